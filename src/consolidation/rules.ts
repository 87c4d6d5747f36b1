import type { EntityManager } from '@mikro-orm/postgresql';
import { AddressBookEntry } from '../address-book/entities';
import { isUsable } from '../address-book/service';
import type { AuthContext } from '../api-keys/auth-context';
import { ASSETS, assetAmount, chainAsset, findChain, networkFor, type AssetInfo, type ChainId } from '../catalogue/service';
import { assertPriceSource, type PriceSourceSettings } from '../catalogue/prices';
import type { ChainNodes } from '../chains/nodes';
import { sameContract, tokenContracts } from '../chains/tokens';
import type { Config } from '../config';
import { Vault, Wallet } from '../custody/entities';
import { findVault, type Tenant } from '../custody/service';
import { GasStation } from '../gas-stations/entities';
import { Organization } from '../organizations/entities';
import { errors } from '../shared/errors';
import { isUuid } from '../shared/ids';
import { assertBelowLimit } from '../shared/limits';
import { Money, toDisplay } from '../shared/money';
import { iso } from '../shared/time';
import { ConsolidationRule, type ConsolidationAsset } from './entities';
import { triggerRun } from './runs';
import type { ConsolidationAssetInput, CreateConsolidationRuleInput, UpdateConsolidationRuleInput } from './schemas';
import { cronProblem, cronShortestInterval, recordScheduleSync } from './schedules';
import { withArticle } from '../shared/articles';

/** Account chains only: a Bitcoin wallet's funds are outputs, swept by a different kind of transaction. */
const SUPPORTED_CHAINS: readonly ChainId[] = ['ethereum', 'tron', 'solana'];

/** The caps on an environment's rules and schedules (docs/limits.md). */
/** The settings rules are checked against: the environment's caps, and whether it has USD prices. */
export type RuleSettings = Pick<Config, 'MAX_CONSOLIDATION_RULES' | 'MAX_SCHEDULED_CONSOLIDATION_RULES' | 'CONSOLIDATION_SCHEDULE_MIN_INTERVAL_MINUTES'> & PriceSourceSettings;

/**
 * One more rule of the environment, or one more scheduled rule (409 `limit_reached` at
 * MAX_CONSOLIDATION_RULES or MAX_SCHEDULED_CONSOLIDATION_RULES), counted before the rule is
 * persisted or becomes scheduled.
 */
async function assertRuleSlot(em: EntityManager, tenant: Tenant, limits: RuleSettings, scheduled: boolean): Promise<void> {
  const setting = scheduled ? 'MAX_SCHEDULED_CONSOLIDATION_RULES' : 'MAX_CONSOLIDATION_RULES';
  await assertBelowLimit(em, {
    resource: scheduled ? 'scheduled_consolidation_rules' : 'consolidation_rules',
    owner: `${tenant.organizationId}:${tenant.environment}`,
    holder: 'environment',
    limit: limits[setting],
    setting,
    remedy: scheduled ? 'delete one or change its trigger_type' : 'delete one',
    count: (tx) =>
      tx.count(ConsolidationRule, { organization: tenant.organizationId, environment: tenant.environment, deletedAt: null, ...(scheduled ? { triggerType: 'scheduled' as const } : {}) }),
  });
}

/** One requested asset resolved to the catalogue asset of the chain it names, with its minimums checked and normalised. */
function resolveAsset(chain: ChainId, contracts: Map<string, string>, input: ConsolidationAssetInput, param: string): ConsolidationAsset {
  const native = ASSETS.find((asset) => asset.chain === chain && asset.type === 'native')!;
  let asset: AssetInfo;
  if (input.is_native) {
    if (input.contract_address) throw errors.validation(`${param}.contract_address: the native coin has no contract; omit it with is_native.`, `${param}.contract_address`);
    if (input.symbol !== undefined && chainAsset(chain, input.symbol, `${param}.symbol`).id !== native.id) {
      throw errors.validation(`${param}.symbol '${input.symbol}' is not the native coin of ${chain} (${native.symbol}).`, `${param}.symbol`);
    }
    asset = native;
  } else if (input.symbol !== undefined) {
    asset = chainAsset(chain, input.symbol, `${param}.symbol`);
    if (asset.type === 'native' && input.is_native === false) throw errors.validation(`${param}.symbol '${input.symbol}' is the native coin: set is_native.`, `${param}.is_native`);
    if (input.contract_address) {
      const known = contracts.get(asset.id);
      if (!known || !sameContract(chain, known, input.contract_address)) {
        throw errors.validation(`${param}.contract_address is not the contract of ${asset.id} on this network${known ? ` (${known})` : ''}.`, `${param}.contract_address`);
      }
    }
  } else if (input.contract_address) {
    const id = [...contracts].find(([, address]) => sameContract(chain, address, input.contract_address!))?.[0];
    if (!id) throw errors.validation(`${param}.contract_address is not the contract of ${withArticle(chain)} token of the catalogue on this network.`, `${param}.contract_address`);
    asset = ASSETS.find((candidate) => candidate.id === id)!;
  } else {
    throw errors.validation(`${param} needs symbol, contract_address or is_native.`, `${param}.symbol`);
  }
  const minimum = (value: string | undefined, field: string) => toDisplay(assetAmount(value ?? '0', asset, `${param}.${field}`, false), asset.decimals);
  return {
    asset_id: asset.id,
    symbol: asset.symbol,
    contract_address: asset.type === 'native' ? null : (contracts.get(asset.id) ?? null),
    is_native: asset.type === 'native',
    min_amount_to_move: minimum(input.min_amount_to_move, 'min_amount_to_move'),
    min_balance_to_leave: minimum(input.min_balance_to_leave, 'min_balance_to_leave'),
  };
}

/** The assets asked for, or by default the chain's native coin and every token of the chain with zero minimums. */
async function resolveAssets(em: EntityManager, chains: ChainNodes, tenant: Tenant, chain: ChainId, inputs: ConsolidationAssetInput[] | undefined): Promise<ConsolidationAsset[]> {
  const contracts = await tokenContracts(em, chains, chain, tenant.environment);
  const requested = inputs ?? ASSETS.filter((asset) => asset.chain === chain).map((asset) => (asset.type === 'native' ? { is_native: true } : { symbol: asset.id }));
  const assets = requested.map((input, index) => resolveAsset(chain, contracts, input, `assets.${index}`));
  const seen = new Set<string>();
  for (const [index, asset] of assets.entries()) {
    if (seen.has(asset.asset_id)) throw errors.validation(`assets.${index} names ${asset.asset_id} again: one entry per asset.`, `assets.${index}`);
    seen.add(asset.asset_id);
  }
  return assets;
}

/** The rule's fields as a request would leave them, before the combination checks. */
interface RuleFields {
  destinationType: ConsolidationRule['destinationType'];
  destinationAddressBookId: string | null;
  destinationVaultId: string | null;
  gasSource: ConsolidationRule['gasSource'];
  gasStationId: string | null;
  triggerType: ConsolidationRule['triggerType'];
  scheduleCron: string | null;
  thresholdBasis: ConsolidationRule['thresholdBasis'];
  thresholdCurrency: ConsolidationRule['thresholdCurrency'];
  thresholdValue: string | null;
}

/**
 * A field that applies only to one choice of another: required (400) when it applies; given while
 * it does not apply, 400; left over from before (PATCH) while it no longer applies, cleared.
 */
function conditional<T>(value: T | null, given: boolean, applies: boolean, param: string, condition: string): T | null {
  if (applies && value == null) throw errors.validation(`${condition} needs ${param}.`, param);
  if (!applies && value != null) {
    if (given) throw errors.validation(`${param} applies only with ${condition}.`, param);
    return null;
  }
  return value;
}

/**
 * Checks every combination on the rule as the request leaves it, and resolves the records it names
 * (another tenant's: 404). A schedule_cron other than the stored one ticks no more often than
 * CONSOLIDATION_SCHEDULE_MIN_INTERVAL_MINUTES (400 `schedule_too_frequent`); a stored one is left as it is.
 */
async function applyFields(
  em: EntityManager,
  tenant: Tenant,
  rule: ConsolidationRule,
  fields: RuleFields,
  given: Partial<Record<keyof RuleFields, boolean>>,
  limits: RuleSettings,
): Promise<void> {
  const destinationBookId = conditional(fields.destinationAddressBookId, !!given.destinationAddressBookId, fields.destinationType === 'address_book', 'destination_address_book_id', 'destination_type address_book');
  const destinationVaultId = conditional(fields.destinationVaultId, !!given.destinationVaultId, fields.destinationType === 'vault', 'destination_vault_id', 'destination_type vault');
  const gasStationId = conditional(fields.gasStationId, !!given.gasStationId, fields.gasSource === 'customer_gas_station', 'gas_station_id', 'gas_source customer_gas_station');
  const scheduled = fields.triggerType === 'scheduled';
  const threshold = fields.triggerType === 'threshold';
  const scheduleCron = conditional(fields.scheduleCron, !!given.scheduleCron, scheduled, 'schedule_cron', 'trigger_type scheduled');
  const thresholdBasis = conditional(fields.thresholdBasis, !!given.thresholdBasis, threshold, 'threshold_basis', 'trigger_type threshold');
  const thresholdCurrency = conditional(fields.thresholdCurrency, !!given.thresholdCurrency, threshold, 'threshold_currency', 'trigger_type threshold');
  const thresholdValue = conditional(fields.thresholdValue, !!given.thresholdValue, threshold, 'threshold_value', 'trigger_type threshold');
  const normalizedCron = scheduleCron === null ? null : scheduleCron.trim().split(/\s+/).join(' ');
  if (scheduleCron !== null) {
    const problem = cronProblem(scheduleCron);
    if (problem) throw errors.validation(`schedule_cron: ${problem}.`, 'schedule_cron');
  }
  if (normalizedCron !== null && normalizedCron !== (rule.scheduleCron ?? null)) {
    const interval = cronShortestInterval(normalizedCron);
    const minimum = limits.CONSOLIDATION_SCHEDULE_MIN_INTERVAL_MINUTES;
    if (interval < minimum) {
      throw errors.invalid(
        'schedule_too_frequent',
        `schedule_cron '${normalizedCron}' ticks ${interval} minute(s) apart; a schedule may tick at most every ${minimum} minutes, since each tick reads every address of the vault. A threshold trigger sweeps as deposits arrive.`,
        { param: 'schedule_cron', details: { min_interval_minutes: minimum, interval_minutes: interval } },
      );
    }
  }

  rule.destinationType = fields.destinationType;
  rule.destinationAddressBook = destinationBookId === null ? null : await addressBookEntry(em, tenant, rule.chain, destinationBookId);
  rule.destinationVault = destinationVaultId === null ? null : await destinationVault(em, tenant, rule, destinationVaultId);
  rule.gasSource = fields.gasSource;
  rule.gasStation = gasStationId === null ? null : await gasStation(em, tenant, rule.chain, gasStationId);
  rule.triggerType = fields.triggerType;
  rule.scheduleCron = normalizedCron;
  rule.thresholdBasis = thresholdBasis;
  rule.thresholdCurrency = thresholdCurrency;
  rule.thresholdValue = thresholdValue === null ? null : new Money(thresholdValue).toFixed();
}

async function addressBookEntry(em: EntityManager, tenant: Tenant, chain: ChainId, id: string): Promise<AddressBookEntry> {
  const param = 'destination_address_book_id';
  const entry = isUuid(id) ? await em.findOne(AddressBookEntry, { id, organization: tenant.organizationId, environment: tenant.environment }) : null;
  if (!entry) throw errors.notFound('address book entry', id, param);
  if (entry.chain !== chain) throw errors.validation(`${param} must be ${withArticle(chain)} address book entry: it is on ${entry.chain}.`, param);
  return entry;
}

/** Another vault of the caller, with a wallet on the chain for the sweeps to land in. */
async function destinationVault(em: EntityManager, tenant: Tenant, rule: ConsolidationRule, id: string): Promise<Vault> {
  const param = 'destination_vault_id';
  const vault = await findVault(em, tenant, id, param);
  if (vault.id === rule.vault.id) throw errors.validation(`${param} must be another vault than vault_id: a vault does not sweep into itself.`, param);
  if (!(await em.count(Wallet, { vault, chain: rule.chain }))) throw errors.validation(`${param}: the vault has no ${rule.chain} wallet to sweep into; create one first.`, param);
  return vault;
}

async function gasStation(em: EntityManager, tenant: Tenant, chain: ChainId, id: string): Promise<GasStation> {
  const param = 'gas_station_id';
  const station = isUuid(id) ? await em.findOne(GasStation, { id, organization: tenant.organizationId, environment: tenant.environment }) : null;
  if (!station) throw errors.notFound('gas station', id, param);
  if (station.chain !== chain) throw errors.validation(`${param} must be ${withArticle(chain)} gas station: it is on ${station.chain}.`, param);
  return station;
}

const minConsolidateUsd = (value: string | null | undefined) => (value == null ? null : new Money(value).toFixed());

/**
 * Creates a rule on a vault of the caller (404 otherwise) for an account chain (Bitcoin: 400
 * `consolidation_unsupported_chain`), after checking every field and combination, within the
 * environment's caps (409 `limit_reached`). A scheduled rule's Schedule is created once the rule
 * has committed (recordScheduleSync).
 */
export async function createRule(
  em: EntityManager,
  chains: ChainNodes,
  limits: RuleSettings,
  tenant: Tenant & Pick<AuthContext, 'apiKeyId'>,
  input: CreateConsolidationRuleInput,
): Promise<ConsolidationRule> {
  const chain = findChain(input.chain);
  if (!SUPPORTED_CHAINS.includes(chain.id)) {
    throw errors.invalid('consolidation_unsupported_chain', `Consolidation sweeps account chains (${SUPPORTED_CHAINS.join(', ')}); ${chain.id} is not supported.`, { param: 'chain' });
  }
  const vault = await findVault(em, tenant, input.vault_id, 'vault_id');
  const assets = await resolveAssets(em, chains, tenant, chain.id, input.assets);
  // Counted before the new rule exists in this transaction (a query could flush it first).
  await assertRuleSlot(em, tenant, limits, false);
  if (input.trigger_type === 'scheduled') await assertRuleSlot(em, tenant, limits, true);
  const rule = em.create(ConsolidationRule, {
    organization: em.getReference(Organization, tenant.organizationId),
    environment: tenant.environment,
    vault,
    chain: chain.id,
    network: networkFor(chain, tenant.environment),
    enabled: input.enabled ?? true,
    destinationType: input.destination_type,
    gasSource: input.gas_source,
    triggerType: input.trigger_type,
    assets,
    minConsolidateUsd: minConsolidateUsd(input.min_consolidate_usd),
    createdByKeyId: tenant.apiKeyId,
  });
  await applyFields(
    em,
    tenant,
    rule,
    {
      destinationType: input.destination_type,
      destinationAddressBookId: input.destination_address_book_id ?? null,
      destinationVaultId: input.destination_vault_id ?? null,
      gasSource: input.gas_source,
      gasStationId: input.gas_station_id ?? null,
      triggerType: input.trigger_type,
      scheduleCron: input.schedule_cron ?? null,
      thresholdBasis: input.threshold_basis ?? null,
      thresholdCurrency: input.threshold_currency ?? null,
      thresholdValue: input.threshold_value ?? null,
    },
    {
      destinationAddressBookId: true,
      destinationVaultId: true,
      gasStationId: true,
      scheduleCron: true,
      thresholdBasis: true,
      thresholdCurrency: true,
      thresholdValue: true,
    },
    limits,
  );
  assertPricedIfInUsd(limits, rule);
  await em.flush();
  if (rule.triggerType === 'scheduled') recordScheduleSync(em, rule);
  return rule;
}

/** A rule valued in USD (a USD threshold or minimum) in an environment without prices would never sweep: 503 price_source_unavailable. */
const assertPricedIfInUsd = (settings: RuleSettings, rule: ConsolidationRule) => {
  if (rule.thresholdCurrency === 'usd' || rule.minConsolidateUsd != null) assertPriceSource(settings, rule.environment, 'A consolidation rule valued in USD');
};

/**
 * Changes the mutable fields (omitted: unchanged; null clears an optional one) and checks every
 * combination on the result; a field that no longer applies (schedule_cron after trigger_type
 * becomes manual...) is cleared. A change of what the Schedule depends on (trigger_type,
 * schedule_cron, enabled) syncs it after commit; disabling stops triggers at once (triggerRun
 * refuses a disabled rule). Becoming scheduled takes one of the environment's schedule slots.
 */
export async function updateRule(
  em: EntityManager,
  chains: ChainNodes,
  limits: RuleSettings,
  tenant: Tenant,
  rule: ConsolidationRule,
  input: UpdateConsolidationRuleInput,
): Promise<ConsolidationRule> {
  const before = { triggerType: rule.triggerType, scheduleCron: rule.scheduleCron ?? null, enabled: rule.enabled };
  if (input.trigger_type === 'scheduled' && rule.triggerType !== 'scheduled') await assertRuleSlot(em, tenant, limits, true);
  const pick = <K extends keyof UpdateConsolidationRuleInput, T>(key: K, current: T): T => (input[key] === undefined ? current : (input[key] as T));
  await applyFields(
    em,
    tenant,
    rule,
    {
      destinationType: pick('destination_type', rule.destinationType),
      destinationAddressBookId: pick('destination_address_book_id', rule.destinationAddressBook?.id ?? null),
      destinationVaultId: pick('destination_vault_id', rule.destinationVault?.id ?? null),
      gasSource: pick('gas_source', rule.gasSource),
      gasStationId: pick('gas_station_id', rule.gasStation?.id ?? null),
      triggerType: pick('trigger_type', rule.triggerType),
      scheduleCron: pick('schedule_cron', rule.scheduleCron ?? null),
      thresholdBasis: pick('threshold_basis', rule.thresholdBasis ?? null),
      thresholdCurrency: pick('threshold_currency', rule.thresholdCurrency ?? null),
      thresholdValue: pick('threshold_value', rule.thresholdValue ?? null),
    },
    {
      destinationAddressBookId: input.destination_address_book_id != null,
      destinationVaultId: input.destination_vault_id != null,
      gasStationId: input.gas_station_id != null,
      scheduleCron: input.schedule_cron != null,
      thresholdBasis: input.threshold_basis != null,
      thresholdCurrency: input.threshold_currency != null,
      thresholdValue: input.threshold_value != null,
    },
    limits,
  );
  if (input.assets !== undefined) rule.assets = await resolveAssets(em, chains, tenant, rule.chain, input.assets);
  if (input.min_consolidate_usd !== undefined) rule.minConsolidateUsd = minConsolidateUsd(input.min_consolidate_usd);
  if (input.enabled !== undefined) rule.enabled = input.enabled;
  assertPricedIfInUsd(limits, rule);
  rule.updatedAt = new Date();
  await em.flush();
  const scheduleChanged = before.triggerType !== rule.triggerType || before.scheduleCron !== (rule.scheduleCron ?? null) || before.enabled !== rule.enabled;
  if (scheduleChanged && (before.triggerType === 'scheduled' || rule.triggerType === 'scheduled')) recordScheduleSync(em, rule);
  return rule;
}

/** Deletes a rule (deleted_at: its runs and sweeps stay readable); no trigger starts a run from then on, and its Schedule goes after commit. */
export async function deleteRule(em: EntityManager, rule: ConsolidationRule): Promise<void> {
  // Under the row lock triggerRun takes: a trigger racing the delete either ran before it or sees it.
  await em.execute('select id from consolidation_rules where id = ? for update', [rule.id]);
  rule.deletedAt = new Date();
  await em.flush();
  if (rule.triggerType === 'scheduled') recordScheduleSync(em, rule);
}

/** A rule of the caller's environment that is not deleted; 404 `resource_missing` otherwise. */
export async function findRule(em: EntityManager, tenant: Tenant, id: string): Promise<ConsolidationRule> {
  const rule = isUuid(id) ? await em.findOne(ConsolidationRule, { id, organization: tenant.organizationId, environment: tenant.environment, deletedAt: null }) : null;
  if (!rule) throw errors.notFound('consolidation_rule', id);
  return rule;
}

/**
 * `POST /v1/consolidation/rules/:id/runs`: a manual run, or the trigger recorded on the run in
 * progress. A disabled rule: 409 `consolidation_rule_disabled`; an address-book destination not yet
 * usable: 409 `destination_not_usable` with its usable_at (a run would fail at planning).
 */
export async function triggerManualRun(em: EntityManager, auth: AuthContext, rule: ConsolidationRule) {
  const destination = rule.destinationAddressBook ? await em.findOneOrFail(AddressBookEntry, { id: rule.destinationAddressBook.id }) : null;
  if (destination && !isUsable(destination)) {
    throw errors.conflict('destination_not_usable', `The destination address book entry is in its cooling period until ${iso(destination.usableAt)}; approve it early or wait.`, {
      address_book_entry_id: destination.id,
      usable_at: iso(destination.usableAt),
    });
  }
  const triggered = await triggerRun(em, rule.id, { source: 'manual', userId: auth.memberId ?? auth.apiKeyId, keyId: auth.apiKeyId, detail: auth.memberId ?? auth.apiKeyId });
  if (!triggered) throw errors.conflict('consolidation_rule_disabled', 'The rule is disabled: enable it (PATCH enabled: true) to run it.');
  return triggered;
}

/** The rules' sweeps submitted and not yet settled, by rule. */
export async function inFlightSweeps(em: EntityManager, ruleIds: string[]): Promise<Map<string, number>> {
  const counts = new Map<string, number>();
  if (!ruleIds.length) return counts;
  const rows = await em.execute<{ rule_id: string; count: string }[]>(
    `select rule_id, count(*) as count from consolidation_sweeps where rule_id in (${ruleIds.map(() => '?').join(', ')}) and status = 'submitted' group by rule_id`,
    ruleIds,
  );
  for (const row of rows) counts.set(row.rule_id, Number(row.count));
  return counts;
}

/** The Consolidation rule resource. */
export function presentRule(rule: ConsolidationRule, inFlight: number) {
  return {
    id: rule.id,
    object: 'consolidation_rule' as const,
    org_id: rule.organization.id,
    vault_id: rule.vault.id,
    chain: rule.chain,
    network: rule.network,
    enabled: rule.enabled,
    destination_type: rule.destinationType,
    destination_address_book_id: rule.destinationAddressBook?.id ?? null,
    destination_vault_id: rule.destinationVault?.id ?? null,
    gas_source: rule.gasSource,
    gas_station_id: rule.gasStation?.id ?? null,
    assets: rule.assets.map((asset) => ({
      symbol: asset.symbol,
      contract_address: asset.contract_address,
      is_native: asset.is_native,
      min_amount_to_move: asset.min_amount_to_move,
      min_balance_to_leave: asset.min_balance_to_leave,
    })),
    trigger_type: rule.triggerType,
    schedule_cron: rule.scheduleCron ?? null,
    threshold_basis: rule.thresholdBasis ?? null,
    threshold_currency: rule.thresholdCurrency ?? null,
    threshold_value: rule.thresholdValue ?? null,
    min_consolidate_usd: rule.minConsolidateUsd ?? null,
    active_run_id: rule.activeRunId ?? null,
    in_flight_sweeps: inFlight,
    automation_paused_at: rule.automationPausedAt ? iso(rule.automationPausedAt) : null,
    created_at: iso(rule.createdAt),
    updated_at: iso(rule.updatedAt),
  };
}

export async function readRule(em: EntityManager, rule: ConsolidationRule) {
  return presentRule(rule, (await inFlightSweeps(em, [rule.id])).get(rule.id) ?? 0);
}

// ---- Threshold triggers ----
