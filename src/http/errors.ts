import type { ZodError } from 'zod';

export type ErrorType =
  | 'invalid_request_error'
  | 'authentication_error'
  | 'permission_error'
  | 'conflict_error'
  | 'idempotency_error'
  | 'rate_limit_error'
  | 'provider_error'
  | 'api_error';

export interface ApiErrorInit {
  status: number;
  type: ErrorType;
  code: string;
  message: string;
  param?: string;
  details?: Record<string, unknown>;
  headers?: Record<string, string>;
}

/** An error that is safe to show the caller: every field ends up in the contract's envelope. */
export class ApiError extends Error {
  readonly status: number;
  readonly type: ErrorType;
  readonly code: string;
  readonly param?: string;
  readonly details: Record<string, unknown>;
  readonly headers: Record<string, string>;

  constructor(init: ApiErrorInit) {
    super(init.message);
    this.name = 'ApiError';
    this.status = init.status;
    this.type = init.type;
    this.code = init.code;
    this.param = init.param;
    this.details = init.details ?? {};
    this.headers = init.headers ?? {};
  }

  toEnvelope(requestId: string) {
    return {
      error: {
        code: this.code,
        type: this.type,
        message: this.message,
        ...(this.param !== undefined ? { param: this.param } : {}),
        request_id: requestId,
        details: this.details,
      },
    };
  }
}

export const errors = {
  notFound(resource: string, id: string, param = 'id') {
    return new ApiError({
      status: 404,
      type: 'invalid_request_error',
      code: 'resource_missing',
      message: `No such ${resource}: '${id}'`,
      param,
    });
  },
  validation(message: string, param?: string, details: Record<string, unknown> = {}) {
    return new ApiError({ status: 400, type: 'invalid_request_error', code: 'validation_failed', message, param, details });
  },
  conflict(code: string, message: string, details: Record<string, unknown> = {}) {
    return new ApiError({ status: 409, type: 'conflict_error', code, message, details });
  },
  unauthenticated(message: string) {
    return new ApiError({ status: 401, type: 'authentication_error', code: 'invalid_api_key', message });
  },
  /** `anyOf` names every scope that would do, when there is more than one. */
  insufficientScope(requiredScope: string, anyOf: readonly string[] = [requiredScope]) {
    return new ApiError({
      status: 403,
      type: 'permission_error',
      code: 'insufficient_scope',
      message:
        anyOf.length > 1
          ? `This API key lacks a scope required for this request (one of ${anyOf.join(', ')}).`
          : `This API key lacks the '${requiredScope}' scope required for this request.`,
      details: anyOf.length > 1 ? { required_scope: requiredScope, any_of: anyOf } : { required_scope: requiredScope },
    });
  },
  permission(code: string, message: string, details: Record<string, unknown> = {}) {
    return new ApiError({ status: 403, type: 'permission_error', code, message, details });
  },
  internal() {
    return new ApiError({
      status: 500,
      type: 'api_error',
      code: 'internal_error',
      message: 'An internal error occurred. Retry later; quote the request id if it persists.',
    });
  },
};

/** Turns a zod failure on one part of the request into validation_failed with a dotted `param`. */
export function fromZodError(error: ZodError, location: 'body' | 'query' | 'path' | 'header'): ApiError {
  const issues = error.issues.map((issue) => ({
    param: issue.path.map(String).join('.') || location,
    code: issue.code,
    message: issue.message,
    location,
  }));
  const first = issues[0]!;
  return errors.validation(
    first.param === location ? `Invalid ${location}: ${first.message}` : `Invalid ${first.param}: ${first.message}`,
    first.param,
    { issues },
  );
}
