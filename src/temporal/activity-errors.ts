import { ApplicationFailure } from '@temporalio/common';
import type { ActivityExecuteInput, ActivityInboundCallsInterceptor, ActivityInterceptorsFactory, Next } from '@temporalio/worker';
import { safeError } from '../logger';
import { DomainError } from '../shared/errors';

/** The failure details a domain refusal carries into workflow history. */
export interface DomainFailureDetails {
  kind: DomainError['kind'];
  code: string;
  param?: string;
  details: Record<string, unknown>;
}

/**
 * The one place an activity's domain error becomes a Temporal failure: a refusal no retry can
 * change is non-retryable, typed by its code, so workflows name it in `nonRetryableErrorTypes` or
 * inspect `ApplicationFailure.type`. Anything else (database, network) stays retryable.
 */
class DomainErrorInterceptor implements ActivityInboundCallsInterceptor {
  async execute(input: ActivityExecuteInput, next: Next<ActivityInboundCallsInterceptor, 'execute'>): Promise<unknown> {
    try {
      return await next(input);
    } catch (error) {
      // A database error would carry its statement and bound values into history and logs: only its summary goes.
      if (!(error instanceof DomainError)) throw safeError(error);
      // What the refusal left to finish (its audit entry) first; its failure is the activity's, retryable.
      await error.settling?.catch((failure: unknown) => {
        throw safeError(failure);
      });
      const details: DomainFailureDetails = { kind: error.kind, code: error.code, ...(error.param ? { param: error.param } : {}), details: error.details };
      throw ApplicationFailure.create({ type: error.code, message: error.message, nonRetryable: true, details: [details], cause: error });
    }
  }
}

const interceptor = new DomainErrorInterceptor();
export const domainErrorInterceptors: ActivityInterceptorsFactory = () => ({ inbound: interceptor });

/**
 * The domain refusal an activity made, found along a workflow failure's causes (an activity's
 * ApplicationFailure carries its DomainFailureDetails): the caller of a workflow answers it as the
 * activity would have. Undefined for any other failure.
 */
export function domainRefusalOf(error: unknown): DomainError | undefined {
  for (let cause: unknown = error; cause instanceof Error; cause = cause.cause) {
    if (!(cause instanceof ApplicationFailure)) continue;
    const [details] = cause.details ?? [];
    if (details && typeof details === 'object' && 'kind' in details && 'code' in details) {
      const { kind, code, param, details: extra } = details as DomainFailureDetails;
      return new DomainError({ kind, code, message: cause.message, ...(param ? { param } : {}), details: extra });
    }
  }
  return undefined;
}
