import { CHAIN_IDS } from '../catalogue/service';
import { chainAddressBody } from '../chains/schemas';
import { ListQuery } from '../shared/pagination';
import { text, Timestamp, trimmedText, z } from '../shared/schemas';

export const AddressBookEntryParams = z.object({ id: text(1, 64) });

export const AddressBookListQuery = ListQuery.extend({
  chain: z.enum(CHAIN_IDS).optional().openapi({ description: 'Only the entries of this chain' }),
});

export const CreateAddressBookEntryBody = chainAddressBody(
  { label: trimmedText(1, 255).openapi({ description: 'What the destination is, e.g. "Kraken deposit"' }) },
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
    usable_at: Timestamp.openapi({
      description:
        "From when whitelist policies (in_address_book, not_in_address_book) and consolidation runs count the entry: created_at plus the organization's cooling period " +
        'for the environment (default 24 h live, 0 sandbox), or earlier once an approval request (POST /v1/address-book/{id}/approval-requests) is approved',
    }),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .openapi('AddressBookEntry');

export const DeletedAddressBookEntryObject = AddressBookEntryObject.extend({
  deleted: z.literal(true),
}).openapi('DeletedAddressBookEntry');

export const EntryApprovalBody = z
  .object({
    comment: text(0, 500).optional(),
    expiry_hours: z.number().int().min(1).max(720).optional().openapi({ description: 'Approval window; default POLICY_ACTIVATION_EXPIRY_HOURS (72)' }),
  })
  .strict()
  .openapi('AddressBookEntryApprovalRequest');

export const PendingEntryApprovalObject = z
  .object({
    status: z.literal('pending_authorization'),
    address_book_entry_id: z.string().uuid(),
    approval_request_id: z.string(),
    workflow_id: z.string().openapi({ description: 'address-book-entry-approval-<approval_request_id>, for its history in the Temporal UI' }),
    required_approvals: z.number().int(),
    expires_at: Timestamp,
    usable_at: Timestamp.openapi({ description: "The entry's usable_at until the request is approved" }),
    message: z.string(),
  })
  .openapi('PendingAddressBookEntryApproval');
