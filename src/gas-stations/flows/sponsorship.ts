import { defineFlow } from '../../temporal/flow';
import type { SponsorshipStatus } from '../entities';

/**
 * A sponsored fee's flow: wait for the station's fuel send to confirm (and be credited to a custody
 * sender), then start the sponsored send (`sponsor: true`) or broadcast the client's signed
 * transaction and follow it to its confirmation count. Shared by the sponsorship service, which records its start, and workflows/fund-sponsorship.ts.
 * Workflow-safe: no Node APIs.
 */
export interface SponsorshipInput {
  sponsorshipId: string;
  /** Seconds between its first waits (CHAIN_CHECK_SECONDS when it was started); 5 for runs started before. */
  checkSeconds?: number;
}

export const sponsorshipFlow = defineFlow<SponsorshipInput, SponsorshipStatus>({
  workflowType: 'fundSponsorshipWorkflow',
  workflowId: (input) => `sponsorship-${input.sponsorshipId}`,
  resource: (input) => ({ type: 'sponsorship', id: input.sponsorshipId }),
  // Money flow: its activities are idempotent, so the reconciler may start a closed one again.
  idReusePolicy: 'ALLOW_DUPLICATE',
  idConflictPolicy: 'USE_EXISTING',
});
