import { CHAIN_IDS } from '../catalogue/service';
import { ACCOUNT_ADDRESS_FORMATS, BITCOIN_ADDRESS_FORMATS } from '../keys/derivation';
import { ListQuery } from '../shared/pagination';
import { BaseUnitAmount, DeprecatedNetwork, DisplayAmount, text, Timestamp, trimmedText, z } from '../shared/schemas';
import { HASH_FUNCTIONS, WALLET_TYPES } from './entities';

export const MAX_SIGN_PAYLOAD_CHARACTERS = 65_536;

const Name = trimmedText(1, 255);
const CustomerRefId = trimmedText(1, 255).openapi({ description: 'Your own reference for this record' });

const METADATA_KEY_LENGTH = { min: 1, max: 40 };
const METADATA_MAX_KEYS = 50;
/** Stripe-like metadata: up to 50 keys of at most 40 characters, scalar values. */
const Metadata = z
  // Lengths in code points, as the document's propertyNames and maxLength count them.
  .record(text(METADATA_KEY_LENGTH.min, METADATA_KEY_LENGTH.max), z.union([text(0, 500), z.number(), z.boolean(), z.null()]))
  .refine((value) => Object.keys(value).length <= METADATA_MAX_KEYS, `at most ${METADATA_MAX_KEYS} keys`)
  .openapi({
    description: 'Your key-value data: up to 50 keys, scalar values',
    maxProperties: METADATA_MAX_KEYS,
    // JSON Schema's propertyNames (OpenAPI 3.1 has it; the generator's types do not).
    ...({ propertyNames: { minLength: METADATA_KEY_LENGTH.min, maxLength: METADATA_KEY_LENGTH.max } } as object),
  });

export const IdParams = z.object({ id: text(1, 64) });

export const VaultObject = z
  .object({
    id: z.string().uuid(),
    object: z.literal('vault'),
    name: z.string(),
    customer_ref_id: z.string().nullable(),
    metadata: Metadata,
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .openapi('Vault');

export const CreateVaultBody = z
  .object({ name: Name, customer_ref_id: CustomerRefId.optional(), metadata: Metadata.optional() })
  .strict()
  .openapi('CreateVaultRequest');

const ADDRESS_FORMATS = [...BITCOIN_ADDRESS_FORMATS, ...Object.values(ACCOUNT_ADDRESS_FORMATS)] as const;

export const AddressObject = z
  .object({
    id: z.string().uuid(),
    object: z.literal('address'),
    wallet_id: z.string().uuid(),
    chain: z.enum(CHAIN_IDS),
    network: z.string(),
    address: z.string().openapi({ description: 'On-chain address, valid for the chain and network' }),
    format: z.enum(ADDRESS_FORMATS).openapi({ description: 'p2wpkh, p2tr or p2pkh on Bitcoin; eip55, base58check or base58 on Ethereum, Tron and Solana' }),
    derivation_path: z.string().openapi({ example: "m/84'/1'/0'/0/0" }),
    is_primary: z.boolean(),
    label: z.string(),
    created_at: Timestamp,
  })
  .openapi('Address');

export const CreateAddressBody = z
  .object({
    address_format: z
      .enum(BITCOIN_ADDRESS_FORMATS)
      .optional()
      .openapi({ description: 'Bitcoin only (default p2wpkh); ignored on account-based chains' }),
    label: z.string().trim().max(255).optional(),
    network: DeprecatedNetwork,
  })
  .strict()
  .openapi('CreateAddressRequest');

export const WalletObject = z
  .object({
    id: z.string().uuid(),
    object: z.literal('wallet'),
    vault_id: z.string().uuid(),
    name: z.string(),
    chain: z.enum(CHAIN_IDS),
    network: z.string(),
    wallet_type: z.enum(WALLET_TYPES),
    customer_ref_id: z.string().nullable(),
    metadata: Metadata,
    primary_address: AddressObject,
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .openapi('Wallet');

export const CreateWalletBody = z
  .object({
    name: Name,
    chain: z.enum(CHAIN_IDS),
    vault_id: z.string().uuid(),
    wallet_type: z.enum(WALLET_TYPES).default('hot'),
    customer_ref_id: CustomerRefId.optional(),
    metadata: Metadata.optional(),
    network: DeprecatedNetwork,
  })
  .strict()
  .openapi('CreateWalletRequest');

export const WalletListQuery = ListQuery.extend({
  vault_id: z.string().uuid().optional(),
  chain: z.enum(CHAIN_IDS).optional(),
});

/** A balance amount under the API's usual names beside the specification's base-unit field: `_raw` base units, `_display` decimal. */
const balanceAmountNames = <N extends string>(name: N, meaning: string) =>
  ({
    [`${name}_raw`]: BaseUnitAmount.openapi({ description: `${name} (${meaning}) in the asset's base units, as every _raw amount` }),
    [`${name}_display`]: DisplayAmount.openapi({ description: `${name} (${meaning}) as a display decimal: ${name}_raw divided by 10^asset_decimals` }),
  }) as Record<`${N}_raw` | `${N}_display`, typeof BaseUnitAmount>;

export const BalanceObject = z
  .object({
    object: z.literal('balance'),
    wallet_id: z.string().uuid(),
    asset: z.string().openapi({ description: 'Asset symbol' }),
    asset_id: z.string(),
    asset_decimals: z.number().int(),
    chain: z.enum(CHAIN_IDS),
    network: z.string(),
    balance: BaseUnitAmount.openapi({ description: 'Total confirmed, in base units (the specification\'s field; the same as balance_raw)' }),
    available: BaseUnitAmount.openapi({ description: 'Spendable: balance minus locked, in base units (the same as available_raw)' }),
    locked: BaseUnitAmount.openapi({ description: 'Reserved by pending operations, in base units (the same as locked_raw)' }),
    pending: BaseUnitAmount.openapi({
      description: "Incoming transfers seen on chain but not yet at the chain's confirmation count; not part of balance. In base units (the same as pending_raw)",
    }),
    ...balanceAmountNames('balance', 'total confirmed'),
    ...balanceAmountNames('available', 'spendable'),
    ...balanceAmountNames('locked', 'reserved'),
    ...balanceAmountNames('pending', 'incoming, unconfirmed'),
  })
  .openapi('Balance');

export const SignPayloadBody = z
  .object({
    payload: z
      .string()
      .min(1)
      .max(MAX_SIGN_PAYLOAD_CHARACTERS)
      .openapi({ description: `At most ${MAX_SIGN_PAYLOAD_CHARACTERS} characters, encoded per payload_encoding` }),
    address_id: z.string().uuid().optional().openapi({ description: "An address of this wallet; the wallet's primary address by default" }),
    hash_function: z.enum(HASH_FUNCTIONS).optional().openapi({
      description:
        'Applied to the decoded payload before signing. Default: sha256 on Bitcoin, keccak256 on Ethereum and Tron, not_applicable on Solana. no_op signs the payload as given (a 32-byte digest for secp256k1). eip712 (Ethereum): the payload is EIP-712 typed data as JSON ({types, primaryType, domain, message}, as eth_signTypedData_v4 takes it), and its EIP-712 digest is signed. psbt (Bitcoin p2wpkh and p2pkh addresses): the payload is a BIP-174 PSBT (its bytes in hexadecimal, or its base64 text with text_utf8), and the SIGHASH_ALL sighash of the input input_index, which must spend the signing address, is signed. What the payload authorizes (a serialized transaction signed with keccak256, typed data, an EIP-7702 authorization, the outputs of a PSBT) is decoded and judged by the enforced policies first (docs/custody.md).',
    }),
    payload_encoding: z.enum(['hexadecimal', 'text_utf8']).default('hexadecimal'),
    input_index: z
      .number()
      .int()
      .min(0)
      .max(0xffff_ffff)
      .optional()
      .openapi({ description: 'With hash_function psbt (and only with it): the index of the PSBT input to sign' }),
  })
  .strict()
  .openapi('SignPayloadRequest');

export const SignatureObject = z
  .object({
    object: z.literal('signature'),
    activity_id: z.string().uuid(),
    address: z.string(),
    address_id: z.string().uuid(),
    wallet_id: z.string().uuid(),
    chain: z.enum(CHAIN_IDS),
    network: z.string(),
    algorithm: z.enum(['ecdsa', 'eddsa']),
    curve: z.enum(['secp256k1', 'ed25519']),
    hash_function: z.enum(HASH_FUNCTIONS),
    payload: z.string(),
    payload_encoding: z.enum(['hexadecimal', 'text_utf8']),
    signed_payload: z.string().openapi({ description: 'The bytes signed, after any hashing' }),
    signed_payload_encoding: z.literal('hexadecimal'),
    signature: z.string(),
    signature_encoding: z.literal('hexadecimal'),
    signature_format: z.enum(['secp256k1_recoverable_65', 'ed25519_64']).openapi({
      description: 'secp256k1_recoverable_65: r (32 bytes) || s (32 bytes, low-S) || v (1 byte, 27 + recovery_id); ed25519_64: R || S',
    }),
    r: z.string().openapi({ description: '32 bytes, hex (ed25519: R)' }),
    s: z.string().openapi({ description: '32 bytes, hex (ed25519: S)' }),
    v: z.number().int().openapi({ description: '27 + recovery_id (secp256k1); 0 for ed25519, which has no recovery' }),
    recovery_id: z.number().int().openapi({ description: '0..3 (secp256k1); 0 for ed25519' }),
    public_key: z.string().openapi({ description: 'The signing public key, hex (compressed SEC1 for secp256k1)' }),
    signed_at: Timestamp,
  })
  .openapi('Signature');
