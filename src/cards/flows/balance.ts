import { defineFlow } from '../../temporal/flow';

/**
 * One funding or withdrawal of a card, settled with the issuer. Recorded by `requestBalanceMove`
 * when it creates the transaction; carried by workflows/card-balance.ts. Workflow-safe.
 */
export interface CardBalanceInput {
  transactionId: string;
}

export interface CardBalanceResult {
  status: string;
}

export const cardBalanceFlow = defineFlow<CardBalanceInput, CardBalanceResult>({
  workflowType: 'cardBalanceWorkflow',
  workflowId: (input) => `card-balance-${input.transactionId}`,
  resource: (input) => ({ type: 'card_transaction', id: input.transactionId }),
  idReusePolicy: 'ALLOW_DUPLICATE',
  idConflictPolicy: 'USE_EXISTING',
});
