import { testOrm } from './environment';
import { eventually } from './eventually';

/**
 * Holds a consolidation rule's row lock (the one triggerRun takes) while `start` sets triggers
 * going, until `waiters` of them wait on it, then lets them through at once: the first starts a
 * run, and the others take the lock the moment it commits, before that run's workflow can even
 * start, so they find the run in progress whatever the run workflow does next.
 */
export async function releaseTogether<T>(ruleId: string, waiters: number, start: () => Promise<T>): Promise<T> {
  const orm = await testOrm();
  const holder = orm.em.fork();
  await holder.begin();
  let started!: Promise<T>;
  try {
    await holder.execute('select id from consolidation_rules where id = ? for update', [ruleId]);
    started = start();
    await eventually(async () => {
      const [row] = await orm.em.fork().execute<{ waiting: string }[]>(
        `select count(*)::text as waiting from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock' and query like 'select id from consolidation_rules where id = % for update'`,
      );
      return Number(row!.waiting) >= waiters ? true : undefined;
    }, `${waiters} triggers waiting on the rule's lock`);
  } finally {
    await holder.commit();
  }
  return started;
}
