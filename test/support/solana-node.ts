import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import { sha256 } from '@noble/hashes/sha256';
import { base58, base64 } from '@scure/base';
import { FailedTransactionMetadata, LiteSVM } from 'litesvm';
import { solanaRecentBlockhash } from '../../src/chains/transfers/solana';
import { messageAccountKeys, messageComputeUnitPrice, messageInstructions, messageWritable, runtimeTransaction, svmAddress, u64At, type SvmAccount } from './litesvm';
import { agaveError, blockhashOffset, type SimulationConfig } from './solana-simulation';

export const MAINNET_GENESIS = '5eykt4UsFv8P8NJdTREpY1vzqKqZKvdpKuc147dw2N9d';
export const DEVNET_GENESIS = 'EtWTRABZaYq6iMfeYKouRu166VU2xqa1wcaWoxPkrZBG';
export const SYSTEM_PROGRAM_ID = '11111111111111111111111111111111';
export const TOKEN_PROGRAM_ID = 'TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA';
export const TOKEN_2022_PROGRAM_ID = 'TokenzQdBNbLqP5VEhdkAS6EPFLC1PHnBqCXEpPxuEb';
/** The token programs, as jsonParsed names them. */
const TOKEN_PROGRAMS: Readonly<Record<string, string>> = { [TOKEN_PROGRAM_ID]: 'spl-token', [TOKEN_2022_PROGRAM_ID]: 'spl-token-2022' };

type Json = Record<string, unknown>;
type Answer = { result: unknown } | { error: { code: number; message: string; data?: unknown } };

/** A token account's balance in a transaction's meta, as getTransaction gives it. */
interface MetaTokenBalance {
  accountIndex: number;
  mint: string;
  owner: string;
  programId: string;
  uiTokenAmount: { amount: string; decimals: number };
}

/**
 * What the runtime executed, as the node keeps it: its signed bytes, slot, block hash, fee (the
 * lamports the accounts lost), error, and each account key's lamports and token balance before and after.
 */
interface Executed {
  raw: string;
  slot: number;
  blockhash: string;
  fee: number;
  /** The compute units the runtime used running it. */
  unitsConsumed: bigint;
  err: string | null;
  confirmationStatus: 'processed' | 'confirmed' | 'finalized';
  /** What each top-level instruction invoked by CPI, as the runtime recorded it: program, accounts and data. */
  inner: { program: string; accounts: string[]; data: Uint8Array; stackHeight: number }[][];
  /** Its accounts as they were before it ran: what a reorganisation restores. */
  before: SvmAccount[];
  balances: { preBalances: number[]; postBalances: number[]; preTokenBalances: MetaTokenBalance[]; postTokenBalances: MetaTokenBalance[] };
}

/**
 * A Solana JSON-RPC node on 127.0.0.1: the runtime's answers from LiteSVM, recorded ones for the rest.
 *
 * Slots: the runtime executes at its clock's slot; a slot is sealed (no transaction joins it any more)
 * when the clock moves on, after each transaction or every tick of `produceBlocks`. The node's
 * `confirmed` slot is the last sealed one: its tip, the context slot of every state read (LiteSVM keeps
 * one state, which is the state after that slot), and the newest block getBlock serves. Every slot up
 * to it has a block: its hash is made from the slot (and the node, so each node is a chain of its own),
 * its transactions are what the runtime executed at that slot, in jsonParsed form.
 */
export class SolanaNode {
  readonly svm = new LiteSVM();
  genesis = MAINNET_GENESIS;
  readonly executed = new Map<string, Executed>();
  readonly recorded = new Map<string, (params: unknown[]) => Answer>();
  readonly calls: string[] = [];
  /** False: sent transactions join the current slot until the clock moves on (a block of many transactions). */
  sealAfterSend = true;
  private readonly madeAt = Date.now();
  /** How long each answer waits before it is sent: a remote node's round trip (bench/solana-scan.ts). */
  latencyMs = 0;
  /** What the block hashes are made from, from each slot on: one more each reorganisation. */
  private readonly forks = [{ from: 0, seed: base58.encode(randomBytes(8)) }];
  private server!: Server;
  private ticker: NodeJS.Timeout | undefined;
  url = '';

  async start(): Promise<void> {
    this.server = createServer((request, response) => {
      let body = '';
      request.on('data', (chunk: Buffer) => (body += chunk.toString()));
      request.on('end', () => {
        const parsed = JSON.parse(body) as Json | Json[];
        const one = (call: Json) => ({ jsonrpc: '2.0', id: call.id, ...this.answer(call.method as string, (call.params as unknown[]) ?? []) });
        response.setHeader('content-type', 'application/json');
        const answers = JSON.stringify(Array.isArray(parsed) ? parsed.map(one) : one(parsed));
        if (this.latencyMs > 0) setTimeout(() => response.end(answers), this.latencyMs);
        else response.end(answers);
      });
    });
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/`;
  }

  stop(): Promise<void> {
    clearInterval(this.ticker);
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  /**
   * A slot sealed every `everyMs`, transactions or not: the node's tip never stands still. The cluster
   * votes as it goes: at each tick what executed in a sealed slot is `confirmed` (the tests that seal by
   * hand set statuses themselves).
   */
  produceBlocks(everyMs: number): void {
    this.ticker = setInterval(() => {
      this.seal();
      for (const executed of this.executed.values()) if (executed.slot <= this.confirmedSlot && executed.confirmationStatus === 'processed') executed.confirmationStatus = 'confirmed';
    }, everyMs);
  }

  /** The runtime's clock: the slot transactions execute at now. */
  get slot(): number {
    return Number(this.svm.getClock().slot);
  }

  /** The last sealed slot: the node's `confirmed` tip. */
  get confirmedSlot(): number {
    return this.slot - 1;
  }

  /** The hash of the block at `slot`. */
  blockHash(slot: number): string {
    const { seed } = this.forks.filter((fork) => fork.from <= slot).at(-1)!;
    return base58.encode(sha256(new TextEncoder().encode(`${seed}:${slot}`)));
  }

  /** The time of the block at `slot`, the same at every read: 400 ms a slot since the node was made. */
  blockTime(slot: number): number {
    return Math.floor((this.madeAt + slot * 400) / 1000);
  }

  /**
   * A reorganisation: the cluster confirmed another fork from `slot` on. Those blocks are replaced by
   * empty ones with other hashes, what their transactions did to accounts is undone, and the runtime's
   * blockhash expires, so that none of them can run again. Answers their signatures.
   */
  abandonFrom(slot: number): string[] {
    const abandoned = [...this.executed.entries()].filter(([, executed]) => executed.slot >= slot).reverse();
    for (const [signature, executed] of abandoned) {
      for (const account of executed.before) this.svm.setAccount(account);
      this.executed.delete(signature);
    }
    this.forks.push({ from: slot, seed: base58.encode(randomBytes(8)) });
    this.svm.expireBlockhash();
    return abandoned.map(([signature]) => signature);
  }

  private seal(): void {
    this.svm.warpToSlot(BigInt(this.slot + 1));
  }

  private answer(method: string, params: unknown[]): Answer {
    this.calls.push(method);
    const context = { slot: this.confirmedSlot };
    const recorded = this.recorded.get(method);
    if (recorded) return recorded(params);
    switch (method) {
      case 'getGenesisHash':
        return { result: this.genesis };
      case 'getSlot':
        return { result: this.confirmedSlot };
      case 'getLatestBlockhash':
        return { result: { context, value: { blockhash: this.svm.latestBlockhash(), lastValidBlockHeight: this.slot + 150 } } };
      case 'getRecentPrioritizationFees':
        return this.prioritizationFees((params[0] as string[] | undefined) ?? []);
      case 'simulateTransaction':
        return this.simulate(params as [string, SimulationConfig?]);
      case 'isBlockhashValid':
        // The runtime takes only its latest blockhash: any other is past its window here.
        return { result: { context, value: params[0] === this.svm.latestBlockhash() } };
      case 'getBalance':
        return { result: { context, value: Number(this.svm.getBalance(svmAddress(params[0] as string)) ?? 0n) } };
      case 'getMultipleAccounts':
        return { result: { context, value: this.accounts(params as [string[], { dataSlice?: { offset: number; length: number } }?]) } };
      case 'getTokenSupply': {
        const mint = this.svm.getAccount(svmAddress(params[0] as string));
        if (!mint.exists || !TOKEN_PROGRAMS[mint.programAddress]) return { error: { code: -32602, message: 'Invalid param: not a Token mint' } };
        const supply = u64At(mint.data, 36).toString();
        return { result: { context, value: { amount: supply, decimals: mint.data[44], uiAmount: null, uiAmountString: supply } } };
      }
      case 'getTokenAccountsByOwner': {
        const [owner, { mint }] = params as [string, { mint: string }];
        const accounts = this.svm
          .getProgramAccounts(svmAddress(TOKEN_PROGRAM_ID))
          .filter((account) => account.data.length === 165 && base58.encode(account.data.slice(0, 32)) === mint && base58.encode(account.data.slice(32, 64)) === owner);
        const value = accounts.map((account) => ({
          pubkey: account.address,
          account: {
            lamports: Number(account.lamports),
            owner: TOKEN_PROGRAM_ID,
            executable: false,
            rentEpoch: 0,
            space: 165,
            data: { program: 'spl-token', space: 165, parsed: { type: 'account', info: { mint, owner, state: 'initialized', isNative: false, tokenAmount: { amount: u64At(account.data, 64).toString(), decimals: 6 } } } },
          },
        }));
        return { result: { context, value } };
      }
      case 'sendTransaction':
        return this.send(params[0] as string);
      case 'getSignatureStatuses': {
        const value = (params[0] as string[]).map((signature) => {
          const known = this.executed.get(signature);
          return known ? { slot: known.slot, confirmations: null, err: known.err, status: known.err ? { Err: known.err } : { Ok: null }, confirmationStatus: known.confirmationStatus } : null;
        });
        return { result: { context, value } };
      }
      case 'getTransaction': {
        const known = this.executed.get(params[0] as string);
        return { result: known ? { slot: known.slot, blockTime: null, ...parsedTransaction(params[0] as string, known) } : null };
      }
      case 'getBlock':
        return this.block(params as [number, { transactionDetails?: string }?]);
    }
    return { error: { code: -32601, message: 'Method not found' } };
  }

  /**
   * getRecentPrioritizationFees as Agave's PrioritizationFeeCache answers it, over the last 150 sealed
   * slots: each slot's fee is the lowest compute unit price (micro-lamports) of the transactions it
   * executed (0 with none), raised to the lowest price among those that wrote each account asked for:
   * what a transaction locking all of them writable had to outbid there. At most 128 accounts.
   */
  private prioritizationFees(accounts: string[]): Answer {
    if (accounts.length > MAX_TX_ACCOUNT_LOCKS) return { error: { code: -32602, message: `Too many inputs provided; max ${MAX_TX_ACCOUNT_LOCKS}` } };
    const from = Math.max(1, this.confirmedSlot - 149);
    const executed = [...this.executed.values()].map((known) => {
      const keys = messageAccountKeys(known.raw);
      const writable = messageWritable(known.raw);
      return { slot: known.slot, price: messageComputeUnitPrice(known.raw), writes: new Set(keys.filter((_, index) => writable[index])) };
    });
    const lowest = (prices: bigint[]) => prices.reduce<bigint | null>((low, price) => (low === null || price < low ? price : low), null);
    return {
      result: Array.from({ length: this.confirmedSlot - from + 1 }, (_, index) => {
        const slot = from + index;
        const inSlot = executed.filter((known) => known.slot === slot);
        let fee = lowest(inSlot.map((known) => known.price)) ?? 0n;
        for (const account of accounts) {
          const accountFee = lowest(inSlot.filter((known) => known.writes.has(account)).map((known) => known.price));
          if (accountFee !== null && accountFee > fee) fee = accountFee;
        }
        return { slot, prioritizationFee: Number(fee) };
      }),
    };
  }

  /**
   * simulateTransaction as Agave answers it: the runtime runs the transaction on the current state
   * without keeping anything. `sigVerify` (default false) checks its signatures; `replaceRecentBlockhash`
   * (which conflicts with it) runs it on the latest blockhash, named in `replacementBlockhash`. The value
   * carries the runtime's error in Agave's JSON form, its logs and the compute units it used.
   */
  private simulate([encoded, config = {}]: [string, SimulationConfig?]): Answer {
    if (config.sigVerify && config.replaceRecentBlockhash) return { error: { code: -32602, message: 'sigVerify may not be used with replaceRecentBlockhash' } };
    const bytes = config.encoding === 'base64' ? base64.decode(encoded) : base58.decode(encoded);
    const latest = this.svm.latestBlockhash();
    if (config.replaceRecentBlockhash) bytes.set(base58.decode(latest), blockhashOffset(bytes));
    this.svm.withSigverify(config.sigVerify ?? false);
    let outcome: ReturnType<LiteSVM['simulateTransaction']>;
    try {
      outcome = this.svm.simulateTransaction(runtimeTransaction(base64.encode(bytes)));
    } finally {
      this.svm.withSigverify(true);
    }
    const meta = outcome.meta();
    const value = {
      err: outcome instanceof FailedTransactionMetadata ? agaveError(outcome) : null,
      logs: meta.logs(),
      accounts: null,
      unitsConsumed: Number(meta.computeUnitsConsumed()),
      returnData: null,
      ...(config.replaceRecentBlockhash ? { replacementBlockhash: { blockhash: latest, lastValidBlockHeight: this.slot + 150 } } : {}),
    };
    return { result: { context: { slot: this.confirmedSlot }, value } };
  }

  /** getMultipleAccounts (base64, with its data slice): each account as the runtime holds it, null where none exists. */
  private accounts([keys, options]: [string[], { dataSlice?: { offset: number; length: number } }?]): unknown[] {
    return keys.map((key) => {
      const account = this.svm.getAccount(svmAddress(key));
      if (!account.exists) return null;
      const slice = options?.dataSlice ? account.data.slice(options.dataSlice.offset, options.dataSlice.offset + options.dataSlice.length) : account.data;
      return { lamports: Number(account.lamports), owner: account.programAddress, data: [base64.encode(slice), 'base64'], executable: account.executable, rentEpoch: 0, space: account.data.length };
    });
  }

  /**
   * getBlock: the block at a sealed slot, with what the runtime executed in it (jsonParsed; only the
   * signatures with `transactionDetails: 'signatures'`), or not available yet. Like Agave's RPC, which
   * caps no answer, it sends the whole block however large: the caller's cap is the caller's.
   */
  private block([slot, options]: [number, { transactionDetails?: string }?]): Answer {
    if (slot > this.confirmedSlot || slot < 1) return { error: { code: -32004, message: `Block not available for slot ${slot}` } };
    const block = { blockhash: this.blockHash(slot), previousBlockhash: this.blockHash(slot - 1), parentSlot: slot - 1, blockHeight: slot, blockTime: this.blockTime(slot) };
    if (options?.transactionDetails === 'none') return { result: block };
    const executed = [...this.executed.entries()].filter(([, known]) => known.slot === slot);
    if (options?.transactionDetails === 'signatures') return { result: { ...block, signatures: executed.map(([signature]) => signature) } };
    return { result: { ...block, transactions: executed.map(([signature, known]) => parsedTransaction(signature, known)) } };
  }

  /** sendTransaction: the runtime runs it and its slot is sealed; a refusal is the preflight failure a node answers (-32002). */
  private send(raw: string): Answer {
    const keys = messageAccountKeys(raw).map(svmAddress);
    const lamports = () => keys.map((key) => Number(this.svm.getBalance(key) ?? 0n));
    const tokenBalances = () =>
      keys.flatMap((key, accountIndex): MetaTokenBalance[] => {
        const account = this.svm.getAccount(key);
        // A token account: 165 bytes, or more with Token-2022's extensions (its account type, 2, at byte 165).
        const tokenAccount = account.exists && TOKEN_PROGRAMS[account.programAddress] && (account.data.length === 165 || (account.data.length > 165 && account.data[165] === 2));
        if (!tokenAccount) return [];
        const owner = base58.encode(account.data.slice(32, 64));
        return [{ accountIndex, mint: base58.encode(account.data.slice(0, 32)), owner, programId: account.programAddress, uiTokenAmount: { amount: u64At(account.data, 64).toString(), decimals: 6 } }];
      });
    const [preBalances, preTokenBalances] = [lamports(), tokenBalances()];
    const before = keys.map((address): SvmAccount => {
      const account = this.svm.getAccount(address);
      return account.exists ? account : { address, data: new Uint8Array(), executable: false, lamports: 0n as SvmAccount['lamports'], programAddress: svmAddress(SYSTEM_PROGRAM_ID), space: 0n };
    });
    const outcome = this.svm.sendTransaction(runtimeTransaction(raw));
    if (outcome instanceof FailedTransactionMetadata) {
      return { error: { code: -32002, message: `Transaction simulation failed: ${outcome.toString()}`, data: { logs: outcome.meta().logs() } } };
    }
    const signature = base58.encode(outcome.signature());
    const postBalances = lamports();
    const fee = preBalances.reduce((sum, value) => sum + value, 0) - postBalances.reduce((sum, value) => sum + value, 0);
    const slot = this.slot;
    const accountKeys = messageAccountKeys(raw);
    const inner = outcome.innerInstructions().map((invoked) =>
      invoked.map((entry) => {
        const instruction = entry.instruction();
        return { program: accountKeys[instruction.programIdIndex()]!, accounts: Array.from(instruction.accounts(), (index) => accountKeys[index]!), data: instruction.data(), stackHeight: entry.stackHeight() };
      }),
    );
    this.executed.set(signature, { raw, slot, blockhash: this.blockHash(slot), fee, unitsConsumed: outcome.computeUnitsConsumed(), err: null, confirmationStatus: 'processed', inner, before, balances: { preBalances, postBalances, preTokenBalances, postTokenBalances: tokenBalances() } });
    if (this.sealAfterSend) this.seal();
    return { result: signature };
  }
}

/** The most accounts a transaction may lock (MAX_TX_ACCOUNT_LOCKS), and so getRecentPrioritizationFees takes. */
const MAX_TX_ACCOUNT_LOCKS = 128;

/**
 * A transaction as getBlock (full) and getTransaction give it in jsonParsed: its message, and its meta
 * with what each top-level instruction invoked (`innerInstructions`, only the instructions that invoked any).
 */
function parsedTransaction(signature: string, executed: Executed) {
  const signed = base64.decode(executed.raw);
  const signers = signed[0]!;
  const innerInstructions = executed.inner.flatMap((invoked, index) => (invoked.length ? [{ index, instructions: invoked.map((instruction) => parsedInstruction(instruction, instruction.stackHeight)) }] : []));
  return {
    transaction: {
      signatures: Array.from({ length: signers }, (_, index) => (index === 0 ? signature : base58.encode(signed.subarray(1 + 64 * index, 65 + 64 * index)))),
      message: {
        accountKeys: messageAccountKeys(executed.raw).map((pubkey, index) => ({ pubkey, signer: index < signers, writable: messageWritable(executed.raw)[index], source: 'transaction' })),
        recentBlockhash: solanaRecentBlockhash(executed.raw),
        instructions: messageInstructions(executed.raw).map((instruction) => parsedInstruction(instruction, null)),
      },
    },
    meta: { err: executed.err, fee: executed.fee, ...executed.balances, innerInstructions, status: { Ok: null } },
    version: 'legacy',
  };
}

/** An instruction as jsonParsed shows it: System transfers, Token and Token-2022 Transfer and TransferChecked parsed, any other raw. */
function parsedInstruction({ program, accounts, data }: { program: string; accounts: string[]; data: Uint8Array }, stackHeight: number | null) {
  if (program === SYSTEM_PROGRAM_ID && data.length === 12 && data[0] === 2) {
    return { program: 'system', programId: program, parsed: { type: 'transfer', info: { source: accounts[0], destination: accounts[1], lamports: Number(u64At(data, 4)) } }, stackHeight };
  }
  const tokenProgram = TOKEN_PROGRAMS[program];
  if (tokenProgram && data[0] === 3) {
    const info = { source: accounts[0], destination: accounts[1], authority: accounts[2], amount: u64At(data, 1).toString() };
    return { program: tokenProgram, programId: program, parsed: { type: 'transfer', info }, stackHeight };
  }
  if (tokenProgram && data[0] === 12) {
    const info = { source: accounts[0], mint: accounts[1], destination: accounts[2], authority: accounts[3], tokenAmount: { amount: u64At(data, 1).toString(), decimals: data[9] } };
    return { program: tokenProgram, programId: program, parsed: { type: 'transferChecked', info }, stackHeight };
  }
  return { programId: program, accounts, data: base58.encode(data), stackHeight };
}
