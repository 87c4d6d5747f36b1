import { pendingRows, pendingWork, type PendingWorkSource } from '../temporal/reconciler';
import { PayoutRefund, PayoutTrip } from './entities';
import { payoutRefundFlow } from './flows/refund';
import { payoutTripFlow } from './flows/trip';

/** Trips not yet ended: each must have its `payout-trip-<id>` workflow running (funds may be on their way or at the rail). */
export const payoutTripPendingWork: PendingWorkSource = {
  name: 'payout_trip',
  pending: async (em, query) => {
    const { rows, next } = await pendingRows(em, PayoutTrip, { status: { $in: ['awaiting_deposit', 'funded', 'processing'] }, createdAt: { $lt: query.olderThan } }, query);
    return { work: rows.map((trip) => pendingWork(payoutTripFlow, { tripId: trip.id }, trip.organization.id)), next };
  },
};

/** Refunds whose send is still followed: each must have its `payout-refund-<id>` workflow running. */
export const payoutRefundPendingWork: PendingWorkSource = {
  name: 'payout_refund',
  pending: async (em, query) => {
    const { rows, next } = await pendingRows(em, PayoutRefund, { status: 'refund_pending', createdAt: { $lt: query.olderThan } }, query);
    return { work: rows.map((refund) => pendingWork(payoutRefundFlow, { refundId: refund.id }, refund.organization.id)), next };
  },
};
