import { defineFlow } from '../../temporal/flow';

/**
 * Carries a live card's status and spending controls to the issuer's copy of it (Stripe Issuing),
 * after a freeze, an unfreeze or new spend limits. Recorded by `recordIssuerSync` with the change;
 * carried by workflows/card-issuer-sync.ts. Workflow-safe.
 */
export interface CardIssuerSyncInput {
  cardId: string;
  /** One run per change (a fresh id), so a change made while an earlier run is still going is carried too. */
  change: string;
}

export const cardIssuerSyncFlow = defineFlow<CardIssuerSyncInput, void>({
  workflowType: 'cardIssuerSyncWorkflow',
  workflowId: (input) => `card-issuer-sync-${input.cardId}-${input.change}`,
  resource: (input) => ({ type: 'card', id: input.cardId }),
  // The sync sends the card as it is: the reconciler may start a closed one again.
  idReusePolicy: 'ALLOW_DUPLICATE',
  idConflictPolicy: 'USE_EXISTING',
});
