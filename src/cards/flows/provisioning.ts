import { defineFlow } from '../../temporal/flow';

/**
 * Card provisioning: mint and activate the card, settle its initial funding, announce card.ready.
 * Recorded by `createCard`; carried by workflows/card-provisioning.ts. Workflow-safe: no Node APIs.
 */
export interface CardProvisioningInput {
  cardId: string;
}

export interface CardProvisioningResult {
  status: 'active' | 'failed';
}

export const cardProvisioningFlow = defineFlow<CardProvisioningInput, CardProvisioningResult>({
  workflowType: 'cardProvisioningWorkflow',
  workflowId: (input) => `card-provisioning-${input.cardId}`,
  resource: (input) => ({ type: 'card', id: input.cardId }),
  // It settles the initial funding: the reconciler may start a closed one again (every step is idempotent).
  idReusePolicy: 'ALLOW_DUPLICATE',
  idConflictPolicy: 'USE_EXISTING',
});
