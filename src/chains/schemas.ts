import { CHAIN_IDS } from '../catalogue/service';
import { z } from '../shared/schemas';
import { JsonRpcRequestSchema } from './json-rpc';

const decimal = (description: string) => z.string().regex(/^(0|[1-9]\d*)(\.\d+)?$/).openapi({ description });

const FeeTierObject = z
  .object({
    base_fee: decimal('Base fee per gas of the next block, in fee_unit').nullable(),
    priority_fee: decimal('Priority fee (tip) per gas, in fee_unit').nullable(),
    gas_price: decimal('base_fee + priority_fee, in fee_unit').nullable(),
    fee_per_byte: decimal('Fee rate per byte (sat/vB), on UTXO chains; null elsewhere').nullable(),
    network_fee: decimal('The fee of a plain native transfer at this level, in the native asset'),
    fee_usd: decimal('The network fee in USD; null while no price source is configured').nullable(),
    confirmation_time_secs: z.number().int().openapi({ description: 'Indicative time to inclusion' }),
  })
  .openapi('NetworkFeeTier');

export const NetworkFeeObject = z
  .object({
    object: z.literal('network_fee'),
    asset_id: z.string().openapi({ example: 'ETH' }),
    chain: z.enum(CHAIN_IDS),
    symbol: z.string(),
    fee_unit: z.string().openapi({ example: 'gwei' }),
    fees: z.object({ low: FeeTierObject, medium: FeeTierObject, high: FeeTierObject }),
  })
  .openapi('NetworkFee');

export const JsonRpcBody = z
  .union([JsonRpcRequestSchema, z.array(JsonRpcRequestSchema).min(1)])
  .openapi('JsonRpcRequest', { description: 'A JSON-RPC 2.0 request, or a batch of them' });

export const JsonRpcAnswer = z
  .unknown()
  .openapi('JsonRpcResponse', { description: 'A JSON-RPC 2.0 response object, or an array of them for a batch' });
