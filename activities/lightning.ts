import { ApplicationFailure, Context } from '@temporalio/activity';
import type { Config } from '../src/config';
import type { Orm } from '../src/db/orm';
import { transactionWithStarts } from './transactions';
import { LightningInvoice } from '../src/lightning/entities';
import { providerFor, type PaymentOrder, type PaymentOutcome } from '../src/lightning/provider';
import { expireInvoice, finalizePayment, paymentOrder, settleIncomingInvoice, signalInvoicePaid } from '../src/lightning/service';
import type { Logger } from '../src/logger';

export interface LightningActivityDeps {
  config: Config;
  orm: Orm;
  log: Logger;
}

/** A provider outcome as it crosses the workflow boundary (no bigint in payloads). */
export type SerializedOutcome = { state: 'succeeded'; preimage: string; feeMsat: string } | { state: 'failed'; reason: string } | { state: 'unknown' };

const serialize = (outcome: PaymentOutcome): SerializedOutcome => (outcome.state === 'succeeded' ? { ...outcome, feeMsat: outcome.feeMsat.toString() } : outcome);

export const createLightningActivities = (deps: LightningActivityDeps) => {
  const inTransaction = transactionWithStarts(deps);

  /** Settles one of our invoices for an organization's payment (the internal route), then wakes the invoice's workflow. */
  const settleInternally = async (order: PaymentOrder): Promise<PaymentOutcome> => {
    const { outcome, invoiceId } = await inTransaction((tx) =>
      settleIncomingInvoice(tx, { paymentHash: order.invoice.paymentHash, environment: order.environment, amountMsat: order.amountMsat, paidByPaymentId: order.paymentId }),
    );
    if (invoiceId && outcome.state === 'succeeded') await signalInvoicePaid(Context.current().client, invoiceId);
    return outcome;
  };

  async function loadPending(paymentId: string) {
    const em = deps.orm.em.fork();
    const payment = await em.findOne(LightningInvoice, { id: paymentId, direction: 'outgoing' });
    // Started just before the API's commit: retried until the row is visible.
    if (!payment) throw ApplicationFailure.retryable(`payment ${paymentId} is not visible yet`, 'PaymentNotVisible');
    const order = paymentOrder(payment);
    const provider = await providerFor(em, payment.environment, order.invoice, settleInternally);
    return { em, payment, order, provider };
  }

  return {
    async readLightningInvoiceStatus(input: { invoiceId: string }): Promise<string> {
      const invoice = await deps.orm.em.fork().findOneOrFail(LightningInvoice, { id: input.invoiceId });
      return invoice.status;
    },

    async expireLightningInvoice(input: { invoiceId: string; at: string }): Promise<string> {
      return inTransaction((tx) => expireInvoice(tx, input.invoiceId, new Date(input.at)));
    },

    /**
     * Sends the payment once: the first call records sent_at before asking the provider, so a
     * retried or restarted send queries the outcome instead of paying again.
     */
    async sendLightningPayment(input: { paymentId: string }): Promise<SerializedOutcome> {
      const { em, payment, order, provider } = await loadPending(input.paymentId);
      if (payment.status === 'paid') return { state: 'succeeded', preimage: payment.preimage, feeMsat: payment.feeMsat };
      if (payment.status !== 'pending') return { state: 'failed', reason: payment.failureReason ?? payment.status };
      if (!provider) return { state: 'failed', reason: 'no_route' };
      if (payment.sentAt) return serialize(await provider.query(order, 0));
      await em.nativeUpdate(LightningInvoice, { id: payment.id, sentAt: null }, { sentAt: new Date() });
      return serialize(await provider.pay(order));
    },

    async queryLightningPayment(input: { paymentId: string; queryNumber: number }): Promise<SerializedOutcome> {
      const { order, provider } = await loadPending(input.paymentId);
      if (!provider) return { state: 'unknown' };
      return serialize(await provider.query(order, input.queryNumber));
    },

    async finalizeLightningPayment(input: { paymentId: string; outcome: Exclude<SerializedOutcome, { state: 'unknown' }> }): Promise<string> {
      const outcome = input.outcome.state === 'succeeded' ? { ...input.outcome, feeMsat: BigInt(input.outcome.feeMsat) } : input.outcome;
      return inTransaction((tx) => finalizePayment(tx, input.paymentId, outcome));
    },
  };
};
