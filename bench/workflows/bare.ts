import { proxyActivities } from '@temporalio/workflow';

/** The bench's own activity: does nothing, so a run of bareWorkflow costs only the orchestration. */
export interface BareActivities {
  touch(): Promise<void>;
}

const { touch } = proxyActivities<BareActivities>({ startToCloseTimeout: '10 seconds' });

/** The orchestration ceiling bench/flows.ts compares money flows with: one workflow, one activity. */
export async function bareWorkflow(): Promise<void> {
  await touch();
}
