import type { EntityManager } from '@mikro-orm/postgresql';
import { ASSETS, assetAmount, chainAsset, findChain, networkFor, type AssetInfo, type ChainInfo } from '../catalogue/service';
import { canonicalAddress } from '../chains/addresses';
import type { FeeLevel } from '../chains/provider';
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

export interface CreateTransactionInput extends TransferRequest {
  fee_level?: FeeLevel | undefined;
  fee_rate?: string | undefined;
  max_fee_rate?: string | undefined;
  fill_fee_from_unselected?: boolean | undefined;
  inputs?: { txid: string; vout: string }[] | undefined;
  note?: string | undefined;
  sponsor?: boolean | undefined;
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

/** The request's options that fit no send of its chain or amount: 400 before anything is read or locked. */
export function checkSendOptions(transfer: ResolvedTransfer, input: CreateTransactionInput): void {
  const { chain, gross } = transfer;
  const bitcoinOnly = (['inputs', 'fee_rate', 'max_fee_rate', 'fill_fee_from_unselected'] as const).find((field) => input[field] !== undefined);
  if (bitcoinOnly && chain.id !== 'bitcoin') {
    throw errors.invalid('bitcoin_only', `${bitcoinOnly} is coin control and fee-rate control for Bitcoin; ${withArticle(chain.id)} wallet cannot use it.`, { param: bitcoinOnly });
  }
  if (input.inputs && gross) {
    throw errors.invalid('inputs_with_gross_amount', 'inputs (coin control) cannot be combined with treat_as_gross_amount: choose the inputs, or let the fee come out of the amount.', {
      param: 'inputs',
    });
  }
  if (input.fill_fee_from_unselected !== undefined && !input.inputs) {
    throw errors.validation('fill_fee_from_unselected tops up pinned inputs: it needs inputs.', 'fill_fee_from_unselected');
  }
  if (input.sponsor && gross) {
    throw errors.invalid('sponsored_gross_amount', 'A sponsored fee is paid by a gas station, not out of the amount: send without treat_as_gross_amount.', {
      param: 'treat_as_gross_amount',
    });
  }
}
