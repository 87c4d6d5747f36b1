import { defineFlow } from '../../temporal/flow';
import type { RefundStatus } from '../entities';

/**
 * A payout refund's flow, `payout-refund-<refundId>`: follow the refund's send until it settles
 * (refunded); a send proven failed is replaced by a new one until PAYOUT_REFUND_ATTEMPTS were made,
 * then the refund is refund_failed and its money held. Recorded by whatever sends a refund (the
 * trip's settlement, an operator's resolution); carried out by workflows/payout-refund.ts. Workflow-safe.
 */
export interface RefundInput {
  refundId: string;
}

export const payoutRefundFlow = defineFlow<RefundInput, RefundStatus>({
  workflowType: 'payoutRefundWorkflow',
  workflowId: (input) => `payout-refund-${input.refundId}`,
  resource: (input) => ({ type: 'payout_refund', id: input.refundId }),
  // Money flow: its activities are idempotent, so the reconciler may start a closed one again.
  idReusePolicy: 'ALLOW_DUPLICATE',
  idConflictPolicy: 'USE_EXISTING',
});

/** Where a refund stands: ended, or pending with its current send on its way or proven failed (`attempts` sends made). */
export type RefundProgress = { status: 'refunded' | 'refund_failed' } | { status: 'refund_pending'; send: 'pending' | 'failed'; attempts: number };
