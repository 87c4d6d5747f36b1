import { CHAIN_IDS, findChain } from '../catalogue/service';
import { ADDRESS_PATTERNS } from '../chains/schemas';
import { SPONSORABLE_CHAINS } from './signed-transfers';
import { PendingChangeObject } from '../policies/governance-schemas';
import { ListQuery } from '../shared/pagination';
import { BaseUnitAmount, DeprecatedNetwork, DisplayAmount, PositiveDisplayAmount, text, Timestamp, trimmedText, z } from '../shared/schemas';
import { FUNDING_MODELS, GAS_STATION_STATUSES, GAS_STRATEGIES, SPONSORSHIP_STATUSES } from './entities';

const Name = trimmedText(1, 255);
const Strategy = z.enum(GAS_STRATEGIES).openapi({ description: 'Fee level the station pays at: economy (low), standard (medium, default), fast (high)' });
const MaxGasPrice = DisplayAmount.openapi({
  description:
    "Ceiling on the fee rate the station pays, in the chain's fee_unit of GET /v1/chains/:chain/fees (gwei per gas, sat/vB, the whole fee in sun or lamports). " +
    "Omitted: the deployment's default for the chain (GAS_STATION_DEFAULT_MAX_GAS_PRICE_<CHAIN>); never null",
});
const WalletId = z.string().uuid();
const DailyBudget = DisplayAmount.openapi({
  description:
    'The most native coin (display units) the station may spend on sponsorship per UTC day: the fees it pays plus its own fees for sending them. ' +
    "Omitted: the deployment's default for the chain (GAS_STATION_DEFAULT_DAILY_BUDGET_<CHAIN>); never null",
});

export const GasStationParams = z.object({ id: text(1, 64) });
export const GasStationListQuery = ListQuery;

export const CreateGasStationBody = z
  .object({
    name: Name,
    chain: z.enum(CHAIN_IDS),
    threshold: DisplayAmount.openapi({ description: 'Balance (display units of the native coin) below which the station is low and auto-refill triggers' }),
    auto_refill_enabled: z.boolean().optional(),
    gas_strategy: Strategy.optional(),
    max_gas_price: MaxGasPrice.optional(),
    daily_sponsorship_budget: DailyBudget.optional(),
    refill_amount: PositiveDisplayAmount.optional().openapi({ description: 'What one refill sends (display units); needed with auto_refill_enabled' }),
    refill_from_wallet_id: WalletId.optional().openapi({ description: 'A wallet of the same organization, environment and chain; needed with auto_refill_enabled' }),
    network: DeprecatedNetwork,
  })
  .strict()
  .openapi('CreateGasStationRequest');

export const UpdateGasStationBody = z
  .object({
    name: Name.optional(),
    threshold: DisplayAmount.optional(),
    auto_refill_enabled: z.boolean().optional(),
    gas_strategy: Strategy.optional(),
    max_gas_price: MaxGasPrice.optional(),
    daily_sponsorship_budget: DailyBudget.optional(),
    refill_amount: PositiveDisplayAmount.nullable().optional(),
    refill_from_wallet_id: WalletId.nullable().optional(),
  })
  .strict()
  .openapi('UpdateGasStationRequest');

export const RefillGasStationBody = z
  .object({
    source_wallet_id: WalletId,
    amount: PositiveDisplayAmount.openapi({ description: 'Native coin to send to the station, display units' }),
  })
  .strict()
  .openapi('RefillGasStationRequest');

export const GasStationObject = z
  .object({
    id: z.string().uuid(),
    object: z.literal('gas_station'),
    name: z.string(),
    chain: z.enum(CHAIN_IDS),
    network: z.string(),
    address: z.string().openapi({ description: "The station's address (its wallet's primary address): send native coin here to fund it" }),
    wallet_id: z.string().uuid().openapi({ description: 'The operational custody wallet holding the funds, in the "Gas stations" vault' }),
    asset: z.string().openapi({ example: 'ETH' }),
    asset_decimals: z.number().int(),
    balance: BaseUnitAmount,
    balance_source: z.enum(['chain', 'ledger']).openapi({ description: "chain: read from the node now; ledger: the wallet's ledger, when no node answered, and in the answer to the create (a new address)" }),
    auto_refill_enabled: z.boolean(),
    gas_strategy: z.enum(GAS_STRATEGIES),
    max_gas_price: z.string().openapi({ description: "What applies: the station's own, else the deployment's default for the chain" }),
    daily_sponsorship_budget: z.string().openapi({ description: "What applies, display units: the station's own, else the deployment's default for the chain" }),
    daily_sponsorship_budget_raw: BaseUnitAmount,
    threshold: z.string(),
    threshold_raw: BaseUnitAmount,
    refill_amount: z.string().nullable(),
    refill_amount_raw: BaseUnitAmount.nullable(),
    refill_from_wallet_id: z.string().uuid().nullable(),
    health_status: z.enum(['healthy', 'low']),
    status: z.enum(GAS_STATION_STATUSES),
    automation_paused_at: Timestamp.nullable().openapi({
      description: 'When revoking the key the station acts for paused its automatic refills (event automation.paused); null: running. POST /v1/gas-stations/:id/take-over resumes them.',
    }),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .openapi('GasStation');

export const PendingStationLimitsObject = PendingChangeObject.extend({
  gas_station_id: z.string().uuid(),
  gas_station: GasStationObject.openapi({ description: 'The station as it is now: the other fields of the PATCH applied, the raised limits not yet' }),
}).openapi('PendingGasStationLimits');

/**
 * Document-only hints of what a sponsored broadcast can name (the service answers 400 naming the field
 * for anything else, with its own codes: sponsorship_unsupported, network_mismatch): an Ethereum or
 * Tron address, and one of their networks. That the signed transaction matches the claims, and the
 * network the key's environment, no document can say.
 */
const SPONSORABLE_ADDRESS = `^(${SPONSORABLE_CHAINS.map((chain) => ADDRESS_PATTERNS[chain].source.slice(1, -1)).join('|')})$`;
const SPONSORABLE_NETWORKS = [...new Set(SPONSORABLE_CHAINS.flatMap((chain) => Object.values(findChain(chain).networks)))];

export const SponsorBroadcastBody = z
  .object({
    from_address: z
      .string()
      .trim()
      .min(1)
      .max(128)
      .openapi({ description: 'The signer: an Ethereum (0x…) or Tron (T…) address; the fuel goes here', pattern: SPONSORABLE_ADDRESS }),
    to_address: z
      .string()
      .trim()
      .min(1)
      .max(128)
      .openapi({ description: 'The recipient the signed transaction pays (of the token transfer, for a token)', pattern: SPONSORABLE_ADDRESS }),
    asset: trimmedText(1, 32).openapi({ description: 'A symbol of the chain (USDT) or an asset id (USDT_TRX)', example: 'USDT' }),
    amount: PositiveDisplayAmount.openapi({ description: 'What the signed transaction moves, display units, exactly' }),
    network: z
      .string()
      .trim()
      .min(1)
      .max(32)
      .openapi({ description: "The chain's network of the key's environment (sandbox: sepolia, nile; live: mainnet)", enum: SPONSORABLE_NETWORKS, example: 'nile' }),
    signed_tx: z
      .string()
      .trim()
      .min(2)
      .max(65_536)
      .regex(/^(0x)?([0-9a-fA-F]{2})+$/, 'signed_tx must be the hex of a signed transaction')
      .openapi({ description: 'The client-signed raw transaction, hex: an EIP-1559 (type 2) Ethereum transaction, or the protobuf bytes of a Tron transaction' }),
    fee_level: z.enum(['low', 'medium', 'high']).optional().openapi({ description: "The fee level of the station's fuel send (its gas_strategy's when omitted)" }),
    tx_hash: trimmedText(1, 80).optional().openapi({ description: 'The hash the client expects; 400 when the signed transaction has another' }),
  })
  .strict()
  .openapi('SponsorBroadcastRequest');

export const SponsorBroadcastParams = z.object({ id: text(1, 64) });

export const SponsorBroadcastObject = z
  .object({
    id: z.string().uuid(),
    object: z.literal('sponsor_broadcast'),
    status: z.enum(SPONSORSHIP_STATUSES).openapi({
      description: "funding (the fuel is on its way), broadcasting (fuel confirmed; the client's transaction is broadcast and followed), confirmed, failed",
    }),
    broadcast_accepted: z.boolean().openapi({ description: "A node has accepted the client's transaction" }),
    tx_hash: z.string().openapi({ description: "The client's transaction, as the chain prints it" }),
    chain: z.enum(CHAIN_IDS),
    mode: z.enum(FUNDING_MODELS).openapi({ description: "customer_gas_station: the organization's station paid; provider_sponsorship: the platform's" }),
    gas_station_id: z.string().uuid().nullable().openapi({ description: "The organization's station that paid; null when the platform's sponsorship did" }),
    sponsor_tx_id: z.string().uuid().openapi({ description: "The station's fuel send (a transaction of the paying station's organization)" }),
    root_sponsor_tx_id: z.string().uuid().openapi({ description: 'The originating sponsorship of a chain of them; sponsorships are not chained here, so the same as sponsor_tx_id' }),
    sponsor_amount_sun: BaseUnitAmount.nullable().openapi({ description: 'Tron: the fuel in sun; null elsewhere' }),
    sponsor_amount_trx: z.string().nullable().openapi({ description: 'Tron: the fuel in TRX; null elsewhere' }),
    sponsor_amount: z.string().openapi({ description: "The fuel in the chain's native coin, display units" }),
    sponsor_amount_raw: BaseUnitAmount,
    sponsor_asset_id: z.string().openapi({ example: 'TRX' }),
    failure_reason: z.string().nullable(),
    failure_message: z.string().nullable(),
    workflow_id: z.string().openapi({ description: 'sponsorship-<id>' }),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .openapi('SponsorBroadcast');
