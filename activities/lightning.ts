import { Context } from '@temporalio/activity';
import type { Config } from '../src/config';
import type { Orm } from '../src/db/orm';
import { findOneByColumns, sql } from '../src/db/lean';
import { transactionWithStarts } from './with-starts';
import { LightningInvoice, type InvoiceStatus } from '../src/lightning/entities';
import type { InvoiceExpiryBatch } from '../src/lightning/flows/invoice-expiry-sweep';
import { configuredLightningNodes } from '../src/lightning/lnd';
import { providerFor, remoteProvidersOf, type PaymentOrder, type PaymentOutcome, type RemoteProviders } from '../src/lightning/provider';
import { expireDueInvoices, expireInvoice } from '../src/lightning/invoices';
import { payOverInternalRoute } from '../src/lightning/internal-route';
import { finalizePayment, paymentOrder } from '../src/lightning/payments';
import type { Logger } from '../src/logger';
import { DomainError } from '../src/shared/errors';
import { committedClaims } from '../src/lightning/claims';
import { heldReasonOf } from '../src/lightning/held';

export interface LightningActivityDeps {
  config: Config;
  orm: Orm;
  log: Logger;
  /** Tests only: other remote providers than the sandbox network and the configured LND. */
  lightningProviders?: RemoteProviders;
}

/** A provider outcome as it crosses the workflow boundary (no bigint in payloads). */
export type SerializedOutcome = { state: 'succeeded'; preimage: string; feeMsat: string } | { state: 'failed'; reason: string } | { state: 'unknown' };

/** What send-and-finalize did: settled the payment (paid or failed), or sent it with its outcome still unknown. */
export type SentAndFinalized = { state: 'finalized'; status: InvoiceStatus } | { state: 'unknown' };

/** The outcome a payment ended with, as it is recorded. */
const endedOutcome = (payment: LightningInvoice): SerializedOutcome =>
  payment.status === 'paid' ? { state: 'succeeded', preimage: payment.preimage, feeMsat: payment.feeMsat } : { state: 'failed', reason: payment.failureReason ?? payment.status };

const serialize = (outcome: PaymentOutcome): SerializedOutcome => (outcome.state === 'succeeded' ? { ...outcome, feeMsat: outcome.feeMsat.toString() } : outcome);

export const createLightningActivities = (deps: LightningActivityDeps) => {
  const inTransaction = transactionWithStarts(deps);
  const nodes = configuredLightningNodes(deps.config);
  const remoteProviders = deps.lightningProviders ?? remoteProvidersOf(nodes, committedClaims(deps.orm));

  /** Settles one of our invoices for an organization's payment (the internal route), the node's copy cancelled first. */
  const settleInternally = (order: PaymentOrder): Promise<PaymentOutcome> => payOverInternalRoute({ nodes, inTransaction, em: deps.orm.em.fork() }, order);

  async function loadPayment(paymentId: string) {
    const em = deps.orm.em.fork();
    // The row committed before its workflow was started.
    const payment = await findOneByColumns(em, LightningInvoice, { id: paymentId, direction: 'outgoing' });
    if (!payment) throw new Error(`Lightning payment ${paymentId} not found`);
    const order = paymentOrder(payment);
    const provider = await providerFor(em, payment.environment, order.invoice, settleInternally, remoteProviders, nodes);
    return { em, payment, order, provider };
  }

  /**
   * A provider's answer, or after LIGHTNING_LND_SEND_ATTEMPTS attempts that each ended in a transient error
   * (an outage, a refusal not known to be final) unknown: the payment is then held for an operator (held_at,
   * `lightning:held`, the lightning_payments_held metric) and the workflow re-queries it on its durable
   * timer, never failing it while its outcome is unknown. An answer clears the hold.
   */
  async function answerOrHold(paymentId: string, ask: () => Promise<SerializedOutcome>): Promise<SerializedOutcome> {
    try {
      const answer = await ask();
      await sql(deps.orm.em.fork(), 'update lightning_invoices set held_at = null, held_reason = null, held_reason_code = null where id = $1 and held_at is not null', [paymentId]);
      return answer;
    } catch (error) {
      if (error instanceof DomainError || Context.current().info.attempt < deps.config.LIGHTNING_LND_SEND_ATTEMPTS) throw error;
      const reason = error instanceof Error ? error.message : String(error);
      await sql(
        deps.orm.em.fork(),
        "update lightning_invoices set held_at = coalesce(held_at, now()), held_reason = $2, held_reason_code = $3 where id = $1 and status = 'pending'",
        [paymentId, reason, heldReasonOf(error)],
      );
      deps.log.warn({ payment_id: paymentId, reason }, 'Lightning payment held: its outcome could not be learned; it stays pending and is re-queried (lightning:held)');
      return { state: 'unknown' };
    }
  }

  /**
   * Sends the payment at most once. "Already sent" is checked first: a sent payment is only ever
   * queried, and with no provider for it now (configuration changed) its outcome is unknown, never
   * failed, since it may have gone out. The provider is asked to pay only by the call whose
   * sent_at update claimed the row.
   */
  function sendLightningPayment(input: { paymentId: string }): Promise<SerializedOutcome> {
    // Choosing the provider asks our node for its key: an outage there counts as the send's.
    return answerOrHold(input.paymentId, async () => {
      const { em, payment, order, provider } = await loadPayment(input.paymentId);
      if (payment.status !== 'pending') return endedOutcome(payment);
      if (!payment.sentAt) {
        // Never sent: with no route nothing went out, so it fails.
        if (!provider) return { state: 'failed', reason: 'no_route' };
        const claimed = (await sql(em, 'update lightning_invoices set sent_at = now() where id = $1 and sent_at is null returning 1', [payment.id])).length === 1;
        if (claimed) return serialize(await provider.pay(order));
      }
      return provider ? serialize(await provider.query(order, 0)) : { state: 'unknown' };
    });
  }

  /** Captures (paid) or releases (failed) the reserve, once. */
  async function finalizeLightningPayment(input: { paymentId: string; outcome: Exclude<SerializedOutcome, { state: 'unknown' }> }): Promise<InvoiceStatus> {
    const outcome = input.outcome.state === 'succeeded' ? { ...input.outcome, feeMsat: BigInt(input.outcome.feeMsat) } : input.outcome;
    return inTransaction((tx) => finalizePayment(tx, input.paymentId, outcome));
  }

  return {
    sendLightningPayment,
    finalizeLightningPayment,

    /**
     * Send, then finalize at once when the outcome is known (always on the internal route): one
     * activity where a settled payment took two, and one workflow task less. A retry after a send
     * finds the payment sent and only queries it, so nothing goes out twice; finalize settles once.
     */
    async sendAndFinalizeLightningPayment(input: { paymentId: string }): Promise<SentAndFinalized> {
      const outcome = await sendLightningPayment(input);
      if (outcome.state === 'unknown') return { state: 'unknown' };
      return { state: 'finalized', status: await finalizeLightningPayment({ paymentId: input.paymentId, outcome }) };
    },

    async readLightningInvoiceStatus(input: { invoiceId: string }): Promise<InvoiceStatus> {
      const invoice = await deps.orm.em.fork().findOneOrFail(LightningInvoice, { id: input.invoiceId });
      return invoice.status;
    },

    /** Only the invoice workflows of invoices created before the expiry sweep call this. */
    async expireLightningInvoice(input: { invoiceId: string; at: string }): Promise<InvoiceStatus> {
      return inTransaction((tx) => expireInvoice(tx, input.invoiceId, new Date(input.at)));
    },

    /** One batch of the expiry sweep, in one transaction (its events' webhook deliveries start after commit); returns how many it expired. */
    async expireDueLightningInvoices(input: InvoiceExpiryBatch): Promise<number> {
      return inTransaction((tx) => expireDueInvoices(tx, { dueBy: new Date(input.dueBy), limit: input.batchSize, organizationId: input.organizationId }));
    },

    queryLightningPayment(input: { paymentId: string; queryNumber: number }): Promise<SerializedOutcome> {
      return answerOrHold(input.paymentId, async () => {
        const { payment, order, provider } = await loadPayment(input.paymentId);
        // Ended meanwhile (an operator's lightning:resolve): a query would send a payment the node never had.
        if (payment.status !== 'pending') return endedOutcome(payment);
        return provider ? serialize(await provider.query(order, input.queryNumber)) : { state: 'unknown' };
      });
    },
  };
};
