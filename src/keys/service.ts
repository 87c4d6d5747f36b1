import { randomBytes } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { Organization } from '../organizations/entities';
import type { Environment } from '../shared/environments';
import { aesGcmDecrypt, aesGcmEncrypt } from './aes-gcm';
import { keyCustodyIsWeak, keyCustodyUnconfigured } from './custody';
import { deriveKey, derivePublicNode, type DerivedKey, type KeyLocation } from './derivation';
import { OrganizationSeed } from './entities';
import { generateMnemonicBytes, isValidMnemonicBytes, mnemonicToSeed } from './mnemonic';
import { DomainError } from '../shared/errors';
import { keyProviderFor, seedKeyProviderFor, type KeyProvider } from './provider';
import type { Config } from '../config';

/** An envelope-encrypted secret as stored: which provider and master key, the wrapped data key, the ciphertext (base64). */
export interface SealedSecret {
  keyProvider: string;
  masterKeyId: string;
  wrappedDataKey: string;
  ciphertext: string;
}

/** New seeds bind the environment into their contexts (v2); seeds made before the split per environment keep v1. */
const SEED_ENVELOPE_VERSION = 2;

/**
 * GCM associated data: a ciphertext only opens for the organization, environment (v2) and purpose
 * it was made for. v1, from before seeds were per environment, names the organization only: its
 * rows keep opening, the sandbox seed and a live copy of it alike.
 */
export function seedContexts(seed: { envelopeVersion: number; organizationId: string; environment: Environment }) {
  const { envelopeVersion, organizationId, environment } = seed;
  if (envelopeVersion === 1) {
    return { dataKey: `custody-platform/seed-data-key/v1/${organizationId}`, mnemonic: `custody-platform/seed-mnemonic/v1/${organizationId}` };
  }
  if (envelopeVersion === 2) {
    return {
      dataKey: `custody-platform/seed-data-key/v2/${organizationId}/${environment}`,
      mnemonic: `custody-platform/seed-mnemonic/v2/${organizationId}/${environment}`,
    };
  }
  throw new Error(`unknown seed envelope version ${envelopeVersion}`);
}

/** What a process that holds no seed key answers when asked to open one (never expected of an API route: those go through the signer). */
export const noSeedKey = () =>
  new DomainError({
    kind: 'unavailable',
    code: 'seed_key_unavailable',
    message: 'This process holds no seed key: seeds are opened only by signers (the worker). The operator gives the seed key (SEED_MASTER_KEY or PKCS11_SEED_KEY_LABEL) to signers only.',
  });

/** The only code that sees an organization's mnemonic or private keys, and only for the length of one call. */
export class KeyService {
  constructor(
    /** The data role: webhook secrets, stored responses, card data, beneficiaries, Lightning node keys (src/cards/issuer.ts and others use it directly). */
    readonly provider: KeyProvider,
    /** The seed role: organization seeds. Absent in a process that is no signer (the API in production). */
    readonly seedProvider?: KeyProvider,
  ) {}

  /** Whether this process can open seeds (derive private keys, sign). */
  get signer(): boolean {
    return this.seedProvider !== undefined;
  }

  private seedKeys(): KeyProvider {
    if (!this.seedProvider) throw noSeedKey();
    return this.seedProvider;
  }

  /**
   * The organization's seed of `environment`, created on first use (a fresh mnemonic: sandbox and
   * live never share one); concurrent first uses converge on one row. Live refuses weak key custody.
   */
  async ensureSeed(em: EntityManager, organizationId: string, environment: Environment): Promise<OrganizationSeed> {
    const seedKeys = this.seedKeys();
    if (environment === 'live' && keyCustodyIsWeak(seedKeys)) throw keyCustodyUnconfigured();
    // FOR KEY SHARE until this transaction ends: `keys:separate-live-seed` cannot replace the seed that a
    // wallet being created here derives from (it locks the row FOR UPDATE, then counts live wallets).
    const [existing] = await em.execute<{ id: string }[]>(`select id from organization_seeds where organization_id = ? and environment = ? for key share`, [organizationId, environment]);
    if (existing) return em.findOneOrFail(OrganizationSeed, { id: existing.id });
    const sealed = await this.sealNewMnemonic(organizationId, environment);
    // A concurrent first use waits on the unique (organization_id, environment) and then inserts nothing.
    await em.execute(
      `insert into organization_seeds (id, organization_id, environment, shares_sandbox_mnemonic, envelope_version, key_provider, master_key_id, wrapped_data_key, mnemonic_ciphertext, created_at)
       values (?, ?, ?, false, ?, ?, ?, ?, ?, now()) on conflict (organization_id, environment) do nothing`,
      [new OrganizationSeed().id, organizationId, environment, SEED_ENVELOPE_VERSION, sealed.keyProvider, sealed.masterKeyId, sealed.wrappedDataKey, sealed.ciphertext],
    );
    return em.findOneOrFail(OrganizationSeed, { organization: em.getReference(Organization, organizationId), environment });
  }

  /**
   * Derives the keys at `locations` from the organization's seed of `environment` (the wallet's)
   * and hands them to `use`; the mnemonic, the seed and the private keys are wiped when `use` returns.
   */
  async withKeys<T>(
    em: EntityManager,
    organizationId: string,
    environment: Environment,
    locations: KeyLocation[],
    use: (keys: DerivedKey[], seed: OrganizationSeed) => T,
  ): Promise<T> {
    const record = await this.ensureSeed(em, organizationId, environment);
    const seed = await this.openSeed(record);
    const keys: DerivedKey[] = [];
    try {
      for (const location of locations) keys.push(deriveKey(seed, location));
      return use(keys, record);
    } finally {
      seed.fill(0);
      for (const key of keys) key.privateKey.fill(0);
    }
  }

  /**
   * The public side of the hardened nodes of `locations` (derivePublicNode: an account's extended public
   * key, a Solana address's public key) on the organization's seed of `environment`; the seed is wiped when done.
   */
  async publicNodes(em: EntityManager, organizationId: string, environment: Environment, locations: KeyLocation[]) {
    const record = await this.ensureSeed(em, organizationId, environment);
    const seed = await this.openSeed(record);
    try {
      return { seed: record, nodes: locations.map((location) => derivePublicNode(seed, location)) };
    } finally {
      seed.fill(0);
    }
  }

  private async sealNewMnemonic(organizationId: string, environment: Environment): Promise<SealedSecret> {
    const mnemonic = generateMnemonicBytes();
    try {
      const contexts = seedContexts({ envelopeVersion: SEED_ENVELOPE_VERSION, organizationId, environment });
      return await sealUnder(this.seedKeys(), mnemonic, contexts.dataKey, contexts.mnemonic);
    } finally {
      mnemonic.fill(0);
    }
  }

  /**
   * Envelope encryption of another secret (a Lightning node key, say): `plaintext` under a fresh
   * data key, the data key under the provider's master key, each bound to its context.
   */
  seal(plaintext: Uint8Array, dataKeyContextValue: string, plaintextContext: string): Promise<SealedSecret> {
    return sealUnder(this.provider, plaintext, dataKeyContextValue, plaintextContext);
  }

  /** Inverse of `seal` under the data role (the master key the row names decides which configured key opens it); the caller wipes the result when done. */
  open(sealed: SealedSecret, dataKeyContextValue: string, plaintextContext: string): Promise<Buffer> {
    return openUnder(this.provider, sealed, dataKeyContextValue, plaintextContext);
  }

  /** The BIP-39 seed of `record`; the caller wipes it. The mnemonic it comes from is held as bytes and wiped here. */
  private async openSeed(record: OrganizationSeed): Promise<Buffer> {
    const mnemonic = await this.openMnemonic(record);
    try {
      return await mnemonicToSeed(mnemonic);
    } finally {
      mnemonic.fill(0);
    }
  }

  /** The mnemonic of `record`, as bytes, validated; the caller wipes it. */
  private async openMnemonic(record: OrganizationSeed): Promise<Buffer> {
    const contexts = seedContexts({ envelopeVersion: record.envelopeVersion, organizationId: record.organization.id, environment: record.environment });
    const sealed = { keyProvider: record.keyProvider, masterKeyId: record.masterKeyId, wrappedDataKey: record.wrappedDataKey, ciphertext: record.mnemonicCiphertext };
    const mnemonic = await openUnder(this.seedKeys(), sealed, contexts.dataKey, contexts.mnemonic);
    if (isValidMnemonicBytes(mnemonic)) return mnemonic;
    mnemonic.fill(0);
    throw new Error(`seed ${record.id} does not hold a valid mnemonic`);
  }
}

/**
 * Envelope encryption: `plaintext` under a fresh data key, the data key under `provider`'s master key,
 * each bound to its context.
 */
async function sealUnder(provider: KeyProvider, plaintext: Uint8Array, dataKeyContextValue: string, plaintextContext: string): Promise<SealedSecret> {
  const dataKey = randomBytes(32);
  try {
    const wrapped = await provider.encryptDataKey(dataKey, dataKeyContextValue);
    const ciphertext = aesGcmEncrypt(dataKey, plaintext, plaintextContext);
    return { keyProvider: provider.name, masterKeyId: wrapped.masterKeyId, wrappedDataKey: wrapped.ciphertext, ciphertext: ciphertext.toString('base64') };
  } finally {
    dataKey.fill(0);
  }
}

/** Inverse of sealUnder: only a provider holding the master key the envelope names opens it. */
async function openUnder(provider: KeyProvider, sealed: SealedSecret, dataKeyContextValue: string, plaintextContext: string): Promise<Buffer> {
  const dataKey = await provider.decryptDataKey({ masterKeyId: sealed.masterKeyId, ciphertext: sealed.wrappedDataKey }, dataKeyContextValue);
  try {
    return aesGcmDecrypt(dataKey, Buffer.from(sealed.ciphertext, 'base64'), plaintextContext);
  } finally {
    dataKey.fill(0);
  }
}

/** The KeyService `config` gives, both roles as configured (without start-up notices): for the CLI, tests and benchmarks. */
export const keyServiceFor = (config: Config): KeyService => new KeyService(keyProviderFor(config), seedKeyProviderFor(config));
