import { CHAIN_IDS, type ChainId } from '../catalogue/service';
import { z } from '../shared/schemas';
import { JsonRpcRequestSchema } from './json-rpc';
import { withArticle } from '../shared/articles';

const BASE58 = '1-9A-HJ-NP-Za-km-z';
/** The 32 characters of bech32's data part (BIP-173), lower case. */
export const BECH32_CHARSET = 'qpzry9x8gf2tvdw0s3jn54khce6mua7l';

/**
 * The shape of an address of each chain on any of its networks, live or sandbox: what
 * `canonicalAddress` (chains/addresses.ts) can accept, so the document shows it and a malformed address
 * is refused before any service reads it. Which network, the checksum and the decoded length stay
 * with `canonicalAddress` (400 on `address` too). Bitcoin: base58 P2PKH and P2SH (1, 3; testnet m, n,
 * 2) or segwit bech32 (bc1, tb1; any case: it is lower-cased); Ethereum: 0x and 40 hex digits in
 * any case; Tron: T and 33 base58 (a 0x41 account); Solana: 32 to 44 base58 (32 bytes).
 */
export const ADDRESS_PATTERNS: Record<ChainId, RegExp> = {
  bitcoin: new RegExp(`^([13mn2][${BASE58}]{24,34}|([bB][cC]|[tT][bB])1[${BECH32_CHARSET}${BECH32_CHARSET.toUpperCase()}]{11,71})$`),
  ethereum: /^0x[0-9a-fA-F]{40}$/,
  tron: new RegExp(`^T[${BASE58}]{33}$`),
  solana: new RegExp(`^[${BASE58}]{32,44}$`),
};

/**
 * A create body naming a `chain` and an `address` on it (trimmed, at most 128 characters): one strict
 * object per chain (a discriminated union), so each chain's address carries its own pattern in the
 * document and in validation. `perChain` adds the fields whose values depend on the chain.
 */
export function chainAddressBody<S extends z.ZodRawShape, P extends z.ZodRawShape = Record<never, never>>(
  shape: S,
  options: { addressDescription?: string; perChain?: (chain: ChainId) => P } = {},
) {
  const variant = <C extends ChainId>(chain: C) => {
    const address = z.string().trim().min(1).max(128).regex(ADDRESS_PATTERNS[chain], `must be ${withArticle(chain)} address`);
    return z
      .object({
        chain: z.literal(chain),
        address: options.addressDescription ? address.openapi({ description: options.addressDescription }) : address,
        ...shape,
        ...(options.perChain?.(chain) as P),
      })
      .strict();
  };
  return z.discriminatedUnion('chain', [variant('bitcoin'), variant('ethereum'), variant('tron'), variant('solana')]);
}

const decimal = (description: string) => z.string().regex(/^(0|[1-9]\d*)(\.\d+)?$/).openapi({ description });

const FeeTierObject = z
  .object({
    base_fee: decimal('Base fee per gas of the next block, in fee_unit').nullable(),
    priority_fee: decimal('Priority fee (tip) per gas, in fee_unit').nullable(),
    gas_price: decimal('base_fee + priority_fee, in fee_unit').nullable(),
    fee_per_byte: decimal('Fee rate per byte (sat/vB), on UTXO chains; null elsewhere').nullable(),
    network_fee: decimal('The fee of a plain native transfer at this level, in the native asset'),
    fee_usd: decimal('The network fee in USD; null when no current price is known').nullable(),
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
