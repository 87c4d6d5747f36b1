import { ENVIRONMENTS, type Environment } from '../../api-keys/entities';
import { LndError, LndNode, LndUnavailableError, lightningNetwork, lndSettings } from '../../lightning/lnd';
import { LND_PERMISSIONS, lndFileCredentials, macaroonPermissions, missingPermissions } from '../../lightning/lnd-macaroon';
import { failing, misconfigured, ok, reasonOf, warn, type Check, type DoctorContext } from './check';

const BAKE = 'bake one of only what the service uses: npm run cli -- lnd:bake-macaroon (docs/lightning.md, "Macaroon")';

/**
 * Each configured LND (LIGHTNING_LND_*): the node reachable and on its environment's network (LndNode's own
 * GetInfo check), and its macaroon granting exactly LND_PERMISSIONS: nothing broader (live refuses it) and
 * nothing missing (those calls would be refused). Only the permissions are printed, never the macaroon.
 */
export function lightningChecks({ config }: DoctorContext): Check[] {
  return ENVIRONMENTS.flatMap((environment): Check[] => {
    const settings = lndSettings(config, environment);
    if (!settings) return [];
    const credentials = lndFileCredentials(settings.macaroonPath, settings.tlsCertPath);
    const prefix = `LIGHTNING_LND_${environment.toUpperCase()}`;
    return [
      {
        name: `lnd ${environment} node`,
        environment,
        run: async () => {
          // Without the least-privilege refusal: the macaroon has its own line, this one says whether the node answers.
          const node = new LndNode({ restUrl: settings.restUrl, credentials, network: lightningNetwork(config, environment) });
          try {
            const pubkey = await node.identityPubkey();
            return ok(`reachable, on ${lightningNetwork(config, environment)}, identity ${pubkey}`);
          } catch (error) {
            if (error instanceof LndUnavailableError && error.reason === 'network_mismatch') {
              return misconfigured(error.message, `point ${prefix}_REST_URL at a ${lightningNetwork(config, environment)} node, or set ${prefix}_NETWORK to the node's network`);
            }
            if (error instanceof LndError) return misconfigured(`the node refused GetInfo: ${error.message}`, `give the macaroon info:read; ${BAKE}`);
            if (error instanceof LndUnavailableError) return failing(error.message, `start the node, or fix ${prefix}_REST_URL or ${prefix}_TLS_CERT_PATH`);
            return misconfigured(`the credentials cannot be read: ${reasonOf(error)}`, `fix ${prefix}_MACAROON_PATH and ${prefix}_TLS_CERT_PATH`);
          }
        },
      },
      { name: `lnd ${environment} macaroon`, environment, run: async () => macaroonOutcome(environment, () => credentials().macaroon, prefix) },
    ];
  });
}

function macaroonOutcome(environment: Environment, read: () => Buffer, prefix: string) {
  let macaroon: Buffer;
  try {
    macaroon = read();
  } catch (error) {
    return misconfigured(`the macaroon cannot be read: ${reasonOf(error)}`, `fix ${prefix}_MACAROON_PATH`);
  }
  const granted = macaroonPermissions(macaroon);
  if (granted === null) {
    const detail = 'not an LND macaroon this reads: it may grant anything';
    return environment === 'live' ? misconfigured(`${detail}; live refuses it`, BAKE) : warn(detail, BAKE);
  }
  const excess = granted.filter((permission) => !(LND_PERMISSIONS as readonly string[]).includes(permission));
  const missing = missingPermissions(macaroon) ?? [];
  if (missing.length > 0) return misconfigured(`grants ${granted.join(', ') || 'nothing'}; lacks ${missing.join(', ')}, which the service's calls need`, BAKE);
  if (excess.length > 0) {
    const detail = `grants ${excess.join(', ')} beyond what the service uses (${LND_PERMISSIONS.join(', ')})`;
    return environment === 'live' ? misconfigured(`${detail}; live refuses it (503 lightning_node_unavailable, macaroon_too_broad)`, BAKE) : warn(detail, BAKE);
  }
  return ok(`grants exactly ${LND_PERMISSIONS.join(', ')}`);
}
