import { z } from 'zod';
import { parseMasterKey } from './master-key';

/** A master key: 32 bytes, base64 or hex. */
const masterKey = (name: string) =>
  z
    .string()
    .optional()
    .refine((value) => value === undefined || parseMasterKey(value) !== null, `${name} must be 32 bytes, base64 or hex encoded`);
/** Older master keys, comma-separated (unwrap only, during a rotation). */
const previousMasterKeys = (name: string) =>
  z
    .string()
    .optional()
    .refine((value) => value === undefined || value.split(',').every((key) => parseMasterKey(key) !== null), `${name} must be comma-separated keys of 32 bytes, base64 or hex encoded`)
    .transform((value) => (value === undefined ? [] : value.split(',').map((key) => key.trim())));
/** Labels of older PKCS#11 keys, comma-separated. */
const keyLabels = z
  .string()
  .optional()
  .transform((value) => (value === undefined ? [] : value.split(',').map((label) => label.trim()).filter((label) => label !== '')));

/** Key custody's variables (docs/custody.md, "Key custody"): the data role, the seed role and the HSM; part of ConfigSchema (src/config.ts). */
export const KeyCustodySettings = z.object({
  /**
   * Where the master key that wraps every data key lives (docs/custody.md, "Key custody"): `local`, MASTER_KEY in
   * this process's memory; `pkcs11`, an AES-256 key inside an HSM (PKCS11_*), which never leaves it.
   */
  KEY_PROVIDER: z.enum(['local', 'pkcs11']).default('local'),
  /** 32 bytes, base64 or hex: the local master key. Required in production unless KEY_PROVIDER=pkcs11. */
  MASTER_KEY: masterKey('MASTER_KEY'),
  /**
   * Older local master keys, comma-separated, during a rotation (`npm run cli -- keys:rotate`): they only unwrap
   * what they wrapped, nothing new is wrapped under them. Also how a move from MASTER_KEY to an HSM keeps opening rows.
   */
  MASTER_KEY_PREVIOUS: previousMasterKeys('MASTER_KEY_PREVIOUS'),
  /**
   * KEY_PROVIDER=pkcs11: the HSM's PKCS#11 module (a .so path), the label of its token, the user PIN (a secret:
   * never logged, never in an error) and the label of the current AES-256 key; older keys' labels, comma-separated,
   * unwrap only during a rotation.
   */
  PKCS11_LIBRARY: z.string().min(1).optional(),
  PKCS11_TOKEN_LABEL: z.string().min(1).max(32, 'PKCS11_TOKEN_LABEL is at most 32 characters (a PKCS#11 token label)').optional(),
  PKCS11_PIN: z.string().min(1, 'PKCS11_PIN must not be empty').optional(),
  PKCS11_KEY_LABEL: z.string().min(1).optional(),
  PKCS11_PREVIOUS_KEY_LABELS: keyLabels,
  /**
   * The seed role (docs/custody.md, "Key custody"): organization seeds are sealed under a master key of their own,
   * given only to signer processes (the worker), never to the API. KEY_PROVIDER=local: SEED_MASTER_KEY (32 bytes,
   * base64 or hex) and, during a rotation or the move of seeds off the data key, SEED_MASTER_KEY_PREVIOUS;
   * KEY_PROVIDER=pkcs11: PKCS11_SEED_KEY_LABEL (a key of its own on the token) and PKCS11_SEED_PREVIOUS_KEY_LABELS.
   */
  SEED_MASTER_KEY: masterKey('SEED_MASTER_KEY'),
  SEED_MASTER_KEY_PREVIOUS: previousMasterKeys('SEED_MASTER_KEY_PREVIOUS'),
  PKCS11_SEED_KEY_LABEL: z.string().min(1).optional(),
  PKCS11_SEED_PREVIOUS_KEY_LABELS: keyLabels,
  /**
   * Outside production, a process with no seed key seals and opens seeds under the data key (`data`, the default:
   * seeds made before the split stay there until keys:rotate moves them), which makes every process a signer;
   * `none` makes it one that holds no seed key, as the API is in production (wallets and signatures then go
   * through the worker). Production never falls back.
   */
  SEED_KEY_FALLBACK: z.enum(['data', 'none']).default('data'),
});

/** What key custody's variables must agree on, with each other and with NODE_ENV. */
export function checkKeyCustodySettings(config: z.infer<typeof KeyCustodySettings> & { NODE_ENV: string }, context: z.RefinementCtx): void {
  if (config.NODE_ENV === 'production' && config.KEY_PROVIDER === 'local' && config.MASTER_KEY === undefined) {
    context.addIssue({ code: 'custom', path: ['MASTER_KEY'], message: 'MASTER_KEY is required when NODE_ENV=production (32 bytes, base64 or hex), unless KEY_PROVIDER=pkcs11' });
  }
    // The token is needed for the current key (pkcs11) and for previous PKCS#11 keys (a rotation back to local).
    const usesToken = config.KEY_PROVIDER === 'pkcs11' || config.PKCS11_PREVIOUS_KEY_LABELS.length > 0 || config.PKCS11_SEED_PREVIOUS_KEY_LABELS.length > 0;
    const needed = ['PKCS11_LIBRARY', 'PKCS11_TOKEN_LABEL', 'PKCS11_PIN', ...(config.KEY_PROVIDER === 'pkcs11' ? (['PKCS11_KEY_LABEL'] as const) : [])] as const;
    for (const name of usesToken ? needed : []) {
      if (config[name] === undefined) context.addIssue({ code: 'custom', path: [name], message: `${name} is required with KEY_PROVIDER=pkcs11 (or PKCS11_PREVIOUS_KEY_LABELS)` });
    }
    if (config.KEY_PROVIDER === 'pkcs11' && config.MASTER_KEY !== undefined) {
      context.addIssue({ code: 'custom', path: ['MASTER_KEY'], message: 'MASTER_KEY is the current key of KEY_PROVIDER=local: with KEY_PROVIDER=pkcs11 move it to MASTER_KEY_PREVIOUS until keys:rotate has re-wrapped every row' });
    }
    if (config.KEY_PROVIDER === 'pkcs11' && config.SEED_MASTER_KEY !== undefined) {
      context.addIssue({ code: 'custom', path: ['SEED_MASTER_KEY'], message: 'SEED_MASTER_KEY is the seed key of KEY_PROVIDER=local: with KEY_PROVIDER=pkcs11 set PKCS11_SEED_KEY_LABEL and move it to SEED_MASTER_KEY_PREVIOUS until keys:rotate has re-wrapped every seed' });
    }
    if (config.KEY_PROVIDER === 'local' && config.PKCS11_SEED_KEY_LABEL !== undefined) {
      context.addIssue({ code: 'custom', path: ['PKCS11_SEED_KEY_LABEL'], message: 'PKCS11_SEED_KEY_LABEL is the seed key of KEY_PROVIDER=pkcs11: with KEY_PROVIDER=local set SEED_MASTER_KEY' });
    }
}
