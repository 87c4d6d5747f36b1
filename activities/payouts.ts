import type { ChainNodes } from '../src/chains/nodes';
import type { Config } from '../src/config';
import type { Orm } from '../src/db/orm';
import type { KeyService } from '../src/keys/service';
import type { Logger } from '../src/logger';
import type { RailState } from '../src/payouts/flows/trip';
import { followRefund, resendRefund } from '../src/payouts/refunds';
import { expireTrip, finishTrip, openTrip, payTrip, resolveLateDeposits, settleTrip, watchFunding, type SettlementDeps } from '../src/payouts/settlement';
import { transactionWithStarts } from './with-starts';

export interface PayoutActivityDeps {
  config: Config;
  orm: Orm;
  log: Logger;
  chains: ChainNodes;
  keys: KeyService;
}

/** The steps of a payout trip (src/payouts/settlement.ts) and of its refunds (src/payouts/refunds.ts); each is idempotent. */
export const createPayoutActivities = (deps: PayoutActivityDeps) => {
  const settlement: SettlementDeps = {
    config: deps.config,
    chains: deps.chains,
    keys: deps.keys,
    em: () => deps.orm.em.fork(),
    transaction: transactionWithStarts(deps),
  };
  return {
    openPayoutTrip: (input: { tripId: string }) => openTrip(settlement, input.tripId),
    watchPayoutTripFunding: (input: { tripId: string; acceptFunding: boolean }) => watchFunding(settlement, input.tripId, input.acceptFunding),
    expirePayoutTrip: (input: { tripId: string }) => expireTrip(settlement, input.tripId),
    settlePayoutTrip: (input: { tripId: string }) => settleTrip(settlement, input.tripId),
    payPayoutTrip: (input: { tripId: string }) => payTrip(settlement, input.tripId),
    finishPayoutTrip: (input: { tripId: string; answer: RailState }) => finishTrip(settlement, input.tripId, input.answer),
    resolveLatePayoutDeposits: (input: { tripId: string }) => resolveLateDeposits(settlement, input.tripId),
    followPayoutRefund: (input: { refundId: string }) => followRefund(settlement, input.refundId),
    resendPayoutRefund: (input: { refundId: string; attempt: number }) => resendRefund(settlement, input.refundId, input.attempt),
  };
};
