import { existsSync } from 'node:fs';
import path from 'node:path';
import { Client } from '@temporalio/client';
import { bundleWorkflowCode, NativeConnection, Worker, type WorkerOptions as SdkWorkerOptions, type WorkflowBundleOption } from '@temporalio/worker';
import type { WorkflowCreator } from '@temporalio/worker/lib/workflow/interface';
import { createActivities, type ActivityDeps } from '../activities';
import { LndInvoiceWatch } from './lightning/invoice-watch';
import { configuredLightningNodes } from './lightning/lnd';
import { WorkflowStarter } from './temporal/starter';
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
    /** Settles our LND invoices from each configured node's subscription while the workers run. */
    readonly invoiceWatch?: LndInvoiceWatch,
  ) {}

  /** Runs both until shutdown() (or SIGINT/SIGTERM, which the SDK turns into a shutdown of each). */
  async run(): Promise<void> {
    const workers = Promise.all([this.main.run(), this.webhooks.run()]);
    // The watch ends with the workers, however they were stopped.
    void workers.finally(() => this.invoiceWatch?.stop()).catch(() => undefined);
    await Promise.all([workers, this.invoiceWatch?.run()]);
  }

  shutdown(): void {
    for (const worker of [this.main, this.webhooks]) if (worker.getState() === 'RUNNING') worker.shutdown();
    this.invoiceWatch?.stop();
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

/**
 * A Worker class whose instances run their workflows in one workflow thread (one V8 isolate, the bundle
 * loaded once) instead of a thread each: the SDK starts a thread per Worker, and each held 20–45 MB of
 * heap plus its own Node environment. Slots, pollers and workflow caches stay per Worker, so webhook
 * deliveries still never take the money flows' slots; only the (short, CPU-bound) activations of both
 * queues take turns in the thread. The thread ends when the last Worker using it has stopped.
 */
function workersSharingOneWorkflowThread(): typeof Worker {
  let shared: Promise<WorkflowCreator> | undefined;
  let users = 0;
  return class extends Worker {
    protected static override async createWorkflowCreator(...args: Parameters<typeof Worker.createWorkflowCreator>): Promise<WorkflowCreator> {
      shared ??= super.createWorkflowCreator(...args);
      const creator = await shared;
      users += 1;
      return {
        createWorkflow: (options) => creator.createWorkflow(options),
        destroy: async () => {
          users -= 1;
          if (users === 0) await creator.destroy();
        },
      };
    }
  };
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
    stickyQueueScheduleToStartTimeout: config.WORKER_STICKY_QUEUE_TIMEOUT_MS,
  } satisfies Partial<SdkWorkerOptions>;
  const ServiceWorker = workersSharingOneWorkflowThread();
  const main = await ServiceWorker.create({
    ...common,
    taskQueue: options.taskQueue,
    maxConcurrentActivityTaskExecutions: config.WORKER_MAX_ACTIVITIES,
    maxConcurrentWorkflowTaskExecutions: config.WORKER_MAX_WORKFLOW_TASKS,
    maxCachedWorkflows: options.maxCachedWorkflows ?? config.WORKER_CACHED_WORKFLOWS,
  });
  const webhooks = await ServiceWorker.create({
    ...common,
    taskQueue: taskQueueOf(options.taskQueue, 'webhooks'),
    maxConcurrentActivityTaskExecutions: config.WEBHOOK_WORKER_MAX_ACTIVITIES,
    maxConcurrentWorkflowTaskExecutions: config.WEBHOOK_WORKER_MAX_WORKFLOW_TASKS,
    maxCachedWorkflows: options.maxCachedWorkflows ?? config.WEBHOOK_WORKER_CACHED_WORKFLOWS,
  });
  // Outside any activity: its settlements' webhook deliveries start on a client of the worker's own connection.
  const starter = new WorkflowStarter(new Client({ connection: options.connection, namespace: options.namespace }), config, options.deps.log);
  const invoiceWatch = new LndInvoiceWatch({
    ...options.deps,
    nodes: configuredLightningNodes(config),
    inTransaction: (work) => starter.transaction(options.deps.orm.em.fork(), work, { detachDeliveries: true }),
  });
  return new ServiceWorkers(main, webhooks, invoiceWatch);
}
