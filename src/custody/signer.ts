import { randomUUID } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { sha256 } from '@noble/hashes/sha256';
import { bytesToHex, hexToBytes } from '@noble/hashes/utils';
import type { Orm } from '../db/orm';
import { storePublicKeys, type PublicKeysRequest, type StoredPublicKeys } from '../keys/public-keys';
import type { KeyService } from '../keys/service';
import { curveOf } from '../keys/derivation';
import { signWithKey } from '../keys/signing';
import { errors } from '../shared/errors';
import { iso } from '../shared/time';
import type { WorkflowStarter } from '../temporal/starter';
import { Address, Wallet } from './entities';
import { seedPublicKeysFlow, walletSignatureFlow, type WalletSignature, type WalletSignatureInput } from './flows/signer';
import { keyLocation } from './service';

/**
 * What only a process holding the seed key does, as the API asks for it (docs/custody.md, "Key custody"):
 * in-process where the process holds the seed key (outside production without SEED_KEY_FALLBACK=none),
 * else through a short workflow on the worker. Either way only public data comes back.
 */
export interface Signer {
  /** Stores the public side of hardened nodes of a seed (account xpubs, Solana public keys) for public derivation. */
  storePublicKeys(request: PublicKeysRequest): Promise<StoredPublicKeys>;
  sign(input: WalletSignatureInput): Promise<WalletSignature>;
}

/**
 * The signer's signature: the key of the wallet's address, checked against the stored address, signs
 * `message`, and the activity row is written in the same transaction (a retried attempt finds it and
 * signs the same bytes again: RFC 6979 and ed25519 are deterministic). The key is wiped when done; the
 * wallet is looked up by organization and environment.
 */
export async function signWithAddressKey(em: EntityManager, keys: KeyService, input: WalletSignatureInput): Promise<WalletSignature> {
  const wallet = await em.findOne(Wallet, { id: input.walletId, organization: input.organizationId, environment: input.environment });
  if (!wallet) throw errors.notFound('wallet', input.walletId, 'id');
  const address = await em.findOne(Address, { id: input.addressId, wallet });
  if (!address) throw errors.notFound('address', input.addressId, 'address_id');
  const location = keyLocation(wallet, address.format, address.addressIndex);
  const message = hexToBytes(input.message);
  const signed = await keys.withKeys(em, input.organizationId, input.environment, [location], ([key], seed) => {
    // A key that does not give the stored address means a wrong seed or master key: never sign with it.
    if (key!.address !== address.address || key!.path !== address.derivationPath) throw new Error(`address ${address.id} does not match its derived key`);
    const signature = signWithKey(key!, message);
    return { r: bytesToHex(signature.r), s: bytesToHex(signature.s), recoveryId: signature.recoveryId, bytes: bytesToHex(signature.bytes), publicKey: bytesToHex(key!.publicKey), seedId: seed.id, path: key!.path };
  });
  const [recorded] = await em.execute<{ created_at: Date }[]>(
    `insert into signing_activities (id, organization_id, wallet_id, address_id, api_key_id, seed_id, derivation_path, curve, hash_function, payload_sha256, signed_payload_sha256, created_at)
     values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, now())
     on conflict (id) do update set id = excluded.id returning created_at`,
    [input.signatureId, input.organizationId, wallet.id, address.id, input.apiKeyId, signed.seedId, signed.path, curveOf(wallet.chain), input.hashFunction, input.payloadSha256, bytesToHex(sha256(message))],
  );
  return { r: signed.r, s: signed.s, recoveryId: signed.recoveryId, bytes: signed.bytes, publicKey: signed.publicKey, signedAt: iso(new Date(recorded!.created_at)) };
}

/** The signer of a process that holds the seed key: the same work as the worker's activities, here. */
export const inProcessSigner = (orm: Orm, keys: KeyService): Signer => ({
  storePublicKeys: (request) => orm.em.fork().transactional((em) => storePublicKeys(em, keys, request)),
  sign: (input) => orm.em.fork().transactional((em) => signWithAddressKey(em, keys, input)),
});

/** The signer of a process that holds no seed key (the API in production): the worker's, through a workflow each. */
export const workflowSigner = (orm: Orm, starter: WorkflowStarter): Signer => ({
  storePublicKeys: (request) => starter.run(orm.em.fork(), seedPublicKeysFlow, { ...request, requestId: randomUUID() }, request.organizationId),
  sign: (input) => starter.run(orm.em.fork(), walletSignatureFlow, input, input.organizationId),
});

/** This process's signer: itself when it holds the seed key, else the worker. */
export const signerFor = (orm: Orm, keys: KeyService, starter: WorkflowStarter): Signer => (keys.signer ? inProcessSigner(orm, keys) : workflowSigner(orm, starter));
