import type { EntityManager } from '@mikro-orm/postgresql';
import { sandboxAddress } from '../addresses';
import type { ChainId } from '../../catalogue/service';
import type { Orm } from '../../db/orm';
import {
  TransactionRejectedError,
  type ChainProvider,
  type ChainTip,
  type FeeMarket,
  type GasEstimateCall,
  type NetworkIdentity,
  type ObservedBlock,
  type RecentBlock,
  type RelayedAnswer,
  type RelayedCall,
  type TransactionStatus,
} from '../provider';
import { DevnetBlock, DevnetOutput, DevnetTransaction } from './entities';
import { acceptDevnetTransaction } from './acceptance';
import { devnetBalance, devnetFeeMarket, devnetTip, minedNonce, pendingNonce, transfersOf } from './ledger-reads';
import { canonicalTxid, DEVNET_ETHEREUM_CHAIN_ID, DEVNET_TOKENS } from './params';
import { answerBitcoinCall } from './rpc/bitcoin';
import { answerEthereumCall } from './rpc/ethereum';
import { answerSolanaCall } from './rpc/solana';
import { answerTronCall } from './rpc/tron';
import { devnetCallGas } from './rules/ethereum';
import { DevnetRejection } from './rules/types';

/** Each chain's JSON-RPC core subset, answered from the ledger. */
const RPC: Record<ChainId, (provider: DevnetProvider, em: EntityManager, call: RelayedCall) => Promise<RelayedAnswer>> = {
  bitcoin: answerBitcoinCall,
  ethereum: answerEthereumCall,
  tron: answerTronCall,
  solana: answerSolanaCall,
};

/**
 * The embedded devnet as a ChainProvider: the sandbox's own chain in PostgreSQL, used for sandbox
 * keys when no node is configured for the chain. Each call works on its own EntityManager, or on the
 * caller's when it is bound to one.
 */
export class DevnetProvider implements ChainProvider {
  readonly kind = 'devnet';

  /** Ethereum only: the ledger's nonces, `confirmed` the count of the account's mined transactions. */
  readonly nonces?: (address: string) => Promise<{ confirmed: bigint; pending: bigint }>;
  /** Bitcoin only: the ledger's outputs know their first accepted spender; spent in the chain once both are mined. */
  readonly spentInChain?: (outpoint: { txid: string; vout: number }) => Promise<boolean>;
  /** Ethereum only: exactly the gas the devnet charges the call when mined (it has no other execution to estimate). */
  readonly estimateGas?: (call: GasEstimateCall) => Promise<bigint>;

  constructor(
    readonly chain: ChainId,
    private readonly orm: Orm,
    /** The caller's EntityManager to work on (inside its transaction); otherwise each call forks its own. */
    private readonly bound?: EntityManager,
  ) {
    if (chain === 'ethereum') {
      this.nonces = async (address) => {
        const em = this.em();
        const account = sandboxAddress(chain, address);
        return { confirmed: await minedNonce(em, chain, account), pending: await pendingNonce(em, chain, account) };
      };
      this.estimateGas = async (call) => {
        try {
          return devnetCallGas(call, DEVNET_TOKENS.ethereum);
        } catch (error) {
          if (error instanceof DevnetRejection) throw new TransactionRejectedError(error.reason, error.message);
          throw error;
        }
      };
    }
    if (chain === 'bitcoin') {
      this.spentInChain = async ({ txid, vout }) => {
        const em = this.em();
        const output = await em.findOne(DevnetOutput, { chain, txid: canonicalTxid(chain, txid), vout });
        if (!output?.spentBy) return false;
        const mined = await em.count(DevnetTransaction, { chain, txid: { $in: [output.txid, output.spentBy] }, status: 'mined' });
        return mined === 2;
      };
    }
  }

  tokenAddress(assetId: string): string | undefined {
    return DEVNET_TOKENS[this.chain][assetId];
  }

  /** The tip block and its time: the devnet does not check references, a real Tron or Solana node does. */
  async recentBlock(): Promise<RecentBlock> {
    const tip = await devnetTip(this.em(), this.chain);
    return { height: tip.height, hash: tip.hash, time: tip.time };
  }

  async identifyNetwork(): Promise<NetworkIdentity> {
    return this.chain === 'ethereum' ? { network: 'devnet', chainId: DEVNET_ETHEREUM_CHAIN_ID } : { network: 'devnet' };
  }

  feeMarket(): Promise<FeeMarket> {
    return devnetFeeMarket(this.em(), this.chain);
  }

  async tip(): Promise<ChainTip> {
    const tip = await devnetTip(this.em(), this.chain);
    return { height: tip.height, hash: tip.hash };
  }

  /** Every output with an address (Bitcoin, coinbase included) and every transfer of a mined transaction. */
  async block(height: number): Promise<ObservedBlock | null> {
    const em = this.em();
    await devnetTip(em, this.chain);
    const block = await em.findOne(DevnetBlock, { chain: this.chain, height });
    if (!block) return null;
    const entries = await this.blockTransactions(em, height);
    const transfers = await transfersOf(em, this.chain, entries);
    const spent = await em.find(DevnetOutput, { chain: this.chain, spentBy: { $in: entries.map((entry) => entry.txid) } }, { orderBy: { txid: 'asc', vout: 'asc' } });
    return {
      height,
      hash: block.hash,
      parentHash: block.parentHash,
      time: block.time,
      transfers: entries.flatMap((entry) => (transfers.get(entry.txid) ?? []).map((transfer) => ({ txid: entry.txid, from: entry.sender, ...transfer }))),
      payments: entries.flatMap((entry) =>
        entry.sender === null ? [] : [{ txid: entry.txid, from: entry.sender, fee: BigInt(entry.feePaid ?? '0'), ...(entry.nonce === null ? {} : { nonce: BigInt(entry.nonce) }) }],
      ),
      inputs: spent.map((output) => ({ txid: output.spentBy!, spends: { txid: output.txid, vout: output.vout } })),
    };
  }

  async balance(address: string, assetId: string): Promise<bigint> {
    const em = this.em();
    await devnetTip(em, this.chain);
    return devnetBalance(em, this.chain, sandboxAddress(this.chain, address), assetId);
  }

  async broadcast(rawTransaction: string): Promise<{ txid: string }> {
    const { txid } = await acceptDevnetTransaction(this.em(), this.chain, rawTransaction);
    return { txid };
  }

  async transactionStatus(txid: string): Promise<TransactionStatus> {
    const em = this.em();
    const entry = await em.findOne(DevnetTransaction, { chain: this.chain, txid: canonicalTxid(this.chain, txid) });
    if (!entry) return { state: 'unknown' };
    if (entry.status === 'mempool') return { state: 'pending' };
    const [tip, block] = await Promise.all([devnetTip(em, this.chain), em.findOneOrFail(DevnetBlock, { chain: this.chain, height: entry.blockHeight! })]);
    return { state: 'mined', blockHeight: block.height, blockHash: block.hash, confirmations: tip.height - block.height + 1, succeeded: true, fee: BigInt(entry.feePaid!) };
  }

  /** Answers each call from the ledger, in order; a method outside the chain's core subset answers -32601. */
  async relay(calls: RelayedCall[]): Promise<RelayedAnswer[]> {
    const answers: RelayedAnswer[] = [];
    for (const call of calls) answers.push(await RPC[this.chain](this, this.em(), call));
    return answers;
  }

  /** A mined block's transactions in block order. */
  blockTransactions(em: EntityManager, height: number): Promise<DevnetTransaction[]> {
    return em.find(DevnetTransaction, { chain: this.chain, blockHeight: height, status: 'mined' }, { orderBy: { blockIndex: 'asc' } });
  }

  private em(): EntityManager {
    return this.bound ?? (this.orm.em.fork() as EntityManager);
  }
}
