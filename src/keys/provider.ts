import { createHash } from 'node:crypto';
import type { Config } from '../config';
import type { Logger } from '../logger';
import { aesGcmDecrypt, aesGcmEncrypt } from './aes-gcm';
import { DEVELOPMENT_MASTER_KEY, parseMasterKey } from './master-key';

/** A data key as the provider returned it: only the provider that wrapped it can unwrap it. */
export interface WrappedDataKey {
  /** Which master key wrapped it (a KMS key ARN, or `local:<fingerprint>`). */
  masterKeyId: string;
  /** base64 */
  ciphertext: string;
}

/**
 * Wraps and unwraps data keys under a master key that never leaves the provider. The local
 * provider holds the master key in memory; a KMS or HSM provider implements the same two calls.
 * `context` is bound to the ciphertext (GCM associated data, or a KMS encryption context).
 */
export interface KeyProvider {
  readonly name: string;
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

const providers = new WeakMap<Config, KeyProvider>();

/**
 * The provider the configuration asks for, built once per configuration and without logging:
 * for code that holds only the configuration (the delivery resolvers, the CLI). Processes say
 * which master key they use once, at start, through createKeyProvider.
 */
export function keyProviderFor(config: Config): KeyProvider {
  let provider = providers.get(config);
  if (!provider) {
    provider = new LocalKeyProvider(config.MASTER_KEY ? parseMasterKey(config.MASTER_KEY)! : DEVELOPMENT_MASTER_KEY);
    providers.set(config, provider);
  }
  return provider;
}

/** The provider the configuration asks for; without MASTER_KEY (never in production) a public development key, loudly. */
export function createKeyProvider(config: Config, log: Logger): KeyProvider {
  if (config.MASTER_KEY) return keyProviderFor(config);
  log.warn(
    { node_env: config.NODE_ENV },
    'MASTER_KEY is not set: organization seeds are encrypted under the public development master key. Set MASTER_KEY (32 bytes, base64 or hex) for any real use; production refuses to start without it.',
  );
  return keyProviderFor(config);
}
