import type { AssetInfo } from '../catalogue/service';
import { NATIVE_TRANSFER_GAS } from '../chains/fees';
import type { FeeLevel, FeeMarket, FlatFeeMarket, TransferComputeBudget } from '../chains/provider';
import { LAMPORTS_PER_SIGNATURE, priorityFeeOf, SOLANA_TOKEN_ACCOUNT_RENT } from '../chains/transfers/solana';

/**
 * Fee terms: what an account-chain send is signed with and the most it can cost. Below the money
 * domains, since a send (transactions), a gas station's fuel and the funding choice all price with
 * them. Pure, no I/O.
 */

/**
 * The fee terms a send is signed with, integers as decimal strings (JSON column). Solana's flat terms
 * carry the compute budget a live node's simulation set (the limit and the price per unit the transfer
 * is signed with, costing exactly `fee`); terms without one are signed at the fixed limit.
 */
export type StoredFeeTerms =
  | { model: 'eip1559'; gasLimit: string; maxFeePerGas: string; maxPriorityFeePerGas: string }
  | { model: 'per_byte'; satPerVbyte: string; vsize: number }
  | { model: 'flat'; fee: string; computeUnitLimit?: string; computeUnitPrice?: string };

/** Energy of a TRC-20 `transfer` to an address that already holds the token. */
export const TRC20_TRANSFER_ENERGY = 65_000n;
/** Sun burnt per energy unit when the sender has no staked energy (the network's getEnergyFee parameter). */
export const TRON_ENERGY_PRICE_SUN = 210n;

/** The fee of one transfer of `asset` on a flat fee market (Tron: the bandwidth, and a TRC-20's energy; Solana: the transfer fee). */
export function flatTransferFee(market: FlatFeeMarket, asset: AssetInfo, level: FeeLevel): bigint {
  const transferFee = market.transferFee[level];
  if (asset.chain === 'tron' && asset.type !== 'native') return transferFee + TRC20_TRANSFER_ENERGY * TRON_ENERGY_PRICE_SUN;
  return transferFee;
}

/**
 * The gas limit an EVM send is signed with. `sponsored`: the transfer's exact gas, at one fixed price.
 * Otherwise a limit the send pays the used part of at the block's price.
 */
export interface SendGas {
  limit: bigint;
  sponsored: boolean;
}

/**
 * Account chains: the fee terms at the level, and the most they can cost. EVM signs a max fee per
 * gas of twice the next block's base fee plus the priority fee, and pays the gas used at the
 * block's price, so the fee limit is locked and the difference released when it settles; its gas
 * limit is 21000 for ether, and for a token the one `gas` gives (erc20GasLimit's). A sponsored EVM
 * send (its exact gas given) signs one fixed price, max fee = priority fee = that same max fee, so
 * that it pays exactly gas x price: the station funds that, no more, no less.
 */
export function accountFeeTerms(market: FeeMarket, asset: AssetInfo, level: FeeLevel, gas?: SendGas, budget?: TransferComputeBudget): { terms: StoredFeeTerms; feeLimit: bigint } {
  if (market.model === 'eip1559') {
    const gasLimit = gas?.limit ?? (asset.type === 'native' ? NATIVE_TRANSFER_GAS : undefined);
    if (gasLimit === undefined) throw new Error(`a ${asset.id} transfer is priced at its estimated gas, and none was given`);
    const maxFeePerGas = 2n * market.baseFeePerGas + market.priorityFeePerGas[level];
    const maxPriorityFeePerGas = gas?.sponsored ? maxFeePerGas : market.priorityFeePerGas[level];
    return {
      terms: { model: 'eip1559', gasLimit: gasLimit.toString(), maxFeePerGas: maxFeePerGas.toString(), maxPriorityFeePerGas: maxPriorityFeePerGas.toString() },
      feeLimit: gasLimit * maxFeePerGas,
    };
  }
  if (market.model === 'flat') {
    const { fee, terms } = budget ? budgetedTerms(budget, level) : { fee: flatTransferFee(market, asset, level), terms: {} };
    // An SPL transfer creates the recipient's token account when it has none: its rent may leave with the fee, so the most it costs counts it.
    const feeLimit = asset.chain === 'solana' && asset.type !== 'native' ? fee + SOLANA_TOKEN_ACCOUNT_RENT : fee;
    return { terms: { model: 'flat', fee: fee.toString(), ...terms }, feeLimit };
  }
  throw new Error(`an account chain with a ${market.model} fee market`);
}

/** Solana with the transfer's own compute budget: the base fee and the level's price over the budget's limit, as the runtime charges it. */
export function budgetedTerms(budget: TransferComputeBudget, level: FeeLevel) {
  const computeBudget = { unitLimit: budget.unitLimit, unitPrice: budget.unitPrice[level] };
  return {
    fee: LAMPORTS_PER_SIGNATURE + priorityFeeOf(computeBudget),
    terms: { computeUnitLimit: computeBudget.unitLimit.toString(), computeUnitPrice: computeBudget.unitPrice.toString() },
  };
}
