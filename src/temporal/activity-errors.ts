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
      const details: DomainFailureDetails = { kind: error.kind, code: error.code, ...(error.param ? { param: error.param } : {}), details: error.details };
      throw ApplicationFailure.create({ type: error.code, message: error.message, nonRetryable: true, details: [details], cause: error });
    }
  }
}

const interceptor = new DomainErrorInterceptor();
export const domainErrorInterceptors: ActivityInterceptorsFactory = () => ({ inbound: interceptor });
