import pino from 'pino';

export type Logger = pino.Logger;

/**
 * JSON logs. Secrets must never be passed to a logger; the redaction list is a second line of
 * defence for fields that commonly carry them.
 */
export function createLogger(level: string, name = 'custody-platform'): Logger {
  return pino({
    name,
    level,
    base: { service: name },
    timestamp: pino.stdTimeFunctions.isoTime,
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
      ],
      censor: '[redacted]',
    },
  });
}
