import { LockMode } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { assetById } from '../catalogue/service';
import { Address } from '../custody/entities';
import { Organization } from '../organizations/entities';
import { emit } from '../events/service';
import { DomainError } from '../shared/errors';
import { toDisplay } from '../shared/money';
import { recordStart } from '../temporal/starter';
import { OutgoingTransaction } from '../transactions/entities';
import { readSendFromNode, type SendNodeReads } from '../transactions/node-reads';
import { createTransaction } from '../transactions/service';
import { deskTenant, deskWallet } from './desk';
import { PayoutDeposit, PayoutRefund, PayoutTrip, type RefundReason } from './entities';
import { payoutRefundFlow, type RefundProgress } from './flows/refund';
import { presentRefund, presentTrip } from './presenters';
import type { SettlementDeps } from './settlement';
import { recordTransition } from './timeline';
import { lockTrip } from './trips';
import { sendHash } from '../transactions/presenters';

/**
 * Sends `amount` of `assetId` back to the trip's refund address and records the refund, its
 * `refund_pending` entry on the timeline and the start of `payout-refund-<id>`, which follows the
 * send to its end. Throws the send's DomainError when the desk cannot make it (nothing recorded).
 */
export async function startRefund(
  em: EntityManager,
  deps: SettlementDeps,
  trip: PayoutTrip,
  refund: { reason: RefundReason; assetId: string; amount: bigint; purpose: string; details: Record<string, unknown> },
): Promise<PayoutRefund> {
  const transactionId = await sendRefund(em, deps, trip, refund.amount, refund.assetId, refund.purpose);
  const row = em.create(PayoutRefund, {
    organization: em.getReference(Organization, trip.organization.id),
    environment: trip.environment,
    trip,
    reason: refund.reason,
    assetId: refund.assetId,
    amount: refund.amount.toString(),
    transaction: em.getReference(OutgoingTransaction, transactionId),
  });
  await em.flush();
  await recordTransition(em, trip, 'refund_pending', `refund-start:${row.id}`, {
    ...refund.details,
    refund_id: row.id,
    reason: refund.reason,
    asset_id: refund.assetId,
    amount_raw: row.amount,
    transaction_id: transactionId,
  });
  recordStart(em, payoutRefundFlow, { refundId: row.id }, trip.organization.id);
  return row;
}

/** A send from the trip's deposit address to its refund address: who makes it, what it asks, where it leaves from. */
async function refundSend(em: EntityManager, deps: SettlementDeps, trip: PayoutTrip, amount: bigint, assetId: string, purpose: string) {
  const desk = await deskTenant(em, deps.config, trip.environment);
  const wallet = await deskWallet(em, deps.keys, desk, trip.chain);
  const from = await em.findOneOrFail(Address, { id: trip.depositAddressRecord.id }, { populate: ['wallet'] });
  const asset = assetById(assetId);
  return {
    // The service's own desk: no key of the organization's set this refund up.
    initiator: { ...desk, automationRuleId: `payout-trip-${trip.id}`, actorKeyId: null },
    input: {
      wallet_id: wallet.id,
      to_address: trip.refundAddress!,
      amount: toDisplay(amount, asset.decimals),
      asset: asset.id,
      // Native coins pay their own fee out of the refund; a token's fee is the desk's native coin.
      treat_as_gross_amount: asset.type === 'native',
      note: `Refund of payout trip ${trip.id} (${purpose})`,
    },
    automation: { operationType: 'payout_refund' as const, fromAddress: from },
  };
}

/** The node's part of a refund's send: one trip, asset and amount leave from one address to one. */
const refundReadsKey = (tripId: string, assetId: string, amount: bigint) => `${tripId}:${assetId}:${amount}`;

/**
 * Thrown inside a transaction that would make a refund's send without the node's part read: the
 * transaction rolls back, `refundingTransaction` reads it outside, and runs the transaction again.
 */
class RefundNodeReadsNeeded extends Error {
  constructor(readonly send: { tripId: string; assetId: string; amount: bigint; purpose: string }) {
    super(`payout trip ${send.tripId}: the node's part of a ${send.amount} ${send.assetId} refund is not read yet`);
  }
}

/** Node reads per refund send (or the node's refusal of it), read outside any transaction. */
export type RefundNodeReads = Map<string, SendNodeReads | DomainError>;

/** Rounds a refunding transaction may ask for node reads: one per distinct refund it makes. */
const MAX_REFUND_READ_ROUNDS = 20;

/**
 * `deps.transaction(work)` for work that may make refund sends, with no node call inside it (fee
 * market, gas: a slow node must not hold the trip's row lock or a pooled connection). A refund the
 * work reaches unread rolls the transaction back; its send is read from the node, and the work runs
 * again, on the state it then finds, with the reads in `deps.refundNodeReads`.
 */
export async function refundingTransaction<T>(deps: SettlementDeps, work: (em: EntityManager, deps: SettlementDeps) => Promise<T>): Promise<T> {
  const refundNodeReads: RefundNodeReads = new Map();
  const refunding = { ...deps, refundNodeReads };
  for (let round = 1; ; round += 1) {
    try {
      return await deps.transaction((em) => work(em, refunding));
    } catch (error) {
      if (!(error instanceof RefundNodeReadsNeeded) || round === MAX_REFUND_READ_ROUNDS) throw error;
      const { tripId, assetId, amount, purpose } = error.send;
      const em = deps.em();
      const trip = await em.findOneOrFail(PayoutTrip, { id: tripId });
      const { initiator, input, automation } = await refundSend(em, deps, trip, amount, assetId, purpose);
      let reads: SendNodeReads | DomainError;
      try {
        reads = await readSendFromNode(em, deps.config, deps.chains, initiator, input, automation);
      } catch (refusal) {
        if (!(refusal instanceof DomainError)) throw refusal;
        reads = refusal;
      }
      refundNodeReads.set(refundReadsKey(tripId, assetId, amount), reads);
    }
  }
}

/** Makes the refund's send in a savepoint, so that a refusal leaves the transaction usable; the node's part is read before (`refundingTransaction`). */
async function sendRefund(em: EntityManager, deps: SettlementDeps, trip: PayoutTrip, amount: bigint, assetId: string, purpose: string): Promise<string> {
  const reads = deps.refundNodeReads?.get(refundReadsKey(trip.id, assetId, amount));
  if (!reads) throw new RefundNodeReadsNeeded({ tripId: trip.id, assetId, amount, purpose });
  if (reads instanceof DomainError) throw reads;
  const { initiator, input, automation } = await refundSend(em, deps, trip, amount, assetId, purpose);
  return em.transactional(async (savepoint) => {
    const sent = await createTransaction(savepoint, deps.config, deps.chains, initiator, input, { ...automation, nodeReads: reads });
    return sent.id;
  });
}

/** The refund and its trip, locked in that order (the trip first, as every step that moves a trip's money). */
async function lockRefund(em: EntityManager, refundId: string): Promise<{ refund: PayoutRefund; trip: PayoutTrip; send: OutgoingTransaction }> {
  const { trip } = await em.findOneOrFail(PayoutRefund, { id: refundId }, { fields: ['trip'] });
  const locked = await lockTrip(em, trip.id);
  const refund = await em.findOneOrFail(PayoutRefund, { id: refundId }, { lockMode: LockMode.PESSIMISTIC_WRITE, refresh: true });
  const send = await em.findOneOrFail(OutgoingTransaction, { id: refund.transaction.id }, { refresh: true });
  return { refund, trip: locked, send };
}

const progressOf = (refund: PayoutRefund, send: OutgoingTransaction): RefundProgress =>
  refund.status === 'refund_pending' ? { status: 'refund_pending', send: send.status === 'failed' ? 'failed' : 'pending', attempts: refund.attempts } : { status: refund.status };

/**
 * Where the refund's send stands: settled, the refund is refunded; failed (proven: its funds never
 * left the desk) with attempts left, the workflow makes a new send (`resendRefund`); failed with none
 * left, the refund is refund_failed and its deposits held for an operator.
 */
export async function followRefund(deps: SettlementDeps, refundId: string): Promise<RefundProgress> {
  return deps.transaction(async (em) => {
    const { refund, trip, send } = await lockRefund(em, refundId);
    if (refund.status !== 'refund_pending') return progressOf(refund, send);
    if (send.status === 'confirmed') {
      refund.status = 'refunded';
      refund.completedAt = new Date();
      await em.flush();
      await recordTransition(em, trip, 'refunded', `refund-end:${refund.id}`, {
        refund_id: refund.id,
        reason: refund.reason,
        transaction_id: send.id,
        tx_hash: sendHash(send),
        amount_raw: send.recipientAmount,
        attempts: refund.attempts,
      });
      await announceRefund(em, trip, refund, 'payouts.refund.refunded');
    } else if (send.status === 'failed' && refund.attempts >= deps.config.PAYOUT_REFUND_ATTEMPTS) {
      await failRefund(em, trip, refund, send.failureReason ?? 'failed');
    }
    return progressOf(refund, send);
  });
}

/** Replaces the failed send of attempt `attempt` by a new one, once; a new send the desk cannot make ends the refund refund_failed. */
export async function resendRefund(deps: SettlementDeps, refundId: string, attempt: number): Promise<RefundProgress> {
  return refundingTransaction(deps, async (em, deps) => {
    const { refund, trip, send } = await lockRefund(em, refundId);
    if (refund.status !== 'refund_pending' || refund.attempts !== attempt || send.status !== 'failed') return progressOf(refund, send);
    let next: string;
    try {
      next = await sendRefund(em, deps, trip, BigInt(refund.amount), refund.assetId, `refund ${refund.id}, attempt ${attempt + 1}`);
    } catch (error) {
      if (!(error instanceof DomainError)) throw error;
      await failRefund(em, trip, refund, `refused:${error.code}`);
      return progressOf(refund, send);
    }
    refund.transaction = em.getReference(OutgoingTransaction, next);
    refund.attempts = attempt + 1;
    await em.flush();
    await recordTransition(em, trip, 'refund_retried', `refund-retry:${refund.id}:${refund.attempts}`, {
      refund_id: refund.id,
      attempt: refund.attempts,
      transaction_id: next,
      failed_transaction_id: send.id,
      failure_reason: send.failureReason ?? null,
    });
    return { status: 'refund_pending', send: 'pending', attempts: refund.attempts };
  });
}

/** The refund could not be made: its money stays in the desk, its deposits held for an operator (`payout:resolve`). */
async function failRefund(em: EntityManager, trip: PayoutTrip, refund: PayoutRefund, reason: string): Promise<void> {
  refund.status = 'refund_failed';
  refund.failureReason = reason;
  refund.completedAt = new Date();
  const deposits = await em.find(PayoutDeposit, { refund });
  for (const deposit of deposits) deposit.resolution = 'hold';
  await em.flush();
  await recordTransition(em, trip, 'refund_failed', `refund-end:${refund.id}`, {
    refund_id: refund.id,
    reason: refund.reason,
    failure_reason: reason,
    attempts: refund.attempts,
    transaction_id: refund.transaction.id,
    resolution: 'hold',
  });
  await announceRefund(em, trip, refund, 'payouts.refund.failed');
}

/** The refund's end, to the trip's organization: the trip as its other events carry it, with `refund`. */
async function announceRefund(em: EntityManager, trip: PayoutTrip, refund: PayoutRefund, type: 'payouts.refund.refunded' | 'payouts.refund.failed'): Promise<void> {
  await em.populate(refund, ['transaction']);
  await emit(em, {
    organizationId: trip.organization.id,
    environment: trip.environment,
    type,
    data: { ...presentTrip(trip), refund: presentRefund(refund) },
    dedupeKey: `${type}:${refund.id}`,
  });
}

/** A trip's refunds, oldest first. */
export function tripRefunds(em: EntityManager, trip: PayoutTrip): Promise<PayoutRefund[]> {
  return em.find(PayoutRefund, { trip }, { orderBy: { createdAt: 'asc', id: 'asc' }, populate: ['transaction'] });
}
