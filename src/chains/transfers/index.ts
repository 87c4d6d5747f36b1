import { ASSETS, type AssetInfo, type ChainId } from '../../catalogue/service';
import type { DerivedKey } from '../../keys/derivation';
import { errors } from '../../shared/errors';
import { canonicalAddress } from '../addresses';
import type { RecentBlock } from '../provider';
import { signBitcoinTransfer } from './bitcoin';
import { signEthereumTransfer } from './ethereum';
import { signSolanaTransfer, type SolanaComputeBudget } from './solana';
import { signTronTransfer } from './tron';
import { withArticle } from '../../shared/articles';

/**
 * Building and signing a transfer on every chain: pure functions, no I/O, and deterministic (the same
 * transfer and keys give the same bytes, so a retried build is the same transaction). What the chain
 * needs from a node (an Ethereum nonce, Bitcoin's inputs, a recent block) comes in the transfer.
 */

/** The fee a transfer pays, in the chain's terms and the native asset's base units. */
export type FeeTerms =
  | { model: 'eip1559'; gasLimit: bigint; maxFeePerGas: bigint; maxPriorityFeePerGas: bigint }
  /** Bitcoin: informative; the fee is the inputs minus the outputs, which the caller fixes. */
  | { model: 'per_byte'; satPerVbyte: bigint }
  /**
   * Tron: a TRC-20 call's fee_limit (the devnet charges it as the fee); a TRX transfer names no fee (it
   * burns bandwidth). Solana: the whole fee, 5000 lamports a signature plus the priority fee, and the
   * compute budget that costs it when a live node's simulation set one.
   */
  | { model: 'flat'; fee: bigint; computeBudget?: SolanaComputeBudget };

/** A Bitcoin output the transfer spends. */
export interface BitcoinSpend {
  txid: string;
  vout: number;
  amount: bigint;
  /** The address it pays (p2wpkh, p2tr or p2pkh of the signing key), in the transfer's network encoding. */
  address: string;
  /** Index into `keys`: the key that signs this input. */
  key: number;
}

export interface TransferToSign {
  chain: ChainId;
  /** Sandbox networks' encodings (tb1..., Tron/Solana same forms). */
  testnet: boolean;
  /** Account chains: the signer's address (must equal the address of keys[0]). Bitcoin: informative. */
  from: string;
  to: string;
  /** Catalogue asset id: BTC, ETH, USDC_ETH, TRX, USDT_TRX, SOL, USDC_SOL... */
  assetId: string;
  /** Base units the recipient gets. */
  amount: bigint;
  /** The contract (Ethereum, Tron) or mint (Solana) of a token asset. */
  tokenAddress?: string;
  fee: FeeTerms;
  ethereum?: { chainId: number; nonce: bigint };
  bitcoin?: { inputs: BitcoinSpend[]; change?: { address: string; amount: bigint } };
  /** Tron and Solana: required, from the provider's recentBlock(); the same block makes the same bytes. */
  recentBlock?: RecentBlock;
  /**
   * Makes two transfers with identical terms distinct where the chain has no nonce (Tron, Solana): the
   * platform's transaction id. Tron carries it in raw_data.data, Solana as a read-only reference account.
   */
  reference: string;
}

/** `raw` as the provider's broadcast takes it (hex; Solana base64); `txid` as the chain names it. */
export interface SignedTransfer {
  raw: string;
  txid: string;
}

/** What signing needs of a key: a DerivedKey, or the devnet faucet's key. */
export type SigningKey = Pick<DerivedKey, 'address' | 'publicKey' | 'privateKey'>;

/** The transfer as a chain's builder takes it, checked once here. */
export interface CheckedTransfer {
  transfer: TransferToSign;
  asset: AssetInfo;
  /** The recipient in the network's canonical form. */
  to: string;
  /** The token's contract or mint in its canonical form; undefined for the native asset. */
  token: string | undefined;
}

const SIGNERS: Record<ChainId, (checked: CheckedTransfer, keys: SigningKey[]) => SignedTransfer> = {
  bitcoin: signBitcoinTransfer,
  ethereum: signEthereumTransfer,
  tron: signTronTransfer,
  solana: signSolanaTransfer,
};

const FEE_MODELS: Record<ChainId, FeeTerms['model']> = { bitcoin: 'per_byte', ethereum: 'eip1559', tron: 'flat', solana: 'flat' };

/**
 * Builds and signs `transfer` with `keys` (account chains: keys[0] is the sender; Bitcoin: each input
 * names its key). Throws a DomainError (validation_failed) when the transfer cannot be built as given
 * (checkTransfer), or the signing key's address is not the sender's. The keys are read, never kept or wiped.
 */
export function signTransfer(transfer: TransferToSign, keys: SigningKey[]): SignedTransfer {
  const checked = checkTransfer(transfer);
  if (transfer.chain !== 'bitcoin') {
    const signer = keys[0] && canonicalAddress(transfer.chain, checked.environment, keys[0].address);
    if (!signer || signer !== canonicalAddress(transfer.chain, checked.environment, transfer.from)) throw errors.validation(`The signing key's address is not the sender ${transfer.from}.`, 'from');
  }
  return SIGNERS[transfer.chain](checked, keys);
}

/**
 * The transfer checked as every builder takes it. Throws a DomainError (validation_failed) for an asset
 * of another chain, a token without its contract, an address that is not the chain's, fee terms of
 * another model, an amount that is not positive.
 */
export function checkTransfer(transfer: TransferToSign): CheckedTransfer & { environment: 'sandbox' | 'live' } {
  const asset = ASSETS.find((candidate) => candidate.id === transfer.assetId && candidate.chain === transfer.chain);
  if (!asset) throw errors.validation(`${transfer.assetId} is not an asset of ${transfer.chain}`, 'asset_id');
  // Zero moves nothing, save an Ethereum transfer of ether back to its sender: a cancel, which only takes the nonce.
  const cancel = transfer.chain === 'ethereum' && asset.type === 'native' && transfer.from.toLowerCase() === transfer.to.toLowerCase();
  if (transfer.amount < 0n || (transfer.amount === 0n && !cancel)) throw errors.validation('The amount must be positive.', 'amount');
  if (transfer.fee.model !== FEE_MODELS[transfer.chain]) throw errors.validation(`${transfer.chain} takes ${FEE_MODELS[transfer.chain]} fee terms, not ${transfer.fee.model}.`, 'fee');
  const environment = transfer.testnet ? 'sandbox' : 'live';
  const canonical = (address: string | undefined) => (address === undefined ? null : canonicalAddress(transfer.chain, environment, address));
  const to = canonical(transfer.to);
  if (!to) throw errors.validation(`'${transfer.to}' is not ${withArticle(transfer.chain)} address of the ${transfer.testnet ? 'test' : 'main'} network.`, 'to');
  let token: string | undefined;
  if (asset.type !== 'native') {
    token = canonical(transfer.tokenAddress) ?? undefined;
    if (!token) throw errors.validation(`${asset.id} needs its token contract or mint (tokenAddress) as ${withArticle(transfer.chain)} address.`, 'token_address');
  }
  return { transfer, asset, to, token, environment };
}
