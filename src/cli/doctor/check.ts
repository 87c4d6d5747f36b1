import { readFileSync } from 'node:fs';
import type { Environment } from '../../api-keys/entities';
import type { Config } from '../../config';
import { describeHost, parseDatabaseUrl } from '../../db/database-url';
import type { Orm } from '../../db/orm';
import type { Logger } from '../../logger';

/** ok: as it should be; warn: works, but not as a deployment should run; fail: the provider refuses or will refuse work. */
export type CheckStatus = 'ok' | 'warn' | 'fail';

/** What one check found: what it saw (detail), and when not ok, what to do (fix). */
export interface CheckOutcome {
  status: CheckStatus;
  detail: string;
  fix?: string;
  /**
   * A failure that lasts until an operator changes something (a wrong network, a key of the other mode, a
   * macaroon's permissions), as against one that may pass on its own (a node down, a stale feed). Only a lasting
   * failure of a live provider stops a production start (startupSelfTest).
   */
  lasting?: boolean;
}

/** One check of one provider: `name` says what is checked ("ethereum live node", "lnd live macaroon"). */
export interface Check {
  name: string;
  /** The environment whose keys use the provider; null: both (the database, Temporal, key custody). */
  environment: Environment | null;
  run: () => Promise<CheckOutcome>;
}

/** What the checks are given: the configuration, each call's time budget, and the database once it is asked for. */
export interface DoctorContext {
  config: Config;
  log: Logger;
  timeoutMs: number;
  /** The database, connected once for every check that reads it; rejects when it cannot be reached. */
  database: () => Promise<Orm>;
}

export const ok = (detail: string): CheckOutcome => ({ status: 'ok', detail });
export const warn = (detail: string, fix: string): CheckOutcome => ({ status: 'warn', detail, fix });
/** A failure that may pass on its own: the provider is down or slow, a feed has not updated. */
export const failing = (detail: string, fix: string): CheckOutcome => ({ status: 'fail', detail, fix, lasting: false });
/** A failure that lasts until the configuration (or the provider's own setup) changes. */
export const misconfigured = (detail: string, fix: string): CheckOutcome => ({ status: 'fail', detail, fix, lasting: true });

/** `work` within `ms`, else a rejection saying so (the work itself is left to its own timeout). */
export function withinTimeout<T>(work: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new CheckTimeout(`${what} did not answer within ${ms} ms`)), ms);
    timer.unref();
  });
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}

export class CheckTimeout extends Error {
  override name = 'CheckTimeout';
}

/** A URL as it may be shown: scheme, host and port only (a path or userinfo may hold a provider's API key). */
export const shownUrl = (url: string): string => {
  try {
    const parsed = new URL(url);
    return `${parsed.protocol}//${parsed.host}`;
  } catch {
    return '(an unparsable URL)';
  }
};

/** Variables whose values are secrets, or URLs that may carry one; and the `_FILE` variables whose files hold one. */
const SECRET_VALUE = /(SECRET|_KEY$|_KEY_PREVIOUS$|_PIN$|API_KEY$)/;
const URL_VALUE = /(^CHAIN_NODE_[A-Z]+_(SANDBOX|LIVE)$|^PRICE_NODE_LIVE$|_REST_URL$)/;
const SECRET_FILE = /^STRIPE_ISSUING_[A-Z_]+_FILE$/;

/**
 * Removes every secret the configuration holds from a text the doctor prints: secret values, the secrets
 * files hold, node URLs beyond their host (an API key in the path, a password). A second guard behind checks
 * that only say what they mean to (and never read a macaroon into a message).
 */
export function secretRedactor(config: Config): (text: string) => string {
  const secrets: { value: string; shown: string }[] = [];
  for (const [name, value] of Object.entries(config)) {
    const values = (Array.isArray(value) ? value : [value]).filter((each): each is string => typeof each === 'string' && each !== '');
    for (const each of values) {
      if (name === 'DATABASE_URL') {
        // libpq's URI, which may name several hosts (WHATWG URL refuses them): its hosts shown, its password hidden.
        try {
          const url = parseDatabaseUrl(each);
          secrets.push({ value: each, shown: `postgresql://${url.hosts.map(describeHost).join(',')}` });
          if (url.password && url.password.length >= 8) secrets.push({ value: url.password, shown: '[redacted]' });
        } catch {
          secrets.push({ value: each, shown: '(an unparsable URL)' });
        }
      } else if (URL_VALUE.test(name)) {
        secrets.push({ value: each, shown: shownUrl(each) });
        try {
          const url = new URL(each);
          // The password; and a node URL's path and query, where providers put their API key, and each long segment of
          // its path (a key alone); a short word of a path ("ethereum") is no secret.
          const path = [`${url.pathname}${url.search}`, ...url.pathname.split('/').filter((segment) => segment.length >= 16)];
          for (const part of [url.password, ...path].map(decodeURIComponent)) if (part.length >= 8) secrets.push({ value: part, shown: '[redacted]' });
        } catch {
          // Not a URL: nothing beyond the value itself to hide.
        }
      } else if (SECRET_FILE.test(name)) {
        try {
          const held = readFileSync(each, 'utf8').trim();
          if (held) secrets.push({ value: held, shown: '[redacted]' });
        } catch {
          // Unreadable: the Stripe check says so, and nothing of it can be printed.
        }
      } else if (SECRET_VALUE.test(name)) secrets.push({ value: each, shown: '[redacted]' });
    }
  }
  // Longest first: a URL is replaced before the path inside it.
  secrets.sort((a, b) => b.value.length - a.value.length);
  return (text) => {
    let shown = text;
    for (const { value, shown: replacement } of secrets) shown = shown.split(value).join(replacement);
    return shown;
  };
}

/** An error's message for a line of output (the redactor still applies): never its stack, nor its cause's contents. */
export const reasonOf = (error: unknown): string => (error instanceof Error ? error.message : String(error));
