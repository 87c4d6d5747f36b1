import { setTimeout } from 'node:timers/promises';

// Database errors that are not the request's fault and pass: the database unavailable for the moment, or a
// transaction rolled back to break a lock conflict.

/**
 * Whether an error means the database could not be reached or is not accepting work right now (down,
 * starting, shutting down, out of connections), as opposed to a fault of the request or the code. Such a
 * request is answered 503 with Retry-After, so a client retries it (with its Idempotency-Key) rather than
 * reading a 500 as a bug. Drivers and MikroORM wrap the cause, so the chain of causes is walked.
 */
const UNAVAILABLE_SQLSTATE = /^(08...|57P01|57P02|57P03|53300)$/;
const UNAVAILABLE_ERRNO = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'ENOTFOUND', 'EAI_AGAIN']);
const UNAVAILABLE_MESSAGE = /Connection terminated|Timeout acquiring a connection|timeout exceeded when trying to connect|Client has encountered a connection error|connection is closed/i;

export function isDatabaseUnavailable(error: unknown): boolean {
  return causes(error).some((cause) => {
    const code = (cause as { code?: unknown }).code;
    return (typeof code === 'string' && (UNAVAILABLE_SQLSTATE.test(code) || UNAVAILABLE_ERRNO.has(code))) || UNAVAILABLE_MESSAGE.test(cause.message);
  });
}

/**
 * Whether PostgreSQL rolled the transaction back to break a deadlock (40P01) or a serialization
 * conflict (40001): nothing of it was kept, and the same work run again succeeds once the other
 * transaction has finished.
 */
export function isTransientConflict(error: unknown): boolean {
  return causes(error).some((cause) => ['40P01', '40001'].includes((cause as { code?: unknown }).code as string));
}

/**
 * Whether PostgreSQL gave up on a statement for its `lock_timeout` (55P03) or `statement_timeout`
 * (57014): the work was cut short by the time budget it was given, not by a fault.
 */
export function isTimedOut(error: unknown): boolean {
  return causes(error).some((cause) => ['55P03', '57014'].includes((cause as { code?: unknown }).code as string));
}

/** How often work that lost such a conflict runs again before its error stands. */
const CONFLICT_ATTEMPTS = 3;

/**
 * Runs `work` (one whole database transaction) again when PostgreSQL rolled it back for a deadlock or
 * a serialization conflict, after a short random pause so the two do not meet again at once.
 */
export async function retryingTransientConflicts<T>(work: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await work();
    } catch (error) {
      if (attempt >= CONFLICT_ATTEMPTS || !isTransientConflict(error)) throw error;
      await setTimeout(5 + Math.floor(Math.random() * 20 * attempt));
    }
  }
}

/** The error and what it wraps: drivers and MikroORM wrap the cause. */
function causes(error: unknown): Error[] {
  const found: Error[] = [];
  for (let cause = error, depth = 0; cause instanceof Error && depth < 5; cause = cause.cause, depth += 1) found.push(cause);
  return found;
}
