import type { Client } from '@temporalio/client';
import { insideActivity } from './client';
import type { Supervised } from './components';
import type { LoadOutcome, LoadState } from './load';
import { sleep, type ComponentName } from './model';
import type { ChaosOptions } from './run';

interface Kill {
  name: ComponentName;
  /** From the load's start. */
  atMs: number;
  downMs: number;
}

type Schedule = Partial<Record<ComponentName, Kill[]>>;

/**
 * Each component killed killsPerComponent times (or its killsOf) at moments drawn between 10% and 85% of the load, down 1 to 6 s each
 * time; a component's kills in the order of their moments. Different components may be down at once.
 */
export function killSchedule(options: Pick<ChaosOptions, 'loadSeconds' | 'killsPerComponent' | 'killsOf'>, components: readonly ComponentName[], random: () => number): Schedule {
  const loadMs = options.loadSeconds * 1000;
  const kills = components.flatMap((name) => Array.from({ length: options.killsOf?.[name] ?? options.killsPerComponent }, () => ({ name, atMs: loadMs * (0.1 + 0.75 * random()), downMs: 1000 + 5000 * random() })));
  return Object.fromEntries(components.map((name) => [name, kills.filter((kill) => kill.name === name).sort((a, b) => a.atMs - b.atMs)]));
}

export const describeSchedule = (schedule: Schedule) =>
  Object.values(schedule)
    .flat()
    .sort((a, b) => a.atMs - b.atMs)
    .map((kill) => `${kill.name} at ${(kill.atMs / 1000).toFixed(1)} s for ${(kill.downMs / 1000).toFixed(1)} s`)
    .join(', ');

interface KillContext {
  options: ChaosOptions;
  state: LoadState;
  temporal: Client;
  supervised: Supervised[];
  outcome: LoadOutcome;
  startedAt: number;
}

/**
 * The schedule carried out: one component's kills one after another, never inside each other's down time (a kill
 * whose moment comes while the component is still down from the one before waits until it is up again, and says
 * so); a kill that finds the component already down kills nothing and says so. Resolves once every kill is done;
 * rejects with the first failure then (held until the load ends, so that nothing rejects unobserved meanwhile).
 */
export async function runKills(schedule: Schedule, context: KillContext): Promise<void> {
  const { options, startedAt } = context;
  const at = () => `${((Date.now() - startedAt) / 1000).toFixed(1)} s`;
  const failures: unknown[] = [];
  await Promise.all(
    context.supervised.map(async (supervised) => {
      const { name } = supervised.component;
      try {
        const kills = schedule[name] ?? [];
        for (const [index, kill] of kills.entries()) {
          const late = Date.now() - (startedAt + kill.atMs);
          if (late > 1000) options.log(`${at()}: the kill of ${name} due at ${(kill.atMs / 1000).toFixed(1)} s waited for it to be up again`);
          await sleep(startedAt + kill.atMs - Date.now());
          // The component's last kill, none before it inside an activity: it looks for longer, so that each component is killed mid-flow once.
          const lastChance = index === kills.length - 1 && !context.outcome.killsInActivitiesOf[name];
          const timed = await timedOnWork(context, name, lastChance ? LAST_CHANCE_WINDOW_MS : WINDOW_MS);
          options.log(`${at()}: SIGKILL ${name}${timed.workflowId ? ` (${timed.workflowId}${timed.inActivity ? ' inside an activity' : ''})` : ''}`);
          const found = await supervised.killFor(kill.downMs);
          options.log(found === 'killed' ? `${at()}: ${name} up again` : `${at()}: ${name} was down already (exited on its own): nothing killed; up again`);
          if (options.failOnPurpose) failOnPurpose(options.failOnPurpose);
        }
      } catch (error) {
        failures.push(error);
      }
    }),
  );
  if (failures.length > 0) throw failures[0];
}

/** How long a kill looks for a workflow inside an activity; a component's last kill when none of its kills found one looks for longer. */
const WINDOW_MS = 5_000;
const LAST_CHANCE_WINDOW_MS = 30_000;
/** The longest wait between two looks: after the load's window (or with the APIs down) no operation is accepted to wake it. */
const LOOK_AGAIN_MS = 500;

/**
 * Timed to land in work (for at most `windowMs`): as soon as Temporal says a workflow of the load is inside an activity (one
 * pending, or a workflow task started: a local activity runs in it). It asks about the sweep runs in progress and the
 * workflows of the latest accepted operations at once, and prefers a sweep run (rarer than the other work, and their
 * activities short), then the newest (a workflow just accepted has often not started its first task yet: an older one
 * may be in an activity); after each look it waits for the next accepted operation, or half a second.
 */
async function timedOnWork({ state, temporal, outcome }: KillContext, name: ComponentName, windowMs: number): Promise<{ workflowId?: string; inActivity: boolean }> {
  const timedUntil = Date.now() + windowMs;
  let found: { workflowId: string; onSweep: boolean } | undefined;
  while (!found && Date.now() < timedUntil) {
    const candidates = [
      ...[...state.sweepsRunning].map((workflowId) => ({ workflowId, onSweep: true })),
      ...state.recentWorkflows.toReversed().map(({ workflowId, kind }) => ({ workflowId, onSweep: kind === 'sweep_run' })),
    ];
    // All asked at once, the first of the list that is inside one taken: on a loaded machine one describe can take a
    // few hundred milliseconds, and asked in turn the 16 outlasted the 5 s (2 of 15 kills timed in a whole run at load 25).
    const inside = await Promise.all(candidates.map((candidate) => insideActivity(temporal, candidate.workflowId)));
    found = candidates.find((_, index) => inside[index]);
    if (found) break;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, Math.max(0, Math.min(LOOK_AGAIN_MS, timedUntil - Date.now())));
      state.onAccepted.push(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }
  // Not inside an activity: timed on the newest accepted operation's workflow, if any was accepted.
  const workflowId = found?.workflowId ?? state.recentWorkflows.at(-1)?.workflowId;
  if (workflowId) outcome.killsTimed += 1;
  if (found) outcome.killsInActivitiesOf[name] = (outcome.killsInActivitiesOf[name] ?? 0) + 1;
  if (found?.onSweep) outcome.killsInSweepActivities += 1;
  return { workflowId, inActivity: found !== undefined };
}

/**
 * The harness failing on purpose after its first kill, for the test that nothing it started outlives it: `exception`
 * is thrown where a harness error would be (the load ends, then the run's own stop), `crash` is thrown where nothing
 * catches it (the process dies of it; only its exit hook is left to stop what it started).
 */
function failOnPurpose(how: NonNullable<ChaosOptions['failOnPurpose']>): void {
  const error = new Error(`the chaos harness failing on purpose (${how})`);
  if (how === 'exception') throw error;
  setImmediate(() => {
    throw error;
  });
}
