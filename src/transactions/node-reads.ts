/**
 * What a send reads from its chain's node before its database transaction opens: the fee market, and
 * the gas of its transfer from each address it may leave from (EVM), within the gas cap, or its compute
 * budget (Solana on a live node).
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import type { AssetInfo } from '../catalogue/service';
import { chainNodeUnavailable, readFeeMarket } from '../chains/fees';
import type { ChainNodes } from '../chains/nodes';
import { NodeUnavailableError, TransactionRejectedError, type ChainProvider, type FeeMarket, type TransferComputeBudget } from '../chains/provider';
import { erc20TransferData } from '../chains/transfers/ethereum';
import { LAMPORTS_PER_SIGNATURE } from '../chains/transfers/solana';
import type { Config } from '../config';
import { Address, type Wallet } from '../custody/entities';
import { spendableByAddress } from '../custody/journal';
import { findPrimaryAddress } from '../custody/service';
import type { SendGas } from '../movements/fee-terms';
import type { MovementInitiator } from '../movements/gate';
import { DomainError, errors } from '../shared/errors';
import type { AutomatedSend } from './service';
import { checkSendOptions, resolveTransfer, type CreateTransactionInput } from './validation';

/**
 * What a send needs from its chain's node: the fee market, and each address it may leave from with
 * the gas its transfer takes from there (ERC-20 and sponsored sends; none for plain ether, Bitcoin
 * and Tron) or the compute budget of its transfer from there (Solana, where the node simulates;
 * none on the devnet). Read before the send's transaction opens, so no pooled connection or row lock
 * waits on the node.
 */
export interface SendNodeReads {
  market: FeeMarket;
  senders: { addressId: string; gas: SendGas | undefined; budget?: TransferComputeBudget | undefined }[];
}

/**
 * The node's part of a send, read outside any transaction: the request is checked first (bad input
 * is 400 before any node is asked), then the market, the token's contract, and the gas from each
 * candidate sending address. The first candidate's estimate refusing the transfer refuses the send
 * (400 gas_estimate_failed); a later candidate's drops that candidate.
 */
export async function readSendFromNode(
  em: EntityManager,
  config: Config,
  chains: ChainNodes,
  auth: MovementInitiator,
  input: CreateTransactionInput,
  automation: Pick<AutomatedSend, 'fromAddress' | 'market'> = {},
): Promise<SendNodeReads> {
  const transfer = await resolveTransfer(em, auth, input);
  checkSendOptions(transfer, input);
  const { wallet, chain, asset, toAddress, amount } = transfer;
  const market = automation.market ?? (await readFeeMarket(chains, chain.id, auth.environment, em));
  const provider = await chains.provider(chain.id, auth.environment, em);
  if (asset.type !== 'native' && !provider.tokenAddress(asset.id)) {
    throw errors.invalid('asset_not_configured', `No ${asset.id} contract is configured for ${chain.id} in this environment.`, { param: 'asset' });
  }
  const candidates = automation.fromAddress ? [automation.fromAddress] : await sendingCandidates(em, wallet, asset, amount);
  const senders: SendNodeReads['senders'] = [];
  for (const sender of candidates) {
    try {
      senders.push({
        addressId: sender.id,
        gas: market.model === 'eip1559' ? await sendGas(config, provider, asset, sender.address, toAddress, amount, input.sponsor === true) : undefined,
        budget: await transferComputeBudget(provider, asset, sender.address, toAddress, amount, transfer.gross),
      });
    } catch (error) {
      if (senders.length === 0 || !(error instanceof DomainError)) throw error;
    }
  }
  return { market, senders };
}

/**
 * The gas an EVM transfer uses, from the node's eth_estimateGas of the call from the sending address
 * (the devnet answers exactly what it charges): a sponsored send is signed with it as its limit, so
 * the fuel is exactly its fee. A call the node says would fail is refused (400 gas_estimate_failed,
 * the node's reason in details); a node that does not answer is 503 chain_node_unavailable.
 */
export async function transferGas(provider: ChainProvider, asset: AssetInfo, from: string, to: string, amount: bigint): Promise<bigint> {
  if (!provider.estimateGas) throw new Error(`the ${asset.chain} provider cannot estimate gas`);
  const token = asset.type === 'native' ? undefined : provider.tokenAddress(asset.id);
  return asEstimate(asset, 'gas', () => (token ? provider.estimateGas!({ from, to: token, data: erc20TransferData(to, amount) }) : provider.estimateGas!({ from, to, value: amount })));
}

/**
 * Solana on a node that simulates (not the devnet): the compute budget of the transfer from `from`,
 * which its send is signed with and its fee priced at. A gross send's transfer is simulated at the
 * amount less the base fee (the simulation pays no priority fee), so that a sender holding just the
 * amount is not refused. A transfer the simulation says fails is refused as EVM's (400
 * gas_estimate_failed); undefined where the provider has no budget.
 */
export async function transferComputeBudget(provider: ChainProvider, asset: AssetInfo, from: string, to: string, amount: bigint, gross: boolean): Promise<TransferComputeBudget | undefined> {
  if (!provider.transferComputeBudget) return undefined;
  const token = asset.type === 'native' ? undefined : provider.tokenAddress(asset.id);
  const moved = gross && amount > LAMPORTS_PER_SIGNATURE ? amount - LAMPORTS_PER_SIGNATURE : amount;
  return asEstimate(asset, 'compute units', () => provider.transferComputeBudget!({ from, to, assetId: asset.id, amount: moved, ...(token ? { tokenAddress: token } : {}) }));
}

/** The node's estimate of a transfer's cost: refused (400 gas_estimate_failed, the node's reason in details) when it says the transfer fails; 503 when it does not answer. */
async function asEstimate<T>(asset: AssetInfo, what: string, estimate: () => Promise<T>): Promise<T> {
  try {
    return await estimate();
  } catch (error) {
    if (error instanceof NodeUnavailableError) throw chainNodeUnavailable('unreachable', `the ${asset.chain} node did not answer`);
    if (!(error instanceof TransactionRejectedError)) throw error;
    throw errors.invalid('gas_estimate_failed', `The node cannot estimate the ${what} of this ${asset.id} transfer: ${error.message}`, {
      details: { asset_id: asset.id, reason: error.reason },
    });
  }
}

/**
 * The gas limit of an unsponsored ERC-20 send, which its fee limit is priced at: the node's estimate
 * of the transfer (transferGas) raised by ERC20_GAS_MARGIN_PERCENT (the gas can grow between the
 * estimate and the block, and a send out of gas still pays), and never above ERC20_GAS_CAP. An
 * estimate above the cap is refused (400 gas_above_cap with the figures): no plain transfer costs that.
 */
export function erc20GasLimit(config: Config, asset: AssetInfo, estimate: bigint): bigint {
  const cap = BigInt(config.ERC20_GAS_CAP);
  if (estimate > cap) {
    throw errors.invalid('gas_above_cap', `The node estimates this ${asset.id} transfer at ${estimate} gas, above the cap of ${cap} gas: it is refused.`, {
      param: 'asset',
      details: { asset_id: asset.id, estimated_gas: estimate.toString(), gas_cap: cap.toString() },
    });
  }
  const limit = (estimate * BigInt(100 + config.ERC20_GAS_MARGIN_PERCENT)) / 100n;
  return limit < cap ? limit : cap;
}

/**
 * The gas an EVM send is signed with: sponsored, the transfer's exact gas; an unsponsored token send,
 * its estimate with margin under the cap; unsponsored ether, the fixed 21000 (undefined here).
 */
async function sendGas(config: Config, provider: ChainProvider, asset: AssetInfo, from: string, to: string, amount: bigint, sponsored: boolean): Promise<SendGas | undefined> {
  if (asset.type === 'native' && !sponsored) return undefined;
  const estimate = await transferGas(provider, asset, from, to, amount);
  return { limit: sponsored ? estimate : erc20GasLimit(config, asset, estimate), sponsored };
}

/**
 * The addresses an account-chain send may leave from: those whose spendable balance of the asset
 * covers the amount, the primary first, then by index. Bitcoin spends the wallet's coins from its
 * primary address's view. None covers it: the primary, whose lock then says why not.
 */
async function sendingCandidates(em: EntityManager, wallet: Wallet, asset: AssetInfo, amount: bigint): Promise<Address[]> {
  const primary = await findPrimaryAddress(em, wallet);
  if (wallet.chain === 'bitcoin') return [primary];
  const spendable = await spendableByAddress(em, { walletId: wallet.id }, [asset.id]);
  const holders = [...spendable].filter(([, assets]) => (assets.get(asset.id) ?? 0n) >= amount).map(([addressId]) => addressId);
  if (holders.length === 0) return [primary];
  const addresses = await em.find(Address, { id: { $in: holders }, wallet }, { orderBy: { isPrimary: 'desc', addressIndex: 'asc' } });
  return addresses;
}
