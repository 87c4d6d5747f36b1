import { LockMode } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { spendableByAddress } from '../custody/journal';
import { priceSourceFor, usdValue } from '../catalogue/prices';
import { assetAmount, assetById, findChain } from '../catalogue/service';
import { readFeeMarket } from '../chains/fees';
import type { ChainNodes } from '../chains/nodes';
import type { Config } from '../config';
import { isUsable } from '../address-book/service';
import { Address, Wallet } from '../custody/entities';
import { emit } from '../events/service';
import type { EventType } from '../events/event-types';
import { sponsoringStations, type FeeSponsor } from '../movements/funding';
import { accountFeeTerms } from '../movements/fee-terms';
import { DomainError } from '../shared/errors';
import { Money, toDisplay } from '../shared/money';
import { OutgoingTransaction } from '../transactions/entities';
import { readSendFromNode } from '../transactions/node-reads';
import { createTransaction, type AutomatedSend } from '../transactions/service';
import { ConsolidationRule, ConsolidationRun, ConsolidationSweep, FINISHED_RUN_STATUSES, type ConsolidationAsset, type RunStatus } from './entities';
import { presentSweep, readRun, SWEEP_POPULATE } from './presenters';
import { releaseRule } from './runs';
import { lockingOnlyItsRow } from '../db/row-lock';

/**
 * What the `consolidation-run-<id>` workflow's activities do, one function each. Every step is
 * idempotent: a sweep is planned once per run, address and asset (a unique key), submitted once
 * (under its row lock, in the transaction that creates its send), and the run's counters are
 * recounted from its sweeps rather than incremented, so a retried activity or a worker killed
 * mid-run never doubles a sweep or a count.
 */

export interface SweepingDeps {
  config: Config;
  chains: ChainNodes;
  em: () => EntityManager;
  /** A database transaction whose recorded workflow starts and events fire after commit. */
  transaction: <T>(work: (em: EntityManager) => Promise<T>) => Promise<T>;
  /** Pays a sponsored sweep's gas (the gas stations' sponsorSendFee). */
  feeSponsor: FeeSponsor;
  /** Called as a step makes progress (balances read, a sweep submitted): the activity's heartbeat, so a step on a lost worker is retried within the heartbeat timeout. */
  progress?: () => void;
}

/** Addresses read per planning step: a 10,000-address vault is 50 steps. */
export const ADDRESSES_PER_PAGE = 200;
/** Balance reads in flight at once while planning: a node answers many, without being flooded. */
const BALANCE_READS_IN_PARALLEL = 16;
/** Sweeps submitted per submission step, each in its own database transaction. */
export const SWEEPS_PER_SUBMISSION = 25;

const lockedRun = (em: EntityManager, runId: string) => em.findOneOrFail(ConsolidationRun, { id: runId }, { ...lockingOnlyItsRow(em, ConsolidationRun), populate: ['rule'] });

/**
 * The run locked for its end, which frees the rule: the rule's row first, then the run's, the order
 * triggerRun takes them in (a trigger counted on the run while it ends would otherwise deadlock).
 */
async function lockedRunToEnd(em: EntityManager, runId: string): Promise<ConsolidationRun> {
  await em.execute('select id from consolidation_rules where id = (select rule_id from consolidation_runs where id = ?) for update', [runId]);
  return lockedRun(em, runId);
}

/** pending → scanning, once, with consolidation.run.started; a finished run answers its status. */
export async function startScanning(deps: SweepingDeps, runId: string): Promise<RunStatus> {
  return deps.transaction(async (em) => {
    const run = await lockedRun(em, runId);
    if (run.status !== 'pending') return run.status;
    Object.assign(run, { status: 'scanning', startedAt: new Date() });
    await announce(em, deps.config, run, 'consolidation.run.started');
    return 'scanning';
  });
}

/** The vault's addresses on the run's chain after `cursor` (address ids in order): one page. */
async function addressPage(em: EntityManager, run: ConsolidationRun, cursor: string | null): Promise<Address[]> {
  return em.find(
    Address,
    { wallet: { vault: run.vault.id, chain: run.chain, environment: run.environment }, ...(cursor ? { id: { $gt: cursor } } : {}) },
    { orderBy: { id: 'asc' }, limit: ADDRESSES_PER_PAGE, populate: ['wallet'] },
  );
}

/**
 * Where the rule sweeps to: the address book entry, or the primary address of the destination
 * vault's oldest wallet on the chain. Or why it cannot: the entry is still in its cooling period
 * (usable_at only moves earlier, so a run past this check stays clear of it), or the vault has no
 * wallet on the chain.
 */
async function destinationOf(em: EntityManager, rule: ConsolidationRule): Promise<{ address: string } | { failure: string }> {
  if (rule.destinationType === 'address_book') {
    const entry = (await em.findOneOrFail(ConsolidationRule, { id: rule.id }, { populate: ['destinationAddressBook'] })).destinationAddressBook!;
    return isUsable(entry) ? { address: entry.address } : { failure: 'destination_not_usable' };
  }
  const wallet = await em.findOne(Wallet, { vault: rule.destinationVault!.id, chain: rule.chain, environment: rule.environment }, { orderBy: { createdAt: 'asc', id: 'asc' } });
  if (!wallet) return { failure: 'destination_vault_has_no_wallet' };
  return { address: (await em.findOneOrFail(Address, { wallet, isPrimary: true })).address };
}

/**
 * Plans one page: for each address and each of the rule's assets (tokens first), what the address
 * can spend (the least of what the chain says it holds and what its ledger holds unlocked, so a
 * send in flight from it is not swept again) less min_balance_to_leave; a native sweep also leaves the fee limits of
 * the address's token sweeps when the wallet pays their gas, and pays its own fee out of the
 * amount. Below min_amount_to_move, or worth less than min_consolidate_usd, nothing is planned.
 * Each plan is recorded once. Answers the next page's cursor (null after the last page).
 */
export async function planPage(deps: SweepingDeps, runId: string, cursor: string | null): Promise<{ next: string | null; planned: number }> {
  const em = deps.em();
  const run = await em.findOneOrFail(ConsolidationRun, { id: runId }, { populate: ['rule'] });
  if (FINISHED_RUN_STATUSES.includes(run.status)) return { next: null, planned: 0 };
  const rule = run.rule;
  const addresses = await addressPage(em, run, cursor);
  const resolved = await destinationOf(em, rule);
  if ('failure' in resolved) {
    await failRun(deps, runId, resolved.failure);
    return { next: null, planned: 0 };
  }
  const destination = resolved.address;
  const provider = await deps.chains.provider(run.chain, run.environment);
  const market = await readFeeMarket(deps.chains, run.chain, run.environment);
  const prices = priceSourceFor(deps.config, run.environment);
  const native = assetById(findChain(run.chain).nativeAssetId);
  const assets = [...rule.assets].sort((a, b) => Number(a.is_native) - Number(b.is_native));
  // A token sweep's gas is estimated when it is sent; here its most, the cap, is what the address keeps for it.
  const tokenGas = { limit: BigInt(deps.config.ERC20_GAS_CAP), sponsored: false };
  const feeLimit = (assetId: string) => accountFeeTerms(market, assetById(assetId), 'medium', assetById(assetId).type === 'native' ? undefined : tokenGas).feeLimit;

  const spendable = await spendableByAddress(em, { addressIds: addresses.map((address) => address.id) });

  const planAddress = async (address: Address) => {
    const planned: { address: Address; asset: ConsolidationAsset; amount: bigint }[] = [];
    // The native coin the address keeps for its token sweeps' gas when the wallet pays it.
    let reserved = 0n;
    for (const configured of assets) {
      const asset = assetById(configured.asset_id);
      const onChain = await provider.balance(address.address, asset.id);
      const unlocked = spendable.get(address.id)?.get(asset.id) ?? 0n;
      let amount = (onChain < unlocked ? onChain : unlocked) - assetAmount(configured.min_balance_to_leave, asset, 'min_balance_to_leave', false);
      if (configured.is_native) {
        amount -= reserved;
        // Gross: the sweep's own fee comes out of it, so it must exceed that fee.
        if (amount <= feeLimit(native.id)) continue;
      }
      if (amount <= 0n || amount < assetAmount(configured.min_amount_to_move, asset, 'min_amount_to_move', false)) continue;
      const usd = usdValue(prices, asset, amount);
      if (rule.minConsolidateUsd && usd !== null && new Money(usd).lt(rule.minConsolidateUsd)) continue;
      if (!configured.is_native && rule.gasSource === 'wallet') reserved += feeLimit(asset.id);
      planned.push({ address, asset: configured, amount });
    }
    return planned;
  };
  const plans: { address: Address; asset: ConsolidationAsset; amount: bigint }[] = [];
  // The node is asked about BALANCE_READS_IN_PARALLEL addresses at a time.
  for (let start = 0; start < addresses.length; start += BALANCE_READS_IN_PARALLEL) {
    for (const planned of await Promise.all(addresses.slice(start, start + BALANCE_READS_IN_PARALLEL).map(planAddress))) plans.push(...planned);
    deps.progress?.();
  }
  const last = addresses.at(-1);
  await deps.transaction(async (tx) => {
    for (const plan of plans) {
      await tx.execute(
        `insert into consolidation_sweeps (id, organization_id, environment, rule_id, run_id, chain, network, wallet_id, source_address_id, destination_address, asset_id, amount, gas_source, status, created_at, updated_at)
         values (gen_random_uuid(), ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'planned', now(), now())
         on conflict (run_id, source_address_id, asset_id) do nothing`,
        [run.organization.id, run.environment, rule.id, run.id, run.chain, run.network, plan.address.wallet.id, plan.address.id, destination, plan.asset.asset_id, plan.amount.toString(), rule.gasSource],
      );
    }
    if (last) {
      // Recounted, not incremented: a retried page counts once.
      await tx.execute(
        `update consolidation_runs set addresses_scanned = (
           select count(*) from addresses a join wallets w on w.id = a.wallet_id where w.vault_id = ? and w.chain = ? and w.environment = ? and a.id <= ?
         ), updated_at = now() where id = ?`,
        [run.vault.id, run.chain, run.environment, last.id, run.id],
      );
    }
  });
  return { next: addresses.length === ADDRESSES_PER_PAGE && last ? last.id : null, planned: plans.length };
}

/** The last page is planned: scanning → sweeping. */
export async function finishScanning(deps: SweepingDeps, runId: string): Promise<void> {
  await deps.em().nativeUpdate(ConsolidationRun, { id: runId, status: 'scanning' }, { status: 'sweeping', updatedAt: new Date() });
}

/**
 * Submits up to SWEEPS_PER_SUBMISSION planned sweeps, each in its own transaction with its send
 * (a system send of the rule: policies decide it as automated), from the sweep's own address. A
 * token's gas is paid by the rule's gas source: the address itself (wallet), the rule's gas
 * station, or the platform's sponsorship; a native sweep pays its own fee from the amount. A send
 * refused (funds, policy, sponsorship) fails the sweep with that code. Answers how many remain.
 */
export async function submitSweeps(deps: SweepingDeps, runId: string): Promise<{ remaining: number }> {
  const planned = await deps.em().find(ConsolidationSweep, { run: runId, status: 'planned' }, { orderBy: { createdAt: 'asc', id: 'asc' }, limit: SWEEPS_PER_SUBMISSION });
  for (const { id } of planned) {
    try {
      // The node's part of the send (fee market, gas) is read before the sweep's row is locked.
      const unlocked = await sweepSend(deps.em(), deps.config, runId, id);
      const nodeReads = await readSendFromNode(deps.em(), deps.config, deps.chains, unlocked.initiator, unlocked.input, unlocked.automation);
      await deps.transaction(async (em) => {
        const sweep = await em.findOneOrFail(ConsolidationSweep, { id }, { lockMode: LockMode.PESSIMISTIC_WRITE });
        if (sweep.status !== 'planned') return;
        const { initiator, input, automation } = await sweepSend(em, deps.config, runId, id);
        const sent = await createTransaction(em, deps.config, deps.chains, initiator, input, { ...automation, nodeReads, feeSponsor: deps.feeSponsor });
        sweep.status = 'submitted';
        sweep.transaction = em.getReference(OutgoingTransaction, sent.id);
      });
    } catch (error) {
      if (!(error instanceof DomainError)) throw error;
      await failSweep(deps, id, error.code);
    }
    deps.progress?.();
  }
  const remaining = await deps.em().count(ConsolidationSweep, { run: runId, status: 'planned' });
  return { remaining };
}

/** A planned sweep's send: its initiator (the rule, the key that asked for a manual run else the rule's creator), request and automation. */
async function sweepSend(em: EntityManager, config: Config, runId: string, sweepId: string) {
  const sweep = await em.findOneOrFail(ConsolidationSweep, { id: sweepId }, { populate: ['rule', 'sourceAddress', 'wallet'] });
  const rule = await em.findOneOrFail(ConsolidationRule, { id: sweep.rule.id }, { populate: ['gasStation.wallet'] });
  const run = await em.findOneOrFail(ConsolidationRun, { id: runId }, { fields: ['initiatedByKeyId'] });
  // A run the rule started by itself stops moving value once the key the rule acts for is revoked.
  if (!run.initiatedByKeyId && rule.automationPausedAt) {
    throw new DomainError({ kind: 'conflict', code: 'automation_paused', message: 'The rule was paused: the key it acts for was revoked. A key takes it over with POST /v1/consolidation/rules/:id/take-over.' });
  }
  const asset = assetById(sweep.assetId);
  const native = asset.type === 'native';
  const automation: AutomatedSend = { operationType: 'consolidation_sweep', fromAddress: sweep.sourceAddress };
  if (!native && rule.gasSource !== 'wallet') automation.funding = await sweepFunding(em, config, rule);
  return {
    initiator: { organizationId: sweep.organization.id, environment: sweep.environment, automationRuleId: rule.id, actorKeyId: run.initiatedByKeyId ?? rule.createdByKeyId ?? null },
    input: {
      wallet_id: sweep.wallet.id,
      to_address: sweep.destinationAddress,
      amount: toDisplay(sweep.amount, asset.decimals),
      asset: asset.id,
      treat_as_gross_amount: native,
      sponsor: !native && rule.gasSource !== 'wallet',
      note: `Consolidation sweep ${sweep.id} (run ${runId})`,
    },
    automation,
  };
}

/** The station that pays a token sweep's gas: the rule's own, or the platform's on the chain (a refused sponsorship fails the sweep). */
async function sweepFunding(em: EntityManager, config: Config, rule: ConsolidationRule): Promise<NonNullable<AutomatedSend['funding']>> {
  if (rule.gasSource === 'customer_gas_station') return { model: 'customer_gas_station', station: rule.gasStation! };
  const { provider } = await sponsoringStations(em, config, { organizationId: rule.organization.id, environment: rule.environment }, rule.chain);
  if (!provider) throw new DomainError({ kind: 'invalid', code: 'sponsorship_not_configured', message: "The platform's sponsorship is not configured for this chain." });
  return { model: 'provider_sponsorship', station: provider };
}

async function failSweep(deps: SweepingDeps, sweepId: string, reason: string): Promise<void> {
  await deps.transaction(async (em) => {
    const sweep = await em.findOneOrFail(ConsolidationSweep, { id: sweepId }, { ...lockingOnlyItsRow(em, ConsolidationSweep), populate: SWEEP_POPULATE });
    if (sweep.status === 'failed' || sweep.status === 'confirmed') return;
    Object.assign(sweep, { status: 'failed', failureReason: reason });
    await em.flush();
    await emit(em, {
      organizationId: sweep.organization.id,
      environment: sweep.environment,
      type: 'consolidation.sweep.failed',
      data: presentSweep(sweep),
      dedupeKey: `consolidation.sweep.failed:${sweep.id}`,
    });
  });
}

/**
 * Brings submitted sweeps up to date with their sends (each send's own workflow settles it): a
 * confirmed send confirms the sweep, a failed one fails it with the send's reason. Recounts the
 * run's transfers. Answers how many sweeps are still in flight.
 */
export async function followSweeps(deps: SweepingDeps, runId: string): Promise<{ inFlight: number }> {
  const submitted = await deps.em().find(ConsolidationSweep, { run: runId, status: 'submitted' }, { populate: ['transaction'] });
  for (const sweep of submitted) {
    const transaction = sweep.transaction!;
    if (transaction.status === 'confirmed') await deps.em().nativeUpdate(ConsolidationSweep, { id: sweep.id, status: 'submitted' }, { status: 'confirmed', updatedAt: new Date() });
    if (transaction.status === 'failed') await failSweep(deps, sweep.id, transaction.failureReason ?? 'failed');
  }
  await deps.em().execute(
    `update consolidation_runs r set
       transfers_created = (select count(*) from consolidation_sweeps s where s.run_id = r.id and s.transaction_id is not null),
       transfers_confirmed = (select count(*) from consolidation_sweeps s where s.run_id = r.id and s.status = 'confirmed'),
       transfers_failed = (select count(*) from consolidation_sweeps s where s.run_id = r.id and s.status = 'failed'),
       updated_at = now()
     where r.id = ?`,
    [runId],
  );
  return { inFlight: await deps.em().count(ConsolidationSweep, { run: runId, status: { $in: ['planned', 'submitted'] } }) };
}

/**
 * Ends the run once every sweep is settled: completed (no sweep failed, including a run with
 * nothing to sweep), partially_failed (some confirmed, some failed), failed (every sweep failed).
 * Emits consolidation.run.completed or consolidation.run.failed, and frees the rule. Once.
 */
export async function finishRun(deps: SweepingDeps, runId: string): Promise<RunStatus> {
  return deps.transaction(async (em) => {
    const run = await lockedRunToEnd(em, runId);
    if (FINISHED_RUN_STATUSES.includes(run.status)) return run.status;
    const confirmed = await em.count(ConsolidationSweep, { run: runId, status: 'confirmed' });
    const failed = await em.count(ConsolidationSweep, { run: runId, status: 'failed' });
    const status: RunStatus = failed === 0 ? 'completed' : confirmed === 0 ? 'failed' : 'partially_failed';
    Object.assign(run, { status, completedAt: new Date(), transfersConfirmed: confirmed, transfersFailed: failed });
    await releaseRule(em, run);
    await announce(em, deps.config, run, status === 'completed' ? 'consolidation.run.completed' : 'consolidation.run.failed');
    return status;
  });
}

/** A run that cannot proceed (its destination is gone): failed with the reason, the rule freed. */
export async function failRun(deps: SweepingDeps, runId: string, reason: string): Promise<RunStatus> {
  return deps.transaction(async (em) => {
    const run = await lockedRunToEnd(em, runId);
    if (FINISHED_RUN_STATUSES.includes(run.status)) return run.status;
    Object.assign(run, { status: 'failed', failureReason: reason, completedAt: new Date() });
    await releaseRule(em, run);
    await announce(em, deps.config, run, 'consolidation.run.failed');
    return 'failed';
  });
}

/** Run events carry the Consolidation run resource, as GET /v1/consolidation/runs/:id answers it then. */
async function announce(em: EntityManager, config: Config, run: ConsolidationRun, type: EventType): Promise<void> {
  await em.flush();
  await emit(em, { organizationId: run.organization.id, environment: run.environment, type, data: await readRun(em, config, run), dedupeKey: `${type}:${run.id}` });
}
