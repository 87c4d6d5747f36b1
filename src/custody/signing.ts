import { randomUUID } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { sha256 } from '@noble/hashes/sha256';
import { keccak_256 } from '@noble/hashes/sha3';
import { bytesToHex } from '@noble/hashes/utils';
import { assetById, findChain, type ChainId } from '../catalogue/service';
import type { AuthContext } from '../api-keys/auth-context';
import type { ChainNodes } from '../chains/nodes';
import { tokenAssetAt } from '../chains/tokens';
import { errors } from '../shared/errors';
import { curveOf, type Curve } from '../keys/derivation';
import type { Config } from '../config';
import { judgeMovement, type WalletMovement } from '../movements/gate';
import type { TxType } from '../policies/schema';
import type { WorkflowStarter } from '../temporal/starter';
import { Address, Wallet, type HashFunction } from './entities';
import { findAddress, findPrimaryAddress, findWallet } from './service';
import type { Signer } from './signer';
import { decodeSignedPayload, readPsbt, readTypedData, type DecodedSignedPayload, type SignedPayloadKind } from './signed-payloads';

export type PayloadEncoding = 'hexadecimal' | 'text_utf8';

export interface SignPayloadInput {
  payload: string;
  payload_encoding: PayloadEncoding;
  hash_function?: HashFunction;
  address_id?: string;
  /** With hash_function psbt: the PSBT input the key signs. */
  input_index?: number;
}

/** What each chain's own signing convention hashes with, when the caller does not say. */
const DEFAULT_HASH_FUNCTION: Record<ChainId, HashFunction> = {
  bitcoin: 'sha256',
  ethereum: 'keccak256',
  tron: 'keccak256',
  solana: 'not_applicable',
};

const HEX_PAYLOAD = /^(0x)?((?:[0-9a-fA-F]{2})+)$/;

export function decodePayload(payload: string, encoding: PayloadEncoding): Uint8Array {
  if (encoding === 'text_utf8') return new TextEncoder().encode(payload);
  const match = HEX_PAYLOAD.exec(payload);
  if (!match) {
    throw errors.validation(
      'payload is not hexadecimal: give an even number of 0-9/a-f characters (an optional 0x prefix is allowed), or set payload_encoding to text_utf8.',
      'payload',
    );
  }
  return Uint8Array.from(Buffer.from(match[2]!, 'hex'));
}

/**
 * The bytes the key signs. secp256k1 (ECDSA) always signs a 32-byte digest: sha256 or keccak256
 * of the payload, or with no_op the payload itself, which must then be a 32-byte digest.
 * ed25519 (EdDSA) hashes internally: not_applicable and no_op sign the payload bytes as they are.
 */
export function bytesToSign(curve: Curve, hashFunction: Exclude<HashFunction, 'eip712' | 'psbt'>, payload: Uint8Array): Uint8Array {
  if (hashFunction === 'sha256') return sha256(payload);
  if (hashFunction === 'keccak256') return keccak_256(payload);
  if (curve === 'ed25519') return payload;
  if (hashFunction === 'not_applicable') {
    throw errors.validation(
      'hash_function not_applicable is for ed25519 (Solana) keys. secp256k1 signs a 32-byte digest: choose sha256 or keccak256, or no_op with a 32-byte payload.',
      'hash_function',
    );
  }
  if (payload.length !== 32) {
    throw errors.validation(
      `hash_function no_op signs the payload as given, and secp256k1 signs exactly 32 bytes (a digest); this payload decodes to ${payload.length} bytes. Pass a 32-byte digest, or choose sha256 or keccak256.`,
      'payload',
      { payload_bytes: payload.length, required_bytes: 32 },
    );
  }
  return payload;
}

/** The bytes signed and what they authorize: typed data by its EIP-712 digest, a PSBT by its input's sighash, anything else as `bytesToSign` hashes it. */
async function readPayload(em: EntityManager, wallet: Wallet, address: Address, hashFunction: HashFunction, payload: Uint8Array, input: SignPayloadInput): Promise<{ message: Uint8Array; decoded: DecodedSignedPayload }> {
  const chain = wallet.chain;
  if ((hashFunction === 'psbt') !== (input.input_index !== undefined)) {
    throw errors.validation(hashFunction === 'psbt' ? 'hash_function psbt signs one input of the PSBT: give its input_index.' : 'input_index names the PSBT input signed with hash_function psbt; leave it out otherwise.', 'input_index');
  }
  if (hashFunction === 'psbt') {
    if (chain !== 'bitcoin') throw errors.validation('hash_function psbt signs an input of a Bitcoin PSBT; this wallet is not a Bitcoin wallet.', 'hash_function');
    const own = await em.find(Address, { wallet }, { fields: ['address'] });
    const signer = { environment: wallet.environment, address: address.address, ownAddresses: new Set(own.map((row) => row.address)) };
    const { sighash, decoded } = readPsbt(payload, input.payload_encoding === 'text_utf8', input.input_index!, signer);
    return { message: sighash, decoded };
  }
  if (hashFunction !== 'eip712') return { message: bytesToSign(curveOf(chain), hashFunction, payload), decoded: decodeSignedPayload(chain, hashFunction, payload) };
  if (chain !== 'ethereum') throw errors.validation('hash_function eip712 signs EIP-712 typed data, which Ethereum keys sign; this wallet is not an Ethereum wallet.', 'hash_function');
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(payload);
  } catch {
    throw errors.validation('With hash_function eip712 the payload is the JSON of the typed data: it does not decode as UTF-8 text.', 'payload');
  }
  const { digest, decoded } = readTypedData(text);
  return { message: digest, decoded };
}

/**
 * A payload naming an EVM chain is signed only for the wallet's network: the gate judged it by this
 * network's assets and prices, and the same key holds the same address on every EVM chain. One valid
 * on every chain (chain id 0) is refused too. 400 on `payload`.
 */
async function assertChainIdOfNetwork(em: EntityManager, chains: ChainNodes, wallet: Wallet, payloadChainId: bigint): Promise<void> {
  const { chainId } = await chains.networkIdentity(wallet.chain, wallet.environment, em);
  if (chainId !== undefined && payloadChainId === BigInt(chainId)) return;
  const valid = payloadChainId === 0n ? 'on every chain (it names no chain id)' : `on chain id ${payloadChainId}`;
  throw errors.validation(`payload is valid ${valid}; this wallet's network (${wallet.network}) is chain id ${chainId}. Sign a payload for chain id ${chainId}.`, 'payload', {
    payload_chain_id: payloadChainId.toString(),
    network_chain_id: chainId ?? null,
  });
}

const SIGNATURE_TX_TYPES: Record<SignedPayloadKind, TxType> = {
  evm_transaction: 'transaction_signature',
  tron_transaction: 'transaction_signature',
  solana_message: 'transaction_signature',
  bitcoin_psbt: 'transaction_signature',
  eip712_typed_data: 'typed_data_signature',
  eip7702_authorization: 'authorization_signature',
  unknown: 'message_signature',
};

/** What the gate is told a decoded payload moves: its destination, its value when the asset is in the catalogue, else the token contract and base units alone. */
async function signatureMovement(em: EntityManager, chains: ChainNodes, wallet: Wallet, decoded: DecodedSignedPayload): Promise<Pick<WalletMovement, 'destination' | 'value' | 'authorizes' | 'feeRaw'>> {
  const { destination, spender, asset: moved, amount, fee } = decoded;
  const tokenAddress = moved && 'contract' in moved ? moved.contract : undefined;
  const asset = !moved ? undefined : tokenAddress ? await tokenAssetAt(em, chains, wallet.chain, wallet.environment, tokenAddress) : assetById(findChain(wallet.chain).nativeAssetId);
  return {
    ...(destination ? { destination: { address: destination } } : {}),
    ...(asset && amount !== undefined ? { value: { asset, amount } } : {}),
    ...(fee !== undefined ? { feeRaw: fee } : {}),
    authorizes: { ...(tokenAddress ? { tokenAddress } : {}), ...(!asset && amount !== undefined ? { amountRaw: amount } : {}), ...(spender ? { spender } : {}) },
  };
}

/** What signPayload needs of the process: the gate's configuration, the nodes, the transactions and the signer. */
export interface SignPayloadDeps {
  config: Config;
  chains: ChainNodes;
  starter: Pick<WorkflowStarter, 'transaction'>;
  signer: Signer;
}

/**
 * Signs with the key of one of the wallet's addresses and records the activity; returns the
 * Signature resource. A signature can spend the address, so the movement gate judges it first, as
 * it judges sends, by what the payload authorizes (signed-payloads/): a transaction's, typed
 * data's or PSBT's destination, amount, asset and spender. What does not decode has destination_type unknown
 * and no value (price_unavailable), and block, approval and delay rules take conditions on them to
 * hold. operation_type `sign_raw` for bytes signed as given that decode to nothing (a digest with
 * no_op; ed25519 bytes that are no message it reads), which in live only a rule naming sign_raw lets
 * through; `sign` otherwise. Block 403, approval or delay 400 with their details, alert allowed and audited.
 * The judgement commits first; the signer (the worker, when this process holds no seed key) signs with no
 * transaction open here, and writes the activity row with the signature.
 */
export async function signPayload(em: EntityManager, deps: SignPayloadDeps, auth: AuthContext, walletId: string, input: SignPayloadInput) {
  const judged = await deps.starter.transaction(em, async (tx) => {
    const wallet = await findWallet(tx, auth, walletId);
    const address = input.address_id ? await findAddress(tx, auth, input.address_id, 'address_id', wallet) : await findPrimaryAddress(tx, wallet);
    const hashFunction = input.hash_function ?? DEFAULT_HASH_FUNCTION[wallet.chain];
    const payload = decodePayload(input.payload, input.payload_encoding);
    const { message, decoded } = await readPayload(tx, wallet, address, hashFunction, payload, input);
    if (decoded.chainId !== undefined) await assertChainIdOfNetwork(tx, deps.chains, wallet, decoded.chainId);
    const raw = decoded.kind === 'unknown' && (hashFunction === 'no_op' || hashFunction === 'not_applicable');
    await judgeMovement(tx, deps.config, auth, {
      operationType: raw ? 'sign_raw' : 'sign',
      txType: raw ? 'raw_signature' : SIGNATURE_TX_TYPES[decoded.kind],
      wallet,
      fromAddress: address.address,
      ...(await signatureMovement(tx, deps.chains, wallet, decoded)),
      ...(raw && wallet.environment === 'live' ? { namedAllowRequired: true } : {}),
    });
    return { wallet, address, hashFunction, payload, message };
  });
  const { wallet, address, hashFunction, payload, message } = judged;
  const curve = curveOf(wallet.chain);

  const signatureId = randomUUID();
  const signed = await deps.signer.sign({
    signatureId,
    organizationId: auth.organizationId,
    environment: auth.environment,
    walletId: wallet.id,
    addressId: address.id,
    message: bytesToHex(message),
    apiKeyId: auth.apiKeyId,
    hashFunction,
    payloadSha256: bytesToHex(sha256(payload)),
  });

  return {
    object: 'signature' as const,
    activity_id: signatureId,
    address: address.address,
    address_id: address.id,
    wallet_id: wallet.id,
    chain: wallet.chain,
    network: wallet.network,
    algorithm: curve === 'ed25519' ? ('eddsa' as const) : ('ecdsa' as const),
    curve,
    hash_function: hashFunction,
    payload: input.payload,
    payload_encoding: input.payload_encoding,
    signed_payload: bytesToHex(message),
    signed_payload_encoding: 'hexadecimal' as const,
    signature: signed.bytes,
    signature_encoding: 'hexadecimal' as const,
    signature_format: curve === 'ed25519' ? ('ed25519_64' as const) : ('secp256k1_recoverable_65' as const),
    r: signed.r,
    s: signed.s,
    v: curve === 'ed25519' ? 0 : 27 + signed.recoveryId,
    recovery_id: signed.recoveryId,
    public_key: signed.publicKey,
    signed_at: signed.signedAt,
  };
}
