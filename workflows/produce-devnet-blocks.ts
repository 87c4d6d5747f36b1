import { allHandlersFinished, ApplicationFailure, condition, continueAsNew, patched, proxyActivities, setHandler, workflowInfo } from '@temporalio/workflow';
import type { createChainActivities } from '../activities/chains';
import {
  INVALID_BLOCK_COUNT,
  MAX_BLOCKS_PER_REQUEST,
  mineBlocksUpdate,
  type DevnetTip,
  type devnetBlocksFlow,
} from '../src/chains/flows/devnet-blocks';
import { HISTORY_EVENTS_PER_RUN, type WorkflowOf } from '../src/temporal/flow';

const { mineDevnetBlocks } = proxyActivities<ReturnType<typeof createChainActivities>>({
  // One transaction of at most a hundred blocks.
  startToCloseTimeout: '1 minute',
  // Retried until the database answers: each step is carried out once however often it is tried.
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' },
});

/** Steps per run of runs recorded before the events bound: at nine or more events a step, 4,500 and more events. */
const STEPS_PER_RUN = 500;
/** Runs recorded before it continued as new by history length, every STEPS_PER_RUN steps only. */
const EVENTS_BOUND_PATCH = 'devnet-blocks-continue-as-new-by-events';

/**
 * `devnet-blocks-<chain>`: waits the block interval or a `mineBlocks` request, then mines (one
 * block, or the request's count). Each step names itself (run id and step number), so a retried
 * activity never mines a step twice; heights come from the ledger, so a restart leaves no gap.
 */
export const produceDevnetBlocksWorkflow: WorkflowOf<typeof devnetBlocksFlow> = async (input) => {
  const requests: { count: number; tip?: DevnetTip }[] = [];
  let intervalSeconds = input.intervalSeconds;
  let step = 0;

  setHandler(
    mineBlocksUpdate,
    async ({ count }) => {
      const request: { count: number; tip?: DevnetTip } = { count };
      requests.push(request);
      await condition(() => request.tip !== undefined);
      return request.tip!;
    },
    {
      validator: ({ count }) => {
        if (!Number.isInteger(count) || count < 1 || count > MAX_BLOCKS_PER_REQUEST) {
          throw ApplicationFailure.create({ type: INVALID_BLOCK_COUNT, message: `count must be an integer from 1 to ${MAX_BLOCKS_PER_REQUEST}` });
        }
      },
    },
  );

  const mine = async (request?: { count: number; tip?: DevnetTip }) => {
    const { workflowId, runId } = workflowInfo();
    const mined = await mineDevnetBlocks({ chain: input.chain, count: request?.count ?? 1, producedBy: `${workflowId}/${runId}/${step++}` });
    intervalSeconds = mined.blockIntervalSeconds;
    if (request) request.tip = mined.tip;
  };

  // Updates add events too: the bound is the history's length, not the steps.
  while (step < STEPS_PER_RUN && !(workflowInfo().historyLength >= HISTORY_EVENTS_PER_RUN && patched(EVENTS_BOUND_PATCH))) {
    await condition(() => requests.length > 0, intervalSeconds * 1000);
    await mine(requests.shift());
  }
  // Requests that arrived meanwhile are served by this run before it hands over.
  for (;;) {
    await condition(() => requests.length > 0 || allHandlersFinished());
    if (!requests.length) break;
    await mine(requests.shift());
  }
  await continueAsNew<typeof produceDevnetBlocksWorkflow>({ ...input, intervalSeconds });
};
