import { CHAIN_IDS } from '../catalogue/service';
import { ListQuery } from '../shared/pagination';
import { BaseUnitAmount, DeprecatedNetwork, DisplayAmount, Timestamp, z } from '../shared/schemas';
import { GAS_STATION_STATUSES, GAS_STRATEGIES } from './entities';

const Name = z.string().trim().min(1).max(255);
const Strategy = z.enum(GAS_STRATEGIES).openapi({ description: 'Fee level the station pays at: economy (low), standard (medium, default), fast (high)' });
const MaxGasPrice = DisplayAmount.openapi({
  description: "Ceiling on the fee rate the station pays, in the chain's fee_unit of GET /v1/chains/:chain/fees (gwei, sat/vB, sun, lamports)",
});
const WalletId = z.string().uuid();

export const GasStationParams = z.object({ id: z.string().min(1).max(64) });
export const GasStationListQuery = ListQuery;

export const CreateGasStationBody = z
  .object({
    name: Name,
    chain: z.enum(CHAIN_IDS),
    threshold: DisplayAmount.openapi({ description: 'Balance (display units of the native coin) below which the station is low and auto-refill triggers' }),
    auto_refill_enabled: z.boolean().optional(),
    gas_strategy: Strategy.optional(),
    max_gas_price: MaxGasPrice.optional(),
    refill_amount: DisplayAmount.optional().openapi({ description: 'What one refill sends (display units); needed with auto_refill_enabled' }),
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
    max_gas_price: MaxGasPrice.nullable().optional(),
    refill_amount: DisplayAmount.nullable().optional(),
    refill_from_wallet_id: WalletId.nullable().optional(),
  })
  .strict()
  .openapi('UpdateGasStationRequest');

export const RefillGasStationBody = z
  .object({
    source_wallet_id: WalletId,
    amount: DisplayAmount.openapi({ description: 'Native coin to send to the station, display units' }),
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
    balance_source: z.enum(['chain', 'ledger']).openapi({ description: "chain: read from the node now; ledger: the wallet's ledger, when no node answered" }),
    auto_refill_enabled: z.boolean(),
    gas_strategy: z.enum(GAS_STRATEGIES),
    max_gas_price: z.string().nullable(),
    threshold: z.string(),
    threshold_raw: BaseUnitAmount,
    refill_amount: z.string().nullable(),
    refill_amount_raw: BaseUnitAmount.nullable(),
    refill_from_wallet_id: z.string().uuid().nullable(),
    health_status: z.enum(['healthy', 'low']),
    status: z.enum(GAS_STATION_STATUSES),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .openapi('GasStation');
