import { randomBytes } from 'node:crypto';
import type * as Pkcs11Js from 'pkcs11js';
import { pkcs11Binding, type Pkcs11Token } from './pkcs11-token';
import type { KeyProvider, WrappedDataKey } from './provider';

const IV_BYTES = 12;
const TAG_BYTES = 16;

/**
 * Data keys wrapped with CKM_AES_GCM under an AES-256 key inside an HSM (PKCS#11): the key never
 * leaves the token, every wrap and unwrap is the token's. The context is the GCM associated data, as
 * the local provider binds it. Stored as base64 of `iv || ciphertext || tag`, the IV drawn here (96
 * bits, PKCS#11 v2.40 leaves it to the caller).
 */
export class Pkcs11KeyProvider implements KeyProvider {
  readonly name = 'pkcs11';
  readonly development = false;
  /** `pkcs11:<token label>/<key label>#<check value>`: another key given the same label is another id. */
  readonly masterKeyId: string;

  constructor(
    private readonly token: Pkcs11Token,
    private readonly keyLabel: string,
  ) {
    const { checkValue } = token.run((session) => token.key(session, keyLabel));
    this.masterKeyId = `pkcs11:${token.label}/${keyLabel}#${checkValue}`;
  }

  async encryptDataKey(dataKey: Uint8Array, context: string): Promise<WrappedDataKey> {
    const iv = randomBytes(IV_BYTES);
    const plaintext = Buffer.from(dataKey);
    try {
      const sealed = this.token.run((session) => {
        this.token.module.C_EncryptInit(session, gcm(iv, context), this.token.key(session, this.keyLabel).handle);
        return this.token.module.C_Encrypt(session, plaintext, Buffer.alloc(plaintext.length + TAG_BYTES));
      });
      return { masterKeyId: this.masterKeyId, ciphertext: Buffer.concat([iv, sealed]).toString('base64') };
    } finally {
      plaintext.fill(0);
    }
  }

  /** The data key, as bytes the caller wipes. */
  async decryptDataKey(wrapped: WrappedDataKey, context: string): Promise<Uint8Array> {
    if (wrapped.masterKeyId !== this.masterKeyId) {
      throw new Error(`data key is wrapped under ${wrapped.masterKeyId}, but this HSM key is ${this.masterKeyId}`);
    }
    const bytes = Buffer.from(wrapped.ciphertext, 'base64');
    if (bytes.length < IV_BYTES + TAG_BYTES) throw new Error('wrapped data key is too short');
    const iv = bytes.subarray(0, IV_BYTES);
    const sealed = bytes.subarray(IV_BYTES);
    try {
      return this.token.run((session) => {
        this.token.module.C_DecryptInit(session, gcm(iv, context), this.token.key(session, this.keyLabel).handle);
        return this.token.module.C_Decrypt(session, sealed, Buffer.alloc(sealed.length));
      });
    } catch (error) {
      throw new Error(`the HSM could not unwrap a data key under ${this.masterKeyId} (${(error as Error).message}): another context, or a damaged ciphertext`);
    }
  }
}

function gcm(iv: Buffer, context: string): Pkcs11Js.Mechanism {
  const pkcs11 = pkcs11Binding();
  return {
    mechanism: pkcs11.CKM_AES_GCM,
    parameter: { type: pkcs11.CK_PARAMS_AES_GCM_v240, iv, ivBits: IV_BYTES * 8, aad: Buffer.from(context, 'utf8'), tagBits: TAG_BYTES * 8 } as Pkcs11Js.GcmParams,
  };
}
