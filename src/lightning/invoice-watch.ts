import type { EntityManager } from '@mikro-orm/postgresql';
import type { Environment } from '../api-keys/entities';
import { sql } from '../db/lean';
import type { Orm } from '../db/orm';
import type { Logger } from '../logger';
import type { LndInvoice, LndNode } from './lnd';
import type { LightningNodes } from './provider';
import { settleIncomingInvoice } from './invoices';

/** How long the subscription may stay silent before it is opened again (a dead connection shows no error). */
const SILENCE_MS = 5 * 60_000;
/** Wait after a failed subscription before the next attempt. */
const RETRY_MS = 2_000;
/** The node's invoices listed per page when catching up without a settle index. */
const CATCH_UP_PAGE = 1_000;

export interface InvoiceWatchDeps {
  orm: Orm;
  log: Logger;
  nodes: LightningNodes;
  /** A transaction whose events' webhook deliveries start once it commits. */
  inTransaction: <T>(work: (em: EntityManager) => Promise<T>) => Promise<T>;
}

/** The settle_index this environment's node's history is recorded up to (lightning_invoice_cursors), 0 when never. */
async function recordedSettleIndex(em: EntityManager, environment: Environment, nodePubkey: string): Promise<bigint> {
  const [cursor] = await sql<{ settle_index: string }>(em, 'select settle_index from lightning_invoice_cursors where environment = $1 and node_pubkey = $2', [environment, nodePubkey]);
  return BigInt(cursor?.settle_index ?? 0);
}

/**
 * Moves the cursor up to `invoice`'s settle_index and add_index, never down (several workers may record
 * the same invoices). The add_index says which of the node's invoices the ledger has seen settled last
 * (an operator's look-up); the catch-up needs the settle_index alone.
 */
const advanceCursor = (em: EntityManager, environment: Environment, nodePubkey: string, invoice: LndInvoice) =>
  sql(
    em,
    `insert into lightning_invoice_cursors (environment, node_pubkey, settle_index, add_index, updated_at) values ($1, $2, $3, $4, now())
     on conflict (environment, node_pubkey) do update set settle_index = greatest(lightning_invoice_cursors.settle_index, excluded.settle_index),
       add_index = greatest(lightning_invoice_cursors.add_index, excluded.add_index), updated_at = now()`,
    [environment, nodePubkey, invoice.settle_index ?? '0', invoice.add_index ?? '0'],
  );

/**
 * Records an invoice the node reports settled: paid, credited and lightning.invoice.paid emitted, once
 * (settling is idempotent), even when the expiry sweep got to it first (the node holds the money).
 * `nodePubkey`: also moves the node's cursor past it, in the same transaction.
 */
export async function recordNodeSettlement(em: EntityManager, environment: Environment, invoice: LndInvoice, nodePubkey?: string): Promise<void> {
  await settleIncomingInvoice(em, {
    paymentHash: Buffer.from(invoice.r_hash, 'base64').toString('hex'),
    environment,
    amountMsat: BigInt(invoice.amt_paid_msat ?? '0'),
    paidByPaymentId: null,
    settledByNode: true,
  });
  if (nodePubkey) await advanceCursor(em, environment, nodePubkey, invoice);
}

/**
 * Settles our LND-issued invoices into the ledger as each environment's node reports them paid, from
 * its invoice subscription (SubscribeInvoices). What settled while no watch ran is caught up from the
 * node's settle_index stored with each settlement (lightning_invoice_cursors): the subscription opens
 * from it, and the node replays what settled after it, in order. A node with no
 * settle_index recorded yet (index 0 replays nothing) is caught up by listing its invoices (ListInvoices)
 * first. Settling is idempotent, so several workers watching the same node, or a replayed settlement,
 * credit an invoice once.
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
    while (!this.stopping.signal.aborted) {
      // Ends this subscription when a settlement cannot be recorded (or on stop): it is reopened from the stored cursor.
      const connection = new AbortController();
      let failure: unknown;
      const failed = (error: unknown) => {
        failure ??= error;
        connection.abort();
      };
      try {
        const nodePubkey = await node.identityPubkey();
        const settleIndex = await recordedSettleIndex(this.deps.orm.em.fork(), environment, nodePubkey);
        // One settlement after another, in the node's order, and only after the catch-up: the cursor
        // passes an index only once everything settled before it is recorded.
        let recorded = settleIndex === 0n ? this.catchUp(environment, node).catch(failed) : Promise.resolve();
        const record = (invoice: LndInvoice) => {
          recorded = recorded.then(async () => {
            if (failure === undefined) await this.deps.inTransaction((tx) => recordNodeSettlement(tx, environment, invoice, nodePubkey));
          }).catch(failed);
        };
        // Its failure is taken at once: the catch-up may still be running when the node refuses the
        // subscription (one starting up does), and a rejection left unhandled that long takes the worker down.
        await node
          .subscribeInvoices(settleIndex, (invoice) => invoice.state === 'SETTLED' && record(invoice), SILENCE_MS, AbortSignal.any([this.stopping.signal, connection.signal]))
          .catch(failed);
        await recorded;
      } catch (error) {
        failure ??= error;
      }
      if (failure !== undefined && !this.stopping.signal.aborted) {
        this.deps.log.warn({ environment, error: failure instanceof Error ? failure.message : String(failure) }, 'LND invoice subscription failed; opening it again');
        await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
      }
    }
  }

  /**
   * Every settled invoice the node lists, recorded (the node's and other applications' alike: settling
   * finds only ours). The cursor is left alone: the subscription's first settlement moves it, once
   * everything before it is recorded.
   */
  private async catchUp(environment: Environment, node: LndNode): Promise<void> {
    let after = 0n;
    for (;;) {
      const page = await node.listInvoices(after, CATCH_UP_PAGE);
      for (const invoice of page.invoices) {
        if (invoice.state === 'SETTLED') await this.deps.inTransaction((tx) => recordNodeSettlement(tx, environment, invoice));
      }
      if (page.invoices.length < CATCH_UP_PAGE) return;
      after = page.lastIndex;
    }
  }
}
