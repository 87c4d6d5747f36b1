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
/** Our unpaid invoices read per page when a first start looks them up on the node. */
const LOOK_UP_PAGE = 500;

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
 * Moves the cursor up to `settleIndex` and `addIndex`, never down (several workers may record the same
 * invoices). The add_index says which of the node's invoices the ledger has seen settled last (an
 * operator's look-up); the catch-up needs the settle_index alone.
 */
const advanceCursor = (em: EntityManager, environment: Environment, nodePubkey: string, settleIndex: string, addIndex: string) =>
  sql(
    em,
    `insert into lightning_invoice_cursors (environment, node_pubkey, settle_index, add_index, updated_at) values ($1, $2, $3, $4, now())
     on conflict (environment, node_pubkey) do update set settle_index = greatest(lightning_invoice_cursors.settle_index, excluded.settle_index),
       add_index = greatest(lightning_invoice_cursors.add_index, excluded.add_index), updated_at = now()`,
    [environment, nodePubkey, settleIndex, addIndex],
  );

/** The payment hashes of our invoices the node issued that are not recorded paid (pending, or expired by the sweep), a page after `afterId`. */
const unpaidInvoicesOfNode = (em: EntityManager, environment: Environment, nodePubkey: string, afterId: string) =>
  sql<{ id: string; payment_hash: string }>(
    em,
    `select id, payment_hash from lightning_invoices where environment = $1 and direction = 'incoming' and destination = $2 and status in ('pending', 'expired') and id > $3 order by id limit $4`,
    [environment, nodePubkey, afterId, LOOK_UP_PAGE],
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
  if (nodePubkey) await advanceCursor(em, environment, nodePubkey, invoice.settle_index ?? '0', invoice.add_index ?? '0');
}

/**
 * Settles our LND-issued invoices into the ledger as each environment's node reports them paid, from
 * its invoice subscription (SubscribeInvoices). What settled while no watch ran is caught up from the
 * node's settle_index stored with each settlement (lightning_invoice_cursors): the subscription opens
 * from it, and the node replays what settled after it, in order. A node with no settle_index recorded yet
 * (a first start; index 0 replays nothing) is caught up from our own invoices, never the node's whole list
 * (a node shared with other software may hold millions): each of ours not recorded paid is looked up by
 * hash (`lookUpOurs`), and the subscription opens from the highest settle_index found, stored at once.
 * Settling is idempotent, so several workers watching the same node, or a replayed settlement, credit an
 * invoice once.
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
        const stored = await recordedSettleIndex(this.deps.orm.em.fork(), environment, nodePubkey);
        const settleIndex = stored === 0n ? await this.catchUp(environment, node, nodePubkey) : stored;
        // From 0 the node replays nothing, so what settled between the look-ups and the subscription's
        // start is unseen: the first settlement it delivers proves it started, and our invoices are looked up
        // once more before it moves the cursor. One settlement after another, in the node's order: the cursor
        // passes an index only once everything settled before it is recorded.
        let started = settleIndex > 0n;
        let recorded = Promise.resolve();
        const record = (invoice: LndInvoice) => {
          recorded = recorded.then(async () => {
            if (failure !== undefined) return;
            if (!started) await this.lookUpOurs(environment, node, nodePubkey, new Set());
            started = true;
            await this.deps.inTransaction((tx) => recordNodeSettlement(tx, environment, invoice, nodePubkey));
          }).catch(failed);
        };
        // Its failure is taken at once: a look-up may still be running when the node refuses the
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
   * A first start's catch-up, reading our invoices only: each of ours not recorded paid is looked up on the
   * node, twice. The highest settle_index the first pass finds settled, S, is at most the node's index when
   * the second pass starts; the second looks up again those open in the first (and any issued since), so each
   * of ours settled before it started is recorded, and any settled after has an index above S, which a
   * subscription from S replays. S is stored (0, none found settled, is not: the next start looks up again).
   */
  private async catchUp(environment: Environment, node: LndNode, nodePubkey: string): Promise<bigint> {
    const first = await this.lookUpOurs(environment, node, nodePubkey, new Set());
    await this.lookUpOurs(environment, node, nodePubkey, first.final);
    if (first.settleIndex > 0n) await advanceCursor(this.deps.orm.em.fork(), environment, nodePubkey, first.settleIndex.toString(), '0');
    return first.settleIndex;
  }

  /**
   * Looks up (LookupInvoice) each of our invoices the node issued that is not recorded paid, but those in
   * `skip`, and records the settled ones (not moving the cursor). Answers the highest settle_index among
   * them and the hashes whose state is final without a payment (canceled, or unknown to the node).
   */
  private async lookUpOurs(environment: Environment, node: LndNode, nodePubkey: string, skip: Set<string>): Promise<{ settleIndex: bigint; final: Set<string> }> {
    const found = { settleIndex: 0n, final: new Set<string>() };
    for (let afterId = '00000000-0000-0000-0000-000000000000'; ; ) {
      const page = await unpaidInvoicesOfNode(this.deps.orm.em.fork(), environment, nodePubkey, afterId);
      for (const { payment_hash: paymentHash } of page) {
        if (skip.has(paymentHash)) continue;
        const invoice = await node.lookupInvoice(paymentHash);
        if (!invoice || invoice.state === 'CANCELED') found.final.add(paymentHash);
        if (invoice?.state !== 'SETTLED') continue;
        await this.deps.inTransaction((tx) => recordNodeSettlement(tx, environment, invoice));
        if (BigInt(invoice.settle_index ?? 0) > found.settleIndex) found.settleIndex = BigInt(invoice.settle_index ?? 0);
      }
      if (page.length < LOOK_UP_PAGE) return found;
      afterId = page[page.length - 1]!.id;
    }
  }
}
