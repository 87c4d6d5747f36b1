import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import type { temporal } from '@temporalio/proto';
import { loadConfig } from '../src/config';
import { createOrm, migrate } from '../src/db/orm';
import type { LightningInvoiceInput } from '../src/lightning/flows/invoice';
import { temporalConnectionOptions } from '../src/temporal/client';
import { eventually } from '../test/support/eventually';
import { ServiceProcess } from '../test/support/service-process';
import { BENCH_ROUNDS, median, report, runBenchmark, serviceProcessEnv } from './support';

/**
 * A restarted worker resuming long-lived workflows. The service's worker runs as its own process
 * (dist/src/worker.js, as `npm start` runs it) on a task queue of the benchmark's own; BENCH_LONG_LIVED
 * (200) of the service's lightning-invoice workflows, each waiting a day for its expiry, are started on it
 * and have run their first task there (so the server hands their next tasks to that worker's sticky
 * queue). Each round kills the worker (SIGKILL: a crash), starts a new one, waits until it polls, then
 * wakes every workflow with a signal none of them handles (the SDK buffers it: one workflow task each,
 * no command, nothing changed) at BENCH_RESTART_SIGNALS_PER_SECOND (50). From each history: the first
 * workflow task after the round's signal, from its scheduling to its completion (schedule-to-start, any
 * sticky-queue timeout and replay of the whole history on the new worker included). The goal: every one
 * under 1 s.
 */
const WORKFLOWS = Number(process.env.BENCH_LONG_LIVED ?? 200);
const SIGNALS_PER_SECOND = Number(process.env.BENCH_RESTART_SIGNALS_PER_SECOND ?? 50);
const GOAL_MS = 1000;
/** A signal no workflow of the service handles. */
const WAKE = 'benchWake';

type HistoryEvent = temporal.api.history.v1.IHistoryEvent;

const eventMs = (event: HistoryEvent) => Number(event.eventTime!.seconds) * 1000 + Math.round((event.eventTime!.nanos ?? 0) / 1e6);

/** The first workflow task after the last WAKE signal: scheduled → completed, and its schedule-to-start, in ms; null while it has not completed. */
function firstTaskAfterWake(events: HistoryEvent[]): { latency_ms: number; schedule_to_start_ms: number; timed_out: number } | null {
  const signals = events.flatMap((event, index) => (event.workflowExecutionSignaledEventAttributes?.signalName === WAKE ? [index] : []));
  const signalled = signals.at(-1);
  if (signalled === undefined) return null;
  const after = events.slice(signalled + 1);
  const scheduled = after.find((event) => event.workflowTaskScheduledEventAttributes);
  const completedAt = after.findIndex((event) => event.workflowTaskCompletedEventAttributes);
  if (!scheduled || completedAt < 0) return null;
  const started = after.slice(0, completedAt).filter((event) => event.workflowTaskStartedEventAttributes).at(-1)!;
  return {
    latency_ms: eventMs(after[completedAt]!) - eventMs(scheduled),
    schedule_to_start_ms: eventMs(started) - eventMs(scheduled),
    timed_out: after.slice(0, completedAt).filter((event) => event.workflowTaskTimedOutEventAttributes).length,
  };
}

async function main() {
  const config = loadConfig(process.env);
  const orm = await createOrm(config.DATABASE_URL, 2);
  await migrate(orm);
  await orm.close();
  const connection = await Connection.connect(temporalConnectionOptions(config));
  const client = new Client({ connection, namespace: config.TEMPORAL_NAMESPACE });
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'custody-bench-restart-'));
  const taskQueue = `bench-restart-${randomUUID()}`;
  const env = serviceProcessEnv(dataDir, taskQueue);
  let worker = new ServiceProcess('worker', 'worker.js', env);
  const ids = Array.from({ length: WORKFLOWS }, (_, index) => `bench-long-lived-${index}-${randomUUID()}`);
  const history = async (id: string) => (await client.workflow.getHandle(id).fetchHistory()).events ?? [];
  /** The time a restart takes is not the workflow tasks'. */
  const polling = (each: ServiceProcess) => each.polling(connection, config.TEMPORAL_NAMESPACE, taskQueue);
  try {
    await polling(worker);
    const expiresAt = new Date(Date.now() + 24 * 3600 * 1000).toISOString();
    for (let index = 0; index < ids.length; index += 20) {
      await Promise.all(
        ids.slice(index, index + 20).map((workflowId) =>
          client.workflow.start('lightningInvoiceWorkflow', { taskQueue, workflowId, args: [{ invoiceId: randomUUID(), expiresAt } satisfies LightningInvoiceInput] }),
        ),
      );
    }
    // Each has run its first task on this worker, which keeps it in its cache: the server now sends its tasks to that worker.
    await eventually(
      async () => ((await Promise.all(ids.map(async (id) => (await history(id)).some((event) => event.workflowTaskCompletedEventAttributes)))).every(Boolean) || undefined),
      `${WORKFLOWS} workflows to run their first task`,
      120_000,
      500,
    );
    const rows = [];
    const latencies: number[] = [];
    for (let round = 1; round <= BENCH_ROUNDS; round += 1) {
      await worker.kill();
      worker = new ServiceProcess('worker', 'worker.js', env);
      const workerStartSeconds = await polling(worker);
      const signalling = Date.now();
      for (const [index, id] of ids.entries()) {
        const due = signalling + (index * 1000) / SIGNALS_PER_SECOND;
        if (due > Date.now()) await new Promise((resolve) => setTimeout(resolve, due - Date.now()));
        void client.workflow.getHandle(id).signal(WAKE);
      }
      const tasks = await eventually(
        async () => {
          const found = await Promise.all(ids.map(async (id) => firstTaskAfterWake(await history(id))));
          return found.every((task) => task !== null) ? found.map((task) => task!) : undefined;
        },
        `every workflow's first task after round ${round}'s signal`,
        120_000,
        500,
      );
      const sorted = tasks.map((task) => task.latency_ms).sort((a, b) => a - b);
      latencies.push(...sorted);
      const row = {
        target: 'first workflow task after a worker restart',
        round,
        workflows: WORKFLOWS,
        worker_start_to_polling_s: workerStartSeconds,
        latency_p50_ms: sorted[Math.floor(sorted.length / 2)]!,
        latency_p99_ms: sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.99))]!,
        latency_max_ms: sorted.at(-1)!,
        schedule_to_start_max_ms: Math.max(...tasks.map((task) => task.schedule_to_start_ms)),
        workflow_task_timeouts: tasks.reduce((sum, task) => sum + task.timed_out, 0),
      };
      console.log(JSON.stringify(row));
      rows.push(row);
    }
    const slowest = Math.max(...latencies);
    await report(
      'worker-restart',
      rows,
      [
        { name: `${GOAL_MS} ms / the slowest first workflow task after a worker restart (${WORKFLOWS} long-lived workflows, ${BENCH_ROUNDS} restarts)`, value: GOAL_MS / slowest, goal: 1 },
        { name: `${GOAL_MS} ms / the median round's p99 first workflow task after a restart`, value: GOAL_MS / median(rows.map((row) => row.latency_p99_ms)) },
      ],
      { workflows: WORKFLOWS, signals_per_second: SIGNALS_PER_SECOND, workflow: 'lightningInvoiceWorkflow (waiting for its expiry a day later)' },
    );
  } finally {
    await worker.kill();
    await Promise.all(ids.map((id) => client.workflow.getHandle(id).terminate('benchmark over').catch(() => undefined)));
    await connection.close();
    await rm(dataDir, { recursive: true, force: true });
  }
}

runBenchmark(main);
