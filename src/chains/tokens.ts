import type { EntityManager } from '@mikro-orm/postgresql';
import type { Environment } from '../api-keys/entities';
import { ASSETS, type AssetInfo, type ChainId } from '../catalogue/service';
import { ChainUnavailableError, type ChainNodes } from './nodes';
import { NodeUnavailableError } from './provider';

/**
 * The catalogue's token contracts (or mints) as the environment's node knows them: a token's address
 * differs per network, so it is the provider's to say (the devnet's own, CHAIN_TOKENS_* for a node).
 */

/** The token contracts (or mints) of the chain on the environment's network, by asset id; empty when its node is not configured or does not answer. */
export async function tokenContracts(em: EntityManager, chains: ChainNodes, chain: ChainId, environment: Environment): Promise<Map<string, string>> {
  const contracts = new Map<string, string>();
  try {
    const provider = await chains.provider(chain, environment, em);
    for (const asset of ASSETS.filter((candidate) => candidate.chain === chain && candidate.type !== 'native')) {
      const address = provider.tokenAddress(asset.id);
      if (address) contracts.set(asset.id, address);
    }
  } catch (error) {
    if (!(error instanceof ChainUnavailableError || error instanceof NodeUnavailableError)) throw error;
  }
  return contracts;
}

/** Ethereum addresses compare without their checksum case; the other chains' as written. */
export const sameContract = (chain: ChainId, a: string, b: string) => (chain === 'ethereum' ? a.toLowerCase() === b.toLowerCase() : a === b);

/** The catalogue asset whose contract (or mint) is `address` on the environment's network, if any. */
export async function tokenAssetAt(em: EntityManager, chains: ChainNodes, chain: ChainId, environment: Environment, address: string): Promise<AssetInfo | undefined> {
  const contracts = await tokenContracts(em, chains, chain, environment);
  const id = [...contracts].find(([, contract]) => sameContract(chain, contract, address))?.[0];
  return id === undefined ? undefined : ASSETS.find((asset) => asset.id === id);
}
