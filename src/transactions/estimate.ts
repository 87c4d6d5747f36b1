import type { EntityManager } from '@mikro-orm/postgresql';
import type { AuthContext } from '../api-keys/auth-context';
import { priceSourceFor, usdValue } from '../catalogue/prices';
import type { AssetInfo } from '../catalogue/service';
import { LAMPORTS_PER_SIGNATURE, SOLANA_TOKEN_ACCOUNT_RENT } from '../chains/transfers/solana';
import { CONFIRMATION_SECS, GWEI_DECIMALS, NATIVE_TRANSFER_GAS, P2WPKH_PAYMENT_VBYTES, readFeeMarket } from '../chains/fees';
import type { ChainNodes } from '../chains/nodes';
import { FEE_LEVELS, type FeeLevel, type FeeMarket, type TransferComputeBudget } from '../chains/provider';
import type { Config } from '../config';
import { findPrimaryAddress } from '../custody/service';
import { accountFeeTerms, budgetedTerms, TRC20_TRANSFER_ENERGY, TRON_ENERGY_PRICE_SUN } from '../movements/fee-terms';
import { assessFunding, FUNDING_MODELS, sponsoredFee, sponsoringStations } from '../movements/funding';
import { DomainError, errors } from '../shared/errors';
import { toDisplay } from '../shared/money';
import { selectCoins, type SpendableFormat, type SpendableOutput } from './coin-selection';
import { erc20GasLimit, transferComputeBudget, transferGas } from './node-reads';
import { resolveTransfer } from './validation';
import { spendableOutputs } from './wallet-outputs';

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
  const sponsor = input.sponsor ?? false;
  if (sponsor && gross) {
    throw errors.invalid('sponsored_gross_amount', 'A sponsored fee is paid by a gas station, not out of the amount: estimate without treat_as_gross_amount.', {
      param: 'treat_as_gross_amount',
    });
  }

  const market = await readFeeMarket(chains, chain.id, auth.environment, em);
  const from = await findPrimaryAddress(em, wallet);
  const coins: WalletCoins | null =
    market.model === 'per_byte'
      ? { outputs: await spendableOutputs(em, wallet, { lock: false }), changeFormat: from.format as SpendableFormat, recipient: toAddress, amount, gross }
      : null;
  // EVM: the transfer's gas, asked of the node once; a token's unsponsored limit is the one its send would sign.
  // Solana on a live node: the transfer's compute budget, as its send would read it.
  const provider = market.model === 'per_byte' ? undefined : await chains.provider(chain.id, auth.environment, em);
  const gas = provider && market.model === 'eip1559' ? await transferGas(provider, asset, from.address, toAddress, amount) : undefined;
  const budget = provider && market.model === 'flat' ? await transferComputeBudget(provider, asset, from.address, toAddress, amount, gross) : undefined;
  const tokenGas = gas !== undefined && asset.type !== 'native' ? erc20GasLimit(config, asset, gas) : undefined;
  const quotes = Object.fromEntries(FEE_LEVELS.map((level) => [level, quoteFee(market, asset, level, coins, tokenGas, budget)])) as Record<FeeLevel, FeeQuote>;
  if (gross) {
    const uncovered = FEE_LEVELS.filter((level) => quotes[level].fee >= amount);
    if (uncovered.length > 0) {
      throw errors.invalid('amount_below_fee', `The amount ${input.amount} ${asset.id} does not exceed the ${uncovered.join(' and ')} fee: the recipient would get nothing.`, {
        param: 'amount',
        details: Object.fromEntries(FEE_LEVELS.map((level) => [`${level}_fee`, toDisplay(quotes[level].fee, native.decimals)])),
      });
    }
  }
  const sponsoredFees = sponsoredQuotes(market, asset, gas, budget);
  const stations = sponsoredFees ? await sponsoringStations(em, config, auth, chain.id) : { customer: null, provider: null };

  const prices = priceSourceFor(config, auth.environment);
  const expiresAt = new Date(Date.now() + QUOTE_LIFETIME_MS).toISOString();
  const display = (raw: bigint, of: AssetInfo) => ({ amount: toDisplay(raw, of.decimals), raw: raw.toString() });
  const level = async (name: FeeLevel) => {
    // Sponsored, the fee is the one the station funds (EVM: exact gas at a fixed price) and none of it comes from the wallet.
    const sponsored = sponsoredFees?.[name] ?? null;
    const fee = sponsor && sponsored ? sponsored.fuel : quotes[name].fee;
    // Net: the recipient gets the amount and the fee comes on top. Gross (native only): the fee comes out of it.
    // A token's fee is paid in the native asset, so its debit in the token is the amount alone.
    const recipient = gross ? amount - fee : amount;
    const debit = asset.id === native.id && !gross && !(sponsor && sponsored) ? amount + fee : amount;
    const networkFee = sponsored?.fuel ?? quotes[name].fee;
    const options = [];
    for (const model of FUNDING_MODELS) {
      const station = model === 'customer_gas_station' ? stations.customer : stations.provider;
      const assessment = await assessFunding(em, config, auth, chain.id, market, model, station, sponsored ?? { fuel: networkFee, priceInFeeUnit: '0' });
      const charged = display(assessment.cost ?? networkFee, native);
      options.push({
        // The fuel is a transaction of its own, confirmed before the sponsored one is signed.
        atomic_collection: false,
        available: assessment.available,
        execution_control: model === 'customer_gas_station' ? 'customer' : 'platform',
        execution_path: 'fuel_transfer',
        fee_asset_amount: charged.amount,
        fee_asset_amount_raw: charged.raw,
        fee_asset_id: native.id,
        funding_model: model,
        indicative: true,
        network_fee_amount: display(networkFee, native).amount,
        network_fee_amount_raw: display(networkFee, native).raw,
        network_fee_asset_id: native.id,
        network_fee_usd: usdValue(prices, native, networkFee),
        quote_expires_at: expiresAt,
        // Funded elsewhere, the fee leaves the wallet alone: the recipient gets the amount, the wallet gives the amount.
        recipient_amount: display(amount, asset).amount,
        recipient_amount_raw: display(amount, asset).raw,
        status: assessment.available ? 'available' : 'unavailable',
        status_label: assessment.message,
        total_debit_amount: display(amount, asset).amount,
        total_debit_amount_raw: display(amount, asset).raw,
        unavailable_reason: assessment.reason,
      });
    }
    return {
      amount: display(fee, native).amount,
      amount_raw: display(fee, native).raw,
      asset_id: native.id,
      breakdown: sponsor && sponsored ? sponsored.breakdown : quotes[name].breakdown,
      estimated_time_seconds: CONFIRMATION_SECS[chain.id][name],
      funding_options: options,
      recipient_amount: display(recipient, asset).amount,
      recipient_amount_raw: display(recipient, asset).raw,
      total_debit_amount: display(debit, asset).amount,
      total_debit_amount_raw: display(debit, asset).raw,
      usd_value: usdValue(prices, native, fee),
    };
  };
  return {
    fee_levels: { low: await level('low'), medium: await level('medium'), high: await level('high') },
    recommended: recommendedLevel(quotes),
  };
}

/**
 * What a sponsored fee of the transfer would be at each level: EVM signs the transfer's exact gas
 * (asked of the node) at one fixed price, so the station funds exactly its fee; Tron and Solana
 * pay their flat fee. Null on Bitcoin, which is not sponsored.
 */
function sponsoredQuotes(market: FeeMarket, asset: AssetInfo, gas: bigint | undefined, budget: TransferComputeBudget | undefined) {
  if (market.model === 'per_byte') return null;
  const quote = (level: FeeLevel) => {
    const { terms, feeLimit } = accountFeeTerms(market, asset, level, gas === undefined ? undefined : { limit: gas, sponsored: true }, budget);
    const breakdown =
      terms.model === 'eip1559'
        ? [
            item('gas_limit', "Gas the transfer uses (the node's estimate), its limit when sponsored", 'gas', terms.gasLimit),
            item('gas_price', 'Fixed price per gas of a sponsored transfer (max fee = priority fee = twice the base fee plus the priority fee)', 'gwei', gwei(BigInt(terms.maxFeePerGas))),
          ]
        : quoteFee(market, asset, level, null, undefined, budget).breakdown;
    return { ...sponsoredFee(terms, feeLimit), breakdown };
  };
  return { low: quote('low'), medium: quote('medium'), high: quote('high') };
}

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

/**
 * The fee of one transfer of `asset` at `level`, in the chain's native base units, and how it is made
 * up. An ERC-20's is priced at `tokenGas`, the limit its send signs (erc20GasLimit); a Solana transfer
 * at its own compute budget when the node gave one (`budget`), as its send is signed.
 */
export function quoteFee(market: FeeMarket, asset: AssetInfo, level: FeeLevel, coins: WalletCoins | null, tokenGas?: bigint, budget?: TransferComputeBudget): FeeQuote {
  const native = asset.type === 'native';
  switch (market.model) {
    case 'per_byte':
      return quoteBitcoinFee(market.satPerVbyte[level], coins!);
    case 'eip1559': {
      const gasLimit = native ? NATIVE_TRANSFER_GAS : tokenGas;
      if (gasLimit === undefined) throw new Error(`a ${asset.id} transfer is priced at its estimated gas, and none was given`);
      const priority = market.priorityFeePerGas[level];
      return {
        fee: (market.baseFeePerGas + priority) * gasLimit,
        breakdown: [
          item('gas_limit', native ? 'Gas limit of an ether transfer' : "Gas limit of the ERC-20 transfer (the node's estimate with its margin, at most the cap)", 'gas', gasLimit),
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
      // Solana: lamports per signature, and the priority fee on top: the level's price over the transfer's compute unit limit.
      const baseFee = LAMPORTS_PER_SIGNATURE * SOLANA_TRANSFER_SIGNATURES;
      const fee = budget ? budgetedTerms(budget, level).fee : transferFee;
      const limitLabel = budget?.limitFrom === 'simulation' ? "the node's simulation of the transfer with its margin" : 'fixed: the node did not simulate the transfer';
      return {
        fee,
        breakdown: [
          item('signatures', 'Signatures', 'signatures', SOLANA_TRANSFER_SIGNATURES),
          item('base_fee', `Base fee, ${LAMPORTS_PER_SIGNATURE} lamports a signature`, 'lamports', baseFee),
          ...(budget
            ? [
                item('compute_unit_limit', `Compute unit limit (${limitLabel})`, 'compute units', budget.unitLimit),
                item('compute_unit_price', 'Priority fee per compute unit, from recent fees paid for the accounts the transfer writes', 'micro-lamports', budget.unitPrice[level]),
              ]
            : []),
          item('priority_fee', 'Priority fee', 'lamports', fee > baseFee ? fee - baseFee : 0n),
          ...(native
            ? []
            : [item('token_account_rent', "Rent of the recipient's token account, paid only when the transfer creates it: not in the fee, but locked with it and debited when paid", 'lamports', SOLANA_TOKEN_ACCOUNT_RENT)]),
        ],
      };
    }
  }
}
