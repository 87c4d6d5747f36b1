import type { EntityManager } from '@mikro-orm/postgresql';
import type { FeeLevel, FeeMarket } from '../chains/provider';
import { findPrimaryAddress } from '../custody/service';
import { selectCoins } from './coin-selection';
import type { PinnedInput, StoredFeeTerms } from './entities';
import type { ResolvedTransfer } from './validation';
import { pinnedOutputs, spendableOutputs } from './wallet-outputs';

export interface BitcoinSendOptions {
  /** sat/vB: overrides the fee level. */
  feeRate: bigint | undefined;
  /** sat/vB: the effective rate may not exceed it. */
  maxFeeRate: bigint | undefined;
  pinned: PinnedInput[] | null;
  fillFromUnselected: boolean;
}

/**
 * A Bitcoin send's coins and fee, chosen when it is accepted: the rate (fee_rate, or the level's
 * market rate, capped by max_fee_rate), the inputs (the pinned ones, topped up from the rest of the
 * wallet only with fill_fee_from_unselected), the exact fee for their size, and change back to the
 * wallet's primary address. The caller locks the chosen outputs in the same transaction.
 */
export async function planBitcoinSend(em: EntityManager, transfer: ResolvedTransfer, market: FeeMarket, level: FeeLevel, options: BitcoinSendOptions) {
  if (market.model !== 'per_byte') throw new Error(`Bitcoin with a ${market.model} fee market`);
  const rate = options.feeRate ?? market.satPerVbyte[level];
  const change = await findPrimaryAddress(em, transfer.wallet);
  const pinned = options.pinned ? await pinnedOutputs(em, transfer.wallet, options.pinned) : null;
  const pinnedIds = new Set(pinned?.map((output) => output.id));
  const others = (await spendableOutputs(em, transfer.wallet)).filter((output) => !pinnedIds.has(output.id));
  const selection = selectCoins({
    amount: transfer.amount,
    gross: transfer.gross,
    satPerVbyte: rate,
    maxSatPerVbyte: options.maxFeeRate,
    recipient: transfer.toAddress,
    changeFormat: change.format as 'p2wpkh' | 'p2tr' | 'p2pkh',
    pinned,
    others,
    fillFromUnselected: options.fillFromUnselected,
  });
  const terms: StoredFeeTerms = { model: 'per_byte', satPerVbyte: rate.toString(), vsize: selection.vsize };
  return {
    terms,
    feeLimit: selection.fee,
    recipientAmount: selection.recipientAmount,
    outputIds: selection.inputs.map((input) => input.id),
    change: selection.change,
  };
}
