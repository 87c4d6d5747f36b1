/**
 * Payment hashes claimed on nodes every organization shares (lightning_payment_claims). LND keeps one
 * payment per hash and answers a second send with the first one's result; a payee settles an invoice
 * once. So through one node a hash is paid by at most one payment, of any organization: the claim on
 * (node key, payment hash) names it. LND payments take it in the payment's own transaction, before
 * anything is sent; the sandbox network's payee takes it when it settles. A failed payment releases it
 * (finalizePayment), so the invoice may be paid again.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../db/lean';
import type { Orm } from '../db/orm';
import type { PaymentOrder } from './provider';

/** Takes the claim of `nodeKey` on the order's payment hash for the order's payment (or finds it has it): false when another payment holds it. */
export type PaymentHashClaims = (nodeKey: string, order: PaymentOrder) => Promise<boolean>;

/**
 * Claims the hash on the node for the payment, or finds it already the payment's: false when another payment
 * holds it. Inside a transaction, a concurrent claim of the same hash waits until this one commits (and then
 * finds it taken) or rolls back (and then takes it).
 */
export async function claimPaymentHash(em: EntityManager, nodeKey: string, paymentHash: string, paymentId: string): Promise<boolean> {
  // A holder that failed in between released the claim: the next pass takes it.
  for (let attempt = 0; attempt < 3; attempt += 1) {
    await sql(em, 'insert into lightning_payment_claims (node_key, payment_hash, payment_id, created_at) values ($1, $2, $3, now()) on conflict do nothing', [nodeKey, paymentHash, paymentId]);
    const [holder] = await sql<{ payment_id: string }>(em, 'select payment_id from lightning_payment_claims where node_key = $1 and payment_hash = $2', [nodeKey, paymentHash]);
    if (holder) return holder.payment_id === paymentId;
  }
  throw new Error(`payment ${paymentId}: the claim on its payment hash kept being released while it was taken`);
}

/** A failed payment gives its hash back: another payment (of any organization) may pay the invoice. */
export const releasePaymentHashClaim = (em: EntityManager, paymentId: string) => sql(em, 'delete from lightning_payment_claims where payment_id = $1', [paymentId]);

/** Claims each committed at once, before the provider acts on them. */
export const committedClaims =
  (orm: Orm): PaymentHashClaims =>
  (nodeKey, order) =>
    claimPaymentHash(orm.em.fork(), nodeKey, order.invoice.paymentHash, order.paymentId);

/** Previews only estimate: nothing there pays, so nothing claims. */
export const previewsClaimNothing: PaymentHashClaims = () => Promise.reject(new Error('a payment preview never pays, so it claims no payment hash'));
