import { renameSync, writeFileSync } from 'node:fs';
import { loadConfig } from '../config';
import type { Orm } from '../db/orm';
import { bakeMacaroon, LND_PERMISSIONS, lndFileCredentials } from '../lightning/lnd-macaroon';
import { LndNode, lightningNetwork, lndSettings } from '../lightning/lnd';
import { environmentOption, required, text, UsageError, wholeNumber, type Options } from './options';

/** The operator CLI's LND commands (docs/lightning.md, "Macaroon"). */
export const lndCommands: Record<string, (orm: Orm, options: Options) => Promise<unknown>> = {
  /**
   * Bakes a macaroon of only the permissions the service uses on the environment's node (its REST URL
   * and certificate from the configuration), with the admin macaroon given, and writes it to --out
   * (owner-only; replaced whole, so a running service reloads it at once). The admin macaroon stays
   * with the operator.
   */
  async 'lnd:bake-macaroon'(_orm, options) {
    const config = loadConfig();
    const environment = environmentOption(options);
    const settings = lndSettings(config, environment);
    if (!settings) throw new UsageError(`set the ${environment} LND variables first (LIGHTNING_LND_${environment.toUpperCase()}_REST_URL, ..._MACAROON_PATH, ..._TLS_CERT_PATH)`);
    const out = required(options, 'out');
    const rootKeyId = BigInt(wholeNumber(text(options, 'root-key-id') ?? '0', 'root-key-id', Number.MAX_SAFE_INTEGER));
    const admin = new LndNode({ restUrl: settings.restUrl, credentials: lndFileCredentials(required(options, 'admin-macaroon'), settings.tlsCertPath), network: lightningNetwork(config, environment) });
    const macaroon = await bakeMacaroon(admin, rootKeyId);
    writeFileSync(`${out}.new`, macaroon, { mode: 0o600 });
    renameSync(`${out}.new`, out);
    return { environment, out, root_key_id: rootKeyId.toString(), permissions: LND_PERMISSIONS };
  },
};
