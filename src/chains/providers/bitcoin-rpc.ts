import { hex } from '@scure/base';
import * as btc from '@scure/btc-signer';
import { z } from 'zod';
import type { Environment } from '../../api-keys/entities';
import { errors } from '../../shared/errors';
import { Money } from '../../shared/money';
import {
  FEE_LEVELS,
  NodeUnavailableError,
  type ChainProvider,
  type ChainTip,
  type FeeLevel,
  type FeeMarket,
  type NetworkIdentity,
  type ObservedBlock,
  type ObservedInput,
  type ObservedTransfer,
  type Outpoint,
  type RelayedAnswer,
  type RelayedCall,
  type TransactionStatus,
} from '../provider';
import { broadcastErrorOutcome } from '../refusals';
import { parseNodeBody, postToNode, type NodeCallLimits } from './node-http';
import { answersInOrder } from './node-replies';
import { addressOf, decodeBlock, decodeTransaction, equalBytes, isCoinbase, type AddressNetwork, type DecodedTransaction } from './bitcoin-decoding';


/** What `getblockchaininfo.chain` says (Bitcoin Core's names, then btcd's) → the platform's network name. */
const NETWORK_OF_CHAIN: Readonly<Record<string, string>> = {
  main: 'main',
  mainnet: 'main',
  test: 'test',
  testnet3: 'test',
  testnet4: 'testnet4',
  signet: 'signet',
  regtest: 'regtest',
  simnet: 'simnet',
};

/** How the node itself writes addresses on each network: it only accepts its own form in calls. */
const NODE_ADDRESS_NETWORKS: Readonly<Record<string, AddressNetwork>> = {
  main: btc.NETWORK,
  test: btc.TEST_NETWORK,
  testnet4: btc.TEST_NETWORK,
  signet: btc.TEST_NETWORK,
  regtest: { ...btc.TEST_NETWORK, bech32: 'bcrt' },
  simnet: { bech32: 'sb', pubKeyHash: 0x3f, scriptHash: 0x7b, wif: 0x64 },
};

/** Confirmation targets in blocks, matching the indicative times of `network_fee` (src/chains/fees.ts). */
const FEE_TARGET_BLOCKS: Record<FeeLevel, number> = { low: 6, medium: 3, high: 1 };
/** What each level pays when the node has no estimate (regtest, a fresh node): the relay minimum and a margin over it. */
export const FEE_FLOOR_SAT_PER_VBYTE: Record<FeeLevel, bigint> = { low: 1n, medium: 2n, high: 5n };
/** Fee rates come in BTC per 1000 virtual bytes: 10^8 sat / 1000 vB. */
const SAT_PER_VBYTE_PER_BTC_PER_KVB = 100_000;

/** Transactions listed per searchrawtransactions page, and unspent checks per batch. */
const ADDRESS_PAGE_SIZE = 1000;
const OUTPUT_CHECK_BATCH = 100;

/** Bitcoin Core's RPC_INVALID_ADDRESS_OR_KEY, which both Core and btcd answer for a transaction they do not know. */
const RPC_NO_INFORMATION = -5;
const RPC_METHOD_NOT_FOUND = -32601;

/** JSON-RPC 1.0: `error` is null on success, `result` null on failure. */

const HexString = z.string().regex(/^([0-9a-fA-F]{2})*$/);
const BlockchainInfo = z.object({ chain: z.string(), blocks: z.number().int().nonnegative(), bestblockhash: z.string() });
const TransactionInfo = z.object({ blockhash: z.string().optional(), hex: HexString });
const BlockHeader = z.object({ height: z.number().int().nonnegative(), confirmations: z.number().int() });
/** gettxout: null when spent or never mined; else the best block it was answered at and the amount in BTC. */
const TxOutAnswer = z.union([z.null(), z.object({ bestblock: z.string(), value: z.number().nonnegative() }).loose()]);
const SATOSHIS_PER_BTC = 100_000_000;
/** estimatesmartfee (Bitcoin Core) answers an object, estimatefee (btcd) a bare rate; -1 or no `feerate` means no data. */
const FeeEstimate = z.union([z.object({ feerate: z.number().optional() }).loose(), z.number()]);

/**
 * A Bitcoin node's JSON-RPC (Bitcoin Core or btcd) for one environment. `rpcuser:rpcpass` come from the
 * URL's userinfo and go in a Basic Authorization header, never in a message. Blocks are read raw and
 * decoded here, so amounts are the satoshis of the serialized outputs, never a float.
 *
 * Addresses are written in the platform's form for the environment, whatever network the node serves:
 * testnet encoding (tb1…, m/n…) for sandbox keys, so a regtest node's bcrt1 output is reported as the
 * tb1 address of the same script; mainnet encoding for live keys.
 */
export class BitcoinRpcProvider implements ChainProvider {
  readonly kind = 'bitcoin-rpc';
  readonly chain = 'bitcoin' as const;
  private readonly endpoint: string;
  private readonly authorization: string | undefined;
  private readonly addressNetwork: AddressNetwork;
  /** The node's own address encoding, read once from its network. */
  private nodeAddressNetwork: AddressNetwork | undefined;

  constructor(
    url: string,
    private readonly limits: NodeCallLimits,
    environment: Environment,
  ) {
    const parsed = new URL(url);
    if (parsed.username || parsed.password) {
      const credentials = `${decodeURIComponent(parsed.username)}:${decodeURIComponent(parsed.password)}`;
      this.authorization = `Basic ${Buffer.from(credentials).toString('base64')}`;
    }
    parsed.username = '';
    parsed.password = '';
    this.endpoint = parsed.toString();
    this.addressNetwork = environment === 'live' ? btc.NETWORK : btc.TEST_NETWORK;
  }

  async identifyNetwork(): Promise<NetworkIdentity> {
    const { chain } = await this.call('getblockchaininfo', [], BlockchainInfo);
    return { network: NETWORK_OF_CHAIN[chain] ?? chain };
  }

  async tip(): Promise<ChainTip> {
    const info = await this.call('getblockchaininfo', [], BlockchainInfo);
    return { height: info.blocks, hash: info.bestblockhash };
  }

  /**
   * One transfer per output that pays an address (`out:<vout>`), the coinbase's included; outputs an
   * address cannot name (OP_RETURN, bare multisig or public key, unknown witness versions) are left out.
   * And every output the block's transactions spend (the coinbase spends none).
   */
  async block(height: number): Promise<ObservedBlock | null> {
    const [found] = await this.relay([{ method: 'getblockhash', params: [height] }]);
    if ('error' in found!) {
      // Core says "Block height out of range" (-8), btcd "Block number out of range" (-1).
      if (/out of range/i.test(found.error.message)) return null;
      throw nodeRefused('getblockhash', found.error);
    }
    const hash = HexString.safeParse(found!.result);
    if (!hash.success) throw new NodeUnavailableError('The node answered getblockhash without a block hash.');
    const raw = await this.call('getblock', [hash.data, 0], HexString);
    const block = decodeBlock(hex.decode(raw));
    const transfers: ObservedTransfer[] = [];
    const inputs: ObservedInput[] = [];
    for (const transaction of block.transactions) {
      transaction.outputs.forEach((output, vout) => {
        const to = addressOf(output.script, this.addressNetwork);
        if (to) transfers.push({ txid: transaction.txid, position: `out:${vout}`, to, from: null, assetId: 'BTC', amount: output.amount });
      });
      if (isCoinbase(transaction)) continue;
      for (const input of transaction.inputs) inputs.push({ txid: transaction.txid, spends: { txid: input.txid, vout: input.vout } });
    }
    return { height, hash: hash.data, parentHash: block.parentHash, time: block.time, transfers, payments: [], inputs };
  }

  /**
   * The confirmed balance: the address's outputs unspent on the best chain, the mempool ignored (an
   * unconfirmed receipt does not count, an unconfirmed spend does not deduct). Needs an address index,
   * which only btcd has (`--addrindex`, read with searchrawtransactions); any other node cannot answer.
   * The reconciliation does not use it (unspentOutputsAt needs no index, and reads at a pinned block).
   */
  async balance(address: string, assetId: string): Promise<bigint> {
    if (assetId !== 'BTC') throw new NodeUnavailableError(`A Bitcoin node holds no ${assetId}.`);
    let output: ReturnType<typeof btc.OutScript.decode>;
    try {
      output = btc.Address(this.addressNetwork).decode(address);
    } catch {
      throw errors.validation(`'${address}' is not a Bitcoin address of this environment's network`, 'address');
    }
    const script = btc.OutScript.encode(output);
    const nodeAddress = btc.Address(await this.nodeNetwork()).encode(output);

    // Keyed by outpoint: a block mined between two pages shifts the listing, so a transaction may come twice.
    const outputs = new Map<string, { txid: string; vout: number; amount: bigint }>();
    for (let skip = 0; ; skip += ADDRESS_PAGE_SIZE) {
      const page = await this.addressTransactions(nodeAddress, skip);
      for (const raw of page) {
        const transaction = decodeTransaction(hex.decode(raw));
        transaction.outputs.forEach((output, vout) => {
          if (equalBytes(output.script, script)) outputs.set(`${transaction.txid}:${vout}`, { txid: transaction.txid, vout, amount: output.amount });
        });
      }
      if (page.length < ADDRESS_PAGE_SIZE) break;
    }

    const owned = [...outputs.values()];
    let total = 0n;
    for (let start = 0; start < owned.length; start += OUTPUT_CHECK_BATCH) {
      const chunk = owned.slice(start, start + OUTPUT_CHECK_BATCH);
      // gettxout without the mempool: null once spent in a block, and for outputs not yet mined.
      const answers = await this.relay(chunk.map(({ txid, vout }) => ({ method: 'gettxout', params: [txid, vout, false] })));
      answers.forEach((answer, index) => {
        if ('error' in answer) throw nodeRefused('gettxout', answer.error);
        if (answer.result !== null) total += chunk[index]!.amount;
      });
    }
    return total;
  }

  /**
   * gettxout per outpoint (the mempool ignored), OUTPUT_CHECK_BATCH to a JSON-RPC batch, each batch
   * between two getbestblockhash calls: a batch whose first and last calls (and every output found, which
   * says its `bestblock`) answer `block` was read at `block` (a node answers a batch's calls in order), so
   * a spent output's null, which says no block, is one at `block` too. No address index needed.
   */
  async unspentOutputsAt(outpoints: Outpoint[], block: ChainTip): Promise<(bigint | null)[] | null> {
    const held: (bigint | null)[] = [];
    for (let start = 0; start < outpoints.length; start += OUTPUT_CHECK_BATCH) {
      const chunk = outpoints.slice(start, start + OUTPUT_CHECK_BATCH);
      const best = { method: 'getbestblockhash' };
      const answers = await this.relay([best, ...chunk.map(({ txid, vout }) => ({ method: 'gettxout', params: [txid, vout, false] })), best]);
      const tips = [answers[0]!, answers.at(-1)!].map((answer) => {
        if ('error' in answer) throw nodeRefused('getbestblockhash', answer.error);
        return answer.result;
      });
      if (tips.some((tip) => tip !== block.hash)) return null;
      for (const answer of answers.slice(1, -1)) {
        if ('error' in answer) throw nodeRefused('gettxout', answer.error);
        const output = TxOutAnswer.safeParse(answer.result);
        if (!output.success) throw new NodeUnavailableError('The node answered gettxout with an unexpected shape.');
        if (output.data && output.data.bestblock !== block.hash) return null;
        held.push(output.data && satoshis(output.data.value));
      }
    }
    return held;
  }

  /**
   * A transaction the node already holds (in its mempool or a block) counts as broadcast: a retry
   * after a timeout gets the txid, not a refusal. Its errors are judged by src/chains/refusals.ts: only
   * a definite refusal (-25, -26) is one, carrying the node's own reason.
   */
  async broadcast(rawTransaction: string): Promise<{ txid: string }> {
    const reply = await this.exchange({ jsonrpc: '1.0', id: 0, method: 'sendrawtransaction', params: [rawTransaction] });
    const [answer] = answersInOrder(parseNodeBody(reply), 1);
    if ('error' in answer!) return broadcastErrorOutcome('bitcoin', answer.error, reply.status, () => decodeTransaction(hex.decode(rawTransaction)).txid);
    if (typeof answer!.result !== 'string') throw new NodeUnavailableError('The node answered sendrawtransaction without a txid.');
    return { txid: answer!.result };
  }

  /** Needs the node's transaction index (`-txindex` on Core, `--txindex` on btcd) for mined transactions. */
  async transactionStatus(txid: string): Promise<TransactionStatus> {
    if (!/^[0-9a-fA-F]{64}$/.test(txid)) return { state: 'unknown' };
    const [answer] = await this.relay([{ method: 'getrawtransaction', params: [txid, 1] }]);
    if ('error' in answer!) {
      if (answer.error.code === RPC_NO_INFORMATION) return { state: 'unknown' };
      throw nodeRefused('getrawtransaction', answer.error);
    }
    const transaction = TransactionInfo.safeParse(answer!.result);
    if (!transaction.success) throw new NodeUnavailableError('The node answered getrawtransaction with an unexpected shape.');
    const blockHash = transaction.data.blockhash;
    if (!blockHash) return { state: 'pending' };
    const header = await this.call('getblockheader', [blockHash, true], BlockHeader);
    // A block off the best chain (Core says -1): the transaction waits to be mined again.
    if (header.confirmations < 1) return { state: 'pending' };
    const fee = await this.feeOf(decodeTransaction(hex.decode(transaction.data.hex)));
    return { state: 'mined', blockHeight: header.height, blockHash, confirmations: header.confirmations, succeeded: true, fee };
  }

  /** gettxout without the mempool is null once a block spends the output, and also before one mines it: hence its transaction first. */
  async spentInChain(outpoint: { txid: string; vout: number }): Promise<boolean> {
    if ((await this.transactionStatus(outpoint.txid)).state !== 'mined') return false;
    const [answer] = await this.relay([{ method: 'gettxout', params: [outpoint.txid, outpoint.vout, false] }]);
    if ('error' in answer!) throw nodeRefused('gettxout', answer.error);
    return answer!.result === null;
  }

  /**
   * Inputs minus outputs: each input's amount read from the transaction it spends (one batch, through
   * the transaction index); a coinbase pays none.
   */
  private async feeOf(transaction: DecodedTransaction): Promise<bigint> {
    if (isCoinbase(transaction)) return 0n;
    const previous = [...new Set(transaction.inputs.map((input) => input.txid))];
    const answers = await this.relay(previous.map((txid) => ({ method: 'getrawtransaction', params: [txid, 0] })));
    const outputsOf = new Map<string, DecodedTransaction['outputs']>();
    answers.forEach((answer, index) => {
      if ('error' in answer) throw nodeRefused('getrawtransaction', answer.error);
      const raw = HexString.safeParse(answer.result);
      if (!raw.success) throw new NodeUnavailableError('The node answered getrawtransaction without a raw transaction.');
      outputsOf.set(previous[index]!, decodeTransaction(hex.decode(raw.data)).outputs);
    });
    const spent = transaction.inputs.reduce((sum, input) => {
      const output = outputsOf.get(input.txid)?.[input.vout];
      if (!output) throw new NodeUnavailableError(`The node's transaction ${input.txid} has no output ${input.vout}.`);
      return sum + output.amount;
    }, 0n);
    return spent - transaction.outputs.reduce((sum, output) => sum + output.amount, 0n);
  }

  /** Bitcoin has no tokens. */
  tokenAddress(): undefined {
    return undefined;
  }

  /**
   * Per level, the node's estimate for its confirmation target (estimatesmartfee, or btcd's estimatefee),
   * rounded up to whole sat/vB; the floor where the node has none. Levels never cross: medium pays at
   * least low, high at least medium.
   */
  async feeMarket(): Promise<FeeMarket> {
    const estimate = (method: string) => this.relay(FEE_LEVELS.map((level) => ({ method, params: [FEE_TARGET_BLOCKS[level]] })));
    let answers = await estimate('estimatesmartfee');
    if (answers.some((answer) => 'error' in answer && answer.error.code === RPC_METHOD_NOT_FOUND)) answers = await estimate('estimatefee');
    const [low, medium, high] = FEE_LEVELS.map((level, index) => satPerVbyte(answers[index]!) ?? FEE_FLOOR_SAT_PER_VBYTE[level]);
    const mediumAtLeastLow = max(medium!, low!);
    return { model: 'per_byte', satPerVbyte: { low: low!, medium: mediumAtLeastLow, high: max(high!, mediumAtLeastLow) } };
  }

  /** JSON-RPC 1.0, positional params as given; a batch when more than one call. */
  async relay(calls: RelayedCall[]): Promise<RelayedAnswer[]> {
    // Our own ids (the call's index): the caller's ids may repeat within a batch.
    const requests = calls.map((call, index) => ({ jsonrpc: '1.0', id: index, method: call.method, params: call.params ?? [] }));
    const reply = await this.post(requests.length === 1 ? requests[0] : requests);
    return answersInOrder(reply, calls.length);
  }

  /** One call whose failure, of any kind, is the node's being unusable. */
  private async call<T>(method: string, params: unknown[], schema: z.ZodType<T>): Promise<T> {
    const [answer] = await this.relay([{ method, params }]);
    if ('error' in answer!) throw nodeRefused(method, answer.error);
    const result = schema.safeParse(answer!.result);
    if (!result.success) throw new NodeUnavailableError(`The node answered ${method} with an unexpected shape.`);
    return result.data;
  }

  private async nodeNetwork(): Promise<AddressNetwork> {
    if (!this.nodeAddressNetwork) {
      const { network } = await this.identifyNetwork();
      const known = NODE_ADDRESS_NETWORKS[network!];
      if (!known) throw new NodeUnavailableError(`The node serves an unknown Bitcoin network '${network}'.`);
      this.nodeAddressNetwork = known;
    }
    return this.nodeAddressNetwork;
  }

  /** One page of the raw transactions touching the address, oldest first; none when it has never been used. */
  private async addressTransactions(nodeAddress: string, skip: number): Promise<string[]> {
    const [answer] = await this.relay([{ method: 'searchrawtransactions', params: [nodeAddress, 0, skip, ADDRESS_PAGE_SIZE] }]);
    if ('error' in answer!) {
      if (answer.error.code === RPC_NO_INFORMATION && /no information/i.test(answer.error.message)) return [];
      throw new NodeUnavailableError(
        `This Bitcoin node cannot report an address's balance: it needs an address index (btcd with --addrindex). It said: ${answer.error.message}`,
      );
    }
    const page = z.array(HexString).safeParse(answer!.result);
    if (!page.success) throw new NodeUnavailableError('The node answered searchrawtransactions with an unexpected shape.');
    return page.data;
  }

  private async post(payload: unknown): Promise<unknown> {
    // Bitcoin Core answers a failed call with HTTP 404 or 500 and the JSON-RPC error in the body.
    return parseNodeBody(await this.exchange(payload));
  }

  /** The node's HTTP status and body text; refused credentials are the node unusable. */
  private async exchange(payload: unknown): Promise<{ status: number; text: string }> {
    const reply = await postToNode(this.endpoint, payload, this.limits, this.authorization ? { authorization: this.authorization } : {});
    if (reply.status === 401 || reply.status === 403) {
      throw new NodeUnavailableError(`The node refused the RPC credentials (HTTP ${reply.status}).`);
    }
    return reply;
  }
}

/** The node's refusal of a call the provider needed: its message names the method, never the URL. */
const nodeRefused = (method: string, error: { code: number; message: string }) =>
  new NodeUnavailableError(`The node refused ${method} (${error.code}): ${error.message}`);

/** A fee estimate in whole sat/vB (rounded up), or null when the node has none. */
function satPerVbyte(answer: RelayedAnswer): bigint | null {
  if ('error' in answer) return null;
  const estimate = FeeEstimate.safeParse(answer.result);
  if (!estimate.success) return null;
  const btcPerKvB = typeof estimate.data === 'number' ? estimate.data : estimate.data.feerate;
  if (btcPerKvB === undefined || btcPerKvB <= 0) return null;
  // The node's decimal (8 places at most) read back exactly from its shortest form, then scaled without a float.
  return BigInt(new Money(btcPerKvB).times(SAT_PER_VBYTE_PER_BTC_PER_KVB).ceil().toFixed(0));
}

/** A node's BTC amount (8 decimal places at most) as exact satoshis, read back from its shortest decimal form. */
function satoshis(btcAmount: number): bigint {
  const amount = new Money(btcAmount).times(SATOSHIS_PER_BTC);
  if (!amount.isInteger()) throw new NodeUnavailableError(`The node answered an amount of ${btcAmount} BTC, finer than a satoshi.`);
  return BigInt(amount.toFixed(0));
}

const max = (a: bigint, b: bigint) => (a > b ? a : b);
