import type { EntityManager } from '@mikro-orm/postgresql';
import type { AuthContext } from '../api-keys/auth-context';
import type { Environment } from '../api-keys/entities';
import { assetAmount, assetById, findChain, networkFor, type AssetInfo, type ChainId } from '../catalogue/service';
import { ChainUnavailableError, type ChainNodes } from '../chains/nodes';
import { NodeUnavailableError, type FeeMarket } from '../chains/provider';
import { readFeeMarket } from '../chains/fees';
import type { Config } from '../config';
import { Vault, Wallet, WalletBalance } from '../custody/entities';
import { createVault, createWallet, findWallet, type Tenant } from '../custody/service';
import { emit } from '../events/service';
import type { KeyService } from '../keys/service';
import { Organization } from '../organizations/entities';
import { DomainError, errors } from '../shared/errors';
import { isUuid, prefixedId } from '../shared/ids';
import { toDisplay } from '../shared/money';
import { iso } from '../shared/time';
import { WorkflowStart } from '../temporal/entities';
import { OutgoingTransaction, type TransactionStatus } from '../transactions/entities';
import { createTransaction } from '../transactions/service';
import { GasStation, STRATEGY_FEE_LEVEL, type GasStrategy } from './entities';
import { stationLimits } from './limits';
import { refillFlow, type RefillInput } from './flows/refill';
import { withArticle } from '../shared/articles';


/** The vault holding every gas-station wallet of an organization's environment, created with the first station. */
const STATIONS_VAULT = { name: 'Gas stations', metadata: { purpose: 'gas_stations' } };

export interface CreateGasStationInput {
  name: string;
  chain: ChainId;
  threshold: string;
  auto_refill_enabled?: boolean | undefined;
  gas_strategy?: GasStrategy | undefined;
  max_gas_price?: string | undefined;
  daily_sponsorship_budget?: string | undefined;
  refill_amount?: string | undefined;
  refill_from_wallet_id?: string | undefined;
}

/** The fields a PATCH sets directly; its limits (max_gas_price, daily_sponsorship_budget) are governed (./limit-changes.ts). */
export interface UpdateGasStationInput {
  name?: string | undefined;
  threshold?: string | undefined;
  auto_refill_enabled?: boolean | undefined;
  gas_strategy?: GasStrategy | undefined;
  refill_amount?: string | null | undefined;
  refill_from_wallet_id?: string | null | undefined;
}

const nativeOf = (chain: ChainId): AssetInfo => assetById(findChain(chain).nativeAssetId);

/**
 * A wallet that may fund the station: the tenant's (another organization's or environment's is
 * 404 `resource_missing`, as everywhere), on the station's chain and not the station's own (400).
 */
async function fundingWallet(em: EntityManager, tenant: Tenant, chain: ChainId, id: string, param: string, stationWallet?: Wallet): Promise<Wallet> {
  const wallet = await findWallet(em, tenant, id, param);
  if (wallet.chain !== chain) throw errors.validation(`${param} must be ${withArticle(chain)} wallet: it is on ${wallet.chain}.`, param);
  if (stationWallet && wallet.id === stationWallet.id) throw errors.validation(`${param} is the station's own wallet: refill from another wallet.`, param);
  return wallet;
}

/** Auto-refill needs to know how much and from where. */
function checkAutoRefill(station: GasStation): void {
  if (!station.autoRefillEnabled) return;
  if (station.refillAmount == null) throw errors.validation('auto_refill_enabled needs refill_amount.', 'refill_amount');
  if (!station.refillFromWallet) throw errors.validation('auto_refill_enabled needs refill_from_wallet_id.', 'refill_from_wallet_id');
}

/** The environment's "Gas stations" vault: the one holding its existing stations' wallets, or a new one. */
async function stationsVault(em: EntityManager, tenant: Tenant): Promise<Vault> {
  const existing = await em.findOne(GasStation, { organization: tenant.organizationId, environment: tenant.environment }, { populate: ['wallet.vault'] });
  if (existing) return existing.wallet.vault;
  const vault = createVault(em, tenant, STATIONS_VAULT);
  await em.flush();
  return vault;
}

/**
 * Creates the environment's station for a chain (one per chain: a second is 409
 * `gas_station_exists`), with a new operational wallet in the "Gas stations" vault whose primary
 * address is the station's. With auto-refill on, the refill workflow is armed: it refills at once
 * when the new station is below its threshold.
 */
export async function createGasStation(em: EntityManager, keys: KeyService, tenant: Tenant & Pick<AuthContext, 'apiKeyId'>, input: CreateGasStationInput): Promise<GasStation> {
  const chain = findChain(input.chain);
  const native = nativeOf(chain.id);
  const threshold = assetAmount(input.threshold, native, 'threshold', false);
  const refillAmount = input.refill_amount === undefined ? null : assetAmount(input.refill_amount, native, 'refill_amount', true);
  const budget = input.daily_sponsorship_budget === undefined ? null : assetAmount(input.daily_sponsorship_budget, native, 'daily_sponsorship_budget', false);
  const refillFrom = input.refill_from_wallet_id === undefined ? null : await fundingWallet(em, tenant, chain.id, input.refill_from_wallet_id, 'refill_from_wallet_id');
  // Serializes creations in the environment: one station per chain, one vault for all of them.
  await em.execute('select pg_advisory_xact_lock(hashtext(?))', [`gas-stations:${tenant.organizationId}:${tenant.environment}`]);
  const existing = await em.findOne(GasStation, { organization: tenant.organizationId, environment: tenant.environment, chain: chain.id });
  if (existing) throw errors.conflict('gas_station_exists', `This environment already has the ${chain.id} gas station ${existing.id}: one per chain.`, { gas_station_id: existing.id });
  const vault = await stationsVault(em, tenant);
  const { wallet, primary } = await createWallet(em, keys, tenant, { name: input.name, chain: chain.id, vault_id: vault.id, wallet_type: 'operational' });
  const station = em.create(GasStation, {
    organization: em.getReference(Organization, tenant.organizationId),
    environment: tenant.environment,
    name: input.name,
    chain: chain.id,
    network: networkFor(chain, tenant.environment),
    wallet,
    address: primary.address,
    threshold: threshold.toString(),
    refillAmount: refillAmount?.toString() ?? null,
    refillFromWallet: refillFrom,
    autoRefillEnabled: input.auto_refill_enabled ?? false,
    gasStrategy: input.gas_strategy ?? 'standard',
    maxGasPrice: input.max_gas_price ?? null,
    dailySponsorshipBudget: budget?.toString() ?? null,
    createdByKeyId: tenant.apiKeyId,
    status: 'active',
    createdAt: new Date(),
    updatedAt: new Date(),
  });
  checkAutoRefill(station);
  await em.flush();
  if (station.autoRefillEnabled) await armRefill(em, station);
  return station;
}

/**
 * Changes the mutable fields but the limits (null clears refill_amount or refill_from_wallet_id);
 * with auto-refill on, the refill workflow is armed again.
 */
export async function updateGasStation(em: EntityManager, tenant: Tenant, station: GasStation, input: UpdateGasStationInput): Promise<GasStation> {
  const native = nativeOf(station.chain);
  if (input.name !== undefined) station.name = input.name;
  if (input.threshold !== undefined) station.threshold = assetAmount(input.threshold, native, 'threshold', false).toString();
  if (input.auto_refill_enabled !== undefined) station.autoRefillEnabled = input.auto_refill_enabled;
  if (input.gas_strategy !== undefined) station.gasStrategy = input.gas_strategy;
  if (input.refill_amount !== undefined) station.refillAmount = input.refill_amount === null ? null : assetAmount(input.refill_amount, native, 'refill_amount', true).toString();
  if (input.refill_from_wallet_id !== undefined) {
    station.refillFromWallet =
      input.refill_from_wallet_id === null ? null : await fundingWallet(em, tenant, station.chain, input.refill_from_wallet_id, 'refill_from_wallet_id', station.wallet);
  }
  checkAutoRefill(station);
  // A changed configuration deserves a new attempt at once, whatever failed before.
  station.refillFailedAt = null;
  station.updatedAt = new Date();
  await em.flush();
  if (station.autoRefillEnabled) await armRefill(em, station);
  return station;
}

export async function findGasStation(em: EntityManager, tenant: Tenant, id: string): Promise<GasStation> {
  const station = isUuid(id) ? await em.findOne(GasStation, { id, organization: tenant.organizationId, environment: tenant.environment }) : null;
  if (!station) throw errors.notFound('gas_station', id);
  return station;
}

/**
 * `POST /v1/gas-stations/:id/refill`: a send of `amount` of the native coin from `source_wallet_id`
 * to the station's address through the sending machinery (checks, locks, policies, workflow
 * `transaction-<id>`), at the fee level of the station's strategy. Answers that transaction.
 */
export async function refillGasStation(
  em: EntityManager,
  config: Config,
  chains: ChainNodes,
  auth: AuthContext,
  station: GasStation,
  input: { source_wallet_id: string; amount: string },
  market: FeeMarket,
) {
  const source = await fundingWallet(em, auth, station.chain, input.source_wallet_id, 'source_wallet_id', station.wallet);
  return createTransaction(
    em,
    config,
    chains,
    auth,
    {
      wallet_id: source.id,
      to_address: station.address,
      amount: input.amount,
      asset: nativeOf(station.chain).id,
      fee_level: STRATEGY_FEE_LEVEL[station.gasStrategy],
      note: `Refill of gas station ${station.id}`,
    },
    { operationType: 'gas_refill', destinationType: 'gas_station', market },
  );
}

/**
 * Records "start `gas-station-refill-<id>`" in the caller's transaction. Unlike a one-off start,
 * this id is started again for every trigger, so the outbox row is re-armed (unstarted again)
 * rather than inserted once; the starter fires it after commit, and Temporal joins a refill
 * already running (USE_EXISTING) or starts a new run, which assesses the station first.
 */
export async function armRefill(em: EntityManager, station: Pick<GasStation, 'id' | 'organization'>): Promise<void> {
  const input: RefillInput = { stationId: station.id };
  const resource = refillFlow.resource(input);
  const [row] = await em.execute<{ id: string }[]>(
    `insert into workflow_starts (id, workflow_id, workflow_type, input, organization_id, resource_type, resource_id, id_reuse_policy, id_conflict_policy, created_at, attempts, restarts)
     values (?, ?, ?, ?, ?, ?, ?, ?, ?, now(), 0, 0)
     on conflict (workflow_id) do update set started_at = null, created_at = now(), attempts = 0, last_error = null
     returning id`,
    [prefixedId('wfs'), refillFlow.workflowId(input), refillFlow.workflowType, JSON.stringify(input), station.organization.id, resource.type, resource.id, refillFlow.idReusePolicy, refillFlow.idConflictPolicy],
  );
  // Loaded into this transaction's unit of work, where the starter looks for starts to fire.
  await em.findOneOrFail(WorkflowStart, { id: row!.id }, { refresh: true });
}

/** A send from a station's wallet settled: its balance went down, so the station is assessed again (when auto-refill is on). */
export async function armRefillForWallet(em: EntityManager, walletId: string): Promise<void> {
  const station = await em.findOne(GasStation, { wallet: walletId, autoRefillEnabled: true });
  if (station) await armRefill(em, station);
}

/** The station's balance in base units: from the chain, or from its wallet's ledger when no node answers. */
export async function stationBalance(em: EntityManager | undefined, chains: ChainNodes, station: GasStation): Promise<{ balance: bigint; source: 'chain' | 'ledger' }> {
  const native = nativeOf(station.chain);
  try {
    const provider = await chains.provider(station.chain, station.environment, em);
    return { balance: await provider.balance(station.address, native.id), source: 'chain' };
  } catch (error) {
    if (!(error instanceof NodeUnavailableError || error instanceof ChainUnavailableError) || !em) throw error;
    const row = await em.findOne(WalletBalance, { wallet: station.wallet.id, assetId: native.id });
    return { balance: BigInt(row?.balance ?? '0'), source: 'ledger' };
  }
}

export const healthOf = (balance: bigint, station: GasStation): 'healthy' | 'low' => (balance >= BigInt(station.threshold) ? 'healthy' : 'low');

/**
 * The Gas station resource; `balance` as read (`balance_source` says from where); max_gas_price and
 * daily_sponsorship_budget as they apply: the station's own, else the deployment's default.
 */
export function presentGasStation(config: Config, station: GasStation, read: { balance: bigint; source: 'chain' | 'ledger' }) {
  const native = nativeOf(station.chain);
  const limits = stationLimits(config, station);
  return {
    id: station.id,
    object: 'gas_station' as const,
    name: station.name,
    chain: station.chain,
    network: station.network,
    address: station.address,
    wallet_id: station.wallet.id,
    asset: native.symbol,
    asset_decimals: native.decimals,
    balance: read.balance.toString(),
    balance_source: read.source,
    auto_refill_enabled: station.autoRefillEnabled,
    gas_strategy: station.gasStrategy,
    max_gas_price: limits.maxGasPrice,
    daily_sponsorship_budget: toDisplay(limits.dailyBudget, native.decimals),
    daily_sponsorship_budget_raw: limits.dailyBudget.toString(),
    threshold: toDisplay(station.threshold, native.decimals),
    threshold_raw: station.threshold,
    refill_amount: station.refillAmount == null ? null : toDisplay(station.refillAmount, native.decimals),
    refill_amount_raw: station.refillAmount ?? null,
    refill_from_wallet_id: station.refillFromWallet?.id ?? null,
    health_status: healthOf(read.balance, station),
    status: station.status,
    automation_paused_at: station.automationPausedAt ? iso(station.automationPausedAt) : null,
    created_at: iso(station.createdAt),
    updated_at: iso(station.updatedAt),
  };
}

export async function readGasStation(em: EntityManager, config: Config, chains: ChainNodes, station: GasStation) {
  return presentGasStation(config, station, await stationBalance(em, chains, station));
}

// ---- The automatic refill's steps (activities/gas-stations.ts) ----

export interface RefillDeps {
  config: Config;
  chains: ChainNodes;
  em: () => EntityManager;
  /** A transaction whose recorded workflow starts fire once it commits. */
  transaction: <T>(work: (em: EntityManager) => Promise<T>) => Promise<T>;
}

export type Assessment = { state: 'healthy' | 'auto_refill_off' } | { state: 'low'; balance: string };

/** Automatic refills run while enabled with an amount and a source, and not paused by the revocation of the key they act for. */
const automaticRefillOn = (station: GasStation): station is GasStation & { refillAmount: string; refillFromWallet: NonNullable<GasStation['refillFromWallet']> } =>
  station.autoRefillEnabled && station.refillAmount != null && !!station.refillFromWallet && !station.automationPausedAt;

/** Whether the station needs a refill now; `announce` emits gas_station.low_balance once per `announce` key when it does. */
export async function assessStation(deps: RefillDeps, stationId: string, announce?: string): Promise<Assessment> {
  return deps.transaction(async (em) => {
    const station = await em.findOneOrFail(GasStation, { id: stationId });
    if (!automaticRefillOn(station)) return { state: 'auto_refill_off' };
    const read = await stationBalance(em, deps.chains, station);
    if (healthOf(read.balance, station) === 'healthy') return { state: 'healthy' };
    if (announce) await announceStation(em, deps.config, station, read, 'gas_station.low_balance', `gas_station.low_balance:${station.id}:${announce}`);
    return { state: 'low', balance: read.balance.toString() };
  });
}

export type Submission = { transactionId: string } | { refused: { code: string; message: string } };

/**
 * Submits refill_amount from refill_from_wallet_id as a system send (policy request automated,
 * automation_rule_id the station). The station's row lock and `refillTransactionId` make it once:
 * while a refill is recorded on the station, that one is answered instead of a new send. A
 * refusal (funds, policy, configuration) is answered, not thrown: it is a failed attempt.
 */
export async function submitRefill(deps: RefillDeps, stationId: string): Promise<Submission> {
  try {
    // The fee market is read before the station's row is locked: no lock waits on the node.
    const { chain, environment } = await deps.em().findOneOrFail(GasStation, { id: stationId }, { fields: ['chain', 'environment'] });
    const market = await readFeeMarket(deps.chains, chain, environment);
    return await deps.transaction(async (em) => {
      const [locked] = await em.execute<{ id: string }[]>('select id from gas_stations where id = ? for update', [stationId]);
      if (!locked) throw new Error(`gas station ${stationId} does not exist`);
      const station = await em.findOneOrFail(GasStation, { id: stationId }, { refresh: true });
      if (station.refillTransactionId) return { transactionId: station.refillTransactionId };
      if (!automaticRefillOn(station)) {
        throw errors.invalid('auto_refill_off', 'Auto-refill was turned off, its source removed, or the key it acts for revoked (automation_paused_at).');
      }
      const native = nativeOf(station.chain);
      const sent = await createTransaction(
        em,
        deps.config,
        deps.chains,
        { organizationId: station.organization.id, environment: station.environment, automationRuleId: station.id, actorKeyId: station.createdByKeyId ?? null },
        {
          wallet_id: station.refillFromWallet.id,
          to_address: station.address,
          amount: toDisplay(station.refillAmount, native.decimals),
          asset: native.id,
          fee_level: STRATEGY_FEE_LEVEL[station.gasStrategy],
          note: `Automatic refill of gas station ${station.id}`,
        },
        { operationType: 'gas_auto_refill', destinationType: 'gas_station', market },
      );
      station.refillTransactionId = sent.id;
      await em.flush();
      return { transactionId: sent.id };
    });
  } catch (error) {
    if (error instanceof DomainError) return { refused: { code: error.code, message: error.message } };
    throw error;
  }
}

export async function refillStatus(deps: RefillDeps, transactionId: string): Promise<TransactionStatus> {
  return (await deps.em().findOneOrFail(OutgoingTransaction, { id: transactionId })).status;
}

/** The refill send finished: the station is free for the next one; a confirmed refill emits gas_station.refilled once. */
export async function finishRefill(deps: RefillDeps, stationId: string, transactionId: string): Promise<TransactionStatus> {
  return deps.transaction(async (em) => {
    const transaction = await em.findOneOrFail(OutgoingTransaction, { id: transactionId });
    await em.nativeUpdate(GasStation, { id: stationId, refillTransactionId: transactionId }, { refillTransactionId: null });
    const station = await em.findOneOrFail(GasStation, { id: stationId }, { refresh: true });
    if (transaction.status === 'confirmed') {
      station.refillFailedAt = null;
      await announceStation(em, deps.config, station, await stationBalance(em, deps.chains, station), 'gas_station.refilled', `gas_station.refilled:${transactionId}`, {
        transaction_id: transactionId,
      });
    }
    return transaction.status;
  });
}

/** Every attempt failed: gas_station.refill_failed, with the attempts and the last failure. */
export async function reportRefillFailed(deps: RefillDeps, stationId: string, key: string, failure: { attempts: number; code: string; message: string; transaction_id?: string }) {
  await deps.transaction(async (em) => {
    const station = await em.findOneOrFail(GasStation, { id: stationId });
    station.refillFailedAt = new Date();
    await announceStation(em, deps.config, station, await stationBalance(em, deps.chains, station), 'gas_station.refill_failed', `gas_station.refill_failed:${stationId}:${key}`, { failure });
  });
}

async function announceStation(
  em: EntityManager,
  config: Config,
  station: GasStation,
  read: { balance: bigint; source: 'chain' | 'ledger' },
  type: 'gas_station.low_balance' | 'gas_station.refilled' | 'gas_station.refill_failed',
  dedupeKey: string,
  extra: Record<string, unknown> = {},
): Promise<void> {
  await emit(em, { organizationId: station.organization.id, environment: station.environment, type, data: { ...presentGasStation(config, station, read), ...extra }, dedupeKey });
}

/** After a reported failure the periodic check leaves the station alone this long (a PATCH or a settled spend retries at once). */
export const FAILED_REFILL_COOLDOWN_MS = 60 * 60 * 1000;

/**
 * The periodic check (schedule `gas-station-check`): arms the refill of every auto-refill station
 * below its threshold, for spends the platform did not make. A station whose node does not answer
 * is skipped until the next check; one whose last refill was reported failed, for an hour (so a
 * source that stays empty is reported hourly, not every few minutes). Returns how many were armed.
 */
export async function armLowStations(deps: RefillDeps, scope: { organizationId?: string; environment?: Environment } = {}): Promise<number> {
  const stations = await deps.em().find(GasStation, {
    autoRefillEnabled: true,
    automationPausedAt: null,
    $or: [{ refillFailedAt: null }, { refillFailedAt: { $lt: new Date(Date.now() - FAILED_REFILL_COOLDOWN_MS) } }],
    ...(scope.organizationId ? { organization: scope.organizationId } : {}),
    ...(scope.environment ? { environment: scope.environment } : {}),
  });
  let armed = 0;
  for (const station of stations) {
    let balance: bigint;
    try {
      ({ balance } = await stationBalance(undefined, deps.chains, station));
    } catch (error) {
      if (error instanceof NodeUnavailableError || error instanceof ChainUnavailableError) continue;
      throw error;
    }
    if (healthOf(balance, station) === 'healthy') continue;
    await deps.transaction((em) => armRefill(em, station));
    armed += 1;
  }
  return armed;
}
