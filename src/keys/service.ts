import { pbkdf2, randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import type { EntityManager } from '@mikro-orm/postgresql';
import { generateMnemonic, validateMnemonic } from '@scure/bip39';
import { wordlist } from '@scure/bip39/wordlists/english';
import { Organization } from '../organizations/entities';
import { aesGcmDecrypt, aesGcmEncrypt } from './aes-gcm';
import { deriveKey, type DerivedKey, type KeyLocation } from './derivation';
import { OrganizationSeed } from './entities';
import type { KeyProvider } from './provider';

const pbkdf2Async = promisify(pbkdf2);

/** An envelope-encrypted secret as stored: which provider and master key, the wrapped data key, the ciphertext (base64). */
export interface SealedSecret {
  keyProvider: string;
  masterKeyId: string;
  wrappedDataKey: string;
  ciphertext: string;
}
const ENVELOPE_VERSION = 1;

/** GCM associated data: a ciphertext only opens for the organization (and purpose) it was made for. */
const mnemonicContext = (organizationId: string) => `custody-platform/seed-mnemonic/v${ENVELOPE_VERSION}/${organizationId}`;
export const dataKeyContext = (organizationId: string) => `custody-platform/seed-data-key/v${ENVELOPE_VERSION}/${organizationId}`;

/** The only code that sees an organization's mnemonic or private keys, and only for the length of one call. */
export class KeyService {
  /** Also seals card numbers (src/cards/issuer.ts). */
  constructor(readonly provider: KeyProvider) {}

  /** The organization's seed, created on first use; concurrent first uses converge on one row. */
  async ensureSeed(em: EntityManager, organizationId: string): Promise<OrganizationSeed> {
    const existing = await em.findOne(OrganizationSeed, { organization: organizationId });
    if (existing) return existing;
    const sealed = await this.sealMnemonic(organizationId, generateMnemonic(wordlist, 256));
    // A concurrent first use waits on the unique organization_id and then inserts nothing.
    await em.execute(
      `insert into organization_seeds (id, organization_id, envelope_version, key_provider, master_key_id, wrapped_data_key, mnemonic_ciphertext, created_at)
       values (?, ?, ?, ?, ?, ?, ?, now()) on conflict (organization_id) do nothing`,
      [new OrganizationSeed().id, organizationId, ENVELOPE_VERSION, this.provider.name, sealed.masterKeyId, sealed.wrappedDataKey, sealed.mnemonicCiphertext],
    );
    return em.findOneOrFail(OrganizationSeed, { organization: em.getReference(Organization, organizationId) });
  }

  /**
   * Derives the keys at `locations` from the organization's seed and hands them to `use`; the
   * seed and the private keys are wiped when `use` returns.
   */
  async withKeys<T>(em: EntityManager, organizationId: string, locations: KeyLocation[], use: (keys: DerivedKey[], seed: OrganizationSeed) => T): Promise<T> {
    const record = await this.ensureSeed(em, organizationId);
    const mnemonic = await this.openMnemonic(record);
    const seed = await mnemonicToSeed(mnemonic);
    const keys: DerivedKey[] = [];
    try {
      for (const location of locations) keys.push(deriveKey(seed, location));
      return use(keys, record);
    } finally {
      seed.fill(0);
      for (const key of keys) key.privateKey.fill(0);
    }
  }

  private async sealMnemonic(organizationId: string, mnemonic: string) {
    const sealed = await this.seal(Buffer.from(mnemonic, 'utf8'), dataKeyContext(organizationId), mnemonicContext(organizationId));
    return { masterKeyId: sealed.masterKeyId, wrappedDataKey: sealed.wrappedDataKey, mnemonicCiphertext: sealed.ciphertext };
  }

  /**
   * Envelope encryption of another secret (a Lightning node key, say): `plaintext` under a fresh
   * data key, the data key under the provider's master key, each bound to its context.
   */
  async seal(plaintext: Uint8Array, dataKeyContextValue: string, plaintextContext: string): Promise<SealedSecret> {
    const dataKey = randomBytes(32);
    try {
      const wrapped = await this.provider.encryptDataKey(dataKey, dataKeyContextValue);
      const ciphertext = aesGcmEncrypt(dataKey, plaintext, plaintextContext);
      return { keyProvider: this.provider.name, masterKeyId: wrapped.masterKeyId, wrappedDataKey: wrapped.ciphertext, ciphertext: ciphertext.toString('base64') };
    } finally {
      dataKey.fill(0);
    }
  }

  /** Inverse of `seal` (the master key the row names decides which configured key opens it); the caller wipes the result when done. */
  async open(sealed: SealedSecret, dataKeyContextValue: string, plaintextContext: string): Promise<Buffer> {
    const dataKey = await this.provider.decryptDataKey({ masterKeyId: sealed.masterKeyId, ciphertext: sealed.wrappedDataKey }, dataKeyContextValue);
    try {
      return aesGcmDecrypt(dataKey, Buffer.from(sealed.ciphertext, 'base64'), plaintextContext);
    } finally {
      dataKey.fill(0);
    }
  }

  private async openMnemonic(record: OrganizationSeed): Promise<string> {
    if (record.envelopeVersion !== ENVELOPE_VERSION) throw new Error(`seed ${record.id} needs envelope v${record.envelopeVersion}`);
    const organizationId = record.organization.id;
    const sealed = { keyProvider: record.keyProvider, masterKeyId: record.masterKeyId, wrappedDataKey: record.wrappedDataKey, ciphertext: record.mnemonicCiphertext };
    const mnemonic = (await this.open(sealed, dataKeyContext(organizationId), mnemonicContext(organizationId))).toString('utf8');
    if (!validateMnemonic(mnemonic, wordlist)) throw new Error(`seed ${record.id} does not hold a valid mnemonic`);
    return mnemonic;
  }
}

/** BIP-39 seed: PBKDF2-HMAC-SHA512, 2048 rounds, salt "mnemonic" (no passphrase); native, off the event loop. */
export async function mnemonicToSeed(mnemonic: string): Promise<Uint8Array> {
  return new Uint8Array(await pbkdf2Async(Buffer.from(mnemonic.normalize('NFKD'), 'utf8'), Buffer.from('mnemonic', 'utf8'), 2048, 64, 'sha512'));
}
