import * as btc from '@scure/btc-signer';
import { BITCOIN_DUST_LIMIT } from '../chains/devnet/params';
import type { BitcoinAddressFormat } from '../keys/derivation';
import { errors } from '../shared/errors';

/** The script types the platform derives addresses in, so the only outputs a wallet spends. */
export type SpendableFormat = BitcoinAddressFormat;
/** The script types a payment can go to. */
export type OutputType = SpendableFormat | 'p2sh' | 'p2wsh';

export interface SpendableOutput {
  id: string;
  txid: string;
  vout: number;
  amount: bigint;
  address: string;
  format: SpendableFormat;
}

export interface CoinSelectionRequest {
  /** Base units asked for. */
  amount: bigint;
  /** The fee comes out of the amount: the recipient gets amount - fee. */
  gross: boolean;
  /** The rate to pay: the caller's fee_rate, or the fee level's market rate. */
  satPerVbyte: bigint;
  /** The caller's max_fee_rate: a higher rate is refused. */
  maxSatPerVbyte?: bigint | undefined;
  /** The recipient's address: its output's size depends on its script type. */
  recipient: string;
  changeFormat: SpendableFormat;
  /** Coin control: exactly these are spent (others too only with fillFromUnselected). */
  pinned: SpendableOutput[] | null;
  /** The wallet's other available outputs. */
  others: SpendableOutput[];
  fillFromUnselected: boolean;
}

export interface CoinSelection {
  inputs: SpendableOutput[];
  /** What the inputs give the miner: rate x vsize, plus a remainder too small for a change output. */
  fee: bigint;
  vsize: number;
  recipientAmount: bigint;
  /** 0n: no change output. */
  change: bigint;
}

/** Bitcoin's standard limit on the inputs one send gathers (the 250). */
export const MAX_INPUTS = 250;

/**
 * The smallest output made, recipient or change: the devnet's (Bitcoin Core's p2pkh dust at 3 sat/vB),
 * the highest of the standard per-type limits (p2wpkh 294, p2tr 330), so every output relays on any node.
 */
export const DUST_LIMIT = BITCOIN_DUST_LIMIT;

/**
 * Sizes in weight units (a virtual byte is four; witness bytes weigh one, the rest four):
 * - p2wpkh input 272 WU (68 vB): 41 bytes of outpoint, empty script and sequence, and a witness of a
 *   72-byte signature at most and a 33-byte key;
 * - p2tr key-path input 230 WU (57.5 vB): the same 41 bytes and one 64-byte Schnorr signature (SIGHASH_DEFAULT);
 * - p2pkh input 592 WU (148 vB): its signature and key in the 107-byte script, no witness;
 * - outputs: 8 bytes of amount, the script's length and the script (p2wpkh 31 vB, p2tr 43, p2pkh 34, p2sh 32, p2wsh 43);
 * - overhead 40 WU (10 vB): version, locktime and the two counts (one byte each below 253), plus 2 WU
 *   for the segwit marker and flag when an input has a witness, and then 1 WU more for each input
 *   without one (its empty witness).
 * Signatures may come out a byte shorter: the estimate is never below the real size.
 */
const INPUT_WEIGHT: Record<SpendableFormat, number> = { p2wpkh: 272, p2tr: 230, p2pkh: 592 };
const OUTPUT_WEIGHT: Record<OutputType, number> = { p2wpkh: 124, p2tr: 172, p2pkh: 136, p2sh: 128, p2wsh: 172 };
const OVERHEAD_WEIGHT = 40;
const SEGWIT_MARKER_WEIGHT = 2;
const EMPTY_WITNESS_WEIGHT = 1;

/** Branch-and-bound gives up after this many steps (Bitcoin Core's bound) and largest-first decides. */
const BRANCH_AND_BOUND_TRIES = 100_000;

const OUTSCRIPT_TYPES: Partial<Record<string, OutputType>> = { wpkh: 'p2wpkh', tr: 'p2tr', pkh: 'p2pkh', sh: 'p2sh', wsh: 'p2wsh' };

/** The script type of a Bitcoin address on mainnet or a test network; the caller has validated it already. */
export function outputTypeOf(address: string): OutputType {
  for (const network of [btc.NETWORK, btc.TEST_NETWORK]) {
    let decoded: { type: string };
    try {
      decoded = btc.Address(network).decode(address);
    } catch {
      continue;
    }
    const type = OUTSCRIPT_TYPES[decoded.type];
    if (type) return type;
  }
  throw errors.validation(`to_address '${address}' is not a p2wpkh, p2tr, p2pkh, p2sh or p2wsh address.`, 'to_address');
}

/** Virtual size of a transaction spending `inputs` to the given outputs, rounded up to a whole vbyte. */
export function virtualSize(inputs: readonly { format: SpendableFormat }[], outputs: readonly OutputType[]): number {
  let weight = OVERHEAD_WEIGHT + outputs.reduce((sum, type) => sum + OUTPUT_WEIGHT[type], 0);
  let witnessless = 0;
  for (const input of inputs) {
    weight += INPUT_WEIGHT[input.format];
    if (input.format === 'p2pkh') witnessless += 1;
  }
  if (witnessless < inputs.length) weight += SEGWIT_MARKER_WEIGHT + witnessless * EMPTY_WITNESS_WEIGHT;
  return Math.ceil(weight / 4);
}

/**
 * Chooses the outputs a Bitcoin send spends and what it pays.
 *
 * Pinned outputs (coin control) are all spent, and others are added only with `fillFromUnselected`.
 * The rest is chosen deterministically (ties by txid and vout) by comparing two candidates:
 * - branch-and-bound (Bitcoin Core's): the set that pays amount and fee with a remainder too small
 *   for a change output, at the least fee: no change output, so a smaller transaction and no new
 *   output to track or link back to the wallet;
 * - largest-first: the fewest inputs, usually with change.
 * The changeless set wins unless it costs more than largest-first plus spending its change later.
 * Outputs worth less than the fee of spending them at this rate are left alone.
 *
 * A change output is made when it would hold at least DUST_LIMIT; a smaller remainder goes to the
 * miner, so `fee` is rate x vsize plus that remainder. Always sum(inputs) = recipient + change + fee.
 */
export function selectCoins(request: CoinSelectionRequest): CoinSelection {
  const rate = request.satPerVbyte;
  if (request.maxSatPerVbyte !== undefined && rate > request.maxSatPerVbyte) {
    throw errors.invalid('fee_rate_above_max', `The fee rate ${rate} sat/vB exceeds max_fee_rate ${request.maxSatPerVbyte} sat/vB.`, {
      param: 'max_fee_rate',
      details: { fee_rate: rate.toString(), max_fee_rate: request.maxSatPerVbyte.toString() },
    });
  }
  const plan: Plan = { ...request, recipientType: outputTypeOf(request.recipient) };
  if (request.amount < DUST_LIMIT) {
    throw errors.invalid('amount_below_dust', `The amount ${request.amount} sat is below the ${DUST_LIMIT} sat dust limit: no node relays such an output.`, {
      param: 'amount',
      details: { dust_limit: DUST_LIMIT.toString() },
    });
  }

  const pinned = request.pinned ?? [];
  if (pinned.length > MAX_INPUTS) throw tooManyInputs(pinned.length);
  const selection = request.pinned ? spendPinned(plan, request.pinned) : chooseInputs(plan, [], request.others);
  if (request.gross && selection.recipientAmount < DUST_LIMIT) {
    const nothing = selection.recipientAmount <= 0n;
    throw errors.invalid(
      nothing ? 'amount_below_fee' : 'amount_below_dust',
      nothing
        ? `The amount ${request.amount} sat does not exceed the ${selection.fee} sat fee: the recipient would get nothing.`
        : `The amount ${request.amount} sat leaves the recipient ${selection.recipientAmount} sat after the ${selection.fee} sat fee, below the ${DUST_LIMIT} sat dust limit.`,
      { param: 'amount', details: { fee: selection.fee.toString(), dust_limit: DUST_LIMIT.toString() } },
    );
  }
  return selection;
}

/** Exactly the pinned outputs, or with fill_fee_from_unselected those and whatever else the send needs. */
function spendPinned(plan: Plan, pinned: SpendableOutput[]): CoinSelection {
  const settled = settle(plan, pinned);
  if (settled.ok) return settled.selection;
  if (!plan.fillFromUnselected) {
    if (settled.feeAboveMax !== undefined) throw remainderAboveMax(plan, settled.feeAboveMax);
    throw errors.invalid(
      'pinned_inputs_insufficient',
      `The pinned inputs hold ${sum(pinned)} sat; the send needs ${settled.needed} sat with its fee. Pin more inputs or set fill_fee_from_unselected.`,
      { param: 'inputs', details: { pinned: sum(pinned).toString(), needed: settled.needed.toString() } },
    );
  }
  const pinnedIds = new Set(pinned.map((output) => output.id));
  return chooseInputs(
    plan,
    pinned,
    plan.others.filter((output) => !pinnedIds.has(output.id)),
  );
}

/**
 * The changeless set branch-and-bound finds, unless largest-first costs less: its fee, plus (when
 * it makes change) the fee of spending that change later at the same rate.
 */
function chooseInputs(plan: Plan, pinned: SpendableOutput[], outputs: SpendableOutput[]): CoinSelection {
  const changeless = branchAndBound(plan, pinned, outputs);
  const settled = largestFirst(plan, pinned, outputs);
  if (!settled.ok) {
    // Every output together leaves a remainder max_fee_rate refuses; a smaller changeless set may still pay within it.
    if (changeless) return changeless;
    if (settled.feeAboveMax !== undefined) throw remainderAboveMax(plan, settled.feeAboveMax);
    const available = sum(pinned) + sum(outputs);
    throw errors.invalid('insufficient_funds', `The wallet's spendable outputs hold ${available} sat; the send needs ${settled.needed} sat with its fee.`, {
      param: 'amount',
      details: { available: available.toString(), needed: settled.needed.toString() },
    });
  }
  const largest = settled.selection;
  const changeCost = largest.change > 0n ? plan.satPerVbyte * BigInt(Math.ceil(INPUT_WEIGHT[plan.changeFormat] / 4)) : 0n;
  return changeless && changeless.fee <= largest.fee + changeCost ? changeless : largest;
}

interface Plan extends CoinSelectionRequest {
  recipientType: OutputType;
}

/**
 * Ok: what the inputs pay. Not ok: what the inputs must hold, and when they hold enough but the
 * remainder too small for change would make the miner's fee exceed max_fee_rate, that fee.
 */
type Settled = Settlement | { ok: false; needed: bigint; feeAboveMax?: bigint };
interface Settlement {
  ok: true;
  selection: CoinSelection;
}

const sum = (outputs: readonly SpendableOutput[]) => outputs.reduce((total, output) => total + output.amount, 0n);

/**
 * What spending exactly `inputs` pays: with a change output when it would hold at least the dust
 * limit, else without one, the remainder to the fee. Not ok when the inputs fall short of the
 * amount (net: and the fee); `needed` then says how much they must hold.
 */
function settle(plan: Plan, inputs: SpendableOutput[]): Settled {
  const rate = plan.satPerVbyte;
  const total = sum(inputs);
  const withoutChange = virtualSize(inputs, [plan.recipientType]);
  const withChange = virtualSize(inputs, [plan.recipientType, plan.changeFormat]);
  const feeWithChange = rate * BigInt(withChange);
  const feeWithoutChange = rate * BigInt(withoutChange);
  // Net: the wallet pays amount + fee. Gross: amount, the fee out of it.
  const debit = (fee: bigint) => (plan.gross ? plan.amount : plan.amount + fee);
  const change = total - debit(feeWithChange);
  // Gross: the recipient gets the amount less rate x vsize; a remainder below dust is the wallet's, paid to the miner.
  const accept = (fee: bigint, vsize: number, changeAmount: bigint, remainder: bigint): Settlement => ({
    ok: true,
    selection: { inputs, fee, vsize, recipientAmount: plan.gross ? plan.amount - (fee - remainder) : plan.amount, change: changeAmount },
  });
  if (change >= DUST_LIMIT) return accept(feeWithChange, withChange, change, 0n);
  const remainder = total - debit(feeWithoutChange);
  if (remainder < 0n) return { ok: false, needed: debit(feeWithoutChange) };
  // The remainder is fee too: with it the rate paid may not exceed max_fee_rate. Enough for a change output would do.
  const fee = feeWithoutChange + remainder;
  if (plan.maxSatPerVbyte !== undefined && fee > plan.maxSatPerVbyte * BigInt(withoutChange)) {
    return { ok: false, needed: debit(feeWithChange) + DUST_LIMIT, feeAboveMax: fee };
  }
  return accept(fee, withoutChange, 0n, remainder);
}

/** What an output adds towards the target, in quarter satoshis (rate x weight is exact in them): its value less the fee of spending it. */
function effectiveValue(plan: Plan, output: SpendableOutput): bigint {
  return 4n * output.amount - (plan.gross ? 0n : plan.satPerVbyte * BigInt(INPUT_WEIGHT[output.format]));
}

/** Largest effective value first; ties by txid and vout so the same wallet and request choose the same coins. */
function ordered(plan: Plan, outputs: SpendableOutput[]) {
  return outputs
    .map((output) => ({ output, value: effectiveValue(plan, output) }))
    .filter((candidate) => candidate.value > 0n)
    .sort((a, b) => (a.value !== b.value ? (a.value > b.value ? -1 : 1) : a.output.txid !== b.output.txid ? (a.output.txid < b.output.txid ? -1 : 1) : a.output.vout - b.output.vout));
}

/**
 * Depth-first over the candidates, largest first, for a set (with the pinned ones) that settles
 * without change; the one paying the least fee (remainder included), then the fewest inputs.
 * The search runs on effective values, so the fee grows with every input added; the exact
 * settlement (rounding of the size included) decides each candidate set.
 */
function branchAndBound(plan: Plan, pinned: SpendableOutput[], outputs: SpendableOutput[]): CoinSelection | null {
  const candidates = ordered(plan, outputs);
  if (candidates.length === 0) return null;
  const rate = plan.satPerVbyte;
  const baseWeight = BigInt(OVERHEAD_WEIGHT + SEGWIT_MARKER_WEIGHT + OUTPUT_WEIGHT[plan.recipientType]);
  // Net: amount and the fee of the transaction's fixed part; the pinned outputs count towards it.
  const target = 4n * plan.amount + (plan.gross ? 0n : rate * baseWeight) - pinned.reduce((total, output) => total + effectiveValue(plan, output), 0n);
  // Above this the remainder pays for a change output: not a changeless match (+4 rate: the size's rounding up).
  const ceiling = target + 4n * DUST_LIMIT + rate * (BigInt(OUTPUT_WEIGHT[plan.changeFormat]) + 4n);
  const after: bigint[] = new Array<bigint>(candidates.length + 1).fill(0n);
  for (let index = candidates.length - 1; index >= 0; index--) after[index] = after[index + 1]! + candidates[index]!.value;

  const inputWeight = (output: SpendableOutput) => BigInt(INPUT_WEIGHT[output.format]);
  // 4 x the fee of the chosen inputs and the fixed part: a branch already paying more than the best set cannot beat it.
  let feeFloor = rate * (baseWeight + pinned.reduce((total, output) => total + inputWeight(output), 0n));
  let best: CoinSelection | null = null;
  const chosen: number[] = [];
  let value = 0n;
  let next = 0;
  for (let tries = 0; tries < BRANCH_AND_BOUND_TRIES; tries++) {
    let backtrack = false;
    if (value + after[next]! < target || value > ceiling || pinned.length + chosen.length > MAX_INPUTS || (best && feeFloor > 4n * best.fee)) {
      backtrack = true;
    } else if (value >= target) {
      const settled = settle(plan, [...pinned, ...chosen.map((index) => candidates[index]!.output)]);
      if (settled.ok && settled.selection.change === 0n && (!best || isBetter(settled.selection, best))) best = settled.selection;
      backtrack = true;
    }
    if (!backtrack) {
      value += candidates[next]!.value;
      feeFloor += rate * inputWeight(candidates[next]!.output);
      chosen.push(next);
      next += 1;
      continue;
    }
    const last = chosen.pop();
    if (last === undefined) break;
    value -= candidates[last]!.value;
    feeFloor -= rate * inputWeight(candidates[last]!.output);
    // Leaving `last` out: an equal output in its place would only repeat the branch just searched.
    next = last + 1;
    while (next < candidates.length && sameOutputValue(candidates[next]!.output, candidates[last]!.output)) next += 1;
  }
  return best;
}

const sameOutputValue = (a: SpendableOutput, b: SpendableOutput) => a.amount === b.amount && a.format === b.format;

const isBetter = (a: CoinSelection, b: CoinSelection) => (a.fee !== b.fee ? a.fee < b.fee : a.inputs.length < b.inputs.length);

/**
 * Adds the largest outputs after the pinned ones until the send settles. When even all of them
 * fall short: not ok, what they settle as; when they would do but only with more than MAX_INPUTS: too_many_inputs.
 */
function largestFirst(plan: Plan, pinned: SpendableOutput[], outputs: SpendableOutput[]): Settled {
  const candidates = ordered(plan, outputs).map(({ output }) => output);
  const everything = settle(plan, [...pinned, ...candidates]);
  if (!everything.ok) return everything;
  const inputs = [...pinned];
  for (const output of candidates) {
    const settled = settle(plan, inputs);
    if (settled.ok) return settled;
    if (inputs.length === MAX_INPUTS) throw tooManyInputs(inputs.length + 1);
    inputs.push(output);
  }
  return everything;
}

/** The inputs leave less than a change output needs, and the remainder, paid to the miner, would raise the rate above max_fee_rate. */
const remainderAboveMax = (plan: Plan, fee: bigint) =>
  errors.invalid(
    'fee_rate_above_max',
    `These inputs leave a remainder too small for a change output; paid to the miner it makes the fee ${fee} sat, above max_fee_rate ${plan.maxSatPerVbyte} sat/vB. Send more, or spend other inputs.`,
    { param: 'max_fee_rate', details: { fee_rate: plan.satPerVbyte.toString(), max_fee_rate: String(plan.maxSatPerVbyte), fee: fee.toString() } },
  );

const tooManyInputs = (count: number) =>
  errors.invalid('too_many_inputs', `The send would need ${count} inputs; a transaction spends at most ${MAX_INPUTS}. Consolidate the wallet's outputs first, or send less.`, {
    param: 'inputs',
    details: { max_inputs: MAX_INPUTS },
  });
