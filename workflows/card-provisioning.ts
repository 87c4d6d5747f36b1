import { proxyActivities } from '@temporalio/workflow';
import type { createCardActivities } from '../activities/cards';
import type { cardProvisioningFlow } from '../src/cards/flows/provisioning';
import type { WorkflowOf } from '../src/temporal/flow';

const { provisionCardWithIssuer, settleCardTransaction, announceCardReady } = proxyActivities<ReturnType<typeof createCardActivities>>({
  // One issuer call and a short transaction each.
  startToCloseTimeout: '1 minute',
  // Money moves here: retried until the issuer and the database answer, never given up (each step is idempotent).
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '5 minutes' },
});

/** `card-provisioning-<cardId>`: mint, activate, settle the initial funding, announce card.ready. */
export const cardProvisioningWorkflow: WorkflowOf<typeof cardProvisioningFlow> = async (input) => {
  const provisioned = await provisionCardWithIssuer({ cardId: input.cardId });
  if (provisioned.status === 'failed') return { status: 'failed' };
  if (provisioned.initialFundingId) await settleCardTransaction({ transactionId: provisioned.initialFundingId });
  await announceCardReady({ cardId: input.cardId });
  return { status: 'active' };
};
