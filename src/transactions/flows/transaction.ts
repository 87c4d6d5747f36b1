import { defineFlow } from '../../temporal/flow';
import type { TransactionStatus } from '../entities';

/**
 * A send's flow, from locked funds to settled or released: sign once, broadcast the same bytes
 * until a node has them, follow them to the confirmation count, settle once. Shared by the send
 * service, which records its start, and workflows/send-transaction.ts. Workflow-safe: no Node APIs.
 */
export interface TransactionInput {
  transactionId: string;
  /** Set when a run continues as new: how many status checks the earlier runs made. */
  checked?: number;
  /** Seconds between its first checks (CHAIN_CHECK_SECONDS when it was started); 5 for runs started before. */
  checkSeconds?: number;
}

export const transactionWorkflowId = (transactionId: string) => `transaction-${transactionId}`;

export const transactionFlow = defineFlow<TransactionInput, TransactionStatus>({
  workflowType: 'sendTransactionWorkflow',
  workflowId: (input) => transactionWorkflowId(input.transactionId),
  resource: (input) => ({ type: 'transaction', id: input.transactionId }),
  // Money flow: its activities are idempotent, so the reconciler may start a closed one again.
  idReusePolicy: 'ALLOW_DUPLICATE',
  idConflictPolicy: 'USE_EXISTING',
});
