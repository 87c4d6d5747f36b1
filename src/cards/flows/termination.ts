import { defineFlow } from '../../temporal/flow';

/**
 * Card termination, accepted under the card lock by `requestTermination` (which refuses early
 * requests, so nothing is started for them); carried by workflows/card-termination.ts. The
 * workflow never refuses: started before `terminableAt` it waits for it on a durable timer.
 * Workflow-safe: no Node APIs.
 */
export const CARD_COOLING_PERIOD_MS = 24 * 60 * 60 * 1000;

export interface CardTerminationInput {
  cardId: string;
  /** ISO time the cooling period ends (creation + 24 h). */
  terminableAt: string;
}

/** The termination as DELETE /api/cards/:cardId answers it. */
export type CardTermination = {
  card_id: string;
  status: 'terminated';
  remaining_balance: string;
  balance_returned: boolean;
  terminated_at: string;
  reason: string | null;
  workflow_id: string;
};

export const cardTerminationFlow = defineFlow<CardTerminationInput, CardTermination>({
  workflowType: 'cardTerminationWorkflow',
  workflowId: (input) => `card-termination-${input.cardId}`,
  resource: (input) => ({ type: 'card', id: input.cardId }),
  // It returns the balance: the reconciler may start a closed one again (the activity is idempotent).
  idReusePolicy: 'ALLOW_DUPLICATE',
  idConflictPolicy: 'USE_EXISTING',
});
