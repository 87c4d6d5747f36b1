import type { EntityManager } from '@mikro-orm/postgresql';
import type { Environment } from '../api-keys/entities';
import type { Orm } from '../db/orm';
import type { Logger } from '../logger';
import { LightningInvoice } from './entities';
import type { LndInvoice, LndNode } from './lnd';
import type { LightningNodes } from './provider';
import { settleIncomingInvoice } from './invoices';

/** How long the subscription may stay silent before it is opened again (a dead connection shows no error). */
const SILENCE_MS = 5 * 60_000;
/** Wait after a failed subscription before the next attempt. */
const RETRY_MS = 2_000;
/** Pending invoices looked up per batch when catching up. */
const CATCH_UP_BATCH = 100;

export interface InvoiceWatchDeps {
  orm: Orm;
  log: Logger;
  nodes: LightningNodes;
  /** A transaction whose events' webhook deliveries start once it commits. */
  inTransaction: <T>(work: (em: EntityManager) => Promise<T>) => Promise<T>;
}

/**
 * Settles our LND-issued invoices into the ledger as each environment's node reports them paid, from
 * its invoice subscription (SubscribeInvoices). A window the subscription missed is caught up: within
 * the process by the node's settle_index (it replays what settled after the last one seen), and at
 * start, with no index yet, by looking up every invoice still pending here. Settling is idempotent,
 * so several workers watching the same node, or a replayed settlement, credit an invoice once.
 */
export class LndInvoiceWatch {
  private readonly stopping = new AbortController();
  private readonly running: Promise<void>[] = [];

  constructor(private readonly deps: InvoiceWatchDeps) {}

  run(): Promise<void> {
    for (const environment of ['sandbox', 'live'] as const) {
      const node = this.deps.nodes.lnd(environment);
      if (node) this.running.push(this.watch(environment, node));
    }
    return Promise.all(this.running).then(() => undefined);
  }

  stop(): void {
    this.stopping.abort();
  }

  private async watch(environment: Environment, node: LndNode): Promise<void> {
    // The settle_index of the last invoice recorded: a reopened subscription replays what settled after it.
    let settleIndex = 0n;
    while (!this.stopping.signal.aborted) {
      // Ends this subscription when a settlement cannot be recorded (or on stop): it is reopened from settleIndex.
      const connection = new AbortController();
      let failure: unknown;
      // One settlement after another, in the node's order, so settleIndex only passes recorded ones.
      let recorded = Promise.resolve();
      const record = (invoice: LndInvoice) => {
        recorded = recorded
          .then(async () => {
            if (failure !== undefined) return;
            await this.settle(environment, invoice);
            const index = BigInt(invoice.settle_index ?? '0');
            if (index > settleIndex) settleIndex = index;
          })
          .catch((error: unknown) => {
            failure = error;
            connection.abort();
          });
      };
      const lookUpPending = settleIndex === 0n;
      // Its failure is taken at once: the catch-up below may still be running when the node refuses the
      // subscription (one starting up does), and a rejection left unhandled that long takes the worker down.
      const subscription = node
        .subscribeInvoices(settleIndex, (invoice) => invoice.state === 'SETTLED' && record(invoice), SILENCE_MS, AbortSignal.any([this.stopping.signal, connection.signal]))
        .catch((error: unknown) => {
          failure ??= error;
        });
      try {
        // With no settle_index yet, what settled before the subscription opened is looked up one by one.
        if (lookUpPending) await this.catchUp(environment, node);
      } catch (error) {
        failure ??= error;
        connection.abort();
      }
      await subscription;
      await recorded;
      if (failure !== undefined && !this.stopping.signal.aborted) {
        this.deps.log.warn({ environment, error: failure instanceof Error ? failure.message : String(failure) }, 'LND invoice subscription failed; opening it again');
        await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
      }
    }
  }

  private async settle(environment: Environment, invoice: LndInvoice): Promise<void> {
    await this.deps.inTransaction((tx) =>
      settleIncomingInvoice(tx, {
        paymentHash: Buffer.from(invoice.r_hash, 'base64').toString('hex'),
        environment,
        amountMsat: BigInt(invoice.amt_paid_msat ?? '0'),
        paidByPaymentId: null,
        settledByNode: true,
      }),
    );
  }

  private async catchUp(environment: Environment, node: LndNode): Promise<void> {
    let after = '';
    for (;;) {
      const pending = await this.deps.orm.em
        .fork()
        .find(LightningInvoice, { environment, direction: 'incoming', status: 'pending', paymentHash: { $gt: after } }, { orderBy: { paymentHash: 'asc' }, limit: CATCH_UP_BATCH, fields: ['paymentHash'] });
      for (const invoice of pending) {
        const known = await node.lookupInvoice(invoice.paymentHash);
        if (known?.state === 'SETTLED') await this.settle(environment, known);
      }
      if (pending.length < CATCH_UP_BATCH) return;
      after = pending[pending.length - 1]!.paymentHash;
    }
  }
}
