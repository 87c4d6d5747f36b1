import { createHash } from 'node:crypto';
import type * as Pkcs11Js from 'pkcs11js';

/** Where the HSM is: its PKCS#11 module, the token's label and the user PIN (a secret: never in a message). */
export interface Pkcs11Settings {
  library: string;
  tokenLabel: string;
  pin: string;
}

/** An AES-256 key of the token, found by its label, and what tells it from another key of the same label. */
export interface Pkcs11Key {
  handle: Pkcs11Js.Handle;
  /** CKA_CHECK_VALUE (hex, the first bytes of the key's encryption of zeros), or CKA_ID where the token keeps none. */
  checkValue: string;
}

/**
 * Errors after which the session or its login is gone (the HSM restarted, a network HSM's connection
 * dropped, the token was pulled): the session is opened and logged in again, the keys found again (and
 * checked to be the same keys), and the call made once more. A key handle gone (an HSM may number its
 * objects anew) and CKR_OPERATION_ACTIVE (an operation a failed call left open) are mended the same way.
 */
const SESSION_LOST = new Set([
  'CKR_SESSION_HANDLE_INVALID',
  'CKR_SESSION_CLOSED',
  'CKR_DEVICE_REMOVED',
  'CKR_TOKEN_NOT_PRESENT',
  'CKR_TOKEN_NOT_RECOGNIZED',
  'CKR_USER_NOT_LOGGED_IN',
  'CKR_OPERATION_ACTIVE',
  'CKR_KEY_HANDLE_INVALID',
  'CKR_OBJECT_HANDLE_INVALID',
]);

const isPkcs11Error = (error: unknown, names: Set<string>): boolean => error instanceof Error && error.name === 'Pkcs11Error' && names.has(error.message);

let binding: typeof Pkcs11Js | undefined;
/** The native binding, loaded on first use: a process without KEY_PROVIDER=pkcs11 never needs the addon built. */
export function pkcs11Binding(): typeof Pkcs11Js {
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- synchronous on first use, and only where an HSM is configured
    return (binding ??= require('pkcs11js') as typeof Pkcs11Js);
  } catch (error) {
    throw new Error(`the PKCS#11 binding (npm pkcs11js) is not installed or not built: run scripts/ensure-tools.sh (${(error as Error).message.split('\n')[0]})`);
  }
}

/** One loaded and initialised module per library per process: PKCS#11 allows one C_Initialize per application. */
const modules = new Map<string, Pkcs11Js.PKCS11>();

/** The module at `library`, loaded and initialised once per process (also what the tests create keys with). */
export function pkcs11Module(library: string): Pkcs11Js.PKCS11 {
  const existing = modules.get(library);
  if (existing) return existing;
  const pkcs11 = pkcs11Binding();
  const module = new pkcs11.PKCS11();
  try {
    module.load(library);
  } catch (error) {
    throw new Error(`PKCS11_LIBRARY ${library} could not be loaded: ${(error as Error).message}`);
  }
  try {
    module.C_Initialize({ flags: pkcs11.CKF_OS_LOCKING_OK });
  } catch (error) {
    if (!isPkcs11Error(error, new Set(['CKR_CRYPTOKI_ALREADY_INITIALIZED']))) throw error;
  }
  modules.set(library, module);
  return module;
}

/** The slot holding the token labelled `label` (labels are blank-padded to 32 characters). */
export function slotOfToken(module: Pkcs11Js.PKCS11, library: string, label: string): Pkcs11Js.Handle {
  const tokens = module.C_GetSlotList(true).map((slot) => ({ slot, label: module.C_GetTokenInfo(slot).label.trimEnd() }));
  const matching = tokens.filter((token) => token.label === label);
  if (matching.length > 1) throw new Error(`${matching.length} tokens are labelled "${label}" in ${library}: give the token a label of its own`);
  if (!matching[0]) {
    const labels = tokens.map((token) => `"${token.label}"`).join(', ') || 'none';
    throw new Error(`no token labelled "${label}" in ${library} (PKCS11_TOKEN_LABEL); its tokens: ${labels}`);
  }
  return matching[0].slot;
}

/** Logs the session's application in; a login that an earlier session of this process made still holds. */
export function loginUser(module: Pkcs11Js.PKCS11, session: Pkcs11Js.Handle, pin: string, tokenLabel: string): void {
  const pkcs11 = pkcs11Binding();
  try {
    module.C_Login(session, pkcs11.CKU_USER, pin);
  } catch (error) {
    if (isPkcs11Error(error, new Set(['CKR_USER_ALREADY_LOGGED_IN']))) return;
    // pkcs11js names only the return value: the PIN is in no message.
    throw new Error(`the token "${tokenLabel}" refused the login with PKCS11_PIN (${(error as Error).message})`);
  }
}

/**
 * A token of the HSM, held by this process through one session: opened and logged in on first use,
 * reused by every call, opened again when the HSM loses it. pkcs11js calls are synchronous and each
 * wrap or unwrap is one uninterrupted run of them (no await between C_EncryptInit and C_Encrypt), so
 * the calls of concurrent requests never interleave on the session.
 */
export class Pkcs11Token {
  private session: Pkcs11Js.Handle | null = null;
  /** Key handles found in the current session; found again after a reconnect. */
  private readonly keys = new Map<string, Pkcs11Js.Handle>();
  /** What each key was when first found: a key that differs after a reconnect is refused, never used. */
  private readonly checkValues = new Map<string, string>();

  constructor(
    readonly module: Pkcs11Js.PKCS11,
    private readonly settings: Pkcs11Settings,
  ) {}

  get label(): string {
    return this.settings.tokenLabel;
  }

  /** Runs `work` on the logged-in session; a lost session is opened again once and `work` run again. */
  run<T>(work: (session: Pkcs11Js.Handle) => T): T {
    try {
      return work(this.open());
    } catch (error) {
      if (!isPkcs11Error(error, SESSION_LOST)) throw error;
      this.drop();
      return work(this.open());
    }
  }

  /** The AES-256 key labelled `label`, checked: only this key, never extractable, 32 bytes, for encryption. */
  key(session: Pkcs11Js.Handle, label: string): Pkcs11Key {
    const found = this.keys.get(label);
    if (found) return { handle: found, checkValue: this.checkValues.get(label)! };
    const pkcs11 = pkcs11Binding();
    const where = `key "${label}" of token "${this.label}"`;
    this.module.C_FindObjectsInit(session, [
      { type: pkcs11.CKA_CLASS, value: pkcs11.CKO_SECRET_KEY },
      { type: pkcs11.CKA_LABEL, value: label },
    ]);
    let handles: Pkcs11Js.Handle[];
    try {
      handles = this.module.C_FindObjects(session, 2);
    } finally {
      this.module.C_FindObjectsFinal(session);
    }
    if (handles.length === 0) throw new Error(`no secret ${where} (PKCS11_KEY_LABEL or PKCS11_PREVIOUS_KEY_LABELS)`);
    if (handles.length > 1) throw new Error(`more than one secret ${where}: give each master key a label of its own`);
    const handle = handles[0]!;
    const [keyType, length, sensitive, extractable, encrypt, decrypt] = this.module
      .C_GetAttributeValue(session, handle, [pkcs11.CKA_KEY_TYPE, pkcs11.CKA_VALUE_LEN, pkcs11.CKA_SENSITIVE, pkcs11.CKA_EXTRACTABLE, pkcs11.CKA_ENCRYPT, pkcs11.CKA_DECRYPT].map((type) => ({ type })))
      .map((attribute) => attribute.value as Buffer);
    if (ulong(keyType!) !== pkcs11.CKK_AES || ulong(length!) !== 32) throw new Error(`${where} is not an AES-256 key`);
    // The key-encryption key must never leave the HSM: a key that could be exported protects no more than MASTER_KEY.
    if (!bool(sensitive!) || bool(extractable!)) throw new Error(`${where} can leave the token: make it with CKA_SENSITIVE true and CKA_EXTRACTABLE false`);
    if (!bool(encrypt!) || !bool(decrypt!)) throw new Error(`${where} must allow CKA_ENCRYPT and CKA_DECRYPT`);
    const checkValue = this.identify(session, handle, where);
    const known = this.checkValues.get(label);
    if (known !== undefined && known !== checkValue) throw new Error(`${where} is not the key it was (check value ${checkValue}, was ${known}): refusing to use it`);
    this.checkValues.set(label, checkValue);
    this.keys.set(label, handle);
    return { handle, checkValue };
  }

  /** CKA_CHECK_VALUE where the token computes one (SoftHSM, most HSMs), else CKA_ID. */
  private identify(session: Pkcs11Js.Handle, handle: Pkcs11Js.Handle, where: string): string {
    const pkcs11 = pkcs11Binding();
    for (const type of [pkcs11.CKA_CHECK_VALUE, pkcs11.CKA_ID]) {
      try {
        const value = this.module.C_GetAttributeValue(session, handle, [{ type }])[0]?.value;
        if (Buffer.isBuffer(value) && value.length > 0) return `${type === pkcs11.CKA_ID ? 'id-' : ''}${value.toString('hex')}`;
      } catch (error) {
        if (!isPkcs11Error(error, new Set(['CKR_ATTRIBUTE_TYPE_INVALID', 'CKR_ATTRIBUTE_SENSITIVE']))) throw error;
      }
    }
    throw new Error(`${where} has neither CKA_CHECK_VALUE nor CKA_ID: give it a CKA_ID so that another key of the same label is told apart`);
  }

  private open(): Pkcs11Js.Handle {
    if (this.session) return this.session;
    const pkcs11 = pkcs11Binding();
    const slot = slotOfToken(this.module, this.settings.library, this.settings.tokenLabel);
    const session = this.module.C_OpenSession(slot, pkcs11.CKF_SERIAL_SESSION);
    try {
      loginUser(this.module, session, this.settings.pin, this.settings.tokenLabel);
    } catch (error) {
      this.module.C_CloseSession(session);
      throw error;
    }
    this.session = session;
    return session;
  }

  private drop(): void {
    const session = this.session;
    this.session = null;
    this.keys.clear();
    if (!session) return;
    try {
      this.module.C_CloseSession(session);
    } catch {
      // Already gone with the device or the HSM's restart: nothing left to close.
    }
  }
}

const ulong = (value: Buffer): number => Number(value.readUIntLE(0, Math.min(value.length, 6)));
const bool = (value: Buffer): boolean => value.length > 0 && value[0] !== 0;

/** One token object per library and token per process: every provider and key of it shares its session. */
const tokens = new Map<string, { token: Pkcs11Token; pinDigest: string }>();

export function pkcs11Token(settings: Pkcs11Settings): Pkcs11Token {
  const id = `${settings.library}\n${settings.tokenLabel}`;
  const pinDigest = createHash('sha256').update(settings.pin).digest('hex');
  const known = tokens.get(id);
  // A login holds for the whole process (PKCS#11 logs in the application, not a session): another PIN could not be checked.
  if (known && known.pinDigest !== pinDigest) throw new Error(`PKCS11_PIN differs from the one this process logged in to token "${settings.tokenLabel}" with`);
  if (known) return known.token;
  const token = new Pkcs11Token(pkcs11Module(settings.library), settings);
  tokens.set(id, { token, pinDigest });
  return token;
}
