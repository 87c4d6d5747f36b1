import type { Environment } from '../api-keys/entities';
import { errors } from '../shared/errors';
import { AmountError, toBaseUnits } from '../shared/money';

export const CHAIN_IDS = ['bitcoin', 'ethereum', 'tron', 'solana'] as const;
export type ChainId = (typeof CHAIN_IDS)[number];

export interface ChainInfo {
  id: ChainId;
  /** Network used by live keys, and by sandbox keys. */
  networks: { live: string; sandbox: string };
  nativeAssetId: string;
}

export interface AssetInfo {
  id: string;
  symbol: string;
  name: string;
  chain: ChainId;
  type: 'native' | 'erc20' | 'trc20' | 'spl';
  decimals: number;
}

export const CHAINS: readonly ChainInfo[] = [
  { id: 'bitcoin', networks: { live: 'mainnet', sandbox: 'testnet' }, nativeAssetId: 'BTC' },
  { id: 'ethereum', networks: { live: 'mainnet', sandbox: 'sepolia' }, nativeAssetId: 'ETH' },
  { id: 'tron', networks: { live: 'mainnet', sandbox: 'nile' }, nativeAssetId: 'TRX' },
  { id: 'solana', networks: { live: 'mainnet', sandbox: 'devnet' }, nativeAssetId: 'SOL' },
];

/** Token ids are `<SYMBOL>_<CHAIN_CODE>`; natives are the bare symbol. Decimals are the chains' own. */
export const ASSETS: readonly AssetInfo[] = [
  { id: 'BTC', symbol: 'BTC', name: 'Bitcoin', chain: 'bitcoin', type: 'native', decimals: 8 },
  { id: 'ETH', symbol: 'ETH', name: 'Ether', chain: 'ethereum', type: 'native', decimals: 18 },
  { id: 'USDC_ETH', symbol: 'USDC', name: 'USD Coin', chain: 'ethereum', type: 'erc20', decimals: 6 },
  { id: 'USDT_ETH', symbol: 'USDT', name: 'Tether USD', chain: 'ethereum', type: 'erc20', decimals: 6 },
  { id: 'TRX', symbol: 'TRX', name: 'Tron', chain: 'tron', type: 'native', decimals: 6 },
  { id: 'USDT_TRX', symbol: 'USDT', name: 'Tether USD', chain: 'tron', type: 'trc20', decimals: 6 },
  { id: 'SOL', symbol: 'SOL', name: 'Solana', chain: 'solana', type: 'native', decimals: 9 },
  { id: 'USDC_SOL', symbol: 'USDC', name: 'USD Coin', chain: 'solana', type: 'spl', decimals: 6 },
];

export function findChain(id: string): ChainInfo {
  const chain = CHAINS.find((candidate) => candidate.id === id);
  if (!chain) throw errors.notFound('chain', id, 'chain');
  return chain;
}

/**
 * A display amount of `asset` in base units, exact: 400 on `param` for anything but a plain decimal
 * with at most the asset's decimals, and (unless `positive` is false) for zero.
 */
export function assetAmount(display: string, asset: AssetInfo, param = 'amount', positive = true): bigint {
  let amount: bigint;
  try {
    amount = toBaseUnits(display, asset.decimals);
  } catch (error) {
    if (error instanceof AmountError) throw errors.validation(`${param}: ${error.message} (${asset.id} has ${asset.decimals} decimals).`, param);
    throw error;
  }
  if (positive && amount === 0n) throw errors.validation(`${param} must be greater than zero.`, param);
  return amount;
}

/** A catalogue asset by its id (ids stored by the platform itself: always known). */
export function assetById(id: string): AssetInfo {
  const asset = ASSETS.find((candidate) => candidate.id === id);
  if (!asset) throw new Error(`unknown asset id '${id}'`);
  return asset;
}

/** An asset of the chain by id (`USDC_ETH`) or by the chain's symbol (`USDC`); 400 on `param` otherwise. */
export function chainAsset(chain: ChainId, asset: string, param = 'asset'): AssetInfo {
  const found = ASSETS.find((candidate) => candidate.chain === chain && (candidate.id === asset || candidate.symbol === asset));
  if (!found) throw errors.validation(`asset '${asset}' is not an asset of ${chain}: give an asset id or symbol of the chain (${ASSETS.filter((a) => a.chain === chain).map((a) => a.id).join(', ')}).`, param);
  return found;
}

/** The network an environment uses on a chain: live keys mainnet, sandbox keys the chain's testnet. */
export const networkFor = (chain: ChainInfo, environment: Environment): string => chain.networks[environment];

export function presentChain(chain: ChainInfo, environment: Environment) {
  return {
    id: chain.id,
    object: 'chain' as const,
    name: chain.id,
    networks: [chain.networks.live, chain.networks.sandbox],
    network: networkFor(chain, environment),
    native_asset_id: chain.nativeAssetId,
  };
}

export function presentAsset(asset: AssetInfo) {
  return {
    id: asset.id,
    object: 'asset' as const,
    symbol: asset.symbol,
    name: asset.name,
    chain: asset.chain,
    type: asset.type,
    decimals: asset.decimals,
  };
}
