import { ConfigError, type Config } from '../config';
import { createOrm, type Orm } from '../db/orm';
import type { Logger } from '../logger';
import { cardChecks } from './doctor/cards';
import { chainChecks } from './doctor/chains';
import { CheckTimeout, failing, reasonOf, secretRedactor, withinTimeout, type CheckStatus, type DoctorContext } from './doctor/check';
import { keyChecks } from './doctor/keys';
import { lightningChecks } from './doctor/lightning';
import { platformChecks } from './doctor/platform';
import { priceChecks } from './doctor/prices';
import { text, wholeNumber, type Options } from './options';

/** How long each check may take unless --timeout-ms says otherwise: an unreachable node fails in this time, not in its calls' own. */
export const DOCTOR_TIMEOUT_MS = 5_000;

/** One check's result as printed (and as `--json` gives it): never a secret, only its presence, shape and permissions. */
export interface CheckResult {
  check: string;
  /** The environment whose keys use the provider; null: both. */
  environment: 'sandbox' | 'live' | null;
  status: CheckStatus;
  detail: string;
  /** What to do, when not ok. */
  fix: string | null;
  /** A failure that lasts until an operator changes something (as against a provider down or a stale feed). */
  lasting: boolean;
  duration_ms: number;
}

/**
 * Every check of every provider the configuration enables (README, "Doctor"), run at once, each
 * within `timeoutMs`: PostgreSQL, Temporal, key custody, the chain nodes, LND, Stripe Issuing and live prices.
 * `database`: the process's own connection (the start-up self-test); else one is made and closed here.
 */
export async function runDoctor(config: Config, log: Logger, options: { timeoutMs: number; database?: () => Promise<Orm> }): Promise<CheckResult[]> {
  let connecting: Promise<Orm> | undefined;
  const database = options.database ?? (() => (connecting ??= createOrm(config.DATABASE_URL, 2)));
  const context: DoctorContext = { config, log, timeoutMs: options.timeoutMs, database };
  const checks = [...platformChecks(context), ...keyChecks(context), ...chainChecks(context), ...lightningChecks(context), ...cardChecks(context), ...priceChecks(context)];
  const redact = secretRedactor(config);
  try {
    return await Promise.all(
      checks.map(async (check): Promise<CheckResult> => {
        const started = Date.now();
        const outcome = await withinTimeout(check.run(), options.timeoutMs, check.name).catch((error: unknown) =>
          error instanceof CheckTimeout
            ? failing(`no answer within ${options.timeoutMs} ms`, 'start it, or fix its address (each check waits this long: --timeout-ms)')
            : failing(`the check failed: ${reasonOf(error)}`, 'see the detail'),
        );
        return {
          check: check.name,
          environment: check.environment,
          status: outcome.status,
          detail: redact(outcome.detail),
          fix: outcome.status === 'ok' || outcome.fix === undefined ? null : redact(outcome.fix),
          lasting: outcome.status === 'fail' && outcome.lasting === true,
          duration_ms: Date.now() - started,
        };
      }),
    );
  } finally {
    await connecting?.then(
      (orm) => orm.close(),
      () => undefined,
    );
  }
}

const counts = (results: CheckResult[]) => ({
  ok: results.filter((result) => result.status === 'ok').length,
  warn: results.filter((result) => result.status === 'warn').length,
  fail: results.filter((result) => result.status === 'fail').length,
});

/** The human report: one line per check (status, what, what it found), what to do under a warning or failure, and the counts. */
export function formatReport(results: CheckResult[]): string {
  const lines = results.flatMap((result) => [
    `${result.status.padEnd(4)}  ${result.check}: ${result.detail}`,
    ...(result.fix ? [`      to do: ${result.fix}`] : []),
  ]);
  const { ok, warn, fail } = counts(results);
  return [...lines, `${ok} ok, ${warn} warn, ${fail} fail`].join('\n');
}

/**
 * `npm run cli -- doctor [--json] [--timeout-ms N]`: prints the report (or the JSON document) and exits 0 when no
 * check fails, 1 when one does; warnings do not fail.
 */
export async function doctorCommand(config: Config, log: Logger, options: Options): Promise<number> {
  const timeout = text(options, 'timeout-ms');
  const timeoutMs = timeout === undefined ? DOCTOR_TIMEOUT_MS : Math.max(100, wholeNumber(timeout, 'timeout-ms', 600_000));
  const results = await runDoctor(config, log, { timeoutMs });
  const failed = results.some((result) => result.status === 'fail');
  console.log(options.json === true ? JSON.stringify({ ok: !failed, summary: counts(results), checks: results }, null, 2) : formatReport(results));
  return failed ? 1 : 0;
}

/**
 * The same checks once at a service's start, each logged (ok as info, warn, fail as error). In production the start
 * waits for them (each DOCTOR_TIMEOUT_MS at most), and a lasting failure of a provider live keys use (a wrong network,
 * a key of the other mode, a macaroon's permissions, a key that does not open the stored rows) stops it: serving on
 * would refuse every such request. A provider down or a stale feed is only logged: it may come back, and each
 * provider already answers 503 meanwhile. Elsewhere the checks run in the background and stop nothing.
 */
export function startupSelfTest(config: Config, log: Logger, orm: Orm): Promise<void> {
  const checked = selfTest(config, log, orm);
  if (config.NODE_ENV === 'production') return checked;
  checked.catch((error: unknown) => log.error({ err: error }, 'the start-up self-test did not run'));
  return Promise.resolve();
}

async function selfTest(config: Config, log: Logger, orm: Orm): Promise<void> {
  const results = await runDoctor(config, log, { timeoutMs: DOCTOR_TIMEOUT_MS, database: async () => orm });
  for (const { check, environment, status, detail, fix } of results) {
    const fields = { check, environment, status, detail, ...(fix ? { fix } : {}) };
    if (status === 'ok') log.info(fields, `self-test: ${check} ok`);
    else if (status === 'warn') log.warn(fields, `self-test: ${check}: ${detail}`);
    else log.error(fields, `self-test: ${check} failed: ${detail}`);
  }
  const stopping = results.filter((result) => result.lasting && result.environment !== 'sandbox');
  if (config.NODE_ENV === 'production' && stopping.length > 0) {
    throw new ConfigError(`The start-up self-test failed (npm run cli -- doctor says the same):\n${stopping.map((result) => `  ${result.check}: ${result.detail}; to do: ${result.fix}`).join('\n')}`);
  }
}
