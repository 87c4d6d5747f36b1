import pino from 'pino';

export type Logger = pino.Logger;

/**
 * JSON logs. Secrets must never be passed to a logger; the redaction list is a second line of
 * defence for fields that commonly carry them, and errors go through `safeError`.
 */
export function createLogger(level: string, name = 'custody-platform', destination?: pino.DestinationStream): Logger {
  return pino(
    {
    name,
    level,
    base: { service: name },
    timestamp: pino.stdTimeFunctions.isoTime,
    serializers: { err: (error: unknown) => (isDatabaseError(error) ? databaseErrorSummary(error) : pino.stdSerializers.err(error as Error)) },
    redact: {
      paths: [
        'authorization',
        '*.authorization',
        'headers.authorization',
        'secret',
        '*.secret',
        'signing_secret',
        '*.signing_secret',
        'seed',
        '*.seed',
        'pan',
        '*.pan',
        'cvv',
        '*.cvv',
        // A payout beneficiary's identifiers, should a request body or an instruction be logged whole.
        'beneficiary.accountNumber',
        'beneficiary.phoneNumber',
        '*.beneficiary.accountNumber',
        '*.beneficiary.phoneNumber',
      ],
      censor: '[redacted]',
    },
    },
    destination ?? pino.destination(1),
  );
}

interface DatabaseErrorFields {
  message: string;
  code: string;
  constraint?: string;
  table?: string;
  column?: string;
}

const SQLSTATE = /^[0-9A-Z]{5}$/;

/** A PostgreSQL error (from the driver, or wrapped by MikroORM): it carries SQLSTATE `code`. */
export function isDatabaseError(error: unknown): error is Error & DatabaseErrorFields {
  const code = error instanceof Error ? (error as { code?: unknown }).code : undefined;
  return typeof code === 'string' && SQLSTATE.test(code);
}

/**
 * What may be said of a database error: its SQLSTATE, constraint, table and column, and the
 * server's message up to its first colon. Never the statement, its bound values, `detail`
 * ("Key (secret)=(whsec_...) already exists") or the stack, whose first line repeats the statement.
 */
export function databaseErrorSummary(error: Error & DatabaseErrorFields) {
  const serverMessage = error.message.split(' - ').pop() ?? '';
  return {
    type: 'DatabaseError',
    message: serverMessage.replace(/:[\s\S]*$/, ''),
    code: error.code,
    ...(error.constraint ? { constraint: error.constraint } : {}),
    ...(error.table ? { table: error.table } : {}),
    ...(error.column ? { column: error.column } : {}),
  };
}

/** An error fit for a log line, a workflow history or a response: database errors lose statement and values. */
export function safeError(error: unknown): unknown {
  if (!isDatabaseError(error)) return error;
  const summary = databaseErrorSummary(error);
  const safe = new Error(`database error ${summary.code}${summary.constraint ? ` on ${summary.constraint}` : ''}: ${summary.message}`);
  safe.name = 'DatabaseError';
  return safe;
}
