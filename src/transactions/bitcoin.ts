import type { EntityManager } from '@mikro-orm/postgresql';
import { BITCOIN_FEE_RATE_CEILING, requireFeeNearMarket } from '../chains/fees';
import type { FeeLevel, FeeMarket } from '../chains/provider';
import { findPrimaryAddress } from '../custody/service';
import { errors } from '../shared/errors';
import { DUST_LIMIT, selectCoins } from './coin-selection';
import type { StoredFeeTerms } from '../movements/fee-terms';
import type { PinnedInput } from './entities';
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

/** A send request's Bitcoin fee and coin control fields, as the API takes them. */
export interface BitcoinSendRequest {
  fee_rate?: string | undefined;
  max_fee_rate?: string | undefined;
  fill_fee_from_unselected?: boolean | undefined;
}

/**
 * The request's Bitcoin options, its fee rates judged: whole sat/vB from 1 to BITCOIN_FEE_RATE_CEILING,
 * and a fee_rate above `maxMarketMultiple` x the market's high level refused (400 fee_above_market)
 * unless max_fee_rate states the caller's own ceiling, which the rate may then not exceed (coin selection
 * refuses it, fee_rate_above_max).
 */
export function bitcoinSendOptions(input: BitcoinSendRequest, pinned: PinnedInput[] | null, market: FeeMarket, maxMarketMultiple: number): BitcoinSendOptions {
  if (market.model !== 'per_byte') throw new Error(`Bitcoin with a ${market.model} fee market`);
  const feeRate = input.fee_rate === undefined ? undefined : satPerVbyte(input.fee_rate, 'fee_rate');
  const maxFeeRate = input.max_fee_rate === undefined ? undefined : satPerVbyte(input.max_fee_rate, 'max_fee_rate');
  if (feeRate !== undefined && maxFeeRate === undefined) {
    requireFeeNearMarket({ param: 'fee_rate', given: feeRate, marketHigh: market.satPerVbyte.high, multiple: maxMarketMultiple, unit: 'sat/vB' });
  }
  return { feeRate, maxFeeRate, pinned, fillFromUnselected: input.fill_fee_from_unselected ?? false };
}

/** A fee rate in whole sat/vB, at least 1 (the network's relay floor), at most the ceiling (400 fee_above_ceiling). */
function satPerVbyte(value: string, param: string): bigint {
  if (!/^\d+$/.test(value) || BigInt(value) < 1n) throw errors.validation(`${param} is a whole number of sat/vB, at least 1 (for example "12").`, param);
  const rate = BigInt(value);
  if (rate > BITCOIN_FEE_RATE_CEILING) {
    throw errors.invalid('fee_above_ceiling', `${param} ${rate} sat/vB is above ${BITCOIN_FEE_RATE_CEILING} sat/vB, the most any request may name (Bitcoin Core's default maxfeerate).`, {
      param,
      details: { ceiling: BITCOIN_FEE_RATE_CEILING.toString(), given: rate.toString(), unit: 'sat/vB' },
    });
  }
  return rate;
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

/** BIP-125 rule 4 at the relay floor nodes default to (1 sat/vB): a replacement pays the fee it replaces plus this rate over its own size. */
export const MIN_RELAY_SAT_PER_VBYTE = 1n;

/** What a Bitcoin replacement is priced from: the send's locked inputs and its newest candidate. */
export interface BitcoinReplacementBasis {
  kind: 'speed_up' | 'cancel';
  inputTotal: bigint;
  recipientAmount: bigint;
  previous: Extract<StoredFeeTerms, { model: 'per_byte' }>;
  previousFee: bigint;
  /** sat/vB: the caller's fee_rate, or the market's at the level asked. */
  rate: bigint;
  /** Automatic bumps: the most the fee may be. */
  cap: bigint | null;
}

/**
 * A BIP-125 replacement of a Bitcoin send spending the same inputs: the fee is the larger of
 * `rate` x vsize and the replaced candidate's fee plus MIN_RELAY_SAT_PER_VBYTE x vsize, the vsize
 * the send's own (the same inputs and outputs for a speed-up; an upper bound for a cancel, which
 * has one output less). The extra fee comes out of the change (speed-up) or the one output back
 * to the wallet (cancel): when that would fall below the dust limit, 400 `change_too_small` (adding
 * inputs is not done). With a `cap` (automatic bumps), a fee above it is lowered to it; null when
 * the capped fee cannot outbid.
 */
export function bitcoinReplacementTerms(basis: BitcoinReplacementBasis): { terms: StoredFeeTerms; feeLimit: bigint } | null {
  const vsize = BigInt(basis.previous.vsize);
  const floor = basis.previousFee + MIN_RELAY_SAT_PER_VBYTE * vsize;
  let fee = basis.rate * vsize > floor ? basis.rate * vsize : floor;
  if (basis.cap !== null && fee > basis.cap) {
    if (floor > basis.cap) return null;
    fee = basis.cap;
  }
  const kept = basis.inputTotal - fee - (basis.kind === 'cancel' ? 0n : basis.recipientAmount);
  if (kept < DUST_LIMIT) {
    const what = basis.kind === 'cancel' ? 'the output back to the wallet' : "the send's change";
    throw errors.invalid('change_too_small', `A replacement paying ${fee} sat leaves ${kept < 0n ? 0n : kept} sat for ${what}, below the ${DUST_LIMIT} sat dust limit; a replacement spends only the send's own inputs.`, {
      details: { fee: fee.toString(), change: (kept < 0n ? 0n : kept).toString(), dust_limit: DUST_LIMIT.toString() },
    });
  }
  return { terms: { model: 'per_byte', satPerVbyte: (fee / vsize).toString(), vsize: basis.previous.vsize }, feeLimit: fee };
}
