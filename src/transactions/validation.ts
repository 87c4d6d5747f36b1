import type { EntityManager } from '@mikro-orm/postgresql';
import { ASSETS, assetAmount, chainAsset, findChain, networkFor, type AssetInfo, type ChainInfo } from '../catalogue/service';
import { canonicalAddress } from '../chains/addresses';
import type { Wallet } from '../custody/entities';
import { findWallet, type Tenant } from '../custody/service';
import { errors } from '../shared/errors';
import { withArticle } from '../shared/articles';

/** What a send and its fee estimate both name. */
export interface TransferRequest {
  wallet_id: string;
  to_address: string;
  amount: string;
  asset: string;
  treat_as_gross_amount?: boolean | undefined;
}

export interface ResolvedTransfer {
  wallet: Wallet;
  chain: ChainInfo;
  asset: AssetInfo;
  /** The chain's native asset: fees are paid in it. */
  native: AssetInfo;
  /** Canonical for the chain and the key's network. */
  toAddress: string;
  /** Base units, positive. */
  amount: bigint;
  gross: boolean;
}

/**
 * Checks a send before anything is asked of a node: the wallet is the caller's, the asset the
 * wallet's chain's (an id, or a bare symbol resolved on that chain), the address valid on the key's
 * network, the amount positive with no more decimals than the asset has, and gross mode only for
 * the native asset (a token's fee is paid in the native asset, so it cannot come out of the amount).
 */
export async function resolveTransfer(em: EntityManager, auth: Tenant, input: TransferRequest): Promise<ResolvedTransfer> {
  const wallet = await findWallet(em, auth, input.wallet_id, 'wallet_id');
  const chain = findChain(wallet.chain);
  const asset = chainAsset(chain.id, input.asset);
  const native = ASSETS.find((candidate) => candidate.id === chain.nativeAssetId)!;
  const toAddress = canonicalAddress(chain.id, auth.environment, input.to_address);
  if (!toAddress) throw errors.validation(`to_address is not ${withArticle(chain.id)} address on ${networkFor(chain, auth.environment)}.`, 'to_address');
  const amount = assetAmount(input.amount, asset);
  const gross = input.treat_as_gross_amount ?? false;
  if (gross && asset.id !== native.id) {
    throw errors.invalid(
      'gross_amount_native_only',
      `treat_as_gross_amount takes the fee out of the amount sent, which only works when the fee is paid in the asset sent: ${asset.id} fees are paid in ${native.id}.`,
      { param: 'treat_as_gross_amount' },
    );
  }
  return { wallet, chain, asset, native, toAddress, amount, gross };
}
