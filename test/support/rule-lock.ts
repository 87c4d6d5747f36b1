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
    const [{ pid }] = await holder.execute<{ pid: number }[]>('select pg_backend_pid() as pid');
    started = start();
    await eventually(async () => {
      // Only the backends queued behind this holder (the first waits on it, the next on the first): a trigger of another
      // rule waiting on some other lock must not count.
      const [row] = await orm.em.fork().execute<{ waiting: string }[]>(
        `with recursive queued(pid) as (
           select pid from pg_stat_activity where ?::int = any(pg_blocking_pids(pid))
           union select waiter.pid from pg_stat_activity waiter join queued on queued.pid = any(pg_blocking_pids(waiter.pid))
         )
         select count(*)::text as waiting from queued join pg_stat_activity activity using (pid)
          where activity.query like 'select id from consolidation_rules where id = % for update'`,
        [pid],
      );
      return Number(row!.waiting) >= waiters ? true : undefined;
    }, `${waiters} triggers waiting on the rule's lock`);
  } finally {
    await holder.commit();
  }
  return started;
}
