import { base58, base64 } from '@scure/base';
import { z } from 'zod';
import {
  NodeUnavailableError,
  type BalanceAtHeight,
  type BalanceRead,
  type BudgetedTransfer,
  type ChainProvider,
  type ChainTip,
  type FeeMarket,
  type NetworkIdentity,
  type ObservedBlock,
  type RecentBlock,
  type RelayedAnswer,
  type RelayedCall,
  type TransactionStatus,
  type TransferComputeBudget,
} from '../provider';
import { checkTransfer } from '../transfers';
import { associatedTokenAccount, LAMPORTS_PER_SIGNATURE, PRIORITY_COMPUTE_UNIT_LIMIT, priorityFeeOf, solanaRecentBlockhash, TOKEN_PROGRAM, unsignedSolanaTransfer } from '../transfers/solana';
import { broadcastErrorOutcome } from '../refusals';
import { NodeResponseTooLargeError, relayJsonRpc2, relayJsonRpc2WithStatus, type NodeCallLimits } from './node-http';
import { Lamports, ParsedTransaction, PayerMeta, payerCost, readTransaction, Slot, TokenAmount } from './solana-blocks';
import { levelPrices, RecentPrioritizationFees, transferBudget } from './solana-fees';

/** The mint of each SPL token asset on this node's network: asset id → mint address (base58). */
export type TokenMints = Readonly<Record<string, string>>;

/** Each cluster's genesis hash (getGenesisHash) → its name; any other (a local validator) is `genesis:<hash>`. */
export const SOLANA_GENESIS_HASHES: Readonly<Record<string, string>> = {
  '5eykt4UsFv8P8NJdTREpY1vzqKqZKvdpKuc147dw2N9d': 'mainnet-beta',
  EtWTRABZaYq6iMfeYKouRu166VU2xqa1wcaWoxPkrZBG: 'devnet',
  '4uhcVJyU9pJkvQyS88uRDiswHXSCkY3zQawwpjk2NsNY': 'testnet',
};
export const SOLANA_MAINNET = 'mainnet-beta';

/**
 * Solana's JSON-RPC error codes (solana-rpc-client-api's custom errors): the slot had no block (skipped),
 * or a skipped slot or one missing from long-term storage; the block is not available yet.
 */
const SLOT_SKIPPED = -32007;
const LONG_TERM_STORAGE_SLOT_SKIPPED = -32009;
const BLOCK_NOT_AVAILABLE = -32004;
/** How far back a skipped slot's newest earlier block is looked for (getBlocks' range). */
const SKIPPED_SLOT_LOOKBACK = 500;
/** Scanning and status read blocks the cluster confirmed (supermajority voted): a processed block can still be dropped. */
const COMMITMENT = 'confirmed';
/**
 * Transactions one getTransaction batch of a paged block asks for: about half a megabyte of mainnet's
 * jsonParsed transactions, well under the default cap (a batch over it is halved).
 */
const TRANSACTIONS_PER_PAGE = 100;
/** Accounts one getMultipleAccounts call takes (the RPC's limit). */
const ACCOUNTS_PER_CALL = 100;
/** What a balance needs of an SPL token account: its mint (bytes 0-32), owner (32-64) and amount (u64 little-endian, 64-72). */
const TOKEN_ACCOUNT_HEAD = 72;
const TOKEN_PROGRAM_ID = base58.encode(TOKEN_PROGRAM);

const WithContext = <T extends z.ZodType>(value: T) => z.object({ context: z.object({ slot: Slot }).loose(), value });
const BlockHeader = z.object({ blockhash: z.string(), previousBlockhash: z.string(), parentSlot: Slot, blockTime: z.number().int().nullable() });
const Block = BlockHeader.extend({ transactions: z.array(ParsedTransaction).optional() });
/** getBlock with `transactionDetails: 'signatures'`: the first signature of each transaction, in the block's order. */
const BlockSignatures = BlockHeader.extend({ signatures: z.array(z.string()) });
/** getTransaction (jsonParsed): the transaction as a full block carries it, and the slot it is in. */
const SlotTransaction = ParsedTransaction.extend({ slot: Slot });
const SignatureStatus = z.object({ slot: Slot, err: z.unknown(), confirmationStatus: z.enum(['processed', 'confirmed', 'finalized']).nullable() }).loose();
const TransactionMeta = z.object({ slot: Slot, meta: PayerMeta.loose().nullable() }).loose();

/** An account as getMultipleAccounts gives it (base64, sliced), or null where none exists. */
const AccountHead = z.object({ lamports: Lamports, owner: z.string(), data: z.tuple([z.string(), z.literal('base64')]) }).loose().nullable();
const TokenAccounts = z.array(z.object({ account: z.object({ data: z.object({ parsed: z.object({ info: z.object({ tokenAmount: z.object({ amount: TokenAmount }).loose() }).loose() }).loose() }).loose() }).loose() }));

/**
 * Any node speaking Solana's JSON-RPC (Agave, Firedancer, a hosted provider), for one environment.
 * Heights are slots: a slot with no block (skipped) reads as an empty block carrying the hash of the
 * newest block before it, so each real block's parent hash is the hash recorded one slot below.
 */
export class SolanaRpcProvider implements ChainProvider {
  readonly kind = 'solana-rpc';
  readonly chain = 'solana' as const;
  private readonly assetOfMint: Map<string, string>;

  constructor(
    private readonly url: string,
    private readonly limits: NodeCallLimits,
    private readonly mints: TokenMints = {},
    /** How many blocks scanning reads at once (SOLANA_SCAN_PARALLEL_BLOCKS): a slot every 400 ms outpaces one round trip at a time. */
    readonly blockReadsInParallel = 1,
  ) {
    this.assetOfMint = new Map(Object.entries(mints).map(([assetId, mint]) => [mint, assetId]));
  }

  async identifyNetwork(): Promise<NetworkIdentity> {
    const genesis = await this.call('getGenesisHash', [], z.string());
    return { network: SOLANA_GENESIS_HASHES[genesis] ?? `genesis:${genesis}` };
  }

  /** The newest confirmed slot, with its blockhash. */
  async tip(): Promise<ChainTip> {
    const latest = await this.call('getLatestBlockhash', [{ commitment: COMMITMENT }], WithContext(z.object({ blockhash: z.string() }).loose()));
    return { height: latest.context.slot, hash: latest.value.blockhash };
  }

  /** The blockhash a new transaction names (finalized, so it cannot be on a dropped fork); `time` is when it was read. */
  async recentBlock(): Promise<RecentBlock> {
    const latest = await this.call('getLatestBlockhash', [{ commitment: 'finalized' }], WithContext(z.object({ blockhash: z.string() }).loose()));
    return { height: latest.context.slot, hash: latest.value.blockhash, time: new Date() };
  }

  /**
   * The confirmed block at slot `height` (jsonParsed, full transactions): what each transaction paid and
   * transferred (readTransaction). A block whose answer is over the response cap
   * (CHAIN_NODE_MAX_RESPONSE_BYTES) is read page by page instead (pagedBlock): one large block never
   * stops scanning. Null for a slot the node has no block for yet.
   */
  async block(height: number): Promise<ObservedBlock | null> {
    let found: z.output<typeof Block> | 'skipped' | null;
    try {
      found = await this.blockAt(height, 'full', Block);
    } catch (error) {
      if (error instanceof NodeResponseTooLargeError) return this.pagedBlock(height);
      throw error;
    }
    if (found === 'skipped') return this.skippedSlot(height);
    return found && this.observed(height, found, found.transactions ?? []);
  }

  /**
   * A block over the response cap: its signatures (getBlock `transactionDetails: 'signatures'`, some 90
   * bytes a transaction), then its transactions by getTransaction, TRANSACTIONS_PER_PAGE a batch, a batch
   * over the cap split in halves. Every transaction must be in this slot: one that is not (the cluster
   * confirmed another fork meanwhile) fails the read, retried with the next pass.
   */
  private async pagedBlock(height: number): Promise<ObservedBlock | null> {
    const found = await this.blockAt(height, 'signatures', BlockSignatures);
    if (found === 'skipped') return this.skippedSlot(height);
    if (!found) return null;
    const transactions: ParsedTransaction[] = [];
    for (let start = 0; start < found.signatures.length; start += TRANSACTIONS_PER_PAGE) {
      transactions.push(...(await this.transactionsOf(height, found.signatures.slice(start, start + TRANSACTIONS_PER_PAGE))));
    }
    return this.observed(height, found, transactions);
  }

  /** getTransaction of each signature in one batch, halved while the answer is over the cap. */
  private async transactionsOf(height: number, signatures: string[]): Promise<ParsedTransaction[]> {
    const options = { commitment: COMMITMENT, encoding: 'jsonParsed', maxSupportedTransactionVersion: 0 };
    let answers: RelayedAnswer[];
    try {
      answers = await this.relay(signatures.map((signature) => ({ method: 'getTransaction', params: [signature, options] })));
    } catch (error) {
      if (!(error instanceof NodeResponseTooLargeError) || signatures.length === 1) throw error;
      const half = Math.ceil(signatures.length / 2);
      return [...(await this.transactionsOf(height, signatures.slice(0, half))), ...(await this.transactionsOf(height, signatures.slice(half)))];
    }
    return answers.map((answer) => {
      if ('error' in answer) throw nodeRefused('getTransaction', answer.error);
      const transaction = parse('getTransaction', SlotTransaction.nullable(), answer.result);
      if (transaction?.slot !== height) throw new NodeUnavailableError(`A transaction of slot ${height} is no longer there: the block changed while it was read in pages.`);
      return transaction;
    });
  }

  /** getBlock at `height` with the given transaction details: the block, 'skipped' (-32007, -32009), or null when not available yet (-32004). */
  private async blockAt<T extends z.ZodType>(height: number, transactionDetails: 'full' | 'signatures', schema: T): Promise<z.output<T> | 'skipped' | null> {
    const answer = await this.answer('getBlock', [height, { commitment: COMMITMENT, encoding: 'jsonParsed', transactionDetails, rewards: false, maxSupportedTransactionVersion: 0 }]);
    if ('error' in answer) {
      if (answer.error.code === SLOT_SKIPPED || answer.error.code === LONG_TERM_STORAGE_SLOT_SKIPPED) return 'skipped';
      if (answer.error.code === BLOCK_NOT_AVAILABLE) return null;
      throw nodeRefused('getBlock', answer.error);
    }
    return answer.result === null ? null : parse('getBlock', schema, answer.result);
  }

  private observed(height: number, block: z.output<typeof BlockHeader>, transactions: ParsedTransaction[]): ObservedBlock {
    const read = transactions.map((transaction) => readTransaction(transaction, this.assetOfMint));
    return {
      height,
      hash: block.blockhash,
      parentHash: block.previousBlockhash,
      time: new Date((block.blockTime ?? 0) * 1000),
      transfers: read.flatMap(({ transfers }) => transfers),
      payments: read.flatMap(({ payment }) => (payment ? [payment] : [])),
      inputs: [],
    };
  }

  /** SOL: the account's lamports; a token: the sum of the owner's token accounts of its mint (all finalized). */
  async balance(address: string, assetId: string): Promise<bigint> {
    if (assetId === 'SOL') return (await this.call('getBalance', [address, { commitment: 'finalized' }], WithContext(Lamports))).value;
    const mint = this.mintOf(assetId);
    const accounts = await this.call('getTokenAccountsByOwner', [address, { mint }, { commitment: 'finalized', encoding: 'jsonParsed' }], WithContext(TokenAccounts));
    return accounts.value.reduce((sum, { account }) => sum + account.data.parsed.info.tokenAmount.amount, 0n);
  }

  /**
   * The balances from one state per call: getMultipleAccounts at `confirmed` (the commitment blocks are
   * scanned at, so the scanner reaches the slot read), 100 accounts a call, the calls sent as one batch,
   * each balance with its call's context slot. SOL: the owner's lamports. A token: the amount in the
   * owner's associated token account of the configured mint (0 while it has none), which is where
   * custody holds tokens: sends spend from it and pay into the recipient's. A token account of another
   * address the owner may hold (a deposit made to one) is not read, so its credit shows as a drift of
   * the ledger ahead of the chain (`balance`, by contrast, sums every account of the owner).
   */
  async balancesAtNewest(reads: BalanceRead[]): Promise<BalanceAtHeight[]> {
    const keys = reads.map((read) => (read.assetId === 'SOL' ? read.address : associatedTokenAccount(read.address, this.mintOf(read.assetId))));
    const calls: RelayedCall[] = [];
    for (let start = 0; start < keys.length; start += ACCOUNTS_PER_CALL) {
      calls.push({ method: 'getMultipleAccounts', params: [keys.slice(start, start + ACCOUNTS_PER_CALL), { commitment: COMMITMENT, encoding: 'base64', dataSlice: { offset: 0, length: TOKEN_ACCOUNT_HEAD } }] });
    }
    const answers = calls.length ? await this.relay(calls) : [];
    return answers.flatMap((answer, call) => {
      if ('error' in answer) throw nodeRefused('getMultipleAccounts', answer.error);
      const accounts = parse('getMultipleAccounts', WithContext(z.array(AccountHead)), answer.result);
      const first = call * ACCOUNTS_PER_CALL;
      if (accounts.value.length !== Math.min(ACCOUNTS_PER_CALL, keys.length - first)) throw new NodeUnavailableError('The node answered getMultipleAccounts with another number of accounts than asked.');
      return accounts.value.map((account, offset) => ({ balance: this.heldIn(reads[first + offset]!, account), height: accounts.context.slot }));
    });
  }

  /**
   * sendTransaction (base64, preflight at `confirmed`). A transaction the cluster already processed counts
   * as broadcast, so a retry after a lost answer is not a refusal; the node's other refusals carry its message.
   */
  async broadcast(rawTransaction: string): Promise<{ txid: string }> {
    const { status, answers } = await relayJsonRpc2WithStatus(this.url, [{ method: 'sendTransaction', params: [rawTransaction, { encoding: 'base64', preflightCommitment: COMMITMENT }] }], this.limits);
    const [answer] = answers;
    if ('error' in answer!) return broadcastErrorOutcome('solana', answer.error, status, () => signatureOf(rawTransaction));
    return { txid: parse('sendTransaction', z.string(), answer!.result) };
  }

  /**
   * getSignatureStatuses (searching the history): none is `unknown`, processed is `pending`; confirmed or
   * finalized is `mined`, its fee and success read with getTransaction, its blockhash with getBlock.
   */
  async transactionStatus(txid: string): Promise<TransactionStatus> {
    const statuses = await this.call('getSignatureStatuses', [[txid], { searchTransactionHistory: true }], WithContext(z.array(SignatureStatus.nullable()).length(1)));
    const status = statuses.value[0];
    if (!status) return { state: 'unknown' };
    if (status.confirmationStatus === null || status.confirmationStatus === 'processed') return { state: 'pending' };
    const [found, tip] = await Promise.all([
      this.call('getTransaction', [txid, { commitment: COMMITMENT, encoding: 'json', maxSupportedTransactionVersion: 0 }], TransactionMeta.nullable()),
      this.tip(),
    ]);
    if (!found) return { state: 'pending' };
    const block = await this.call('getBlock', [found.slot, { commitment: COMMITMENT, transactionDetails: 'none', rewards: false }], z.object({ blockhash: z.string() }).loose());
    return {
      state: 'mined',
      blockHeight: found.slot,
      blockHash: block.blockhash,
      confirmations: Math.max(1, tip.height - found.slot + 1),
      succeeded: found.meta?.err === null,
      fee: found.meta ? payerCost(found.meta) : null,
    };
  }

  /**
   * isBlockhashValid at finalized: false once the finalized bank is past the blockhash's last valid
   * block height. Its blockhash was read at finalized (recentBlock), so the node knew it then: a node
   * that no longer does has moved past it (the proof trusts one node to be consistent, as a nonce's does).
   */
  async validityPassed(rawTransaction: string): Promise<boolean> {
    return this.blockhashExpired(solanaRecentBlockhash(rawTransaction));
  }

  async blockhashExpired(blockhash: string): Promise<boolean> {
    const valid = await this.call('isBlockhashValid', [blockhash, { commitment: 'finalized' }], WithContext(z.boolean()));
    return !valid.value;
  }

  tokenAddress(assetId: string): string | undefined {
    return this.mints[assetId];
  }

  /** Each configured mint's decimals (getTokenSupply); null for an address that is no mint. */
  async tokenDecimals(): Promise<{ assetId: string; contract: string; decimals: number | null }[]> {
    return Promise.all(
      Object.entries(this.mints).map(async ([assetId, mint]) => {
        const answer = await this.answer('getTokenSupply', [mint]);
        if ('error' in answer) return { assetId, contract: mint, decimals: null };
        return { assetId, contract: mint, decimals: parse('getTokenSupply', WithContext(z.object({ decimals: z.number().int() }).loose()), answer.result).value.decimals };
      }),
    );
  }

  /**
   * The network's fee of a plain transfer at each level (the fee route, funding assessments): 5000
   * lamports for its signature, plus a priority fee at the level's percentile of getRecentPrioritizationFees
   * over every account (micro-lamports per compute unit) at the fixed limit, rounded up to whole lamports.
   * A send is priced by its own transfer instead (transferComputeBudget). Low pays no priority fee when
   * most recent slots asked none.
   */
  async feeMarket(): Promise<FeeMarket> {
    const prices = levelPrices(await this.call('getRecentPrioritizationFees', [[]], RecentPrioritizationFees));
    const at = (unitPrice: bigint) => LAMPORTS_PER_SIGNATURE + priorityFeeOf({ unitLimit: PRIORITY_COMPUTE_UNIT_LIMIT, unitPrice });
    return { model: 'flat', transferFee: { low: at(prices.low), medium: at(prices.medium), high: at(prices.high) } };
  }

  /**
   * The compute budget of one transfer, in one batch: getRecentPrioritizationFees over the accounts the
   * transfer writes (the fee payer, the recipient or the token accounts: what a transaction locking them
   * must outbid), and simulateTransaction of the transfer as it will be signed (unsigned: sigVerify
   * false, replaceRecentBlockhash, at `confirmed` as blocks are scanned) for its units (transferBudget).
   */
  async transferComputeBudget(transfer: BudgetedTransfer): Promise<TransferComputeBudget> {
    const checked = checkTransfer({ ...transfer, chain: 'solana', testnet: false, fee: { model: 'flat', fee: LAMPORTS_PER_SIGNATURE }, reference: 'simulation' });
    const { raw, writableAccounts } = unsignedSolanaTransfer(checked);
    const [fees, simulation] = await this.relay([
      { method: 'getRecentPrioritizationFees', params: [writableAccounts] },
      { method: 'simulateTransaction', params: [raw, { encoding: 'base64', sigVerify: false, replaceRecentBlockhash: true, commitment: COMMITMENT }] },
    ]);
    return transferBudget(fees!, simulation!);
  }

  relay(calls: RelayedCall[]): Promise<RelayedAnswer[]> {
    return relayJsonRpc2(this.url, calls, this.limits);
  }

  private mintOf(assetId: string): string {
    const mint = this.mints[assetId];
    if (!mint) throw new NodeUnavailableError(`No ${assetId} mint is configured for this node.`);
    return mint;
  }

  /** What `account` (the read's owner, or its associated token account) holds of the read's asset. */
  private heldIn(read: BalanceRead, account: z.output<typeof AccountHead>): bigint {
    if (read.assetId === 'SOL' || account === null) return account?.lamports ?? 0n;
    const data = base64.decode(account.data[0]);
    const mint = this.mintOf(read.assetId);
    if (account.owner !== TOKEN_PROGRAM_ID || data.length < TOKEN_ACCOUNT_HEAD || base58.encode(data.subarray(0, 32)) !== mint || base58.encode(data.subarray(32, 64)) !== read.address) {
      throw new NodeUnavailableError(`The associated ${read.assetId} account of ${read.address} is no token account of its mint.`);
    }
    return new DataView(data.buffer, data.byteOffset, data.byteLength).getBigUint64(64, true);
  }

  /** A skipped slot: no transactions, and the hash of the newest block before it as both its hash and parent. */
  private async skippedSlot(height: number): Promise<ObservedBlock> {
    const earlier = await this.call('getBlocks', [Math.max(0, height - SKIPPED_SLOT_LOOKBACK), height - 1, { commitment: COMMITMENT }], z.array(Slot));
    const previous = earlier.at(-1);
    if (previous === undefined) throw new NodeUnavailableError(`The node has no block in the ${SKIPPED_SLOT_LOOKBACK} slots before skipped slot ${height}.`);
    const block = await this.call('getBlock', [previous, { commitment: COMMITMENT, transactionDetails: 'none', rewards: false }], z.object({ blockhash: z.string(), blockTime: z.number().int().nullable() }).loose());
    return { height, hash: block.blockhash, parentHash: block.blockhash, time: new Date((block.blockTime ?? 0) * 1000), transfers: [], payments: [], inputs: [] };
  }

  private async answer(method: string, params: unknown[]): Promise<RelayedAnswer> {
    return (await this.relay([{ method, params }]))[0]!;
  }

  private async call<T extends z.ZodType>(method: string, params: unknown[], schema: T): Promise<z.output<T>> {
    const answer = await this.answer(method, params);
    if ('error' in answer) throw nodeRefused(method, answer.error);
    return parse(method, schema, answer.result);
  }
}

function parse<T extends z.ZodType>(method: string, schema: T, value: unknown): z.output<T> {
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw new NodeUnavailableError(`The node answered ${method} with an unexpected shape.`);
  return parsed.data;
}

/** A JSON-RPC error where an answer was due: the node's own message, which names no URL. */
const nodeRefused = (method: string, error: { code: number; message: string }) => new NodeUnavailableError(`The node refused ${method}: ${error.message} (${error.code}).`);

/** The txid of a signed transaction (base64): the base58 of its first signature. */
function signatureOf(rawTransaction: string): string {
  return base58.encode(base64.decode(rawTransaction).subarray(1, 65));
}

