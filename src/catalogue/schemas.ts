import { text, z } from '../shared/schemas';
import { CHAIN_IDS } from './service';

export const ChainObject = z
  .object({
    id: z.enum(CHAIN_IDS),
    object: z.literal('chain'),
    name: z.string().openapi({ description: 'Currently equal to id' }),
    networks: z.array(z.string()),
    network: z.string().openapi({ description: "The network this key's environment uses" }),
    native_asset_id: z.string(),
  })
  .openapi('Chain');

export const AssetObject = z
  .object({
    id: z.string().openapi({ example: 'USDC_ETH' }),
    object: z.literal('asset'),
    symbol: z.string(),
    name: z.string(),
    chain: z.enum(CHAIN_IDS),
    type: z.enum(['native', 'erc20', 'trc20', 'spl']),
    decimals: z.number().int(),
  })
  .openapi('Asset');

export const ChainParams = z.object({ chain: text(1, 32) });
export const AssetQuery = z.object({ chain: z.enum(CHAIN_IDS).optional() });

/** Catalogue lists are short and fixed, so they come whole: `has_more` is always false. */
export const catalogueList = <T>(data: T[]) => ({ object: 'list' as const, data, has_more: false, next_cursor: null });
