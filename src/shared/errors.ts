/**
 * Domain errors: what went wrong, said once by the code that knows, with no HTTP status in sight.
 * Services and activities throw these; the HTTP floor alone maps a kind to a status and an envelope
 * (src/http/errors.ts), and the worker turns them into non-retryable activity failures
 * (src/temporal/activity-errors.ts). Workflow-safe: no Node APIs.
 */
export type ErrorKind =
  | 'invalid'
  | 'unauthenticated'
  | 'forbidden'
  | 'not_found'
  | 'method_not_allowed'
  | 'conflict'
  | 'idempotency'
  | 'gone'
  | 'too_large'
  | 'unsupported_media_type'
  | 'rate_limited'
  | 'unavailable'
  | 'internal';

export interface DomainErrorInit {
  kind: ErrorKind;
  code: string;
  message: string;
  param?: string;
  details?: Record<string, unknown>;
}

/** An error that is safe to show the caller: every field ends up in the contract's envelope. */
export class DomainError extends Error {
  readonly kind: ErrorKind;
  readonly code: string;
  readonly param?: string;
  readonly details: Record<string, unknown>;
  /**
   * What the refusal left to finish once its transaction has ended (a policy refusal's audit entry,
   * src/policies/decisions.ts): whoever answers the error waits for it first, and answers its failure instead.
   */
  settling?: Promise<unknown>;

  constructor(init: DomainErrorInit) {
    super(init.message);
    this.name = 'DomainError';
    this.kind = init.kind;
    this.code = init.code;
    this.param = init.param;
    this.details = init.details ?? {};
  }
}

export const errors = {
  notFound(resource: string, id: string, param = 'id') {
    return new DomainError({ kind: 'not_found', code: 'resource_missing', message: `No such ${resource}: '${id}'`, param });
  },
  validation(message: string, param?: string, details: Record<string, unknown> = {}) {
    return new DomainError({ kind: 'invalid', code: 'validation_failed', message, param, details });
  },
  /** A named refusal of a well-formed request (insufficient_funds, invoice_expired...). */
  invalid(code: string, message: string, options: { param?: string; details?: Record<string, unknown> } = {}) {
    return new DomainError({ kind: 'invalid', code, message, ...options });
  },
  conflict(code: string, message: string, details: Record<string, unknown> = {}) {
    return new DomainError({ kind: 'conflict', code, message, details });
  },
  /** The same reference or key used for a different request. */
  referenceReused(message: string, param?: string) {
    return new DomainError({ kind: 'idempotency', code: 'idempotency_key_reused', message, param });
  },
  unauthenticated(message: string) {
    return new DomainError({ kind: 'unauthenticated', code: 'invalid_api_key', message });
  },
  /** `anyOf` names every scope that would do, when there is more than one. */
  insufficientScope(requiredScope: string, anyOf: readonly string[] = [requiredScope]) {
    return new DomainError({
      kind: 'forbidden',
      code: 'insufficient_scope',
      message:
        anyOf.length > 1
          ? `This API key lacks a scope required for this request (one of ${anyOf.join(', ')}).`
          : `This API key lacks the '${requiredScope}' scope required for this request.`,
      details: anyOf.length > 1 ? { required_scope: requiredScope, any_of: anyOf } : { required_scope: requiredScope },
    });
  },
  permission(code: string, message: string, details: Record<string, unknown> = {}) {
    return new DomainError({ kind: 'forbidden', code, message, details });
  },
  /** A dependency (the database) is down for the moment: 503, retry after `retryAfterSeconds`. */
  unavailable(code: string, message: string, retryAfterSeconds: number) {
    return new DomainError({ kind: 'unavailable', code, message, details: { retry_after_seconds: retryAfterSeconds } });
  },
  internal() {
    return new DomainError({
      kind: 'internal',
      code: 'internal_error',
      message: 'An internal error occurred. Retry later; quote the request id if it persists.',
    });
  },
};
