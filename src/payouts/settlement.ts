import type { EntityManager } from '@mikro-orm/postgresql';
import type { BalanceCurrency } from '../balances/entities';
import { applyBalanceEntry } from '../balances/service';
import { assetById } from '../catalogue/service';
import type { ChainNodes } from '../chains/nodes';
import type { Config } from '../config';
import { emit } from '../events/service';
import type { EventType } from '../events/event-types';
import type { KeyService } from '../keys/service';
import { IncomingTransfer } from '../monitoring/entities';
import { DomainError } from '../shared/errors';
import { openBeneficiary } from './beneficiaries';
import { deskTenant } from './desk';
import { FINAL_TRIP_STATUSES, PayoutDeposit, PayoutTrip, type PayoutRefund, type DepositResolution, type RefundReason, type TripStatus } from './entities';
import type { FundingState, LateResolution, RailState, Settlement } from './flows/trip';
import { presentTrip } from './presenters';
import { RailOutcomeUnknownError, railFor } from './rails';
import { refundingTransaction, startRefund, type RefundNodeReads } from './refunds';
import { recordTransition } from './timeline';
import { lockTrip } from './trips';

export interface SettlementDeps {
  config: Config;
  chains: ChainNodes;
  keys: KeyService;
  /** A fresh EntityManager for reads outside transactions. */
  em: () => EntityManager;
  /** One transaction whose recorded workflow starts (event deliveries, a refund's send) fire once it commits. */
  transaction: <T>(work: (em: EntityManager) => Promise<T>) => Promise<T>;
  /** The node's part of the refund sends a `refundingTransaction` makes, read before it. */
  refundNodeReads?: RefundNodeReads;
}

/** The payout stages' aliases named in the recovery guidance, emitted beside their payouts.* event (docs/payouts.md). */
const STAGE_ALIASES: Partial<Record<EventType, EventType>> = {
  'payouts.processing': 'withdrawal.processing',
  'payouts.withdrawal.success': 'withdrawal.success',
  'payouts.withdrawal.failed': 'withdrawal.failed',
};

/** The organization balance a trip's asset is credited to: BTC in sats, stablecoins in micro-units (6 decimals on every chain). */
export function creditCurrencyOf(assetId: string): BalanceCurrency {
  const asset = assetById(assetId);
  if (asset.id === 'BTC') return 'sat';
  if (asset.symbol === 'USDT') return 'usdt';
  if (asset.symbol === 'USDC') return 'usdc';
  throw new Error(`${assetId} is not a payout asset`);
}

export async function announce(em: EntityManager, trip: PayoutTrip, type: EventType, key: string = type): Promise<void> {
  const data = presentTrip(trip);
  const scope = { organizationId: trip.organization.id, environment: trip.environment };
  await emit(em, { ...scope, type, data, dedupeKey: `${key}:${trip.id}` });
  const alias = STAGE_ALIASES[type];
  if (alias) await emit(em, { ...scope, type: alias, data: { ...data, alias_of: type }, dedupeKey: `${alias}:${trip.id}` });
}

/** Moves the trip to `status`, on its timeline too; a final status stamps completedAt. */
export async function moveTo(em: EntityManager, trip: PayoutTrip, status: TripStatus, details: Record<string, unknown> = {}): Promise<void> {
  trip.status = status;
  if (FINAL_TRIP_STATUSES.includes(status)) trip.completedAt ??= new Date();
  await em.flush();
  await recordTransition(em, trip, status, status, details);
}

/** Credits base units of the trip's asset to the organization's balance, once per (reason, id). */
export async function creditOrganization(em: EntityManager, trip: PayoutTrip, amount: bigint, reference: { type: string; id: string }): Promise<void> {
  if (amount <= 0n) return;
  await applyBalanceEntry(em, {
    organizationId: trip.organization.id,
    environment: trip.environment,
    currency: creditCurrencyOf(trip.assetId),
    kind: 'credit',
    amount,
    reference,
  });
  trip.creditedAmount = (BigInt(trip.creditedAmount ?? '0') + amount).toString();
}

/**
 * Brings the trip's deposits up to date with what the chain scanner recorded at its address (the
 * desk's incoming transfers). A transfer first seen while the trip still takes funds, and seen by
 * the scanner before the quote expired (or while the workflow still accepts funding), is funding;
 * any other is late. Another asset than the quote's is never funding.
 */
async function syncDeposits(em: EntityManager, deps: SettlementDeps, trip: PayoutTrip, acceptFunding: boolean): Promise<PayoutDeposit[]> {
  const desk = await deskTenant(em, deps.config, trip.environment);
  const transfers = await em.find(
    IncomingTransfer,
    { organization: desk.organizationId, environment: trip.environment, address: trip.depositAddressRecord.id },
    { orderBy: { createdAt: 'asc', id: 'asc' }, refresh: true },
  );
  const deposits = await em.find(PayoutDeposit, { trip }, { refresh: true });
  const fundingOpen = trip.status === 'awaiting_deposit' || trip.status === 'funded';
  for (const transfer of transfers) {
    let deposit = deposits.find((candidate) => candidate.incomingTransferId === transfer.id);
    if (!deposit) {
      const funding = fundingOpen && transfer.assetId === trip.assetId && (acceptFunding || transfer.createdAt < trip.expiresAt);
      deposit = em.create(PayoutDeposit, {
        trip,
        incomingTransferId: transfer.id,
        txid: transfer.txid,
        amount: transfer.amount,
        role: funding ? 'funding' : 'late',
        seenAt: transfer.createdAt,
      });
      deposits.push(deposit);
      if (!funding) {
        await recordTransition(em, trip, 'late_payment_received', `late-seen:${transfer.id}`, {
          tx_hash: transfer.txid,
          asset_id: transfer.assetId,
          amount_raw: transfer.amount,
        });
      }
    }
    deposit.confirmedAt = transfer.status === 'confirmed' ? (transfer.confirmedAt ?? new Date()) : null;
    deposit.droppedAt = transfer.status === 'dropped' ? (transfer.droppedAt ?? new Date()) : null;
  }
  await em.flush();
  return deposits;
}

const sum = (deposits: PayoutDeposit[]) => deposits.reduce((total, deposit) => total + BigInt(deposit.amount), 0n);

export async function openTrip(deps: SettlementDeps, tripId: string) {
  const trip = await deps.em().findOneOrFail(PayoutTrip, { id: tripId });
  return { status: trip.status, expiresAt: trip.expiresAt.getTime(), lateWatchSeconds: deps.config.PAYOUT_LATE_PAYMENT_WATCH_HOURS * 3600 };
}

/**
 * One look at the deposit address while funds are awaited: the first funding deposit seen makes
 * the trip funded (asset.received, assetReceivedAt); amountReceived is what the funding deposits
 * add up to; once every one of them is confirmed, assetConfirmedAt is set (rule 8). A reorganisation
 * that drops the only deposit puts the trip back to awaiting_deposit.
 */
export async function watchFunding(deps: SettlementDeps, tripId: string, acceptFunding: boolean): Promise<FundingState> {
  return deps.transaction(async (em) => {
    const trip = await lockTrip(em, tripId);
    if (trip.status !== 'awaiting_deposit' && trip.status !== 'funded') return { status: trip.status, expiresAt: trip.expiresAt.getTime(), seen: 0, unconfirmed: 0 };
    const funding = (await syncDeposits(em, deps, trip, acceptFunding)).filter((deposit) => deposit.role === 'funding' && !deposit.droppedAt);
    if (funding.length === 0) {
      if (trip.status === 'funded') {
        trip.amountReceived = null;
        trip.assetReceivedAt = null;
        await moveTo(em, trip, 'awaiting_deposit');
        await recordTransition(em, trip, 'deposit_dropped', `dropped:${Date.now()}`);
      }
      return { status: trip.status, expiresAt: trip.expiresAt.getTime(), seen: 0, unconfirmed: 0 };
    }
    trip.amountReceived = sum(funding).toString();
    trip.assetReceivedAt ??= funding[0]!.seenAt;
    if (trip.status === 'awaiting_deposit') await moveTo(em, trip, 'funded', { amount_received_raw: trip.amountReceived });
    for (const deposit of funding) await announce(em, trip, 'asset.received', `asset.received:${deposit.id}`);
    const unconfirmed = funding.filter((deposit) => !deposit.confirmedAt).length;
    if (unconfirmed === 0 && !trip.assetConfirmedAt) {
      trip.assetConfirmedAt = new Date(Math.max(...funding.map((deposit) => deposit.confirmedAt!.getTime())));
      await recordTransition(em, trip, 'asset_confirmed', 'asset_confirmed', { amount_received_raw: trip.amountReceived });
    }
    await em.flush();
    return { status: trip.status, expiresAt: trip.expiresAt.getTime(), seen: funding.length, unconfirmed };
  });
}

/** The quote expired with nothing received: the trip is expired and cancelled (payouts.withdrawal.expired). A deposit seen meanwhile keeps it funded. */
export async function expireTrip(deps: SettlementDeps, tripId: string): Promise<TripStatus> {
  return deps.transaction(async (em) => {
    const trip = await lockTrip(em, tripId);
    if (trip.status !== 'awaiting_deposit') return trip.status;
    const funding = (await syncDeposits(em, deps, trip, false)).filter((deposit) => deposit.role === 'funding' && !deposit.droppedAt);
    if (funding.length > 0) return trip.status;
    await moveTo(em, trip, 'expired', { reason: 'no_payment_before_expiry' });
    await announce(em, trip, 'payouts.withdrawal.expired');
    return trip.status;
  });
}

/**
 * Decides the payout once the funding is confirmed (rule 7): paid in full or over, the quoted fiat
 * amount is paid and the excess credited to the organization's balance in the asset; short within
 * PAYOUT_UNDERPAYMENT_MARGIN_BPS, the quoted amount pro rata (toAmount × received / fromAmount,
 * rounded down to the currency's minor unit); short beyond it, PAYOUT_UNDERPAYMENT_RESOLUTION:
 * refund to the refund address, credit the balance, or hold for an operator.
 */
export async function settleTrip(deps: SettlementDeps, tripId: string): Promise<Settlement> {
  return refundingTransaction(deps, async (em, deps) => {
    const trip = await lockTrip(em, tripId);
    if (trip.status === 'processing') return { next: 'pay' };
    if (trip.status !== 'funded') return { next: 'done', status: trip.status };
    const quoted = BigInt(trip.quote.fromAmount);
    const toAmount = BigInt(trip.quote.toAmount);
    const received = BigInt(trip.amountReceived!);
    if (received >= quoted) {
      trip.payoutAmount = toAmount.toString();
      if (received > quoted) {
        await creditOrganization(em, trip, received - quoted, { type: 'payout_trip_excess', id: trip.id });
        await recordTransition(em, trip, 'excess_credited', 'excess_credited', { amount_raw: (received - quoted).toString(), currency: creditCurrencyOf(trip.assetId) });
      }
    } else if (received * 10_000n >= quoted * BigInt(10_000 - deps.config.PAYOUT_UNDERPAYMENT_MARGIN_BPS)) {
      trip.payoutAmount = ((toAmount * received) / quoted).toString();
    } else {
      const deposits = (await em.find(PayoutDeposit, { trip, role: 'funding', droppedAt: null })).filter((deposit) => deposit.confirmedAt);
      const details = { amount_received_raw: received.toString(), amount_to_send_raw: quoted.toString() };
      const outcome = await resolveFunds(em, deps, trip, deps.config.PAYOUT_UNDERPAYMENT_RESOLUTION, underpaidFunds(trip, deposits, details));
      if (outcome.resolution === 'hold') {
        trip.holdReason = outcome.reason ?? 'underpaid_beyond_margin';
        await moveTo(em, trip, 'held', { ...details, resolution: 'hold' });
        return { next: 'done', status: trip.status };
      }
      if (outcome.resolution === 'credit') await recordTransition(em, trip, 'underpayment_credited', 'underpayment_resolved', { ...details, resolution: 'credit' });
      await failUnderpaid(em, trip);
      return { next: 'done', status: trip.status };
    }
    trip.rail = railFor(trip.environment, trip.quote.paymentMethod).name;
    await moveTo(em, trip, 'processing', { payout_amount_raw: trip.payoutAmount, currency: trip.quote.toCurrency });
    await announce(em, trip, 'payouts.processing');
    return { next: 'pay' };
  });
}

/**
 * Asks the rail where the trip's instruction stands and sends it only when the rail has never
 * received it: an unknown answer is asked again, never sent again, so nothing is paid twice.
 */
export async function payTrip(deps: SettlementDeps, tripId: string): Promise<RailState> {
  const em = deps.em();
  const trip = await em.findOneOrFail(PayoutTrip, { id: tripId }, { populate: ['quote'] });
  if (trip.status !== 'processing') throw new Error(`trip ${tripId} is ${trip.status}, not processing`);
  const rail = railFor(trip.environment, trip.quote.paymentMethod);
  try {
    const known = await rail.status(em, trip.id);
    if (known) return known;
    return await rail.submit(em, {
      tripId: trip.id,
      organizationId: trip.organization.id,
      environment: trip.environment,
      country: trip.quote.country,
      currency: trip.quote.toCurrency,
      amount: BigInt(trip.payoutAmount!),
      beneficiary: await openBeneficiary(deps.keys.provider, trip),
    });
  } catch (error) {
    if (error instanceof RailOutcomeUnknownError) {
      await recordTransition(em, trip, 'rail_answer_unknown', 'rail_answer_unknown', { rail: rail.name });
      return { state: 'unknown' };
    }
    throw error;
  }
}

/**
 * The rail's final answer: success (payouts.withdrawal.success), or failed with failure_reason when
 * it rejected the payout or blocked it at compliance or risk (rule 9). A failed payout's funds not
 * yet credited (everything received but an excess already credited) go to the organization's balance.
 */
export async function finishTrip(deps: SettlementDeps, tripId: string, answer: RailState): Promise<TripStatus> {
  return deps.transaction(async (em) => {
    const trip = await lockTrip(em, tripId);
    if (trip.status !== 'processing') return trip.status;
    if (answer.state === 'paid') {
      await moveTo(em, trip, 'success', { payout_amount_raw: trip.payoutAmount, rail: trip.rail });
      await announce(em, trip, 'payouts.withdrawal.success');
      return trip.status;
    }
    if (answer.state !== 'failed' && answer.state !== 'blocked') throw new Error(`trip ${tripId}: the rail's answer ${answer.state} is not final`);
    trip.failureReason = answer.reason;
    const refundable = BigInt(trip.amountReceived!) - BigInt(trip.creditedAmount ?? '0');
    await creditOrganization(em, trip, refundable, { type: 'payout_trip_failed', id: trip.id });
    await moveTo(em, trip, 'failed', { failure_reason: answer.reason, stage: answer.state === 'blocked' ? 'compliance' : 'delivery' });
    if (refundable > 0n) await recordTransition(em, trip, 'funds_credited', 'funds_credited', { amount_raw: refundable.toString(), currency: creditCurrencyOf(trip.assetId) });
    await announce(em, trip, 'payouts.withdrawal.failed');
    return trip.status;
  });
}

/**
 * Late payments (rule 1): each deposit that came after the trip stopped taking funds is resolved
 * once it is confirmed, by PAYOUT_LATE_PAYMENT_RESOLUTION; another asset than the quote's is held.
 */
export async function resolveLateDeposits(deps: SettlementDeps, tripId: string): Promise<LateResolution> {
  return refundingTransaction(deps, async (em, deps) => {
    const trip = await lockTrip(em, tripId);
    if (trip.status === 'awaiting_deposit' || trip.status === 'funded') return { resolved: [], waiting: 0 };
    const late = (await syncDeposits(em, deps, trip, false)).filter((deposit) => deposit.role === 'late' && !deposit.resolution && !deposit.droppedAt);
    const resolved: LateResolution['resolved'] = [];
    let waiting = 0;
    for (const deposit of late) {
      if (!deposit.confirmedAt) {
        waiting += 1;
        continue;
      }
      const funds = await lateFunds(em, deposit);
      const configured = funds.assetId === trip.assetId ? deps.config.PAYOUT_LATE_PAYMENT_RESOLUTION : 'hold';
      const outcome = await resolveFunds(em, deps, trip, configured, funds);
      if (outcome.resolution !== 'refund') {
        await recordTransition(em, trip, `late_payment_${outcome.resolution === 'credit' ? 'credited' : 'held'}`, `late:${deposit.id}`, {
          ...funds.details,
          ...(outcome.reason ? { reason: outcome.reason } : {}),
        });
      }
      resolved.push({ depositId: deposit.id, resolution: outcome.resolution });
    }
    await em.flush();
    return { resolved, waiting };
  });
}

/** Money of a trip held, refunded or credited as one: an underpayment's funding deposits, or one late deposit. */
export interface TripFunds {
  amount: bigint;
  assetId: string;
  /** The balance journal's reference of a credit, unique per funds. */
  reference: { type: string; id: string };
  deposits: PayoutDeposit[];
  refundReason: RefundReason;
  /** What the timeline says of these funds. */
  details: Record<string, unknown>;
}

/** An underpayment beyond the margin: what the confirmed funding deposits add up to. */
export function underpaidFunds(trip: PayoutTrip, deposits: PayoutDeposit[], details: Record<string, unknown>): TripFunds {
  return { amount: sum(deposits), assetId: trip.assetId, reference: { type: 'payout_trip_underpaid', id: trip.id }, deposits, refundReason: 'underpayment', details };
}

/** One late deposit, in whatever asset it came. */
export async function lateFunds(em: EntityManager, deposit: PayoutDeposit): Promise<TripFunds> {
  const transfer = await em.findOneOrFail(IncomingTransfer, { id: deposit.incomingTransferId });
  return {
    amount: BigInt(deposit.amount),
    assetId: transfer.assetId,
    reference: { type: 'payout_late_deposit', id: deposit.id },
    deposits: [deposit],
    refundReason: 'late_payment',
    details: { tx_hash: deposit.txid, amount_raw: deposit.amount, asset_id: transfer.assetId },
  };
}

/** An underpayment credited or refunded: the payout failed (payouts.withdrawal.failed). */
export async function failUnderpaid(em: EntityManager, trip: PayoutTrip): Promise<void> {
  trip.failureReason = 'underpaid_beyond_margin';
  await moveTo(em, trip, 'failed', { failure_reason: trip.failureReason });
  await announce(em, trip, 'payouts.withdrawal.failed');
}

/**
 * Money the trip will not pay out, as configured: refunded on chain from the desk to the trip's
 * refund address (followed by its own workflow), credited to the organization's balance, or held.
 * A refund that cannot be made (no refund address, the desk cannot send it) is held instead, with
 * the reason: money is never left unaccounted.
 */
async function resolveFunds(em: EntityManager, deps: SettlementDeps, trip: PayoutTrip, configured: DepositResolution, funds: TripFunds): Promise<{ resolution: DepositResolution; reason?: string }> {
  if (configured === 'refund' && !trip.refundAddress) {
    await applyResolution(em, deps, trip, 'hold', funds);
    return { resolution: 'hold', reason: 'no_refund_address' };
  }
  try {
    await applyResolution(em, deps, trip, configured, funds);
    return { resolution: configured, ...(configured === 'hold' && funds.assetId !== trip.assetId ? { reason: 'unexpected_asset' } : {}) };
  } catch (error) {
    if (!(error instanceof DomainError) || configured !== 'refund') throw error;
    await applyResolution(em, deps, trip, 'hold', funds);
    return { resolution: 'hold', reason: `refund_refused:${error.code}` };
  }
}

/** Credits, refunds (throwing the send's DomainError when the desk cannot make it) or holds `funds`, and marks its deposits so. */
export async function applyResolution(em: EntityManager, deps: SettlementDeps, trip: PayoutTrip, resolution: DepositResolution, funds: TripFunds): Promise<PayoutRefund | null> {
  let refund: PayoutRefund | null = null;
  if (resolution === 'credit') await creditOrganization(em, trip, funds.amount, funds.reference);
  if (resolution === 'refund') {
    refund = await startRefund(em, deps, trip, {
      reason: funds.refundReason,
      assetId: funds.assetId,
      amount: funds.amount,
      purpose: `${funds.reference.type} ${funds.reference.id}`,
      details: funds.details,
    });
  }
  const now = new Date();
  for (const deposit of funds.deposits) {
    deposit.resolution = resolution;
    deposit.resolvedAt = now;
    // A deposit credited after its refund failed keeps naming that refund.
    if (refund) deposit.refund = refund;
  }
  await em.flush();
  return refund;
}
