import { proxyActivities } from '@temporalio/workflow';
import type { createCardActivities } from '../activities/cards';
import type { cardIssuerSyncFlow } from '../src/cards/flows/issuer-sync';
import type { WorkflowOf } from '../src/temporal/flow';

const { syncCardWithIssuer } = proxyActivities<ReturnType<typeof createCardActivities>>({
  // One read and one issuer call.
  startToCloseTimeout: '1 minute',
  // Until the issuer answers: a frozen card must not stay active at the issuer (our authorization decision declines it meanwhile).
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '5 minutes' },
});

/** `card-issuer-sync-<cardId>-<change>`: sends the card's status and spending controls to the issuer. */
export const cardIssuerSyncWorkflow: WorkflowOf<typeof cardIssuerSyncFlow> = (input) => syncCardWithIssuer({ cardId: input.cardId });
