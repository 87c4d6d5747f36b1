import { bundleWorkflowCode, NativeConnection, Worker, type WorkerOptions as SdkWorkerOptions, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { createActivities, type ActivityDeps } from '../activities';
import { domainErrorInterceptors } from './temporal/activity-errors';

let bundle: Promise<WorkflowBundleWithSourceMap> | undefined;

/** Bundles workflows/ once per process; every worker (and every test) reuses it. */
export function workflowBundle(): Promise<WorkflowBundleWithSourceMap> {
  bundle ??= bundleWorkflowCode({ workflowsPath: require.resolve('../workflows'), logger: quietBundlerLogger });
  return bundle;
}

const quietBundlerLogger = {
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
  taskQueue: string;
  deps: ActivityDeps;
  /** 0 turns off the sticky cache: tests that stop a worker mid-workflow hand its history to the next one at once. */
  maxCachedWorkflows?: SdkWorkerOptions['maxCachedWorkflows'];
}

/** The one worker setup used by the service and by every workflow test. */
export async function createWorker(options: WorkerOptions): Promise<Worker> {
  return Worker.create({
    connection: options.connection,
    namespace: options.namespace,
    taskQueue: options.taskQueue,
    workflowBundle: await workflowBundle(),
    activities: createActivities(options.deps),
    interceptors: { activity: [domainErrorInterceptors] },
    // A stopping worker (a deploy, SIGTERM) lets the activities it is running finish rather than abandoning them
    // to their start-to-close timeouts (up to 5 minutes) before another worker may retry them.
    shutdownGraceTime: '30 seconds',
    ...(options.maxCachedWorkflows !== undefined ? { maxCachedWorkflows: options.maxCachedWorkflows } : {}),
  });
}
