import type { ZodError } from 'zod';
import { DomainError, errors, type ErrorKind } from '../shared/errors';
import { namedIssueMessage } from '../shared/validation-messages';

export type ErrorType =
  | 'invalid_request_error'
  | 'authentication_error'
  | 'permission_error'
  | 'conflict_error'
  | 'idempotency_error'
  | 'rate_limit_error'
  | 'provider_error'
  | 'api_error';

/** The one place a domain error becomes an HTTP status and an error type. */
const HTTP: Record<ErrorKind, { status: number; type: ErrorType }> = {
  invalid: { status: 400, type: 'invalid_request_error' },
  unauthenticated: { status: 401, type: 'authentication_error' },
  forbidden: { status: 403, type: 'permission_error' },
  not_found: { status: 404, type: 'invalid_request_error' },
  method_not_allowed: { status: 405, type: 'invalid_request_error' },
  conflict: { status: 409, type: 'conflict_error' },
  idempotency: { status: 409, type: 'idempotency_error' },
  gone: { status: 410, type: 'invalid_request_error' },
  too_large: { status: 413, type: 'invalid_request_error' },
  unsupported_media_type: { status: 415, type: 'invalid_request_error' },
  rate_limited: { status: 429, type: 'rate_limit_error' },
  unavailable: { status: 503, type: 'provider_error' },
  internal: { status: 500, type: 'api_error' },
};

export const httpStatus = (error: DomainError): number => HTTP[error.kind].status;

/** Headers an error carries on the wire (Retry-After for rate limits and a dependency that is down). */
export function errorHeaders(error: DomainError): Record<string, string> {
  const retryAfter = error.details.retry_after_seconds;
  return (error.kind === 'rate_limited' || error.kind === 'unavailable') && retryAfter !== undefined ? { 'Retry-After': String(retryAfter) } : {};
}

export function toEnvelope(error: DomainError, requestId: string) {
  return {
    error: {
      code: error.code,
      type: HTTP[error.kind].type,
      message: error.message,
      ...(error.param !== undefined ? { param: error.param } : {}),
      request_id: requestId,
      details: error.details,
    },
  };
}

/**
 * Turns a zod failure on one part of the request into validation_failed: `param` is the dotted path of the
 * first offending field (an unknown field is named itself), every message names its field in our words
 * (the request was parsed with `describeIssue`), and `details.issues` holds them all.
 */
export function fromZodError(error: ZodError, location: 'body' | 'query' | 'path' | 'header'): DomainError {
  const issues = error.issues.flatMap((issue): { param: string; code: string; message: string; location: typeof location }[] => {
    const path = issue.path.map(String);
    if (issue.code === 'unrecognized_keys') {
      const known = location === 'query' ? 'query parameter' : 'field';
      return issue.keys.map((key) => {
        const param = [...path, key].join('.');
        return { param, code: issue.code, message: `${param} is not a known ${known} of this request`, location };
      });
    }
    const param = path.join('.') || location;
    return [{ param, code: issue.code, message: namedIssueMessage(param, issue.message), location }];
  });
  const first = issues[0]!;
  return errors.validation(first.message, first.param, { issues });
}
