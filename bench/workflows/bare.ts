import { proxyActivities, proxyLocalActivities } from '@temporalio/workflow';

/** The bench's own activity: does nothing, or writes one row (`rowId`), so a run of bareWorkflow costs only the orchestration and that write. */
export interface BareActivities {
  touch(rowId?: string): Promise<void>;
}

const { touch } = proxyActivities<BareActivities>({ startToCloseTimeout: '10 seconds' });
const { touch: touchLocally } = proxyLocalActivities<BareActivities>({ startToCloseTimeout: '10 seconds' });

/** How many no-op activities a bare run has, of each kind: the shape of the flow it bounds, read from that flow's history. */
export interface BareShape {
  activities: number;
  localActivities: number;
  /** A row of the benchmark's own table that each activity writes (one durable statement), as a flow's activity writes its settlement. */
  rowId?: string;
}

/**
 * The orchestration ceiling bench/flows.ts compares a money flow with: one workflow with as many
 * activities and local activities as the flow's own workflow runs, one after another, doing nothing
 * (or writing one row).
 */
export async function bareWorkflow(shape: BareShape): Promise<void> {
  for (let index = 0; index < shape.localActivities; index += 1) await touchLocally(shape.rowId);
  for (let index = 0; index < shape.activities; index += 1) await touch(shape.rowId);
}
