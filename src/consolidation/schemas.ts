import { CHAIN_IDS } from '../catalogue/service';
import { ListQuery } from '../shared/pagination';
import { DisplayAmount, PositiveDisplayAmount, text, Timestamp, trimmedText, z } from '../shared/schemas';
import { DESTINATION_TYPES, GAS_SOURCES, RUN_STATUSES, SWEEP_STATUSES, THRESHOLD_BASES, THRESHOLD_CURRENCIES, TRIGGER_SOURCES, TRIGGER_TYPES } from './entities';

const Id = z.string().uuid();
const Cron = trimmedText(1, 100).openapi({ description: 'Five fields (minute hour day-of-month month day-of-week), evaluated in UTC: numbers, *, ranges a-b, steps /n, lists a,b; JAN-DEC and SUN-SAT names', example: '0 */6 * * *' });

export const ConsolidationAssetInput = z
  .object({
    symbol: trimmedText(1, 32).optional().openapi({ description: 'A symbol of the chain (USDC) or a catalogue asset id (USDC_ETH)' }),
    contract_address: trimmedText(1, 128).nullable().optional().openapi({ description: "The token's contract (or mint); null or omitted with is_native" }),
    is_native: z.boolean().optional().openapi({ description: "The chain's native coin (needs no symbol)" }),
    min_amount_to_move: DisplayAmount.optional().openapi({ description: 'An address holding less than this (display units) is not swept; default 0' }),
    min_balance_to_leave: DisplayAmount.optional().openapi({ description: 'What each address keeps after a sweep (display units); default 0' }),
  })
  .strict()
  .openapi('ConsolidationAssetRequest');
export type ConsolidationAssetInput = z.infer<typeof ConsolidationAssetInput>;

const Assets = z
  .array(ConsolidationAssetInput)
  .min(1)
  .max(20)
  .openapi({ description: "What the rule sweeps. Omitted on create: the chain's native coin and every token of the chain, with zero minimums" });

const mutableFields = {
  destination_type: z.enum(DESTINATION_TYPES),
  destination_address_book_id: Id.nullable().openapi({ description: 'An address book entry of the same chain; needed with destination_type address_book' }),
  destination_vault_id: Id.nullable().openapi({ description: 'Another vault of the caller, swept to its wallet on the chain; needed with destination_type vault' }),
  trigger_type: z.enum(TRIGGER_TYPES),
  gas_source: z.enum(GAS_SOURCES).openapi({ description: "Who pays a token sweep's gas: wallet (the source address), customer_gas_station (gas_station_id), hedge_paymaster (the platform)" }),
  gas_station_id: Id.nullable().openapi({ description: 'A gas station of the same chain; needed with gas_source customer_gas_station' }),
  enabled: z.boolean(),
  assets: Assets,
  min_consolidate_usd: DisplayAmount.nullable().openapi({ description: 'A sweep worth less than this many USD is not made' }),
  schedule_cron: Cron.nullable(),
  threshold_basis: z.enum(THRESHOLD_BASES).nullable().openapi({ description: "aggregate: the vault's wallets together; per_address: the wallet of the address that received the deposit" }),
  threshold_currency: z.enum(THRESHOLD_CURRENCIES).nullable().openapi({ description: 'usd: the assets valued together in USD; token: each asset in its own display units' }),
  threshold_value: PositiveDisplayAmount.nullable(),
};

export const CreateConsolidationRuleBody = z
  .object({
    vault_id: Id,
    chain: z.enum(CHAIN_IDS),
    network: text(0, 64).optional().openapi({ description: "Accepted; the key's environment decides the network (sandbox: the chain's testnet, live: mainnet)" }),
    destination_type: mutableFields.destination_type,
    trigger_type: mutableFields.trigger_type,
    gas_source: mutableFields.gas_source,
    destination_address_book_id: Id.optional(),
    destination_vault_id: Id.optional(),
    gas_station_id: Id.optional(),
    enabled: z.boolean().optional(),
    assets: Assets.optional(),
    min_consolidate_usd: DisplayAmount.optional(),
    schedule_cron: Cron.optional(),
    threshold_basis: z.enum(THRESHOLD_BASES).optional(),
    threshold_currency: z.enum(THRESHOLD_CURRENCIES).optional(),
    threshold_value: PositiveDisplayAmount.optional(),
  })
  .strict()
  .openapi('CreateConsolidationRuleRequest');
export type CreateConsolidationRuleInput = z.infer<typeof CreateConsolidationRuleBody>;

export const UpdateConsolidationRuleBody = z
  .object(Object.fromEntries(Object.entries(mutableFields).map(([name, schema]) => [name, schema.optional()])) as { [K in keyof typeof mutableFields]: z.ZodOptional<(typeof mutableFields)[K]> })
  .strict()
  .openapi('UpdateConsolidationRuleRequest');
export type UpdateConsolidationRuleInput = z.infer<typeof UpdateConsolidationRuleBody>;

export const RuleParams = z.object({ id: text(1, 64) });
export const RuleListQuery = ListQuery.extend({ vault_id: Id.optional(), chain: z.enum(CHAIN_IDS).optional() });
export const RunListQuery = ListQuery.extend({ rule_id: Id.optional(), status: z.enum(RUN_STATUSES).optional() });
export const SweepListQuery = ListQuery;

const Decimal = z.string().openapi({ description: 'Decimal as a string' });

export const ConsolidationAssetObject = z
  .object({
    symbol: z.string(),
    contract_address: z.string().nullable(),
    is_native: z.boolean(),
    min_amount_to_move: Decimal,
    min_balance_to_leave: Decimal,
  })
  .openapi('ConsolidationAsset');

export const ConsolidationRuleObject = z
  .object({
    id: Id,
    object: z.literal('consolidation_rule'),
    org_id: Id,
    vault_id: Id,
    chain: z.enum(CHAIN_IDS),
    network: z.string(),
    enabled: z.boolean(),
    destination_type: z.enum(DESTINATION_TYPES),
    destination_address_book_id: Id.nullable(),
    destination_vault_id: Id.nullable(),
    gas_source: z.enum(GAS_SOURCES),
    gas_station_id: Id.nullable(),
    assets: z.array(ConsolidationAssetObject),
    trigger_type: z.enum(TRIGGER_TYPES),
    schedule_cron: z.string().nullable(),
    threshold_basis: z.enum(THRESHOLD_BASES).nullable(),
    threshold_currency: z.enum(THRESHOLD_CURRENCIES).nullable(),
    threshold_value: Decimal.nullable(),
    min_consolidate_usd: Decimal.nullable(),
    active_run_id: Id.nullable().openapi({ description: 'The run in progress: one at a time per rule' }),
    in_flight_sweeps: z.number().int().openapi({ description: "The rule's sweeps submitted and not yet confirmed or failed" }),
    automation_paused_at: Timestamp.nullable().openapi({
      description: 'When revoking the key the rule acts for paused its scheduled and threshold runs (event automation.paused); null: running. POST /v1/consolidation/rules/:id/take-over resumes them.',
    }),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .openapi('ConsolidationRule');

export const ConsolidationRunObject = z
  .object({
    id: Id,
    object: z.literal('consolidation_run'),
    org_id: Id,
    rule_id: Id,
    vault_id: Id,
    chain: z.enum(CHAIN_IDS),
    network: z.string(),
    status: z.enum(RUN_STATUSES).openapi({
      description:
        'pending → scanning → sweeping → completed (every sweep confirmed, or nothing to sweep), partially_failed (some sweeps failed, some confirmed) or failed',
    }),
    trigger_source: z.enum(TRIGGER_SOURCES),
    initiated_by_user_id: z.string().nullable().openapi({ description: 'Manual runs: the member, or the API key without a member, that asked' }),
    recorded_trigger_count: z.number().int().openapi({ description: 'Triggers that arrived while this run was going: counted here rather than starting a second run' }),
    last_recorded_trigger: z
      .object({
        source: z.enum(TRIGGER_SOURCES),
        at: Timestamp,
        detail: z.string().nullable().openapi({ description: 'Threshold: the deposit that crossed it. Manual: the member or key that asked. Scheduled: null' }),
      })
      .nullable()
      .openapi({ description: 'The last of those triggers; null when none arrived' }),
    addresses_scanned: z.number().int(),
    transfers_created: z.number().int(),
    transfers_confirmed: z.number().int(),
    transfers_failed: z.number().int(),
    per_asset_totals: z.array(
      z.object({ asset_address: z.string().nullable(), asset_symbol: z.string(), amount_swept: Decimal.openapi({ description: 'Confirmed sweeps, display units' }), sweep_count: z.number().int() }),
    ),
    fees: z.object({
      total_usd: Decimal.openapi({ description: 'The priced fees in USD, exact; fees without a price are left out of it' }),
      breakdown: z.array(
        z.object({
          kind: z.enum(['network_fee', 'gas_sponsorship']).openapi({ description: "network_fee: paid by the swept address itself; gas_sponsorship: paid for it by a gas station or the platform" }),
          currency: z.string().openapi({ example: 'ETH' }),
          amount: Decimal,
          amount_usd: Decimal.nullable(),
        }),
      ),
    }),
    failure_reason: z.string().nullable(),
    started_at: Timestamp.nullable(),
    completed_at: Timestamp.nullable(),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .openapi('ConsolidationRun');

export const ConsolidationSweepObject = z
  .object({
    id: Id,
    object: z.literal('consolidation_sweep'),
    org_id: Id,
    rule_id: Id,
    run_id: Id,
    chain: z.enum(CHAIN_IDS),
    network: z.string(),
    source_address_id: Id,
    destination_address: z.string(),
    asset_address: z.string().nullable().openapi({ description: "The token's contract; null for the native coin" }),
    asset_symbol: z.string(),
    is_native: z.boolean(),
    amount: Decimal.openapi({ description: 'Display units' }),
    gas_source: z.enum(GAS_SOURCES),
    status: z.enum(SWEEP_STATUSES).openapi({ description: 'planned → submitted → confirmed, or failed (failure_reason)' }),
    failure_reason: z.string().nullable(),
    transaction_id: Id.nullable(),
    tx_hash: z.string().nullable(),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .openapi('ConsolidationSweep');
