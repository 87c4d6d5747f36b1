import type { EntityManager } from '@mikro-orm/postgresql';
import { assetById, findChain } from '../catalogue/service';
import { priceSourceFor, usdValue } from '../catalogue/prices';
import type { Config } from '../config';
import { Money, toDisplay } from '../shared/money';
import { iso, isoOrNull } from '../shared/time';
import type { AssetTotal, ConsolidationRule, ConsolidationRun, ConsolidationSweep, RunFees } from './entities';
import { sendHash } from '../transactions/presenters';

/**
 * The Consolidation run and sweep resources, for the routes and for the run workflow's events.
 * A run's per_asset_totals and fees are computed from its sweeps (and their transactions) when read.
 */

/** The contract (or mint) of an asset as the rule recorded it; null for the native coin or one not recorded. */
const assetAddress = (rule: ConsolidationRule, assetId: string): string | null => rule.assets.find((asset) => asset.asset_id === assetId)?.contract_address ?? null;

/**
 * Per asset, the confirmed sweeps of the run: how many, and how much reached the destination
 * (display units): a native sweep pays its fee out of its amount, so what arrived is its send's
 * recipient amount, which with the fees reconciles the destination's balance.
 */
export async function runAssetTotals(em: EntityManager, run: ConsolidationRun): Promise<AssetTotal[]> {
  const rows = await em.execute<{ asset_id: string; amount: string; sweeps: string }[]>(
    `select s.asset_id, sum(coalesce(t.recipient_amount, s.amount))::text as amount, count(*)::text as sweeps
       from consolidation_sweeps s left join transactions t on t.id = s.transaction_id
      where s.run_id = ? and s.status = 'confirmed' group by s.asset_id order by s.asset_id`,
    [run.id],
  );
  return rows.map((row) => {
    const asset = assetById(row.asset_id);
    return { asset_id: asset.id, asset_address: assetAddress(run.rule, asset.id), asset_symbol: asset.symbol, amount_swept: toDisplay(row.amount, asset.decimals), sweep_count: Number(row.sweeps) };
  });
}

/**
 * The fees the run's sweeps paid, in the chain's native coin, by who paid them: network_fee (the
 * swept address itself, gas_source wallet) and gas_sponsorship (a gas station or the platform, for
 * the others). A fee counts once the chain says what it was (EVM: once mined). total_usd is the
 * exact sum of the priced amounts; without a price (live keys) it is "0" and amount_usd null.
 */
export async function runFees(em: EntityManager, config: Config, run: ConsolidationRun): Promise<RunFees> {
  const rows = await em.execute<{ kind: 'network_fee' | 'gas_sponsorship'; fee: string }[]>(
    `select case when s.gas_source = 'wallet' then 'network_fee' else 'gas_sponsorship' end as kind, sum(t.fee)::text as fee
     from consolidation_sweeps s join transactions t on t.id = s.transaction_id
     where s.run_id = ? and t.fee is not null group by 1 order by 1 desc`,
    [run.id],
  );
  const native = assetById(findChain(run.chain).nativeAssetId);
  const prices = priceSourceFor(config, run.environment);
  const breakdown = rows.map((row) => ({ kind: row.kind, currency: native.symbol, amount: toDisplay(row.fee, native.decimals), amount_usd: usdValue(prices, native, BigInt(row.fee)) }));
  const total = breakdown.reduce((sum, entry) => sum.plus(entry.amount_usd ?? '0'), new Money(0));
  return { total_usd: total.toFixed(), breakdown };
}

/** The Consolidation run resource, with its totals and fees as computed (runAssetTotals, runFees). */
export function presentRun(run: ConsolidationRun, totals: AssetTotal[], fees: RunFees) {
  return {
    id: run.id,
    object: 'consolidation_run' as const,
    org_id: run.organization.id,
    rule_id: run.rule.id,
    vault_id: run.vault.id,
    chain: run.chain,
    network: run.network,
    status: run.status,
    trigger_source: run.triggerSource,
    initiated_by_user_id: run.initiatedByUserId ?? null,
    recorded_trigger_count: run.recordedTriggerCount,
    last_recorded_trigger: run.lastRecordedTrigger ? { source: run.lastRecordedTrigger.source, at: run.lastRecordedTrigger.at, detail: run.lastRecordedTrigger.detail ?? null } : null,
    addresses_scanned: run.addressesScanned,
    transfers_created: run.transfersCreated,
    transfers_confirmed: run.transfersConfirmed,
    transfers_failed: run.transfersFailed,
    per_asset_totals: totals.map((total) => ({ asset_address: total.asset_address, asset_symbol: total.asset_symbol, amount_swept: total.amount_swept, sweep_count: total.sweep_count })),
    fees,
    failure_reason: run.failureReason ?? null,
    started_at: isoOrNull(run.startedAt),
    completed_at: isoOrNull(run.completedAt),
    created_at: iso(run.createdAt),
    updated_at: iso(run.updatedAt),
  };
}

/** A run as the API shows it (the rule is loaded for the assets' contracts). */
export async function readRun(em: EntityManager, config: Config, run: ConsolidationRun) {
  await em.populate(run, ['rule']);
  return presentRun(run, await runAssetTotals(em, run), await runFees(em, config, run));
}

/** The Consolidation sweep resource; `tx_hash` from its transaction once it has one (populate `transaction` and `rule`). */
export function presentSweep(sweep: ConsolidationSweep) {
  const asset = assetById(sweep.assetId);
  return {
    id: sweep.id,
    object: 'consolidation_sweep' as const,
    org_id: sweep.organization.id,
    rule_id: sweep.rule.id,
    run_id: sweep.run.id,
    chain: sweep.chain,
    network: sweep.network,
    source_address_id: sweep.sourceAddress.id,
    destination_address: sweep.destinationAddress,
    asset_address: asset.type === 'native' ? null : assetAddress(sweep.rule, asset.id),
    asset_symbol: asset.symbol,
    is_native: asset.type === 'native',
    amount: toDisplay(sweep.amount, asset.decimals),
    gas_source: sweep.gasSource,
    status: sweep.status,
    failure_reason: sweep.failureReason ?? null,
    transaction_id: sweep.transaction?.id ?? null,
    tx_hash: sweep.transaction ? sendHash(sweep.transaction) : null,
    created_at: iso(sweep.createdAt),
    updated_at: iso(sweep.updatedAt),
  };
}

/** What presentSweep reads beyond the sweep's own columns. */
export const SWEEP_POPULATE = ['rule', 'transaction'] as const;
