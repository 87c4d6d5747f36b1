import { createHash } from 'node:crypto';
import { ConfigError, type Config } from '../config';
import type { Logger } from '../logger';
import { aesGcmDecrypt, aesGcmEncrypt } from './aes-gcm';
import { DEVELOPMENT_MASTER_KEY, parseMasterKey } from './master-key';
import { Pkcs11KeyProvider } from './pkcs11-provider';
import { pkcs11Token } from './pkcs11-token';

/** A data key as the provider returned it: only the provider that wrapped it can unwrap it. */
export interface WrappedDataKey {
  /** Which master key wrapped it (`local:<fingerprint>`, `pkcs11:<token>/<key label>#<check value>`, a KMS key ARN). */
  masterKeyId: string;
  /** base64 */
  ciphertext: string;
}

/**
 * Wraps and unwraps data keys under a master key that never leaves the provider. The local
 * provider holds the master key in memory; the PKCS#11 provider (src/keys/pkcs11-provider.ts) asks
 * an HSM, and a KMS provider would implement the same two calls (docs/custody.md, "Key custody").
 * `context` is bound to the ciphertext (GCM associated data, or a KMS encryption context).
 */
export interface KeyProvider {
  readonly name: string;
  /** The master key new data keys are wrapped under: what a row names once it is wrapped, and what keys:rotate moves rows to. */
  readonly masterKeyId: string;
  /** True while the master key is the public development key: nothing it wraps is protected, so live keys must not work. */
  readonly development: boolean;
  encryptDataKey(dataKey: Uint8Array, context: string): Promise<WrappedDataKey>;
  decryptDataKey(wrapped: WrappedDataKey, context: string): Promise<Uint8Array>;
}

/** AES-256-GCM under the MASTER_KEY of the configuration. */
export class LocalKeyProvider implements KeyProvider {
  readonly name = 'local';
  /** A fingerprint, never the key: tells which master key a row needs after a rotation. */
  readonly masterKeyId: string;
  readonly development: boolean;

  constructor(private readonly masterKey: Buffer) {
    this.development = masterKey.equals(DEVELOPMENT_MASTER_KEY);
    this.masterKeyId = `local:${createHash('sha256').update(masterKey).digest('hex').slice(0, 16)}`;
  }

  async encryptDataKey(dataKey: Uint8Array, context: string): Promise<WrappedDataKey> {
    return { masterKeyId: this.masterKeyId, ciphertext: aesGcmEncrypt(this.masterKey, dataKey, context).toString('base64') };
  }

  async decryptDataKey(wrapped: WrappedDataKey, context: string): Promise<Uint8Array> {
    if (wrapped.masterKeyId !== this.masterKeyId) {
      throw new Error(`data key is wrapped under ${wrapped.masterKeyId}, but the configured master key is ${this.masterKeyId}`);
    }
    return aesGcmDecrypt(this.masterKey, Buffer.from(wrapped.ciphertext, 'base64'), context);
  }
}

/**
 * The current master key and, during a rotation, the previous ones: the current key wraps, each key
 * unwraps what it wrapped (the row names it). Keys of different providers mix: a move from MASTER_KEY
 * to an HSM keeps the old local key as a previous one until `keys:rotate` has re-wrapped every row.
 */
export class KeyRing implements KeyProvider {
  constructor(
    private readonly current: KeyProvider,
    private readonly previous: readonly KeyProvider[],
  ) {}

  get name(): string {
    return this.current.name;
  }

  get masterKeyId(): string {
    return this.current.masterKeyId;
  }

  get development(): boolean {
    return this.current.development;
  }

  encryptDataKey(dataKey: Uint8Array, context: string): Promise<WrappedDataKey> {
    return this.current.encryptDataKey(dataKey, context);
  }

  decryptDataKey(wrapped: WrappedDataKey, context: string): Promise<Uint8Array> {
    const holder = [this.current, ...this.previous].find((provider) => provider.masterKeyId === wrapped.masterKeyId);
    if (!holder) {
      throw new Error(`data key is wrapped under ${wrapped.masterKeyId}, which is neither the current master key (${this.current.masterKeyId}) nor a previous one`);
    }
    return holder.decryptDataKey(wrapped, context);
  }
}

/** `current` alone, or with the previous keys that only unwrap during a rotation. */
const ring = (current: KeyProvider, previous: KeyProvider[]): KeyProvider => (previous.length > 0 ? new KeyRing(current, previous) : current);

function tokenOf(config: Config) {
  return pkcs11Token({ library: config.PKCS11_LIBRARY!, tokenLabel: config.PKCS11_TOKEN_LABEL!, pin: config.PKCS11_PIN! });
}

/** The data role: the current provider (KEY_PROVIDER), with the previous keys of MASTER_KEY_PREVIOUS and PKCS11_PREVIOUS_KEY_LABELS. */
function buildDataKeyProvider(config: Config): KeyProvider {
  const current =
    config.KEY_PROVIDER === 'pkcs11'
      ? new Pkcs11KeyProvider(tokenOf(config), config.PKCS11_KEY_LABEL!)
      : new LocalKeyProvider(config.MASTER_KEY ? parseMasterKey(config.MASTER_KEY)! : DEVELOPMENT_MASTER_KEY);
  return ring(current, [
    ...config.PKCS11_PREVIOUS_KEY_LABELS.map((label) => new Pkcs11KeyProvider(tokenOf(config), label)),
    ...config.MASTER_KEY_PREVIOUS.map((key) => new LocalKeyProvider(parseMasterKey(key)!)),
  ]);
}

/** Whether this process's configuration names a seed key of its own (SEED_MASTER_KEY, or PKCS11_SEED_KEY_LABEL with an HSM). */
export const hasSeedKey = (config: Config): boolean => (config.KEY_PROVIDER === 'pkcs11' ? config.PKCS11_SEED_KEY_LABEL : config.SEED_MASTER_KEY) !== undefined;

/**
 * Whether a process without a seed key seals and opens seeds under the data key: outside production
 * only, unless SEED_KEY_FALLBACK=none (docs/custody.md, "Key custody").
 */
const fallsBackToDataKey = (config: Config): boolean => !hasSeedKey(config) && config.NODE_ENV !== 'production' && config.SEED_KEY_FALLBACK === 'data';

/** The seed role: its own key and previous keys (SEED_MASTER_KEY_PREVIOUS holds the data key while seeds move off it); the data provider as the fallback; else none. */
function buildSeedKeyProvider(config: Config): KeyProvider | undefined {
  if (fallsBackToDataKey(config)) return keyProviderFor(config);
  if (!hasSeedKey(config)) return undefined;
  const current = config.KEY_PROVIDER === 'pkcs11' ? new Pkcs11KeyProvider(tokenOf(config), config.PKCS11_SEED_KEY_LABEL!) : new LocalKeyProvider(parseMasterKey(config.SEED_MASTER_KEY!)!);
  return ring(current, [
    ...config.PKCS11_SEED_PREVIOUS_KEY_LABELS.map((label) => new Pkcs11KeyProvider(tokenOf(config), label)),
    ...config.SEED_MASTER_KEY_PREVIOUS.map((key) => new LocalKeyProvider(parseMasterKey(key)!)),
  ]);
}

const providers = new WeakMap<Config, KeyProvider>();
const seedProviders = new WeakMap<Config, { provider: KeyProvider | undefined }>();

/**
 * The data role's provider the configuration asks for, built once per configuration and without logging:
 * for code that holds only the configuration (the delivery resolvers, the CLI). Processes say
 * which master key they use once, at start, through createKeyProvider.
 */
export function keyProviderFor(config: Config): KeyProvider {
  let provider = providers.get(config);
  if (!provider) {
    provider = buildDataKeyProvider(config);
    providers.set(config, provider);
  }
  return provider;
}

/** The seed role's provider, built once per configuration and without logging; undefined in a process that is no signer. */
export function seedKeyProviderFor(config: Config): KeyProvider | undefined {
  let built = seedProviders.get(config);
  if (!built) {
    built = { provider: buildSeedKeyProvider(config) };
    seedProviders.set(config, built);
  }
  return built.provider;
}

/**
 * The data role's provider the configuration asks for; without MASTER_KEY or an HSM (never in production) a public
 * development key, loudly. An HSM that cannot be reached, or a key that is missing or could leave it,
 * stops the start here, with what to fix.
 */
export function createKeyProvider(config: Config, log: Logger): KeyProvider {
  const provider = keyProviderFor(config);
  if (config.KEY_PROVIDER === 'local' && !config.MASTER_KEY) {
    log.warn(
      { node_env: config.NODE_ENV },
      'MASTER_KEY is not set: webhook secrets, stored responses and card data are encrypted under the public development master key. Set MASTER_KEY (32 bytes, base64 or hex) or KEY_PROVIDER=pkcs11 for any real use; production refuses to start without one.',
    );
  }
  const previous = config.PKCS11_PREVIOUS_KEY_LABELS.length + config.MASTER_KEY_PREVIOUS.length;
  if (previous > 0) log.info({ master_key_id: provider.masterKeyId, previous_keys: previous }, 'previous master keys configured: run `npm run cli -- keys:rotate`, then remove them');
  return provider;
}

/**
 * The seed role's provider, said once at start: a signer (`worker`) in production refuses to start
 * without a seed key; outside production, seeds under the data key are said to be reachable by every
 * process holding it, the API included. The API in production is expected to hold none.
 */
export function createSeedKeyProvider(config: Config, log: Logger, processKind: 'api' | 'worker' | 'cli'): KeyProvider | undefined {
  if (processKind === 'worker' && config.NODE_ENV === 'production' && !hasSeedKey(config)) {
    throw new ConfigError(
      `Invalid configuration:\n  ${config.KEY_PROVIDER === 'pkcs11' ? 'PKCS11_SEED_KEY_LABEL' : 'SEED_MASTER_KEY'}: the worker signs, so it needs the seed key when NODE_ENV=production (docs/custody.md, "Key custody")`,
    );
  }
  const provider = seedKeyProviderFor(config);
  if (fallsBackToDataKey(config)) {
    log.warn(
      { node_env: config.NODE_ENV },
      'no seed key (SEED_MASTER_KEY or PKCS11_SEED_KEY_LABEL): organization seeds are sealed under the data master key, so this process (the API too) can open them. Give signers a seed key of their own; production does not fall back.',
    );
  } else if (processKind === 'api' && provider) {
    log.warn({ master_key_id: provider.masterKeyId }, 'the API holds the seed key: it can open organization seeds. Give the seed key to signers (the worker) only.');
  }
  const previous = config.PKCS11_SEED_PREVIOUS_KEY_LABELS.length + config.SEED_MASTER_KEY_PREVIOUS.length;
  if (provider && previous > 0) log.info({ seed_master_key_id: provider.masterKeyId, previous_keys: previous }, 'previous seed keys configured: run `npm run cli -- keys:rotate` on a signer host, then remove them');
  return provider;
}
