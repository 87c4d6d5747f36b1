import type { EntityManager } from '@mikro-orm/postgresql';
import { readOneByColumns } from '../db/lean';
import { LightningInvoice } from './entities';
import { settleIncomingInvoice } from './invoices';
import { recordNodeSettlement } from './invoice-watch';
import type { LightningNodes, PaymentOrder, PaymentOutcome } from './provider';

export interface InternalRouteDeps {
  nodes: LightningNodes;
  /** A transaction whose events' webhook deliveries start once it commits. */
  inTransaction: <T>(work: (em: EntityManager) => Promise<T>) => Promise<T>;
  em: EntityManager;
}

/**
 * An organization's payment of one of our invoices (the internal route): settled in our ledger, fee 0.
 * When our LND issued the invoice, the node's copy is cancelled first, so no outside payer can pay it
 * as well (that payment would reach the node with nobody to credit). Had an outside payer paid it on
 * the node already, that settlement is recorded (the payee is credited once) and this payment fails
 * `invoice_already_paid`, with nothing taken. Asking again answers the same, so the query of a payment
 * whose send was lost is this too.
 */
export async function payOverInternalRoute(deps: InternalRouteDeps, order: PaymentOrder): Promise<PaymentOutcome> {
  const lnd = deps.nodes.lnd(order.environment);
  // Only an invoice of ours still open: another application's invoice on a shared node is never touched.
  const ours = lnd && (await readOneByColumns(deps.em, LightningInvoice, { paymentHash: order.invoice.paymentHash, environment: order.environment, direction: 'incoming', status: 'pending' }));
  if (lnd && ours && (await lnd.cancelInvoice(order.invoice.paymentHash)) === 'settled') {
    const paidOnNode = await lnd.lookupInvoice(order.invoice.paymentHash);
    if (paidOnNode) await deps.inTransaction((tx) => recordNodeSettlement(tx, order.environment, paidOnNode));
    return { state: 'failed', reason: 'invoice_already_paid' };
  }
  const { outcome } = await deps.inTransaction((tx) =>
    settleIncomingInvoice(tx, { paymentHash: order.invoice.paymentHash, environment: order.environment, amountMsat: order.amountMsat, paidByPaymentId: order.paymentId }),
  );
  return outcome;
}
