import type { EntityManager } from '@mikro-orm/postgresql';
import { secp256k1 } from '@noble/curves/secp256k1';
import type { Environment } from '../api-keys/entities';
import { keyColumns, type SealedColumn } from '../keys/rotation';
import type { KeyService } from '../keys/service';
import { readOneByColumns } from '../db/lean';
import { perDatabase } from '../db/per-database';
import { LightningNodeKey } from './entities';

/** GCM associated data: a node key ciphertext opens only for its environment. */
const dataKeyContext = (environment: Environment) => `custody-platform/lightning-node-data-key/v1/${environment}`;
const privateKeyContext = (environment: Environment) => `custody-platform/lightning-node-key/v1/${environment}`;

/** Where keys:rotate finds the node keys' data keys. */
export const nodeKeyColumn: SealedColumn = keyColumns('lightning_node_keys', ['environment'], (row) => dataKeyContext(row.environment as Environment));

/** The environment's node key, created on first use; concurrent first uses converge on one row. */
export async function ensureNodeKey(em: EntityManager, keys: KeyService, environment: Environment): Promise<LightningNodeKey> {
  const existing = await readNodeKey(em, environment);
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
  return (await readNodeKey(em, environment))!;
}

/** Hands the node's private key and its public key (hex) to `use` and wipes the private key when `use` returns. */
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
 * The node key rows read so far (the private key sealed, as stored), per database (its ORM's
 * configuration) and environment. A node key row never changes once it exists but for keys:rotate
 * wrapping its data key anew, and the old wrapped key opens as long as this process is configured with
 * the old master key as a previous one (removing it restarts the process), so what a read found
 * stays true, and an invoice spends no round trip on it; a missing key is not remembered (the first
 * invoice may be about to create it).
 */
const knownNodeKeys = new WeakMap<object, Map<Environment, LightningNodeKey>>();
/** Transactions that inserted a node key: until they commit, what they read of it is not yet true. */
const creatingTransactions = new WeakSet<object>();

/** The environment's node key row (detached, never persisted), or null while no invoice was ever issued there. */
async function readNodeKey(em: EntityManager, environment: Environment): Promise<LightningNodeKey | null> {
  const known = perDatabase(knownNodeKeys, em, () => new Map<Environment, LightningNodeKey>());
  const cached = known.get(environment);
  if (cached) return cached;
  const record = await readOneByColumns(em, LightningNodeKey, { environment });
  // Only a committed row is remembered: one this very transaction inserted could still roll back.
  const context = em.getTransactionContext<object>();
  if (record && !(context && creatingTransactions.has(context))) known.set(environment, record);
  return record;
}

/** Our node's public key in this environment, or null while no invoice was ever issued there. */
export async function nodePublicKey(em: EntityManager, environment: Environment): Promise<string | null> {
  return (await readNodeKey(em, environment))?.publicKey ?? null;
}
