import type { Environment } from '../src/api-keys/entities';
import type { ChainNodes } from '../src/chains/nodes';
import type { Config } from '../src/config';
import type { Orm } from '../src/db/orm';
import { armLowStations, assessStation, finishRefill, refillStatus, reportRefillFailed, submitRefill, type RefillDeps } from '../src/gas-stations/service';
import type { Logger } from '../src/logger';
import { transactionWithStarts } from './with-starts';

export interface GasStationActivityDeps {
  config: Config;
  orm: Orm;
  log: Logger;
  chains: ChainNodes;
}

/** The steps of a gas station's automatic refill and of the periodic check (src/gas-stations/service.ts). */
export const createGasStationActivities = (deps: GasStationActivityDeps) => {
  const refill: RefillDeps = { config: deps.config, chains: deps.chains, em: () => deps.orm.em.fork(), transaction: transactionWithStarts(deps) };
  return {
    assessGasStation: (input: { stationId: string; announce?: string }) => assessStation(refill, input.stationId, input.announce),
    submitGasStationRefill: (input: { stationId: string }) => submitRefill(refill, input.stationId),
    gasStationRefillStatus: (input: { transactionId: string }) => refillStatus(refill, input.transactionId),
    finishGasStationRefill: (input: { stationId: string; transactionId: string }) => finishRefill(refill, input.stationId, input.transactionId),
    reportGasStationRefillFailed: (input: { stationId: string; key: string; failure: { attempts: number; code: string; message: string; transaction_id?: string } }) =>
      reportRefillFailed(refill, input.stationId, input.key, input.failure),
    armLowGasStations: (input: { organizationId?: string; environment?: Environment }) => armLowStations(refill, input),
  };
};
