import { CHAIN_IDS } from '../catalogue/service';
import { ListQuery } from '../shared/pagination';
import { BaseUnitAmount, Timestamp, z } from '../shared/schemas';
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
    position: z.string().openapi({ description: 'Where in the transaction: out:<vout>, native, log:<index> or ix:<n>' }),
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

export const DepositParams = z.object({ id: z.string().min(1).max(64) });
