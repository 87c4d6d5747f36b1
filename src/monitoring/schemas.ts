import { ASSETS, CHAIN_IDS } from '../catalogue/service';
import { chainAddressBody } from '../chains/schemas';
import { ListQuery } from '../shared/pagination';
import { BaseUnitAmount, PositiveDisplayAmount, text, Timestamp, z } from '../shared/schemas';
import { INCOMING_TRANSFER_STATUSES } from './entities';

export const DepositObject = z
  .object({
    id: z.string().uuid(),
    object: z.literal('deposit'),
    status: z.enum(INCOMING_TRANSFER_STATUSES).openapi({ description: "pending until the chain's confirmation count, then confirmed; dropped when a reorganisation removed it first" }),
    wallet_id: z.string().uuid(),
    address_id: z.string().uuid(),
    chain: z.enum(CHAIN_IDS),
    network: z.string(),
    asset: z.string().openapi({ description: 'Asset symbol' }),
    asset_id: z.string(),
    amount: z.string().openapi({ description: 'Display units, exact decimal string' }),
    amount_raw: BaseUnitAmount.openapi({ description: 'Base units' }),
    from_address: z.string().nullable().openapi({ description: 'The sender, when the chain says (null for Bitcoin)' }),
    to_address: z.string(),
    tx_hash: z.string(),
    position: z.string().openapi({ description: 'Where in the transaction: out:<vout>, native, log:<index>, ix:<n> or ix:<n>.<k> (an instruction Solana instruction n invoked)' }),
    block_height: z.number().int().nullable(),
    block_hash: z.string().nullable(),
    confirmations: z.number().int(),
    required_confirmations: z.number().int(),
    created_at: Timestamp,
    confirmed_at: Timestamp.nullable(),
    updated_at: Timestamp,
    dropped_at: Timestamp.nullable(),
  })
  .openapi('Deposit');

export const DepositListQuery = ListQuery.extend({
  wallet_id: z.string().uuid().optional(),
  status: z.enum(INCOMING_TRANSFER_STATUSES).optional(),
});

export const DepositParams = z.object({ id: text(1, 64) });

export const SandboxDepositBody = chainAddressBody(
  { amount: PositiveDisplayAmount.openapi({ description: 'Display units, greater than zero, at most the asset\'s decimals' }) },
  {
    // What chainAsset reads: an asset id or a symbol of the chain, exactly.
    perChain: (chain) => {
      const assets = ASSETS.filter((asset) => asset.chain === chain);
      const names = [...new Set(assets.flatMap((asset) => [asset.id, asset.symbol]))] as [string, ...string[]];
      return { asset: z.enum(names).openapi({ description: "An asset id (USDC_ETH) or the chain's symbol (USDC)" }) };
    },
  },
);

export const SandboxDepositObject = z
  .object({
    object: z.literal('sandbox_deposit'),
    chain: z.enum(CHAIN_IDS),
    network: z.string(),
    address: z.string(),
    asset: z.string(),
    asset_id: z.string(),
    amount: z.string(),
    amount_raw: BaseUnitAmount,
    from_address: z.string().openapi({ description: "The devnet faucet: the simulated outside sender" }),
    tx_hash: z.string(),
    position: z.string(),
    // A union, not .nullable(): zod-to-openapi documents a nullable reference as an allOf of the
    // reference and `null`, which no null satisfies.
    deposit: z.union([DepositObject, z.null()]).openapi({ description: "The deposit it made, when the address is one of the caller's own; null otherwise" }),
  })
  .openapi('SandboxDeposit');

export const SandboxBlocksBody = z.object({ count: z.number().int().min(1).max(100) }).strict();

export const SandboxBlocksObject = z
  .object({
    object: z.literal('sandbox_blocks'),
    chain: z.enum(CHAIN_IDS),
    network: z.string(),
    mined: z.number().int(),
    height: z.number().int().openapi({ description: 'The new tip' }),
    hash: z.string(),
    scanned: z.boolean().openapi({ description: 'Whether block scanning had processed the new blocks when the response was sent' }),
  })
  .openapi('SandboxBlocks');
