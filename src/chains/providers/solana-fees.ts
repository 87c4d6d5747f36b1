import { z } from 'zod';
import { FEE_LEVELS, NodeUnavailableError, TransactionRejectedError, type FeeLevel, type RelayedAnswer, type TransferComputeBudget } from '../provider';
import { MAX_COMPUTE_UNIT_LIMIT, PRIORITY_COMPUTE_UNIT_LIMIT } from '../transfers/solana';
import { Lamports, Slot } from './solana-blocks';

/**
 * What a Solana transfer's fee is made of, read from the node: the price per compute unit at each level
 * (getRecentPrioritizationFees) and the compute unit limit (simulateTransaction).
 */

/** The levels' priority fees: percentiles of the node's recent prioritization fees (micro-lamports per compute unit). */
const PRIORITY_PERCENTILES: Record<FeeLevel, number> = { low: 10, medium: 50, high: 90 };
/**
 * The margin over the units a simulation used. A transfer's units are the same whenever the accounts are
 * as simulated (Solana's cost is deterministic); the margin covers the programs taking a costlier path in
 * accounts that changed between the estimate and the landing (a token account's state, a program
 * upgraded meanwhile): a fifth covers the token program's longest paths around a TransferChecked. The
 * recipient's token account closed after it was simulated (CreateIdempotent then creates it, some 9,000
 * units more) is not covered: that transfer fails paying its fee, as any over its limit.
 */
const SIMULATION_MARGIN_PERCENT = 20n;
/**
 * The least limit a simulated transfer asks for: a SOL transfer uses 450 units (its two Compute Budget
 * instructions and the System transfer, 150 each), where a fifth is 90 units; a builtin's cost raised
 * by a feature gate would exhaust that. At a price of a whole lamport per unit, the floor costs 1,000
 * lamports: nothing worth saving against a failed transfer.
 */
const MIN_SIMULATED_COMPUTE_UNIT_LIMIT = 1_000n;
/**
 * Transaction errors of a simulation that are the transfer's own: what it does fails with the accounts
 * as they are (an instruction fails: too few lamports or tokens, a frozen account), the sender cannot
 * pay the fee or has never been credited, or it would leave an account below rent exemption. Such a
 * transfer is refused before it is signed. Any other error is the node's or the cluster's (a blockhash
 * it could not replace, an account in use, block limits, maintenance): the fixed limit is used instead.
 */
const TRANSFER_OWN_ERRORS: Readonly<Record<string, string>> = {
  InstructionError: 'rejected',
  InsufficientFundsForFee: 'insufficient_funds',
  AccountNotFound: 'insufficient_funds',
  InvalidAccountForFee: 'insufficient_funds',
  InsufficientFundsForRent: 'dust_output',
  InvalidRentPayingAccount: 'dust_output',
};

export const RecentPrioritizationFees = z.array(z.object({ slot: Slot, prioritizationFee: Lamports }).loose());
const Simulation = z.object({
  value: z.object({ err: z.union([z.string(), z.record(z.string(), z.unknown())]).nullable(), logs: z.array(z.string()).nullish(), unitsConsumed: z.number().int().nonnegative().optional() }).loose(),
}).loose();

/** Each level's price per compute unit (micro-lamports): its percentile of the recent slots' fees; 0 when the node names no slot. */
export function levelPrices(recent: z.output<typeof RecentPrioritizationFees>): Record<FeeLevel, bigint> {
  const prices = recent.map((entry) => entry.prioritizationFee).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const at = (percentile: number) => (prices.length ? prices[Math.min(prices.length - 1, Math.floor((prices.length * percentile) / 100))]! : 0n);
  return Object.fromEntries(FEE_LEVELS.map((level) => [level, at(PRIORITY_PERCENTILES[level])])) as Record<FeeLevel, bigint>;
}

/**
 * The budget of a transfer from the node's answers to getRecentPrioritizationFees over the accounts it
 * writes and to simulateTransaction of it: the limit is the units the simulation used plus
 * SIMULATION_MARGIN_PERCENT, at least MIN_SIMULATED_COMPUTE_UNIT_LIMIT and at most what a transaction may
 * use. A simulation the node could not run (an error answer: the method unsupported or disabled, the node
 * behind or unhealthy; no `unitsConsumed`, as before Solana 1.16; an error of the node's, not the
 * transfer's) gives the fixed PRIORITY_COMPUTE_UNIT_LIMIT. A simulation in which the transfer itself fails
 * throws TransactionRejectedError with the runtime's error. Prioritization fees the node does not give
 * are NodeUnavailableError, as a fee market it cannot read.
 */
export function transferBudget(fees: RelayedAnswer, simulation: RelayedAnswer): TransferComputeBudget {
  if ('error' in fees) throw new NodeUnavailableError(`The node refused getRecentPrioritizationFees: ${fees.error.message} (${fees.error.code}).`);
  const recent = RecentPrioritizationFees.safeParse(fees.result);
  if (!recent.success) throw new NodeUnavailableError('The node answered getRecentPrioritizationFees with an unexpected shape.');
  const unitPrice = levelPrices(recent.data);
  const fixed: TransferComputeBudget = { unitLimit: PRIORITY_COMPUTE_UNIT_LIMIT, limitFrom: 'fixed', unitPrice };
  if ('error' in simulation) return fixed;
  const simulated = Simulation.safeParse(simulation.result);
  if (!simulated.success) return fixed;
  const { err, logs, unitsConsumed } = simulated.data.value;
  if (err !== null) {
    const name = typeof err === 'string' ? err : Object.keys(err)[0]!;
    const reason = TRANSFER_OWN_ERRORS[name];
    if (!reason) return fixed;
    const insufficient = name === 'InstructionError' && (logs ?? []).some((line) => /insufficient (lamports|funds)/i.test(line));
    throw new TransactionRejectedError(insufficient ? 'insufficient_funds' : reason, `The node's simulation of the transfer failed: ${JSON.stringify(err)}`);
  }
  if (unitsConsumed === undefined) return fixed;
  const units = BigInt(unitsConsumed);
  const withMargin = units + (units * SIMULATION_MARGIN_PERCENT + 99n) / 100n;
  const limit = withMargin < MIN_SIMULATED_COMPUTE_UNIT_LIMIT ? MIN_SIMULATED_COMPUTE_UNIT_LIMIT : withMargin > MAX_COMPUTE_UNIT_LIMIT ? MAX_COMPUTE_UNIT_LIMIT : withMargin;
  return { unitLimit: limit, limitFrom: 'simulation', unitPrice };
}
