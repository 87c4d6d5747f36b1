import { base58, base64 } from '@scure/base';
import { z } from 'zod';
import {
  NodeUnavailableError,
  type BalanceAtHeight,
  type BalanceRead,
  type ChainProvider,
  type ChainTip,
  type FeeMarket,
  type NetworkIdentity,
  type ObservedBlock,
  type ObservedPayment,
  type ObservedTransfer,
  type RecentBlock,
  type RelayedAnswer,
  type RelayedCall,
  type TransactionStatus,
} from '../provider';
import { associatedTokenAccount, LAMPORTS_PER_SIGNATURE, MICRO_LAMPORTS_PER_LAMPORT, PRIORITY_COMPUTE_UNIT_LIMIT, solanaRecentBlockhash, TOKEN_PROGRAM } from '../transfers/solana';
import { broadcastErrorOutcome } from '../refusals';
import { relayJsonRpc2, relayJsonRpc2WithStatus, type NodeCallLimits } from './node-http';

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
/** The levels' priority fees: percentiles of the node's recent prioritization fees (micro-lamports per compute unit). */
const PRIORITY_PERCENTILES = { low: 10, medium: 50, high: 90 } as const;
/** Scanning and status read blocks the cluster confirmed (supermajority voted): a processed block can still be dropped. */
const COMMITMENT = 'confirmed';
/** Accounts one getMultipleAccounts call takes (the RPC's limit). */
const ACCOUNTS_PER_CALL = 100;
/** What a balance needs of an SPL token account: its mint (bytes 0-32), owner (32-64) and amount (u64 little-endian, 64-72). */
const TOKEN_ACCOUNT_HEAD = 72;
const TOKEN_PROGRAM_ID = base58.encode(TOKEN_PROGRAM);

/**
 * Lamports and token amounts are u64, which Solana's JSON writes as numbers (token amounts also as a
 * string). A JSON number above 2^53 cannot be read exactly: such an answer is refused, never rounded.
 */
const Lamports = z
  .number()
  .int()
  .nonnegative()
  .refine(Number.isSafeInteger, 'an amount above 2^53 cannot be read exactly')
  .transform((value) => BigInt(value));
const TokenAmount = z.string().regex(/^\d+$/).transform((value) => BigInt(value));
const Slot = z.number().int().nonnegative();
const WithContext = <T extends z.ZodType>(value: T) => z.object({ context: z.object({ slot: Slot }).loose(), value });

const ParsedInstruction = z.object({ program: z.string().optional(), programId: z.string(), parsed: z.unknown().optional() }).loose();
const SystemTransfer = z.object({ type: z.literal('transfer'), info: z.object({ source: z.string(), destination: z.string(), lamports: Lamports }) });
const TokenTransfer = z.object({
  type: z.enum(['transfer', 'transferChecked']),
  info: z.object({
    source: z.string(),
    destination: z.string(),
    mint: z.string().optional(),
    amount: TokenAmount.optional(),
    tokenAmount: z.object({ amount: TokenAmount }).loose().optional(),
  }).loose(),
});
const TokenBalance = z.object({ accountIndex: z.number().int().nonnegative(), mint: z.string(), owner: z.string().optional() }).loose();
/** A transaction's meta as far as its payer's cost is read: the fee, lamports per account key before and after, and the token accounts before. */
const PayerMeta = z.object({
  err: z.unknown(),
  fee: Lamports,
  preBalances: z.array(Lamports).optional(),
  postBalances: z.array(Lamports).optional(),
  preTokenBalances: z.array(TokenBalance).nullish(),
  postTokenBalances: z.array(TokenBalance).nullish(),
});
const BlockTransaction = z.object({
  transaction: z.object({
    signatures: z.array(z.string()).min(1),
    message: z.object({ accountKeys: z.array(z.object({ pubkey: z.string() }).loose()).min(1), recentBlockhash: z.string().optional(), instructions: z.array(ParsedInstruction) }).loose(),
  }),
  meta: PayerMeta.extend({ postTokenBalances: z.array(TokenBalance).nullish() }).loose().nullable(),
});
const Block = z.object({
  blockhash: z.string(),
  previousBlockhash: z.string(),
  parentSlot: Slot,
  blockTime: z.number().int().nullable(),
  transactions: z.array(BlockTransaction).optional(),
});
const SignatureStatus = z.object({ slot: Slot, err: z.unknown(), confirmationStatus: z.enum(['processed', 'confirmed', 'finalized']).nullable() }).loose();
const TransactionMeta = z.object({ slot: Slot, meta: PayerMeta.loose().nullable() }).loose();

/**
 * The recent blockhash that bounds a transaction's life, as ObservedPayment carries it; none for a
 * durable-nonce transaction (its first instruction advances a nonce account: the "blockhash" is the
 * nonce's value, valid until the nonce advances, so its expiry proves nothing).
 */
function expiringBlockhash(message: { recentBlockhash?: string; instructions: z.output<typeof ParsedInstruction>[] }): { recentBlockhash?: string } {
  const first = message.instructions[0];
  const durable = first?.program === 'system' && (first.parsed as { type?: unknown } | undefined)?.type === 'advanceNonce';
  return message.recentBlockhash && !durable ? { recentBlockhash: message.recentBlockhash } : {};
}

/**
 * What a transaction cost its fee payer beyond its transfers: the fee, and the rent of each token
 * account it created (an SPL transfer's CreateIdempotent for a recipient with none: 2,039,280
 * lamports), which leaves the payer for good. The ledger debits this as the send's fee.
 */
function payerCost(meta: z.output<typeof PayerMeta>): bigint {
  const existed = new Set((meta.preTokenBalances ?? []).map((balance) => balance.accountIndex));
  const lamportsOf = (balances: bigint[] | undefined, index: number) => balances?.[index] ?? 0n;
  return (meta.postTokenBalances ?? [])
    .filter((balance) => !existed.has(balance.accountIndex))
    .reduce((cost, { accountIndex }) => cost + lamportsOf(meta.postBalances, accountIndex) - lamportsOf(meta.preBalances, accountIndex), meta.fee);
}
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
   * The confirmed block at slot `height` (jsonParsed): each successful top-level System transfer (`SOL`)
   * and SPL Token transfer of a configured mint (credited to the token account's owner, from the
   * transaction's token balances), at position `ix:<n>`; every transaction's fee payer and its cost (payerCost). Transfers
   * made by inner instructions (a program's CPI) are not seen. Null for a slot the node has no block for yet.
   */
  async block(height: number): Promise<ObservedBlock | null> {
    const answer = await this.answer('getBlock', [height, { commitment: COMMITMENT, encoding: 'jsonParsed', transactionDetails: 'full', rewards: false, maxSupportedTransactionVersion: 0 }]);
    if ('error' in answer) {
      if (answer.error.code === SLOT_SKIPPED || answer.error.code === LONG_TERM_STORAGE_SLOT_SKIPPED) return this.skippedSlot(height);
      if (answer.error.code === BLOCK_NOT_AVAILABLE) return null;
      throw nodeRefused('getBlock', answer.error);
    }
    if (answer.result === null) return null;
    const block = parse('getBlock', Block, answer.result);
    const transfers: ObservedTransfer[] = [];
    const payments: ObservedPayment[] = [];
    for (const { transaction, meta } of block.transactions ?? []) {
      const txid = transaction.signatures[0]!;
      const keys = transaction.message.accountKeys.map((key) => key.pubkey);
      if (meta) payments.push({ txid, from: keys[0]!, fee: payerCost(meta), ...expiringBlockhash(transaction.message) });
      if (!meta || meta.err !== null) continue;
      const tokenAccounts = new Map((meta.postTokenBalances ?? []).map((balance) => [keys[balance.accountIndex], balance]));
      transaction.message.instructions.forEach((instruction, index) => {
        const position = `ix:${index}`;
        if (instruction.program === 'system') {
          const transfer = SystemTransfer.safeParse(instruction.parsed);
          if (transfer.success) transfers.push({ txid, position, to: transfer.data.info.destination, from: transfer.data.info.source, assetId: 'SOL', amount: transfer.data.info.lamports });
        } else if (instruction.program === 'spl-token') {
          const transfer = TokenTransfer.safeParse(instruction.parsed);
          if (!transfer.success) return;
          const { destination, source, tokenAmount, amount } = transfer.data.info;
          const account = tokenAccounts.get(destination);
          const assetId = account && this.assetOfMint.get(account.mint);
          const moved = tokenAmount?.amount ?? amount;
          if (!assetId || !account.owner || moved === undefined) return;
          transfers.push({ txid, position, to: account.owner, from: tokenAccounts.get(source)?.owner ?? null, assetId, amount: moved });
        }
      });
    }
    const time = new Date((block.blockTime ?? 0) * 1000);
    return { height, hash: block.blockhash, parentHash: block.previousBlockhash, time, transfers, payments, inputs: [] };
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
   * The fee of a plain transfer at each level: 5000 lamports for its signature, plus a priority fee at the
   * level's percentile of getRecentPrioritizationFees (micro-lamports per compute unit) over the compute
   * unit limit the transfer builder asks for, rounded up to whole lamports. Low pays no priority fee when
   * most recent slots asked none.
   */
  async feeMarket(): Promise<FeeMarket> {
    const recent = await this.call('getRecentPrioritizationFees', [[]], z.array(z.object({ slot: Slot, prioritizationFee: Lamports }).loose()));
    const prices = recent.map((entry) => entry.prioritizationFee).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    const at = (percentile: number) => {
      const price = prices.length ? prices[Math.min(prices.length - 1, Math.floor((prices.length * percentile) / 100))]! : 0n;
      const priority = (price * PRIORITY_COMPUTE_UNIT_LIMIT + MICRO_LAMPORTS_PER_LAMPORT - 1n) / MICRO_LAMPORTS_PER_LAMPORT;
      return LAMPORTS_PER_SIGNATURE + priority;
    };
    return { model: 'flat', transferFee: { low: at(PRIORITY_PERCENTILES.low), medium: at(PRIORITY_PERCENTILES.medium), high: at(PRIORITY_PERCENTILES.high) } };
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

