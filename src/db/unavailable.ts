/**
 * Whether an error means the database could not be reached or is not accepting work right now (down,
 * starting, shutting down, out of connections), as opposed to a fault of the request or the code. Such a
 * request is answered 503 with Retry-After, so a client retries it (with its Idempotency-Key) rather than
 * reading a 500 as a bug. Drivers and MikroORM wrap the cause, so the chain of causes is walked.
 */
const UNAVAILABLE_SQLSTATE = /^(08...|57P01|57P02|57P03|53300)$/;
const UNAVAILABLE_ERRNO = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'ENOTFOUND', 'EAI_AGAIN']);
const UNAVAILABLE_MESSAGE = /Connection terminated|Timeout acquiring a connection|Client has encountered a connection error|connection is closed/i;

export function isDatabaseUnavailable(error: unknown): boolean {
  for (let cause = error, depth = 0; cause instanceof Error && depth < 5; cause = cause.cause, depth += 1) {
    const code = (cause as { code?: unknown }).code;
    if (typeof code === 'string' && (UNAVAILABLE_SQLSTATE.test(code) || UNAVAILABLE_ERRNO.has(code))) return true;
    if (UNAVAILABLE_MESSAGE.test(cause.message)) return true;
  }
  return false;
}
