import { getAddress, parseTransaction, type Hex } from 'viem';
import type { Environment } from '../api-keys/entities';
import { assetAmount, chainAsset, findChain, networkFor, type AssetInfo, type ChainId } from '../catalogue/service';
import { canonicalAddress } from '../chains/addresses';
import { GWEI_DECIMALS } from '../chains/fees';
import { canonicalTxid } from '../chains/devnet/params';
import { readSignedEthereumTransaction } from '../chains/devnet/rules/ethereum';
import { tronRules } from '../chains/devnet/rules/tron';
import { DevnetRejection, type AccountTransaction, type DecodeContext } from '../chains/devnet/rules/types';
import { TransactionRejectedError, type ChainProvider, type GasEstimateCall } from '../chains/provider';
import { errors } from '../shared/errors';
import { toDisplay } from '../shared/money';
import type { StoredFeeTerms } from '../movements/fee-terms';
import { withArticle } from '../shared/articles';

/**
 * What a sponsor-broadcast request claims about the transaction its client signed, checked here against
 * the transaction itself before anyone funds its fee: checkSignedTransfer is pure, no I/O. The chains' own
 * rules (those the devnet enforces) decode the bytes and recover the signer, so what is checked is what the
 * chain will do. Ethereum's gas is the one thing only the chain's node can price: requireGasCovered asks it.
 */

/** The chains whose fees a gas station can sponsor: account chains where the fee is the signer's native balance. */
export const SPONSORABLE_CHAINS = ['ethereum', 'tron'] as const satisfies readonly ChainId[];
export type SponsorableChain = (typeof SPONSORABLE_CHAINS)[number];
/**
 * Ethereum is read without the devnet's gas rule (its fixed price of a token transfer is no real
 * contract's): requireGasCovered checks the gas limit against the node's estimate, the devnet's included.
 */
const DECODERS: Record<SponsorableChain, (raw: string, context: DecodeContext) => AccountTransaction> = {
  ethereum: readSignedEthereumTransaction,
  tron: (raw, context) => tronRules.decode(raw, context) as AccountTransaction,
};

export interface SponsorBroadcastClaim {
  from_address: string;
  to_address: string;
  /** A symbol of the chain (USDT) or a catalogue asset id (USDT_TRX). */
  asset: string;
  /** Display decimal. */
  amount: string;
  network: string;
  signed_tx: string;
  tx_hash?: string | undefined;
}

export interface SignedTransferContext {
  environment: Environment;
  /** Token contracts of the chain in this environment: asset id -> address (from provider.tokenAddress). */
  tokens: Readonly<Record<string, string>>;
  /** Ethereum: the chain id of this environment's node (provider.identifyNetwork()). */
  chainId?: number;
}

export interface CheckedSignedTransfer {
  chain: SponsorableChain;
  asset: AssetInfo;
  /** The signer, canonical. */
  from: string;
  /** The recipient of the value or of the token transfer, canonical. */
  to: string;
  /** Base units. */
  amount: bigint;
  /** As the chain prints it: 0x-hex (Ethereum), bare lower-case hex (Tron). */
  txHash: string;
  /** As provider.broadcast takes it. */
  raw: string;
  /** The most the signer can be charged, native base units (Ethereum gas limit x max fee per gas; Tron fee_limit, or the TRX transfer fee). */
  maxFee: bigint;
  /** Ethereum: the account nonce the transaction uses; Tron: null. */
  nonce: bigint | null;
  /** Ethereum: the gas limit and max fee per gas (wei) the transaction sets, and the call it makes (for requireGasCovered); Tron: null. */
  gas: { limit: bigint; maxFeePerGas: bigint; call: GasEstimateCall } | null;
}

const MISMATCH = 'signed_transaction_mismatch';
const mismatch = (param: keyof SponsorBroadcastClaim, message: string) => errors.invalid(MISMATCH, message, { param });
const invalidSignedTx = (message: string, reason: string) => errors.invalid('invalid_signed_transaction', message, { param: 'signed_tx', details: { reason } });

/** The chain of the sender's address by its form (0x… Ethereum, a Tron base58check T… address); any other is 400. */
export function sponsorableChainOf(claim: Pick<SponsorBroadcastClaim, 'from_address'>): SponsorableChain {
  if (/^0x/i.test(claim.from_address)) return 'ethereum';
  // A Tron address is the same on every network, so either environment reads it.
  if (canonicalAddress('tron', 'live', claim.from_address) !== null) return 'tron';
  throw errors.invalid('sponsorship_unsupported', `Fees can be sponsored on ethereum and tron only: from_address '${claim.from_address}' is not an address of either.`, {
    param: 'from_address',
  });
}

/**
 * Decodes and verifies `claim.signed_tx` and checks that it is exactly what the claim says: signed by
 * from_address, moving `amount` of `asset` to to_address on the environment's network, and nothing else.
 * Throws a 400 DomainError naming the first field that does not hold.
 */
export function checkSignedTransfer(claim: SponsorBroadcastClaim, context: SignedTransferContext): CheckedSignedTransfer {
  const chain = sponsorableChainOf(claim);
  const network = networkFor(findChain(chain), context.environment);
  if (claim.network !== network) {
    throw errors.invalid('network_mismatch', `network '${claim.network}' is not the ${chain} network of ${context.environment} keys: it is '${network}'.`, { param: 'network' });
  }
  const addressOf = (param: 'from_address' | 'to_address') => {
    const address = canonicalAddress(chain, context.environment, claim[param]);
    if (address === null) throw errors.validation(`${param} '${claim[param]}' is not ${withArticle(chain)} address of ${network}.`, param);
    return address;
  };
  const from = addressOf('from_address');
  const to = addressOf('to_address');
  const asset = chainAsset(chain, claim.asset, 'asset');
  if (asset.type !== 'native' && context.tokens[asset.id] === undefined) {
    throw errors.invalid('asset_unavailable', `${asset.id} has no token contract on ${chain} ${network}.`, { param: 'asset' });
  }

  const decoded = decode(chain, claim.signed_tx, context);
  if (decoded.transfers.length !== 1) {
    throw invalidSignedTx(
      decoded.transfers.length === 0
        ? 'The signed transaction moves nothing: a sponsored transaction moves one asset to one recipient.'
        : 'The signed transaction moves more than one thing (ether and a token): a sponsored transaction moves one asset to one recipient.',
      'not_one_transfer',
    );
  }
  const [moved] = decoded.transfers as [AccountTransaction['transfers'][number]];
  if (decoded.from !== from) throw mismatch('from_address', `The transaction is signed by ${decoded.from}, not by from_address ${from}.`);
  if (moved.to !== to) throw mismatch('to_address', `The transaction pays ${moved.to}, not to_address ${to}.`);
  if (moved.assetId !== asset.id) throw mismatch('asset', `The transaction moves ${moved.assetId}, not ${asset.id}.`);
  const amount = assetAmount(claim.amount, asset, 'amount');
  if (moved.amount !== amount) throw mismatch('amount', `The transaction moves ${moved.amount} base units of ${asset.id}, not amount ${claim.amount} (${amount} base units).`);
  if (claim.tx_hash !== undefined && canonicalTxid(chain, claim.tx_hash) !== canonicalTxid(chain, decoded.txid)) {
    throw mismatch('tx_hash', `The transaction's hash is ${decoded.txid}, not tx_hash ${claim.tx_hash}.`);
  }
  return { chain, asset, from, to, amount, txHash: decoded.txid, raw: decoded.raw, maxFee: decoded.maxFee, nonce: decoded.nonce, gas: gasOf(decoded) };
}

/** The transaction's gas limit and call, as eth_estimateGas takes it (the bytes were decoded already). */
function gasOf(decoded: AccountTransaction): CheckedSignedTransfer['gas'] {
  if (!decoded.gas) return null;
  const { to, value, data } = parseTransaction(decoded.raw as Hex);
  return {
    limit: decoded.gas.limit,
    maxFeePerGas: decoded.gas.maxFeePerGas,
    call: { from: decoded.from, to: getAddress(to!), ...(value ? { value } : {}), ...(data ? { data } : {}) },
  };
}

/**
 * Ethereum: refuses (400 on signed_tx) a transaction whose gas limit is below the gas its node estimates
 * the call uses (the devnet: exactly what it charges), or whose call the node says would fail, so that no
 * fee is funded for a transaction that cannot succeed; answers that gas. Tron: nothing to ask (its fee
 * cap is the fee), null. NodeUnavailableError passes through.
 */
export async function requireGasCovered(checked: CheckedSignedTransfer, provider: Pick<ChainProvider, 'chain' | 'estimateGas'>): Promise<bigint | null> {
  if (!checked.gas) return null;
  if (!provider.estimateGas) throw new Error(`the ${provider.chain} provider cannot estimate gas`);
  let needed: bigint;
  try {
    needed = await provider.estimateGas(checked.gas.call);
  } catch (error) {
    if (error instanceof TransactionRejectedError) throw invalidSignedTx(`The signed transaction would fail: ${error.message}`, error.reason);
    throw error;
  }
  if (checked.gas.limit < needed) {
    throw invalidSignedTx(`The signed transaction's gas limit ${checked.gas.limit} is below the ${needed} gas its call uses: sign it again with a gas limit of at least ${needed}.`, 'gas_limit_too_low');
  }
  return needed;
}

/** `value` raised by `marginPercent` percent, rounded down: the most a sponsored fee may exceed its need by. */
const withMargin = (value: bigint, marginPercent: number): bigint => (value * BigInt(100 + marginPercent)) / 100n;

/**
 * Refuses (400 `sponsored_fee_above_need` on signed_tx, the figures in details) a transaction whose fee
 * cap exceeds its need by more than `marginPercent`, so that the fuel, which is the fee cap, is bounded
 * by need and never by what the client chose to sign. `need` is the transfer priced at the fee market's
 * high level: on Ethereum its gas by eth_estimateGas (gasLimit) at the high level's max fee per gas; on
 * Tron the whole fee (a TRC-20 call's fee_limit, the TRX transfer's bandwidth). On Ethereum the margin
 * bounds the fee cap (gas limit x max fee per gas) once, against gas needed x price needed: bounding the
 * gas limit and the price each by it would let the fuel reach need x (1 + margin)^2. The gas limit is
 * also bounded by itself, so the margin cannot all go to gas that no call uses.
 * Refusing, rather than funding the need only, because an Ethereum node takes a transaction only from
 * a sender holding gas limit x max fee per gas up front: less fuel than the cap and it is never mined,
 * the fuel spent for nothing.
 */
export function requireFeeWithinNeed(checked: CheckedSignedTransfer, need: StoredFeeTerms, marginPercent: number): void {
  const refuse = (message: string, details: Record<string, string | number>) =>
    errors.invalid('sponsored_fee_above_need', message, { param: 'signed_tx', details: { ...details, margin_percent: marginPercent } });
  if (checked.gas) {
    if (need.model !== 'eip1559') throw new Error(`an Ethereum transaction's need priced on a ${need.model} market`);
    const gasAllowed = withMargin(BigInt(need.gasLimit), marginPercent);
    const feeNeeded = BigInt(need.gasLimit) * BigInt(need.maxFeePerGas);
    const feeAllowed = withMargin(feeNeeded, marginPercent);
    if (checked.gas.limit > gasAllowed || checked.maxFee > feeAllowed) {
      const details = {
        gas_limit: checked.gas.limit.toString(),
        gas_needed: need.gasLimit,
        gas_limit_allowed: gasAllowed.toString(),
        max_fee_per_gas: checked.gas.maxFeePerGas.toString(),
        max_fee_per_gas_needed: need.maxFeePerGas,
        fee: checked.maxFee.toString(),
        fee_needed: feeNeeded.toString(),
        fee_allowed: feeAllowed.toString(),
      };
      throw refuse(
        `The signed transaction may cost ${checked.gas.limit} gas at ${toDisplay(checked.gas.maxFeePerGas, GWEI_DECIMALS)} gwei (${checked.maxFee} wei); a sponsored fee is at most its need plus ${marginPercent}%: ` +
          `${feeAllowed} wei (the node estimates ${need.gasLimit} gas, at ${toDisplay(need.maxFeePerGas, GWEI_DECIMALS)} gwei, the fee market's high level), with at most ${gasAllowed} gas. Sign it again within both.`,
        details,
      );
    }
    return;
  }
  if (need.model !== 'flat') throw new Error(`a Tron transaction's need priced on a ${need.model} market`);
  const feeAllowed = withMargin(BigInt(need.fee), marginPercent);
  if (checked.maxFee > feeAllowed) {
    throw refuse(
      `The signed transaction's fee limit is ${checked.maxFee} sun; a sponsored fee is at most its need, ${need.fee} sun at the fee market's high level, plus ${marginPercent}%: ${feeAllowed} sun. Sign it again with a fee limit within that.`,
      { fee_limit: checked.maxFee.toString(), fee_needed: need.fee, fee_limit_allowed: feeAllowed.toString() },
    );
  }
}

/**
 * Ethereum: refuses (400 `nonce_mismatch` on signed_tx) a transaction whose nonce is not the sender's
 * next one (its pending nonce): a lower one is used already and can never be mined, a higher one waits
 * in the mempool for a gap nobody may fill; either way the fuel would stay with the signer. Tron: no
 * nonce. NodeUnavailableError passes through.
 */
export async function requireNextNonce(checked: CheckedSignedTransfer, provider: Pick<ChainProvider, 'chain' | 'nonces'>): Promise<void> {
  if (checked.nonce === null) return;
  if (!provider.nonces) throw new Error(`the ${provider.chain} provider cannot read nonces`);
  const expected = (await provider.nonces(checked.from)).pending;
  if (checked.nonce !== expected) {
    throw errors.invalid('nonce_mismatch', `The signed transaction's nonce is ${checked.nonce}; ${checked.from}'s next nonce is ${expected}: sign it again with nonce ${expected}.`, {
      param: 'signed_tx',
      details: { expected: expected.toString(), actual: checked.nonce.toString() },
    });
  }
}

/** The chain's rules on the raw bytes (Tron's hex taken with or without 0x); a refusal is 400 on signed_tx. */
function decode(chain: SponsorableChain, signedTx: string, context: SignedTransferContext): AccountTransaction {
  if (chain === 'ethereum' && context.chainId === undefined) throw new Error('checking an Ethereum transaction needs the chain id of the node of the environment');
  const raw = chain === 'tron' ? signedTx.replace(/^0x/i, '') : signedTx;
  try {
    return DECODERS[chain](raw, { tokens: context.tokens, chainId: context.chainId });
  } catch (error) {
    if (!(error instanceof DevnetRejection)) throw error;
    if (error.reason === 'wrong_chain') {
      throw invalidSignedTx(`signed_tx is signed for another chain: this environment's Ethereum network has chain id ${context.chainId}.`, error.reason);
    }
    throw invalidSignedTx(`signed_tx is not a valid ${chain} transaction (${error.reason}): ${error.message}`, error.reason);
  }
}
