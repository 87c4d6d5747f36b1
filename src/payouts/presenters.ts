import { assetById, findChain, networkFor } from '../catalogue/service';
import { toDisplay } from '../shared/money';
import { iso, isoOrNull } from '../shared/time';
import { maskBeneficiary } from './beneficiaries';
import { toFiatDisplay } from './corridors';
import type { PayoutRefund, PayoutTrip, PayoutTripTransition } from './entities';
import { payoutTripFlow } from './flows/trip';
import { sendHash } from '../transactions/presenters';

/** A trip as its events show it (camelCase, as the specification names payout fields); the quote must be loaded. */
export function presentTrip(trip: PayoutTrip) {
  const quote = trip.quote;
  const asset = assetById(trip.assetId);
  const crypto = (raw: string | null | undefined) => (raw == null ? null : toDisplay(raw, asset.decimals));
  const fiat = (raw: string | null | undefined) => (raw == null ? null : toFiatDisplay(raw, quote.toCurrency));
  return {
    object: 'payout_trip' as const,
    tripId: trip.id,
    reference: trip.reference,
    status: trip.status,
    quoteId: quote.id,
    fromAsset: asset.symbol,
    assetId: asset.id,
    chain: trip.chain,
    network: networkFor(findChain(trip.chain), trip.environment),
    depositAddress: trip.depositAddress,
    amountToSend: crypto(quote.fromAmount)!,
    amountToSendRaw: quote.fromAmount,
    rate: quote.rate,
    toCurrency: quote.toCurrency,
    toAmount: fiat(quote.toAmount)!,
    toAmountRaw: quote.toAmount,
    payoutAmount: fiat(trip.payoutAmount),
    payoutAmountRaw: trip.payoutAmount ?? null,
    amountReceived: crypto(trip.amountReceived),
    amountReceivedRaw: trip.amountReceived ?? null,
    creditedAmount: crypto(trip.creditedAmount),
    creditedAmountRaw: trip.creditedAmount ?? null,
    country: quote.country,
    paymentMethod: quote.paymentMethod,
    // Masked again: a trip stored before beneficiaries were sealed holds them in clear until `cli migrate`.
    beneficiary: maskBeneficiary(trip.beneficiary),
    refundAddress: trip.refundAddress ?? null,
    rail: trip.rail ?? null,
    failure_reason: trip.failureReason ?? null,
    holdReason: trip.holdReason ?? null,
    expiresAt: iso(trip.expiresAt),
    assetReceivedAt: isoOrNull(trip.assetReceivedAt),
    assetConfirmedAt: isoOrNull(trip.assetConfirmedAt),
    completedAt: isoOrNull(trip.completedAt),
    /** From initialization to the trip's final status, in milliseconds; null while it runs. */
    timeToFinishMs: trip.completedAt ? trip.completedAt.getTime() - trip.createdAt.getTime() : null,
    createdAt: iso(trip.createdAt),
    updatedAt: iso(trip.updatedAt),
    workflow_id: payoutTripFlow.workflowId({ tripId: trip.id }),
  };
}

/**
 * A trip as the API answers it: as its events show it, plus `late_payment_watch_until`, a state of the
 * moment that an event (a snapshot) does not carry. Once the trip has ended its workflow watches the deposit
 * address for PAYOUT_LATE_PAYMENT_WATCH_HOURS from that end (workflows/payout-trip.ts): until then this says
 * when the watch ends, null before the end and after the watch.
 */
export function presentTripResource(trip: PayoutTrip, lateWatchHours: number, now = new Date()) {
  const watchUntil = trip.completedAt ? new Date(trip.completedAt.getTime() + lateWatchHours * 3_600_000) : null;
  return { ...presentTrip(trip), late_payment_watch_until: watchUntil && watchUntil > now ? iso(watchUntil) : null };
}

/** A refund of the trip, its current send loaded. */
export function presentRefund(refund: PayoutRefund) {
  const asset = assetById(refund.assetId);
  return {
    refundId: refund.id,
    status: refund.status,
    reason: refund.reason,
    assetId: asset.id,
    amount: toDisplay(refund.amount, asset.decimals),
    amountRaw: refund.amount,
    toAddress: refund.transaction.toAddress,
    transactionId: refund.transaction.id,
    txHash: sendHash(refund.transaction),
    attempts: refund.attempts,
    failure_reason: refund.failureReason ?? null,
    createdAt: iso(refund.createdAt),
    completedAt: isoOrNull(refund.completedAt),
  };
}

/** A trip with its refunds and its timeline: every status it reached and every movement of its money, in order. */
export function presentTripWithTimeline(trip: PayoutTrip, timeline: PayoutTripTransition[], refunds: PayoutRefund[], lateWatchHours: number) {
  return {
    ...presentTripResource(trip, lateWatchHours),
    refunds: refunds.map(presentRefund),
    timeline: timeline.map((entry) => ({
      name: entry.name,
      at: iso(entry.occurredAt),
      /** Since the trip was initialized. */
      elapsedMs: entry.occurredAt.getTime() - trip.createdAt.getTime(),
      details: entry.details,
    })),
  };
}
