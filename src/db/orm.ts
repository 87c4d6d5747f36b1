import { MikroORM } from '@mikro-orm/postgresql';
import { attachAfterTransaction } from './after-transaction';
import { attachStatementPool } from './lean';
import { ormConfig } from './mikro-orm.config';
import { isDatabaseUnavailable } from './transient-errors';

export type Orm = MikroORM;

export async function createOrm(databaseUrl: string, poolMax?: number): Promise<Orm> {
  const orm = await MikroORM.init(ormConfig(databaseUrl, poolMax));
  attachStatementPool(orm);
  attachAfterTransaction(orm);
  return orm;
}

/** How long a service process waits at startup for a database that is down or starting up before it gives up. */
const STARTUP_WAIT_MS = 120_000;

/**
 * createOrm for the API and the worker: a database that cannot be reached or is still starting up (a
 * restart after a crash, 57P03) is waited for, tried again every second up to STARTUP_WAIT_MS, so a
 * process started beside it comes up with it instead of exiting; any other error throws at once.
 */
export async function createOrmWaiting(databaseUrl: string, poolMax: number | undefined, onWait: () => void): Promise<Orm> {
  const giveUpAt = Date.now() + STARTUP_WAIT_MS;
  for (;;) {
    try {
      return await createOrm(databaseUrl, poolMax);
    } catch (error) {
      if (!isDatabaseUnavailable(error) || Date.now() > giveUpAt) throw error;
      onWait();
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  }
}

/** Applies the committed migrations; never `schema.update()`. */
export async function migrate(orm: Orm): Promise<string[]> {
  const applied = await orm.getMigrator().up();
  return applied.map((m) => m.name);
}
