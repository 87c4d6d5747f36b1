import type { EntityManager } from '@mikro-orm/postgresql';
import { secp256k1 } from '@noble/curves/secp256k1';
import type { Environment } from '../api-keys/entities';
import type { KeyService } from '../keys/service';
import { findOneByColumns } from '../db/lean';
import { perDatabase } from '../db/per-database';
import { LightningNodeKey } from './entities';

/** GCM associated data: a node key ciphertext opens only for its environment. */
const dataKeyContext = (environment: Environment) => `custody-platform/lightning-node-data-key/v1/${environment}`;
const privateKeyContext = (environment: Environment) => `custody-platform/lightning-node-key/v1/${environment}`;

/** The environment's node key, created on first use; concurrent first uses converge on one row. */
export async function ensureNodeKey(em: EntityManager, keys: KeyService, environment: Environment): Promise<LightningNodeKey> {
  const existing = await em.findOne(LightningNodeKey, { environment });
  if (existing) return existing;
  const privateKey = secp256k1.utils.randomPrivateKey();
  try {
    const sealed = await keys.seal(privateKey, dataKeyContext(environment), privateKeyContext(environment));
    const context = em.getTransactionContext<object>();
    if (context) creatingTransactions.add(context);
    await em.execute(
      `insert into lightning_node_keys (id, environment, public_key, key_provider, master_key_id, wrapped_data_key, private_key_ciphertext, created_at)
       values (?, ?, ?, ?, ?, ?, ?, now()) on conflict (environment) do nothing`,
      [new LightningNodeKey().id, environment, Buffer.from(secp256k1.getPublicKey(privateKey, true)).toString('hex'), sealed.keyProvider, sealed.masterKeyId, sealed.wrappedDataKey, sealed.ciphertext],
    );
  } finally {
    privateKey.fill(0);
  }
  return em.findOneOrFail(LightningNodeKey, { environment });
}

/** Hands the node's private key to `use` and wipes it when `use` returns. */
export async function withNodeKey<T>(em: EntityManager, keys: KeyService, environment: Environment, use: (privateKey: Uint8Array, publicKey: string) => T): Promise<T> {
  const record = await ensureNodeKey(em, keys, environment);
  const privateKey = await keys.open(
    { keyProvider: record.keyProvider, masterKeyId: record.masterKeyId, wrappedDataKey: record.wrappedDataKey, ciphertext: record.privateKeyCiphertext },
    dataKeyContext(environment),
    privateKeyContext(environment),
  );
  try {
    return use(privateKey, record.publicKey);
  } finally {
    privateKey.fill(0);
  }
}

/**
 * The public keys read so far, per database (its ORM's configuration) and environment. A node key row
 * never changes once it exists, so what a read found stays true; a missing key is not remembered (the
 * first invoice may be about to create it).
 */
const knownPublicKeys = new WeakMap<object, Map<Environment, string>>();
/** Transactions that inserted a node key: until they commit, what they read of it is not yet true. */
const creatingTransactions = new WeakSet<object>();

/** Our node's public key in this environment, or null while no invoice was ever issued there. */
export async function nodePublicKey(em: EntityManager, environment: Environment): Promise<string | null> {
  const known = perDatabase(knownPublicKeys, em, () => new Map<Environment, string>());
  const cached = known.get(environment);
  if (cached) return cached;
  const publicKey = (await findOneByColumns(em, LightningNodeKey, { environment }))?.publicKey ?? null;
  // Only a committed row is remembered: one this very transaction inserted could still roll back.
  const context = em.getTransactionContext<object>();
  if (publicKey && !(context && creatingTransactions.has(context))) known.set(environment, publicKey);
  return publicKey;
}
