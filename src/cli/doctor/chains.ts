import type { NetworkIdentity } from '../../chains/provider';
import { configuredNodeInspections } from '../../chains/nodes';
import { failing, misconfigured, ok, type Check, type DoctorContext } from './check';

const networkOf = (identity: NetworkIdentity) => (identity.chainId !== undefined ? `chain id ${identity.chainId}` : `network ${identity.network ?? 'unnamed'}`);

/**
 * Each configured chain node (CHAIN_NODE_*): reachable, on its environment's network, its token contracts
 * those of the catalogue. The checks are ChainNodes' own (src/chains/nodes.ts), run afresh.
 */
export function chainChecks({ config, timeoutMs }: DoctorContext): Check[] {
  return configuredNodeInspections(config, timeoutMs).map(({ chain, environment, inspect }) => {
    const variable = `CHAIN_NODE_${chain.toUpperCase()}_${environment.toUpperCase()}`;
    return {
      name: `${chain} ${environment} node`,
      environment,
      run: async () => {
        const inspection = await inspect();
        switch (inspection.kind) {
          case 'verified':
            return ok(`reachable, ${networkOf(inspection.identity)}${chain === 'bitcoin' ? '' : ', token contracts as the catalogue has them'}`);
          case 'network_mismatch':
            return misconfigured(`on the wrong network: ${inspection.problem}`, `point ${variable} at a node of the right network; ${chain} ${environment} answers 503 until then`);
          case 'token_mismatch':
            return misconfigured(inspection.problem, `fix CHAIN_TOKENS_${chain.toUpperCase()}_${environment.toUpperCase()}; ${chain} ${environment} answers 503 until then`);
          case 'unreachable':
            return failing(`unreachable: ${inspection.problem}`, `start the node or fix ${variable}; it is asked again on next use`);
        }
      },
    };
  });
}
