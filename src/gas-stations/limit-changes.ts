import { LockMode } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import Decimal from 'decimal.js';
import { assetAmount, assetById, findChain } from '../catalogue/service';
import type { Config } from '../config';
import { applyNow, assertNoPendingChange, proposeLoosening, type ChangeOptions, type ChangeOutcome } from '../policies/change-requests';
import type { GovernanceChange } from '../policies/entities';
import type { ChangeProposal } from '../policies/governance-log';
import type { PolicyActor } from '../policies/service';
import { toDisplay } from '../shared/money';
import type { GasStation } from './entities';
import { stationLimits } from './limits';

/**
 * A gas station's spending limits as governed controls (docs/policies.md, "Governance"): lowering
 * max_gas_price or daily_sponsorship_budget applies at once; raising either above what applies now
 * (the station's own, or the deployment's default) is a change request under the organization's quorum.
 */

/** One limit changed, in the API's units (display units of the native coin; the chain's fee unit). */
export interface LimitChange {
  field: 'max_gas_price' | 'daily_sponsorship_budget';
  from: string;
  to: string;
}

export interface LimitsInput {
  max_gas_price?: string | undefined;
  daily_sponsorship_budget?: string | undefined;
}

const nativeOf = (station: Pick<GasStation, 'chain'>) => assetById(findChain(station.chain).nativeAssetId);

/** The limits `input` changes, each with what applies now, split by direction. */
function limitChanges(config: Config, station: GasStation, input: LimitsInput): { raised: LimitChange[]; lowered: LimitChange[] } {
  const native = nativeOf(station);
  const current = stationLimits(config, station);
  const changes: (LimitChange & { up: boolean })[] = [];
  if (input.max_gas_price !== undefined) {
    const comparison = new Decimal(input.max_gas_price).cmp(current.maxGasPrice);
    if (comparison !== 0) changes.push({ field: 'max_gas_price', from: current.maxGasPrice, to: input.max_gas_price, up: comparison > 0 });
  }
  if (input.daily_sponsorship_budget !== undefined) {
    const budget = assetAmount(input.daily_sponsorship_budget, native, 'daily_sponsorship_budget', false);
    if (budget !== current.dailyBudget) {
      changes.push({ field: 'daily_sponsorship_budget', from: toDisplay(current.dailyBudget, native.decimals), to: toDisplay(budget, native.decimals), up: budget > current.dailyBudget });
    }
  }
  const strip = ({ up: _up, ...change }: LimitChange & { up: boolean }): LimitChange => change;
  return { raised: changes.filter((change) => change.up).map(strip), lowered: changes.filter((change) => !change.up).map(strip) };
}

/** Sets the limits a change names (what an approved raise, or a lowering, applies). */
export function setStationLimits(station: GasStation, changes: readonly LimitChange[]): void {
  for (const { field, to } of changes) {
    if (field === 'max_gas_price') station.maxGasPrice = to;
    else station.dailySponsorshipBudget = assetAmount(to, nativeOf(station), 'daily_sponsorship_budget', false).toString();
  }
  station.updatedAt = new Date();
}

/** What a limits proposal sets. */
export const limitChangesOf = (change: Pick<GovernanceChange, 'change'>): LimitChange[] => change.change.limits as LimitChange[];

const proposal = (station: GasStation, kind: 'gas_station_limits_raised' | 'gas_station_limits_lowered', limits: LimitChange[]): ChangeProposal => ({
  kind,
  environment: station.environment,
  subject: { gas_station_id: station.id },
  change: { limits },
});

/**
 * The limit part of `PATCH /v1/gas-stations/:id`: lowerings applied at once, raises opened as one
 * change request (or applied at once when the organization requires no approvals). Returns the
 * pending change request, if one was opened.
 */
export async function changeStationLimits(
  em: EntityManager,
  config: Config,
  actor: PolicyActor,
  station: GasStation,
  input: LimitsInput,
  options: ChangeOptions,
): Promise<Extract<ChangeOutcome, { status: 'pending' }> | undefined> {
  const { raised, lowered } = limitChanges(config, station, input);
  if (lowered.length) await applyNow(em, actor, proposal(station, 'gas_station_limits_lowered', lowered), async () => setStationLimits(station, lowered));
  if (!raised.length) return undefined;
  // Serializes raises of one station: one change request at a time.
  await em.lock(station, LockMode.PESSIMISTIC_WRITE);
  await assertNoPendingChange(em, actor.organizationId, ['gas_station_limits_raised'], { gas_station_id: station.id });
  const outcome = await proposeLoosening(em, actor, proposal(station, 'gas_station_limits_raised', raised), options, async () => setStationLimits(station, raised));
  return outcome.status === 'pending' ? outcome : undefined;
}
