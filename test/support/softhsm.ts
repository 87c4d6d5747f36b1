import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { pkcs11Binding, pkcs11Module, loginUser, slotOfToken } from '../../src/keys/pkcs11-token';
import { missingTool } from './missing-tool';

const run = promisify(execFile);

/** Where Debian's softhsm2 (scripts/ensure-tools.sh installs it) and other systems put the module; SOFTHSM2_MODULE wins. */
const MODULE_PATHS = [
  process.env.SOFTHSM2_MODULE,
  '/usr/lib/softhsm/libsofthsm2.so',
  '/usr/lib/x86_64-linux-gnu/softhsm/libsofthsm2.so',
  '/usr/lib/aarch64-linux-gnu/softhsm/libsofthsm2.so',
  '/usr/local/lib/softhsm/libsofthsm2.so',
  '/opt/homebrew/lib/softhsm/libsofthsm2.so',
];

export interface SoftHsmToken {
  library: string;
  tokenLabel: string;
  pin: string;
  /**
   * The configuration of KEY_PROVIDER=pkcs11 on this token with `keyLabel` current and `previous` older keys;
   * MASTER_KEY unset (the suite sets one in the environment, and an HSM's configuration refuses it).
   */
  config: (keyLabel: string, previous?: string[]) => Record<string, string | undefined>;
  /** Generates an AES-256 key inside the token: never extractable unless a test asks for a key the provider must refuse. */
  createKey: (label: string, options?: { extractable?: boolean }) => void;
  /** Destroys the keys labelled `label` (a test replacing a key by another of the same label). */
  destroyKey: (label: string) => void;
  /** Closes every session of this process on the token, as an HSM restart would: the providers' sessions are lost. */
  dropSessions: () => void;
}

let token: Promise<SoftHsmToken> | undefined;

/**
 * A throwaway SoftHSM2 token for this test process: a softhsm2.conf of its own (SOFTHSM2_CONF, inherited
 * by the CLI processes the tests start) with its tokens in a temporary folder, removed when the process
 * exits. One per process: SoftHSM reads its tokens when the library is initialised, once per process.
 * Without SoftHSM or the pkcs11js binding the test is skipped, and fails under CI.
 */
export async function softHsmToken(context: Mocha.Context): Promise<SoftHsmToken> {
  const library = MODULE_PATHS.find((candidate) => candidate && existsSync(candidate));
  if (!library) return missingTool(context, 'SoftHSM2 (Debian softhsm2) is not installed');
  try {
    pkcs11Binding();
  } catch (error) {
    return missingTool(context, (error as Error).message);
  }
  token ??= initialiseToken(library);
  return token;
}

async function initialiseToken(library: string): Promise<SoftHsmToken> {
  const dir = mkdtempSync(path.join(tmpdir(), 'softhsm-'));
  process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  const conf = path.join(dir, 'softhsm2.conf');
  mkdirSync(path.join(dir, 'tokens'));
  writeFileSync(conf, `directories.tokendir = ${path.join(dir, 'tokens')}\nobjectstore.backend = file\nlog.level = ERROR\n`);
  process.env.SOFTHSM2_CONF = conf;
  const tokenLabel = `custody-test-${process.pid}`;
  const pin = `user-${process.pid}-pin`;
  await run('softhsm2-util', ['--init-token', '--free', '--label', tokenLabel, '--pin', pin, '--so-pin', `so-${process.pid}-pin`], { env: process.env });

  const module = pkcs11Module(library);
  const pkcs11 = pkcs11Binding();
  /** A session of the test's own: the login is the process's, and closing it keeps the providers' sessions. */
  const withSession = <T>(work: (session: Buffer) => T): T => {
    const session = module.C_OpenSession(slotOfToken(module, library, tokenLabel), pkcs11.CKF_SERIAL_SESSION | pkcs11.CKF_RW_SESSION);
    try {
      loginUser(module, session, pin, tokenLabel);
      return work(session);
    } finally {
      module.C_CloseSession(session);
    }
  };
  return {
    library,
    tokenLabel,
    pin,
    config: (keyLabel, previous = []) => ({
      KEY_PROVIDER: 'pkcs11',
      MASTER_KEY: undefined,
      PKCS11_LIBRARY: library,
      PKCS11_TOKEN_LABEL: tokenLabel,
      PKCS11_PIN: pin,
      PKCS11_KEY_LABEL: keyLabel,
      PKCS11_PREVIOUS_KEY_LABELS: previous.join(','),
    }),
    createKey: (label, options = {}) =>
      withSession((session) => {
        module.C_GenerateKey(session, { mechanism: pkcs11.CKM_AES_KEY_GEN }, [
          { type: pkcs11.CKA_CLASS, value: pkcs11.CKO_SECRET_KEY },
          { type: pkcs11.CKA_KEY_TYPE, value: pkcs11.CKK_AES },
          { type: pkcs11.CKA_VALUE_LEN, value: 32 },
          { type: pkcs11.CKA_LABEL, value: label },
          { type: pkcs11.CKA_TOKEN, value: true },
          { type: pkcs11.CKA_PRIVATE, value: true },
          { type: pkcs11.CKA_SENSITIVE, value: !options.extractable },
          { type: pkcs11.CKA_EXTRACTABLE, value: options.extractable === true },
          { type: pkcs11.CKA_ENCRYPT, value: true },
          { type: pkcs11.CKA_DECRYPT, value: true },
        ]);
      }),
    destroyKey: (label) =>
      withSession((session) => {
        module.C_FindObjectsInit(session, [{ type: pkcs11.CKA_LABEL, value: label }]);
        const handles = module.C_FindObjects(session, 10);
        module.C_FindObjectsFinal(session);
        for (const handle of handles) module.C_DestroyObject(session, handle);
      }),
    dropSessions: () => module.C_CloseAllSessions(slotOfToken(module, library, tokenLabel)),
  };
}
