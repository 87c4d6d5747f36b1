import { readFileSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { ConfigError } from '../config';

/** The checkout this CLI was built in (dist/src/cli/instance.js): a relative DATA_DIR is read from it, as `npm start` reads it. */
const CHECKOUT = path.resolve(__dirname, '../../..');
/** scripts/start.sh's PG_PORT when none is set. */
const DEFAULT_PG_PORT = '54329';

/** What scripts/start.sh (record_instance) writes to DATA_DIR/instance.json: no secret, by construction. */
const InstanceRecord = z.object({
  pid: z.number().int().positive(),
  instance_id: z.string(),
  api_url: z.string(),
  /** Null when the start's own DATABASE_URL held a password. */
  database_url: z.string().nullable(),
  temporal: z.object({ address: z.string().min(1), namespace: z.string().min(1), task_queue: z.string().min(1).nullable() }),
  /** Key custody and Temporal credentials the start ran with, by name: the CLI must be given them itself. */
  not_recorded: z.array(z.string()),
});

/** A recycled pid passes too; the connection to the recorded database then fails, naming it. */
function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * For a CLI run without DATABASE_URL: the settings of the `npm start` running in this checkout (DATA_DIR/instance.json),
 * as the variables to set; with DATABASE_URL set, none. When no start runs, a ConfigError names the exact value to set.
 * The start's key custody settings are never recorded: the CLI refuses to run without those it ran with, rather than
 * seal anything under the development master key.
 */
export function recordedInstanceSettings(env: NodeJS.ProcessEnv): { settings: Record<string, string>; from?: string } {
  if (env.DATABASE_URL !== undefined) return { settings: {} };
  const dataDir = path.resolve(CHECKOUT, env.DATA_DIR ?? '.data');
  const file = path.join(dataDir, 'instance.json');
  const pgPort = /^\d{1,5}$/.test(env.PG_PORT ?? '') ? env.PG_PORT! : DEFAULT_PG_PORT;
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    throw new ConfigError(
      `DATABASE_URL is not set, and no npm start has recorded its settings in ${file}: run the CLI in the checkout whose npm start runs ` +
        `(with DATA_DIR set as it is, if it runs with another), or set DATABASE_URL. For npm start's embedded PostgreSQL: ` +
        `DATABASE_URL=postgresql://postgres@127.0.0.1:${pgPort}/custody`,
    );
  }
  let record: z.infer<typeof InstanceRecord>;
  try {
    record = InstanceRecord.parse(JSON.parse(text));
  } catch {
    throw new ConfigError(`DATABASE_URL is not set, and ${file} is not what npm start writes: start the service again (npm start), or set DATABASE_URL.`);
  }
  const start = `the npm start that recorded ${file} (pid ${record.pid})`;
  if (!running(record.pid)) {
    throw new ConfigError(
      `DATABASE_URL is not set, and ${start} is not running: start it again, or set ` +
        (record.database_url ? `DATABASE_URL=${record.database_url} (its PostgreSQL must run).` : 'DATABASE_URL to the one it ran with.'),
    );
  }
  if (!record.database_url) throw new ConfigError(`DATABASE_URL is not set: ${start} runs with a DATABASE_URL of its own, which holds a password and is not recorded: set DATABASE_URL to it.`);
  const missing = record.not_recorded.filter((name) => env[name] === undefined);
  if (missing.length) {
    throw new ConfigError(`${start} runs with ${missing.join(', ')}, which is never recorded (key custody and Temporal credentials): give the CLI the same.`);
  }
  const settings: Record<string, string> = { DATABASE_URL: record.database_url };
  const temporal = { TEMPORAL_ADDRESS: record.temporal.address, TEMPORAL_NAMESPACE: record.temporal.namespace, TEMPORAL_TASK_QUEUE: record.temporal.task_queue };
  for (const [name, value] of Object.entries(temporal)) if (value !== null && env[name] === undefined) settings[name] = value;
  return { settings, from: start };
}
