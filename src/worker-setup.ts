import { existsSync } from 'node:fs';
import path from 'node:path';
import { bundleWorkflowCode, NativeConnection, Worker, type WorkerOptions as SdkWorkerOptions, type WorkflowBundleOption } from '@temporalio/worker';
import { createActivities, type ActivityDeps } from '../activities';
import { domainErrorInterceptors } from './temporal/activity-errors';
import { taskQueueOf } from './temporal/flow';

/**
 * The workflow bundle that `npm run build` writes (src/bundle-workflows.ts). A worker that loads it
 * never runs webpack: bundling at start kept about 70 MB of the bundler resident in every worker process.
 */
export const PREBUILT_WORKFLOW_BUNDLE = path.resolve(__dirname, '../workflow-bundle.js');

let bundle: Promise<WorkflowBundleOption> | undefined;

/** The workflows/ bundle, once per process: the build's file when there is one, else bundled here (a build without its bundle step). */
export function workflowBundle(): Promise<WorkflowBundleOption> {
  bundle ??= existsSync(PREBUILT_WORKFLOW_BUNDLE) ? Promise.resolve({ codePath: PREBUILT_WORKFLOW_BUNDLE }) : bundleWorkflows();
  return bundle;
}

/** Bundles workflows/ with webpack (the build's step, or a fallback). */
export function bundleWorkflows(): Promise<{ code: string }> {
  return bundleWorkflowCode({ workflowsPath: require.resolve('../workflows'), logger: quietBundlerLogger });
}

export const quietBundlerLogger = {
  log: () => undefined,
  trace: () => undefined,
  debug: () => undefined,
  info: () => undefined,
  warn: (message: string, meta?: Record<string, unknown>) => console.warn(message, meta ?? ''),
  error: (message: string, meta?: Record<string, unknown>) => console.error(message, meta ?? ''),
};

export interface WorkerOptions {
  connection: NativeConnection;
  namespace: string;
  /** The main queue (TEMPORAL_TASK_QUEUE); the webhooks queue is derived from it (taskQueueOf). */
  taskQueue: string;
  deps: ActivityDeps;
  /** 0 turns off the sticky cache: tests that stop a worker mid-workflow hand its history to the next one at once. */
  maxCachedWorkflows?: SdkWorkerOptions['maxCachedWorkflows'];
}

/**
 * The service's workers, one per task queue, run and stopped together: `main` carries every flow
 * but webhook delivery, with bounded slots and cache (WORKER_*); `webhooks` carries deliveries with slots and a workflow cache of their own
 * (WEBHOOK_WORKER_*), so a backlog of retries against dead endpoints waits for its own slots.
 */
export class ServiceWorkers {
  constructor(
    readonly main: Worker,
    readonly webhooks: Worker,
  ) {}

  /** Runs both until shutdown() (or SIGINT/SIGTERM, which the SDK turns into a shutdown of each). */
  async run(): Promise<void> {
    await Promise.all([this.main.run(), this.webhooks.run()]);
  }

  shutdown(): void {
    for (const worker of [this.main, this.webhooks]) if (worker.getState() === 'RUNNING') worker.shutdown();
  }

  /** Runs both while `work` runs, then stops them and returns its result (Worker.runUntil for the pair). */
  async runUntil<R>(work: Promise<R> | (() => Promise<R>)): Promise<R> {
    const running = this.run();
    const stoppedEarly = running.then(() => {
      throw new Error('the workers stopped before the work they were running for');
    });
    try {
      return await Promise.race([typeof work === 'function' ? work() : work, stoppedEarly]);
    } finally {
      this.shutdown();
      await running;
    }
  }
}

/** The one worker setup used by the service and by every workflow test. */
export async function createWorker(options: WorkerOptions): Promise<ServiceWorkers> {
  const { config } = options.deps;
  const common = {
    connection: options.connection,
    namespace: options.namespace,
    workflowBundle: await workflowBundle(),
    activities: createActivities(options.deps),
    interceptors: { activity: [domainErrorInterceptors] },
    // A stopping worker (a deploy, SIGTERM) lets the activities it is running finish rather than abandoning them
    // to their start-to-close timeouts (up to 5 minutes) before another worker may retry them.
    shutdownGraceTime: '30 seconds',
  } satisfies Partial<SdkWorkerOptions>;
  const main = await Worker.create({
    ...common,
    taskQueue: options.taskQueue,
    maxConcurrentActivityTaskExecutions: config.WORKER_MAX_ACTIVITIES,
    maxConcurrentWorkflowTaskExecutions: config.WORKER_MAX_WORKFLOW_TASKS,
    maxCachedWorkflows: options.maxCachedWorkflows ?? config.WORKER_CACHED_WORKFLOWS,
  });
  const webhooks = await Worker.create({
    ...common,
    taskQueue: taskQueueOf(options.taskQueue, 'webhooks'),
    maxConcurrentActivityTaskExecutions: config.WEBHOOK_WORKER_MAX_ACTIVITIES,
    maxConcurrentWorkflowTaskExecutions: config.WEBHOOK_WORKER_MAX_WORKFLOW_TASKS,
    maxCachedWorkflows: options.maxCachedWorkflows ?? config.WEBHOOK_WORKER_CACHED_WORKFLOWS,
  });
  return new ServiceWorkers(main, webhooks);
}
