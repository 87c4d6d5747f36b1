import { CHAIN_IDS } from '../catalogue/service';
import { chainAddressBody } from '../chains/schemas';
import { ListQuery } from '../shared/pagination';
import { Timestamp, z } from '../shared/schemas';

export const AddressBookEntryParams = z.object({ id: z.string().min(1).max(64) });

export const AddressBookListQuery = ListQuery.extend({
  chain: z.enum(CHAIN_IDS).optional().openapi({ description: 'Only the entries of this chain' }),
});

export const CreateAddressBookEntryBody = chainAddressBody(
  { label: z.string().trim().min(1).max(255).openapi({ description: 'What the destination is, e.g. "Kraken deposit"' }) },
  { addressDescription: "An address of the chain on the key's environment's network (sandbox: the testnet), stored in its canonical form" },
).openapi('CreateAddressBookEntryRequest');

export const AddressBookEntryObject = z
  .object({
    id: z.string().uuid(),
    object: z.literal('address_book_entry'),
    chain: z.enum(CHAIN_IDS),
    network: z.string().openapi({ description: "The chain's network of the environment", example: 'sepolia' }),
    address: z.string().openapi({ description: 'Canonical: EIP-55 on Ethereum, lower-case bech32 on Bitcoin' }),
    label: z.string(),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .openapi('AddressBookEntry');

export const DeletedAddressBookEntryObject = AddressBookEntryObject.extend({
  deleted: z.literal(true),
}).openapi('DeletedAddressBookEntry');
