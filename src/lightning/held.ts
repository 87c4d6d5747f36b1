/**
 * Held payments: LND payments whose send or re-query kept failing for a transient reason
 * (LIGHTNING_LND_SEND_ATTEMPTS attempts). They stay pending with their reserve and are re-queried by their
 * workflow; an operator sees them in /metrics and `lightning:held`, and may settle one with
 * `lightning:resolve`, which applies only what the node itself answers.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import { Gauge, type Registry } from 'prom-client';
import type { Environment } from '../api-keys/entities';
import { msatToSat, satsToDebit } from './amounts';
import { LightningInvoice, type HeldReason, type InvoiceStatus } from './entities';
import { LndError, LndUnavailableError } from './lnd';
import { finalizePayment, paymentOrder } from './payments';
import type { LndProvider } from './lnd-provider';

/** The kind of a transient failure that holds a payment: what its API shows (HELD_REASONS). */
export function heldReasonOf(error: unknown): HeldReason {
  if (error instanceof LndUnavailableError) return error.reason;
  return error instanceof LndError ? 'node_error' : 'internal_error';
}

/** lightning_payments_held: pending payments held for an operator, per environment (any is an alarm). */
export function registerLightningMetrics(registry: Registry, em: () => EntityManager): void {
  new Gauge({
    name: 'lightning_payments_held',
    help: "Lightning payments whose send or re-query kept failing for a transient reason: pending, reserve held, re-queried (npm run cli -- lightning:held)",
    labelNames: ['environment'],
    registers: [registry],
    async collect() {
      this.reset();
      const rows = await em().execute<{ environment: string; count: string }[]>(
        `select environment, count(*) as count from lightning_invoices where direction = 'outgoing' and status = 'pending' and held_at is not null group by environment`,
      );
      for (const row of rows) this.set({ environment: row.environment }, Number(row.count));
    },
  });
}

/** The held payments, oldest hold first, optionally of one organization or environment. */
export async function heldPayments(em: EntityManager, filter: { organizationId?: string; environment?: Environment }) {
  const payments = await em.find(
    LightningInvoice,
    {
      direction: 'outgoing',
      status: 'pending',
      heldAt: { $ne: null },
      ...(filter.organizationId ? { organization: filter.organizationId } : {}),
      ...(filter.environment ? { environment: filter.environment } : {}),
    },
    { orderBy: { heldAt: 'asc', id: 'asc' } },
  );
  return payments.map((payment) => ({
    id: payment.id,
    organization_id: payment.organization.id,
    environment: payment.environment,
    payment_hash: payment.paymentHash,
    destination: payment.destination,
    amount_sat: msatToSat(BigInt(payment.amountMsat)).toString(),
    reserved_sat: (satsToDebit(BigInt(payment.amountMsat)) + satsToDebit(BigInt(payment.feeLimitMsat ?? '0'))).toString(),
    sent_at: payment.sentAt?.toISOString() ?? null,
    held_at: payment.heldAt!.toISOString(),
    held_reason: payment.heldReason,
    held_reason_code: payment.heldReasonCode ?? null,
  }));
}

export type HeldResolution = { payment_id: string; resolved: boolean; status: InvoiceStatus; node_says: string };

/**
 * Ends a pending LND payment (a held one, typically) with what the node says of it, never blind:
 * TrackPaymentV2's final state (paid: captured; failed: released), or failed `not_sent` when the node has no
 * payment of the hash (nothing went out). In flight, or the node unreachable (thrown): nothing changes.
 */
export async function resolveHeldPayment(
  em: EntityManager,
  lnd: LndProvider,
  paymentId: string,
  transaction: <T>(work: (tx: EntityManager) => Promise<T>) => Promise<T>,
): Promise<HeldResolution> {
  const payment = await em.findOne(LightningInvoice, { id: paymentId, direction: 'outgoing' });
  if (!payment) throw new Error(`no Lightning payment ${paymentId}`);
  if (payment.status !== 'pending') return { payment_id: paymentId, resolved: false, status: payment.status, node_says: 'nothing asked: the payment had ended' };
  const known = await lnd.lookup(paymentOrder(payment));
  if (known.state === 'unknown') return { payment_id: paymentId, resolved: false, status: 'pending', node_says: 'in flight' };
  const outcome = known.state === 'not_sent' ? { state: 'failed' as const, reason: 'not_sent' } : known;
  const status = await transaction((tx) => finalizePayment(tx, paymentId, outcome));
  return { payment_id: paymentId, resolved: true, status, node_says: known.state === 'failed' ? `failed: ${known.reason}` : known.state };
}
