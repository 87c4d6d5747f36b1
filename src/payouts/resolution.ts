import type { EntityManager } from '@mikro-orm/postgresql';
import { writeAudit } from '../policies/service';
import { errors } from '../shared/errors';
import { isUuid } from '../shared/ids';
import { PayoutDeposit, PayoutTrip, PayoutTripTransition } from './entities';
import { applyResolution, creditCurrencyOf, failUnderpaid, lateFunds, underpaidFunds, type SettlementDeps, type TripFunds } from './settlement';
import { recordTransition } from './timeline';
import { lockTrip } from './trips';

/** What an operator does with a trip's held money: credit it to the organization's balance, or send it back to the refund address. */
export type OperatorResolution = 'credit' | 'refund';

/**
 * Resolves everything a trip holds, in one transaction under the trip's lock: an underpayment held
 * beyond the margin (the trip then fails, payouts.withdrawal.failed), late payments held, and the
 * money of refunds that ended refund_failed. Each is credited (in the trip's asset only) or
 * refunded (followed by its own workflow); the resolution is audited (`payout_trip_resolved`, in
 * the trip's organization) and on the timeline (`resolved_by_operator`). Refuses, moving nothing,
 * a trip that holds nothing (still running, never held, or already resolved), a refund without a
 * refund address, and a credit of another asset than the trip's.
 */
export async function resolveHeldFunds(em: EntityManager, deps: SettlementDeps, input: { tripId: string; resolution: OperatorResolution; operator: string }) {
  const found = isUuid(input.tripId) ? await em.findOne(PayoutTrip, { id: input.tripId }) : null;
  if (!found) throw errors.notFound('payout trip', input.tripId, 'trip');
  const trip = await lockTrip(em, found.id);
  const held = await em.find(PayoutDeposit, { trip, resolution: 'hold', droppedAt: null }, { orderBy: { seenAt: 'asc', id: 'asc' } });
  if (held.length === 0) {
    if (['awaiting_deposit', 'funded', 'processing'].includes(trip.status)) {
      throw errors.conflict('trip_not_held', `Trip ${trip.id} is ${trip.status}: it is still running and holds nothing to resolve.`);
    }
    const before = await em.findOne(PayoutTripTransition, { trip, name: 'resolved_by_operator' }, { orderBy: { occurredAt: 'desc' } });
    if (before) throw errors.conflict('already_resolved', `Trip ${trip.id} is already resolved (${String(before.details.resolution)} at ${before.occurredAt.toISOString()}): it holds nothing more.`);
    throw errors.conflict('trip_not_held', `Trip ${trip.id} is ${trip.status} and holds no money: nothing to resolve.`);
  }
  if (input.resolution === 'refund' && !trip.refundAddress) {
    throw errors.invalid('no_refund_address', `Trip ${trip.id} has no refund address: resolve it with --credit.`, { param: 'refund' });
  }
  const funding = held.filter((deposit) => deposit.role === 'funding');
  const funds: TripFunds[] = [
    ...(funding.length ? [underpaidFunds(trip, funding, { amount_received_raw: trip.amountReceived, amount_to_send_raw: trip.quote.fromAmount })] : []),
    ...(await Promise.all(held.filter((deposit) => deposit.role === 'late').map((deposit) => lateFunds(em, deposit)))),
  ];
  const foreign = funds.find((each) => each.assetId !== trip.assetId);
  if (input.resolution === 'credit' && foreign) {
    throw errors.invalid('asset_not_creditable', `Trip ${trip.id} holds ${foreign.assetId}, not its own ${trip.assetId}: only --refund returns it.`, { param: 'credit' });
  }
  const resolved = [];
  for (const each of funds) {
    const refund = await applyResolution(em, deps, trip, input.resolution, each);
    resolved.push({
      deposit_ids: each.deposits.map((deposit) => deposit.id),
      asset_id: each.assetId,
      amount_raw: each.amount.toString(),
      ...(input.resolution === 'credit' ? { currency: creditCurrencyOf(each.assetId) } : {}),
      ...(refund ? { refund_id: refund.id, transaction_id: refund.transaction.id } : {}),
    });
  }
  const wasHeld = trip.status === 'held';
  if (wasHeld) await failUnderpaid(em, trip);
  const actor = { organizationId: trip.organization.id, environment: trip.environment, id: 'operator', name: input.operator, type: 'system' as const };
  const audit = writeAudit(em, {
    actor,
    policyId: null,
    action: 'payout_trip_resolved',
    changes: wasHeld ? { status: ['held', trip.status] } : {},
    metadata: { trip_id: trip.id, resolution: input.resolution, resolved },
  });
  await em.flush();
  await recordTransition(em, trip, 'resolved_by_operator', `operator:${audit.id}`, { resolution: input.resolution, operator: input.operator, audit_log_id: audit.id, resolved });
  return { trip_id: trip.id, status: trip.status, resolution: input.resolution, resolved, audit_log_id: audit.id };
}
