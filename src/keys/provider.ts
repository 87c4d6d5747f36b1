import { createHash } from 'node:crypto';
import type { Config } from '../config';
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

/** The current provider (KEY_PROVIDER), with the previous keys of MASTER_KEY_PREVIOUS and PKCS11_PREVIOUS_KEY_LABELS. */
function buildKeyProvider(config: Config): KeyProvider {
  const token = () => pkcs11Token({ library: config.PKCS11_LIBRARY!, tokenLabel: config.PKCS11_TOKEN_LABEL!, pin: config.PKCS11_PIN! });
  const current =
    config.KEY_PROVIDER === 'pkcs11'
      ? new Pkcs11KeyProvider(token(), config.PKCS11_KEY_LABEL!)
      : new LocalKeyProvider(config.MASTER_KEY ? parseMasterKey(config.MASTER_KEY)! : DEVELOPMENT_MASTER_KEY);
  const previous = [
    ...config.PKCS11_PREVIOUS_KEY_LABELS.map((label) => new Pkcs11KeyProvider(token(), label)),
    ...config.MASTER_KEY_PREVIOUS.map((key) => new LocalKeyProvider(parseMasterKey(key)!)),
  ];
  return previous.length > 0 ? new KeyRing(current, previous) : current;
}

const providers = new WeakMap<Config, KeyProvider>();

/**
 * The provider the configuration asks for, built once per configuration and without logging:
 * for code that holds only the configuration (the delivery resolvers, the CLI). Processes say
 * which master key they use once, at start, through createKeyProvider.
 */
export function keyProviderFor(config: Config): KeyProvider {
  let provider = providers.get(config);
  if (!provider) {
    provider = buildKeyProvider(config);
    providers.set(config, provider);
  }
  return provider;
}

/**
 * The provider the configuration asks for; without MASTER_KEY or an HSM (never in production) a public
 * development key, loudly. An HSM that cannot be reached, or a key that is missing or could leave it,
 * stops the start here, with what to fix.
 */
export function createKeyProvider(config: Config, log: Logger): KeyProvider {
  const provider = keyProviderFor(config);
  if (config.KEY_PROVIDER === 'local' && !config.MASTER_KEY) {
    log.warn(
      { node_env: config.NODE_ENV },
      'MASTER_KEY is not set: organization seeds are encrypted under the public development master key. Set MASTER_KEY (32 bytes, base64 or hex) or KEY_PROVIDER=pkcs11 for any real use; production refuses to start without one.',
    );
  }
  const previous = config.PKCS11_PREVIOUS_KEY_LABELS.length + config.MASTER_KEY_PREVIOUS.length;
  if (previous > 0) log.info({ master_key_id: provider.masterKeyId, previous_keys: previous }, 'previous master keys configured: run `npm run cli -- keys:rotate`, then remove them');
  return provider;
}
