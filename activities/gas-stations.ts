import type { Environment } from '../src/api-keys/entities';
import type { ChainNodes } from '../src/chains/nodes';
import type { Config } from '../src/config';
import type { Orm } from '../src/db/orm';
import { armLowStations, armRefillForWallet, assessStation, finishRefill, refillStatus, reportRefillFailed, submitRefill, type RefillDeps } from '../src/gas-stations/service';
import { fuelOutcome } from '../src/gas-stations/fuel';
import { broadcastSponsored, checkSponsored, failSponsorship, releaseSponsorship, type SponsorshipDeps } from '../src/gas-stations/sponsorship';
import type { KeyService } from '../src/keys/service';
import type { Logger } from '../src/logger';
import { transactionWithStarts } from './with-starts';

export interface GasStationActivityDeps {
  config: Config;
  orm: Orm;
  log: Logger;
  chains: ChainNodes;
  keys: KeyService;
}

/** The steps of a gas station's automatic refill and the periodic check (service.ts), and of a sponsored fee (sponsorship.ts). */
export const createGasStationActivities = (deps: GasStationActivityDeps) => {
  const refill: RefillDeps = { config: deps.config, chains: deps.chains, em: () => deps.orm.em.fork(), transaction: transactionWithStarts(deps) };
  const sponsorship: SponsorshipDeps = { config: deps.config, chains: deps.chains, lifecycle: { ...refill, keys: deps.keys, walletDebited: armRefillForWallet } };
  return {
    assessGasStation: (input: { stationId: string; announce?: string }) => assessStation(refill, input.stationId, input.announce),
    submitGasStationRefill: (input: { stationId: string }) => submitRefill(refill, input.stationId),
    gasStationRefillStatus: (input: { transactionId: string }) => refillStatus(refill, input.transactionId),
    finishGasStationRefill: (input: { stationId: string; transactionId: string }) => finishRefill(refill, input.stationId, input.transactionId),
    reportGasStationRefillFailed: (input: { stationId: string; key: string; failure: { attempts: number; code: string; message: string; transaction_id?: string } }) =>
      reportRefillFailed(refill, input.stationId, input.key, input.failure),
    armLowGasStations: (input: { organizationId?: string; environment?: Environment }) => armLowStations(refill, input),
    sponsorshipFuelOutcome: (input: { sponsorshipId: string }) => fuelOutcome(sponsorship, input.sponsorshipId),
    releaseSponsorship: (input: { sponsorshipId: string }) => releaseSponsorship(sponsorship, input.sponsorshipId),
    failSponsorship: (input: { sponsorshipId: string; reason: string; message: string }) => failSponsorship(sponsorship, input.sponsorshipId, input.reason, input.message),
    broadcastSponsored: (input: { sponsorshipId: string }) => broadcastSponsored(sponsorship, input.sponsorshipId),
    checkSponsored: (input: { sponsorshipId: string }) => checkSponsored(sponsorship, input.sponsorshipId),
  };
};
