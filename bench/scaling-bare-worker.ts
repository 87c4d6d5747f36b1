import { bundleWorkflowCode, DefaultLogger, NativeConnection, Runtime, Worker } from '@temporalio/worker';
import { quietBundlerLogger } from '../src/worker-setup';
import type { BareActivities } from './workflows/bare';

/**
 * The baseline worker of bench/scaling.ts, in a process of its own as the service's worker is: it runs the bare
 * workflows (bench/workflows/bare.ts) on BARE_TASK_QUEUE of the Temporal at TEMPORAL_ADDRESS, their activities doing
 * nothing, until SIGTERM. What a flow's bare workflow costs the cluster is then what Temporal alone asks of that shape.
 */
async function main() {
  Runtime.install({ logger: new DefaultLogger('WARN') });
  const connection = await NativeConnection.connect({ address: process.env.TEMPORAL_ADDRESS! });
  const worker = await Worker.create({
    connection,
    namespace: process.env.TEMPORAL_NAMESPACE ?? 'default',
    taskQueue: process.env.BARE_TASK_QUEUE!,
    workflowBundle: await bundleWorkflowCode({ workflowsPath: require.resolve('./workflows/bare'), logger: quietBundlerLogger }),
    activities: { touch: async () => undefined } satisfies BareActivities,
  });
  process.once('SIGTERM', () => worker.shutdown());
  await worker.run();
  await connection.close();
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
