import { randomBytes } from 'node:crypto';
import { hasSeedKey, keyProviderFor, seedKeyProviderFor, type KeyProvider } from '../../keys/provider';
import { rowsPerMasterKey, type KeyRole } from '../../keys/rotation';
import { sealedColumns } from '../../registries';
import { failing, misconfigured, ok, reasonOf, warn, type Check, type CheckOutcome, type DoctorContext } from './check';

/** The key of a role, built as the processes build it: an HSM that cannot be reached, or a missing key, throws here. */
function providerOf<T extends KeyProvider | undefined>(build: () => T): T | Error {
  try {
    return build();
  } catch (error) {
    return error as Error;
  }
}

/** Wraps a throwaway data key and unwraps it: the master key is there and works (an HSM: the token answers, the PIN opens it). */
async function roundTrip(provider: KeyProvider): Promise<void> {
  const dataKey = randomBytes(32);
  const opened = await provider.decryptDataKey(await provider.encryptDataKey(dataKey, 'doctor'), 'doctor');
  if (!Buffer.from(opened).equals(dataKey)) throw new Error('the key provider unwrapped another key than it wrapped');
}

const where = (config: DoctorContext['config'], role: KeyRole) =>
  config.KEY_PROVIDER === 'pkcs11' ? `PKCS#11 token ${config.PKCS11_TOKEN_LABEL}, key ${role === 'data' ? config.PKCS11_KEY_LABEL : config.PKCS11_SEED_KEY_LABEL}` : role === 'data' ? 'MASTER_KEY' : 'SEED_MASTER_KEY';

/**
 * Key custody (docs/custody.md, "Key custody"): the data key, and on a signer host the seed key, each wraps and
 * unwraps (an HSM reachable, its key usable); and the stored rows of each role, one per master key they name, open
 * under the configured keys (a row under a key no longer configured is lost to the service until it is).
 */
export function keyChecks({ config, database }: DoctorContext): Check[] {
  const data = providerOf(() => keyProviderFor(config));
  const seed = providerOf(() => seedKeyProviderFor(config));
  const fallsBack = !hasSeedKey(config) && seed !== undefined;
  const keyLine = async (role: KeyRole, provider: KeyProvider | Error): Promise<CheckOutcome> => {
    if (provider instanceof Error) return misconfigured(`${where(config, role)} cannot be used: ${reasonOf(provider)}`, 'fix the PKCS11_* variables, or the token (docs/custody.md)');
    try {
      await roundTrip(provider);
    } catch (error) {
      return failing(`${where(config, role)} does not wrap and unwrap: ${reasonOf(error)}`, 'check the HSM and its PKCS11_* variables (docs/custody.md)');
    }
    if (role === 'seed' && fallsBack) return warn(`no seed key: seeds are sealed under the data key (${provider.masterKeyId}), so every process holding it can open them`, 'give signers (the worker) SEED_MASTER_KEY or PKCS11_SEED_KEY_LABEL');
    if (provider.development) {
      const detail = 'the public development master key: nothing it wraps is protected; live keys answer 503 key_custody_unconfigured';
      return config.NODE_ENV === 'production' ? misconfigured(detail, 'set MASTER_KEY or KEY_PROVIDER=pkcs11') : warn(detail, 'set MASTER_KEY (32 random bytes) or KEY_PROVIDER=pkcs11 for any real use');
    }
    return ok(`${where(config, role)} wraps and unwraps (${provider.masterKeyId})`);
  };
  return [
    { name: 'key custody data key', environment: null, run: () => keyLine('data', data) },
    {
      name: 'key custody seed key',
      environment: null,
      run: async () => (seed === undefined ? ok('none on this host: it is no signer (seeds open only where the worker signs)') : keyLine('seed', seed)),
    },
    {
      name: 'key custody stored rows',
      environment: null,
      run: async () => {
        const providers: Record<KeyRole, KeyProvider | undefined | Error> = { data, seed };
        let em;
        try {
          em = (await database()).em.fork();
        } catch {
          return failing('not checked: the database cannot be reached', 'see the postgresql line');
        }
        let rows = 0;
        let previous = 0;
        for (const column of sealedColumns) {
          const provider = providers[column.role];
          if (provider === undefined || provider instanceof Error) continue;
          for (const key of await rowsPerMasterKey(em, column)) {
            rows += key.rows;
            try {
              (await provider.decryptDataKey(column.read(key.first), column.context(key.first))).fill(0);
            } catch (error) {
              return misconfigured(
                `${key.rows} rows of ${column.name} are under ${key.masterKeyId}, which does not open them: ${reasonOf(error)}`,
                'configure that key again (as current, or as previous: MASTER_KEY_PREVIOUS, PKCS11_PREVIOUS_KEY_LABELS, the SEED_ ones) until keys:rotate has moved them',
              );
            }
            if (key.masterKeyId !== provider.masterKeyId) previous += key.rows;
          }
        }
        const summary = `${rows} sealed rows open under the configured keys${seed === undefined ? ' (seeds not checked: no seed key on this host)' : ''}`;
        return previous > 0 ? warn(`${summary}; ${previous} of them under a previous key`, 'run npm run cli -- keys:rotate (on a signer host), then remove the previous keys') : ok(summary);
      },
    },
  ];
}
