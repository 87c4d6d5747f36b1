import type { EntityManager } from '@mikro-orm/postgresql';
import type { AuthContext } from '../api-keys/auth-context';
import { priceSourceFor, usdValue } from '../catalogue/prices';
import type { AssetInfo } from '../catalogue/service';
import { LAMPORTS_PER_SIGNATURE } from '../chains/transfers/solana';
import { CONFIRMATION_SECS, GWEI_DECIMALS, NATIVE_TRANSFER_GAS, P2WPKH_PAYMENT_VBYTES, readFeeMarket } from '../chains/fees';
import type { ChainNodes } from '../chains/nodes';
import { FEE_LEVELS, type FeeLevel, type FeeMarket } from '../chains/provider';
import type { Config } from '../config';
import { findPrimaryAddress } from '../custody/service';
import { DomainError, errors } from '../shared/errors';
import { toDisplay } from '../shared/money';
import { selectCoins, type SpendableFormat, type SpendableOutput } from './coin-selection';
import { resolveTransfer } from './validation';
import { spendableOutputs } from './wallet-outputs';

/** Gas limit of an ERC-20 `transfer`: enough for a first transfer to a new holder (a fresh storage slot). */
export const ERC20_TRANSFER_GAS = 65_000n;
/** Energy of a TRC-20 `transfer` to an address that already holds the token. */
const TRC20_TRANSFER_ENERGY = 65_000n;
/** Sun burnt per energy unit when the sender has no staked energy (the network's getEnergyFee parameter). */
const TRON_ENERGY_PRICE_SUN = 210n;
/** Signatures of a plain Solana transfer, native or SPL: the fee payer's. */
const SOLANA_TRANSFER_SIGNATURES = 1n;
/** A fee quote ages with the market: Ethereum prices a new block every 12 s. */
const QUOTE_LIFETIME_MS = 60_000;

export interface EstimateFeeInput {
  wallet_id: string;
  to_address: string;
  amount: string;
  asset: string;
  sponsor?: boolean | undefined;
  treat_as_gross_amount?: boolean | undefined;
}

interface BreakdownItem {
  key: string;
  label: string;
  unit: string;
  value: string;
}

export interface FeeQuote {
  /** Native base units. */
  fee: bigint;
  breakdown: BreakdownItem[];
}

/**
 * The fee of sending `amount` of an asset from a wallet at each level of the chain's fee market,
 * with what the recipient gets and what the wallet is debited. Everything is checked before the
 * node is asked: the wallet is the caller's, the asset the wallet's chain's, the address valid on
 * the key's network, the amount positive with no more decimals than the asset has.
 */
export async function estimateFee(em: EntityManager, config: Config, chains: ChainNodes, auth: AuthContext, input: EstimateFeeInput) {
  const { wallet, chain, asset, native, toAddress, amount, gross } = await resolveTransfer(em, auth, input);

  const market = await readFeeMarket(chains, chain.id, auth.environment, em);
  const coins: WalletCoins | null =
    market.model === 'per_byte'
      ? {
          outputs: await spendableOutputs(em, wallet, { lock: false }),
          changeFormat: (await findPrimaryAddress(em, wallet)).format as SpendableFormat,
          recipient: toAddress,
          amount,
          gross,
        }
      : null;
  const quotes = Object.fromEntries(FEE_LEVELS.map((level) => [level, quoteFee(market, asset, level, coins)])) as Record<FeeLevel, FeeQuote>;
  if (gross) {
    const uncovered = FEE_LEVELS.filter((level) => quotes[level].fee >= amount);
    if (uncovered.length > 0) {
      throw errors.invalid('amount_below_fee', `The amount ${input.amount} ${asset.id} does not exceed the ${uncovered.join(' and ')} fee: the recipient would get nothing.`, {
        param: 'amount',
        details: Object.fromEntries(FEE_LEVELS.map((level) => [`${level}_fee`, toDisplay(quotes[level].fee, native.decimals)])),
      });
    }
  }

  const prices = priceSourceFor(config, auth.environment);
  const expiresAt = new Date(Date.now() + QUOTE_LIFETIME_MS).toISOString();
  const level = (name: FeeLevel) => {
    const { fee, breakdown } = quotes[name];
    // Net: the recipient gets the amount and the fee comes on top. Gross (native only): the fee comes out of it.
    // A token's fee is paid in the native asset, so its debit in the token is the amount alone.
    const recipient = gross ? amount - fee : amount;
    const debit = asset.id === native.id && !gross ? amount + fee : amount;
    const usd = usdValue(prices, native, fee);
    const feeAmount = { amount: toDisplay(fee, native.decimals), amount_raw: fee.toString() };
    return {
      ...feeAmount,
      asset_id: native.id,
      breakdown,
      estimated_time_seconds: CONFIRMATION_SECS[chain.id][name],
      funding_options: FUNDING_OPTIONS.map((option) => ({
        atomic_collection: false,
        available: false,
        execution_control: option.executionControl,
        execution_path: option.executionPath,
        fee_asset_amount: feeAmount.amount,
        fee_asset_amount_raw: feeAmount.amount_raw,
        fee_asset_id: native.id,
        funding_model: option.model,
        indicative: true,
        network_fee_amount: feeAmount.amount,
        network_fee_amount_raw: feeAmount.amount_raw,
        network_fee_asset_id: native.id,
        network_fee_usd: usd,
        quote_expires_at: expiresAt,
        // Funded elsewhere, the fee leaves the wallet alone: the recipient gets the amount, the wallet gives the amount.
        recipient_amount: toDisplay(amount, asset.decimals),
        recipient_amount_raw: amount.toString(),
        status: 'unavailable',
        status_label: option.statusLabel,
        total_debit_amount: toDisplay(amount, asset.decimals),
        total_debit_amount_raw: amount.toString(),
        unavailable_reason: option.unavailableReason,
      })),
      recipient_amount: toDisplay(recipient, asset.decimals),
      recipient_amount_raw: recipient.toString(),
      total_debit_amount: toDisplay(debit, asset.decimals),
      total_debit_amount_raw: debit.toString(),
      usd_value: usd,
    };
  };
  return {
    fee_levels: { low: level('low'), medium: level('medium'), high: level('high') },
    recommended: recommendedLevel(quotes),
  };
}

/** The two ways a fee can be funded other than from the wallet; the gas-station issue makes them available. */
const FUNDING_OPTIONS = [
  {
    model: 'provider_sponsorship',
    executionControl: 'platform',
    executionPath: 'sponsor_broadcast',
    statusLabel: 'Sponsorship is not configured',
    unavailableReason: 'sponsorship_not_configured',
  },
  {
    model: 'customer_gas_station',
    executionControl: 'customer',
    executionPath: 'gas_station',
    statusLabel: 'No gas station',
    unavailableReason: 'no_gas_station',
  },
] as const;

/**
 * Medium, unless high costs no more than medium (a quiet or flat market): then the faster level for
 * the same fee.
 */
const recommendedLevel = (quotes: Record<FeeLevel, FeeQuote>): FeeLevel => (quotes.high.fee <= quotes.medium.fee ? 'high' : 'medium');

const item = (key: string, label: string, unit: string, value: bigint | string): BreakdownItem => ({ key, label, unit, value: value.toString() });
const gwei = (wei: bigint) => toDisplay(wei, GWEI_DECIMALS);

/** Bitcoin: what the send would spend, to price the inputs it would really use. */
interface WalletCoins {
  outputs: SpendableOutput[];
  changeFormat: SpendableFormat;
  recipient: string;
  amount: bigint;
  gross: boolean;
}

/** Coin selection cannot price the send from the wallet's outputs for these reasons: the typical payment is priced instead. */
const UNCOVERED = ['insufficient_funds', 'too_many_inputs'];

/**
 * Bitcoin at `rate`: the inputs a send would spend now, chosen by the send's own coin selection,
 * with change when it would get some; a wallet whose outputs cannot pay for it (none yet, or too
 * few) is priced as a typical p2wpkh payment of one input and two outputs.
 */
function quoteBitcoinFee(rate: bigint, coins: WalletCoins): FeeQuote {
  const feeRate = item('fee_rate', 'Fee rate', 'sat/vB', rate);
  let uncovered = 'the wallet has no spendable outputs';
  if (coins.outputs.length > 0) {
    try {
      const selection = selectCoins({ ...coins, satPerVbyte: rate, pinned: null, others: coins.outputs, fillFromUnselected: false });
      const outputs = selection.change > 0n ? '2 outputs (recipient, change)' : '1 output (no change: the rest is below the dust limit)';
      const remainder = selection.fee - rate * BigInt(selection.vsize);
      return {
        fee: selection.fee,
        breakdown: [
          feeRate,
          item('vsize', `Virtual size spending the wallet's outputs coin selection picks: ${selection.inputs.length} input(s), ${outputs}`, 'vB', BigInt(selection.vsize)),
          item('inputs', 'Inputs spent', 'inputs', BigInt(selection.inputs.length)),
          ...(remainder > 0n ? [item('dust_remainder', 'Left over below the dust limit, paid to the miner instead of a change output', 'sat', remainder)] : []),
        ],
      };
    } catch (error) {
      if (!(error instanceof DomainError && UNCOVERED.includes(error.code))) throw error;
      uncovered = error.code === 'insufficient_funds' ? "the wallet's spendable outputs do not cover the amount" : 'the send would need more than 250 inputs';
    }
  }
  return {
    fee: rate * P2WPKH_PAYMENT_VBYTES,
    breakdown: [feeRate, item('vsize', `Virtual size of a p2wpkh payment, 1 input and 2 outputs (estimated: ${uncovered})`, 'vB', P2WPKH_PAYMENT_VBYTES)],
  };
}

/** The fee of one transfer of `asset` at `level`, in the chain's native base units, and how it is made up. */
export function quoteFee(market: FeeMarket, asset: AssetInfo, level: FeeLevel, coins: WalletCoins | null): FeeQuote {
  const native = asset.type === 'native';
  switch (market.model) {
    case 'per_byte':
      return quoteBitcoinFee(market.satPerVbyte[level], coins!);
    case 'eip1559': {
      const gasLimit = native ? NATIVE_TRANSFER_GAS : ERC20_TRANSFER_GAS;
      const priority = market.priorityFeePerGas[level];
      return {
        fee: (market.baseFeePerGas + priority) * gasLimit,
        breakdown: [
          item('gas_limit', native ? 'Gas limit of an ether transfer' : 'Gas limit of an ERC-20 transfer', 'gas', gasLimit),
          item('base_fee', 'Base fee per gas of the next block', 'gwei', gwei(market.baseFeePerGas)),
          item('priority_fee', 'Priority fee per gas', 'gwei', gwei(priority)),
          // Twice the base fee: the transaction stays includable if the next blocks are full.
          item('max_fee_per_gas', 'Max fee per gas (twice the base fee plus the priority fee)', 'gwei', gwei(2n * market.baseFeePerGas + priority)),
        ],
      };
    }
    case 'flat': {
      const transferFee = market.transferFee[level];
      if (asset.chain === 'tron') {
        const bandwidth = item('bandwidth', 'Bandwidth burnt (no free or staked bandwidth left)', 'TRX', toDisplay(transferFee, 6));
        if (native) return { fee: transferFee, breakdown: [bandwidth] };
        const energyFee = TRC20_TRANSFER_ENERGY * TRON_ENERGY_PRICE_SUN;
        return {
          fee: transferFee + energyFee,
          breakdown: [
            bandwidth,
            item('energy', 'Energy of a TRC-20 transfer', 'energy', TRC20_TRANSFER_ENERGY),
            item('energy_fee', `Energy burnt at ${TRON_ENERGY_PRICE_SUN} sun a unit (no staked energy)`, 'TRX', toDisplay(energyFee, 6)),
            item('fee_limit', 'Fee limit the transaction names', 'TRX', toDisplay(energyFee, 6)),
          ],
        };
      }
      // Solana: lamports per signature, and the priority fee on top (the same for an SPL transfer).
      const baseFee = LAMPORTS_PER_SIGNATURE * SOLANA_TRANSFER_SIGNATURES;
      return {
        fee: transferFee,
        breakdown: [
          item('signatures', 'Signatures', 'signatures', SOLANA_TRANSFER_SIGNATURES),
          item('base_fee', `Base fee, ${LAMPORTS_PER_SIGNATURE} lamports a signature`, 'lamports', baseFee),
          item('priority_fee', 'Priority fee', 'lamports', transferFee > baseFee ? transferFee - baseFee : 0n),
        ],
      };
    }
  }
}
