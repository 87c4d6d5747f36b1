import type { EntityManager } from '@mikro-orm/postgresql';
import { decodeFunctionData, encodeAbiParameters, erc20Abi, getAddress, hexToBytes, isAddress, keccak256, pad, parseTransaction, toHex, type Hex } from 'viem';
import { ASSETS } from '../../../catalogue/service';
import { TransactionRejectedError, type RelayedAnswer, type RelayedCall } from '../../provider';
import { DevnetBlock, DevnetTransaction } from '../entities';
import { acceptDevnetTransaction } from '../acceptance';
import { devnetBalance, devnetFeeMarket, devnetTip, minedNonce, pendingNonce } from '../ledger-reads';
import { canonicalTxid, DEVNET_ETHEREUM_CHAIN_ID, DEVNET_PARAMS, DEVNET_TOKENS } from '../params';
import type { DevnetProvider } from '../provider';
import { InvalidParams, methodNotFound, param, quantity, requireString, result, rpcError, withParams } from './answers';

/** keccak256("Transfer(address,address,uint256)"): the ERC-20 Transfer event's topic. */
const TRANSFER_TOPIC = keccak256(new TextEncoder().encode('Transfer(address,address,uint256)'));
const GAS_LIMIT = DEVNET_PARAMS.ethereum.blockCapacity;
/** geth's code for a transaction the pool refuses. */
const TXPOOL_REFUSAL = -32000;
const MAX_FEE_HISTORY_BLOCKS = 1024;

/**
 * The devnet's Ethereum JSON-RPC core subset, answered as a node would (hex quantities, null for
 * what it does not have). Blocks carry no state, receipts or transactions roots: the devnet has no tries.
 */
export function answerEthereumCall(provider: DevnetProvider, em: EntityManager, call: RelayedCall): Promise<RelayedAnswer> {
  return withParams(async () => {
    switch (call.method) {
      case 'eth_chainId':
        return result(quantity(DEVNET_ETHEREUM_CHAIN_ID));
      case 'net_version':
        return result(String(DEVNET_ETHEREUM_CHAIN_ID));
      case 'eth_blockNumber':
        return result(quantity((await devnetTip(em, 'ethereum')).height));
      case 'eth_getBalance': {
        const address = addressParam(call, 0);
        const refusal = await stateAt(em, param(call, 1, 'block'));
        return refusal ?? result(quantity(await devnetBalance(em, 'ethereum', address, 'ETH')));
      }
      case 'eth_getTransactionCount': {
        const address = addressParam(call, 0);
        const tag = param(call, 1, 'block');
        if (tag === 'pending') return result(quantity(await pendingNonce(em, 'ethereum', address)));
        return (await stateAt(em, tag)) ?? result(quantity(await minedNonce(em, 'ethereum', address)));
      }
      case 'eth_getTransactionByHash': {
        const entry = await transactionParam(em, call);
        return result(entry ? await presentTransaction(em, entry) : null);
      }
      case 'eth_getTransactionReceipt': {
        const entry = await transactionParam(em, call);
        return result(entry?.status === 'mined' ? await presentReceipt(provider, em, entry) : null);
      }
      case 'eth_getBlockByNumber': {
        const height = await heightParam(em, param(call, 0, 'block'));
        const block = height === null ? null : await em.findOne(DevnetBlock, { chain: 'ethereum', height });
        return result(block ? await presentBlock(provider, em, block, param(call, 1, 'full') === true) : null);
      }
      case 'eth_getBlockByHash': {
        const block = await em.findOne(DevnetBlock, { chain: 'ethereum', hash: requireString(param(call, 0, 'hash'), 'the block hash').toLowerCase() });
        return result(block ? await presentBlock(provider, em, block, param(call, 1, 'full') === true) : null);
      }
      case 'eth_sendRawTransaction':
        try {
          return result((await acceptDevnetTransaction(em, 'ethereum', requireString(param(call, 0, 'data'), 'the signed transaction'))).txid);
        } catch (error) {
          if (error instanceof TransactionRejectedError) return rpcError(TXPOOL_REFUSAL, error.message, { reason: error.reason });
          throw error;
        }
      case 'eth_gasPrice': {
        const market = await devnetFeeMarket(em, 'ethereum');
        return result(market.model === 'eip1559' ? quantity(market.baseFeePerGas + market.priorityFeePerGas.medium) : null);
      }
      case 'eth_maxPriorityFeePerGas': {
        const market = await devnetFeeMarket(em, 'ethereum');
        return result(market.model === 'eip1559' ? quantity(market.priorityFeePerGas.medium) : null);
      }
      case 'eth_feeHistory':
        return feeHistory(provider, em, call);
      case 'eth_call':
        return tokenRead(em, call);
      default:
        return methodNotFound(call, 'ethereum');
    }
  });
}

function addressParam(call: RelayedCall, index: number): `0x${string}` {
  const value = param(call, index, 'address');
  if (typeof value !== 'string' || !isAddress(value, { strict: false })) throw new InvalidParams('the address must be 20 bytes of hex');
  return getAddress(value);
}

async function transactionParam(em: EntityManager, call: RelayedCall): Promise<DevnetTransaction | null> {
  const hash = requireString(param(call, 0, 'hash'), 'the transaction hash');
  return em.findOne(DevnetTransaction, { chain: 'ethereum', txid: canonicalTxid('ethereum', hash) });
}

/** A block tag or number: its height, or null above the tip. */
async function heightParam(em: EntityManager, tag: unknown): Promise<number | null> {
  const tip = (await devnetTip(em, 'ethereum')).height;
  if (tag === undefined || tag === 'latest' || tag === 'pending' || tag === 'safe' || tag === 'finalized') return tip;
  if (tag === 'earliest') return 0;
  if (typeof tag !== 'string' || !/^0x[0-9a-fA-F]+$/.test(tag)) throw new InvalidParams(`'${String(tag)}' is not a block number or tag`);
  const height = Number(BigInt(tag));
  return height > tip ? null : height;
}

/** State is kept at the tip only, as on a node that is not an archive: an older block is refused. */
async function stateAt(em: EntityManager, tag: unknown): Promise<RelayedAnswer | null> {
  const tip = (await devnetTip(em, 'ethereum')).height;
  const height = await heightParam(em, tag);
  if (tag === 'pending' || height === tip) return null;
  return rpcError(TXPOOL_REFUSAL, height === null ? 'header not found' : 'missing trie node: the devnet keeps the state at the tip only');
}

const decoded = (entry: DevnetTransaction) => parseTransaction(entry.raw as Hex) as ReturnType<typeof parseTransaction> & { r: Hex; s: Hex; yParity: number };

async function presentTransaction(em: EntityManager, entry: DevnetTransaction) {
  const tx = decoded(entry);
  const block = entry.blockHeight === null ? null : await em.findOneOrFail(DevnetBlock, { chain: 'ethereum', height: entry.blockHeight });
  return {
    type: '0x2',
    chainId: quantity(DEVNET_ETHEREUM_CHAIN_ID),
    hash: entry.txid,
    nonce: quantity(tx.nonce ?? 0),
    blockHash: block?.hash ?? null,
    blockNumber: block ? quantity(block.height) : null,
    transactionIndex: entry.blockIndex === null ? null : quantity(entry.blockIndex),
    from: entry.sender,
    to: tx.to ? getAddress(tx.to) : null,
    value: quantity(tx.value ?? 0n),
    gas: quantity(tx.gas ?? 0n),
    maxFeePerGas: quantity(tx.maxFeePerGas ?? 0n),
    maxPriorityFeePerGas: quantity(tx.maxPriorityFeePerGas ?? 0n),
    gasPrice: quantity(BigInt(entry.gas?.effectiveGasPrice ?? tx.maxFeePerGas ?? 0n)),
    input: tx.data ?? '0x',
    accessList: tx.accessList ?? [],
    v: quantity(tx.yParity),
    yParity: quantity(tx.yParity),
    r: tx.r,
    s: tx.s,
  };
}

/** The Transfer logs of a block's transactions, log indexes counted across the block as a node does. */
function logsOf(block: DevnetBlock, entries: DevnetTransaction[]) {
  let logIndex = 0;
  return entries.map((entry) =>
    entry.transfers
      .filter((transfer) => transfer.position.startsWith('log:'))
      .map((transfer) => ({
        address: DEVNET_TOKENS.ethereum[transfer.assetId]!.toLowerCase(),
        topics: [TRANSFER_TOPIC, pad(entry.sender!.toLowerCase() as Hex), pad(transfer.to.toLowerCase() as Hex)],
        data: encodeAbiParameters([{ type: 'uint256' }], [BigInt(transfer.amount)]),
        blockNumber: quantity(block.height),
        blockHash: block.hash,
        transactionHash: entry.txid,
        transactionIndex: quantity(entry.blockIndex!),
        logIndex: quantity(logIndex++),
        removed: false,
      })),
  );
}

async function presentReceipt(provider: DevnetProvider, em: EntityManager, entry: DevnetTransaction) {
  const block = await em.findOneOrFail(DevnetBlock, { chain: 'ethereum', height: entry.blockHeight! });
  const entries = await provider.blockTransactions(em, block.height);
  const index = entries.findIndex((candidate) => candidate.txid === entry.txid);
  const cumulative = entries.slice(0, index + 1).reduce((sum, candidate) => sum + BigInt(candidate.gas!.used), 0n);
  const logs = logsOf(block, entries)[index]!;
  const tx = decoded(entry);
  return {
    type: '0x2',
    transactionHash: entry.txid,
    transactionIndex: quantity(entry.blockIndex!),
    blockHash: block.hash,
    blockNumber: quantity(block.height),
    from: entry.sender,
    to: tx.to ? getAddress(tx.to) : null,
    contractAddress: null,
    cumulativeGasUsed: quantity(cumulative),
    gasUsed: quantity(BigInt(entry.gas!.used)),
    effectiveGasPrice: quantity(BigInt(entry.gas!.effectiveGasPrice!)),
    logs,
    logsBloom: bloom(logs),
    status: '0x1',
  };
}

async function presentBlock(provider: DevnetProvider, em: EntityManager, block: DevnetBlock, full: boolean) {
  const entries = await provider.blockTransactions(em, block.height);
  return {
    number: quantity(block.height),
    hash: block.hash,
    parentHash: block.parentHash,
    timestamp: quantity(Math.floor(block.time.getTime() / 1000)),
    baseFeePerGas: quantity(BigInt(block.baseFeePerGas!)),
    gasLimit: quantity(GAS_LIMIT),
    gasUsed: quantity(BigInt(block.gasUsed!)),
    miner: '0x0000000000000000000000000000000000000000',
    difficulty: '0x0',
    extraData: '0x',
    logsBloom: bloom(logsOf(block, entries).flat()),
    uncles: [],
    transactions: full ? await Promise.all(entries.map((entry) => presentTransaction(em, entry))) : entries.map((entry) => entry.txid),
  };
}

/** eth_feeHistory: base fees (and the next block's), fullness, and gas-weighted tip percentiles per block. */
async function feeHistory(provider: DevnetProvider, em: EntityManager, call: RelayedCall): Promise<RelayedAnswer> {
  const countParam = param(call, 0, 'blockCount');
  const count = typeof countParam === 'number' ? countParam : typeof countParam === 'string' && /^0x[0-9a-fA-F]+$/.test(countParam) ? Number(BigInt(countParam)) : NaN;
  if (!Number.isInteger(count) || count < 1 || count > MAX_FEE_HISTORY_BLOCKS) throw new InvalidParams(`blockCount must be 1 to ${MAX_FEE_HISTORY_BLOCKS}`);
  const newest = await heightParam(em, param(call, 1, 'newestBlock'));
  if (newest === null) return rpcError(TXPOOL_REFUSAL, 'request beyond head block');
  const percentilesParam = param(call, 2, 'rewardPercentiles') ?? [];
  if (!Array.isArray(percentilesParam) || percentilesParam.some((value, index) => typeof value !== 'number' || value < 0 || value > 100 || (index > 0 && value < percentilesParam[index - 1]))) {
    throw new InvalidParams('rewardPercentiles must be increasing numbers from 0 to 100');
  }
  const percentiles = percentilesParam as number[];
  const oldest = Math.max(0, newest - count + 1);
  const blocks = await em.find(DevnetBlock, { chain: 'ethereum', height: { $gte: oldest, $lte: newest } }, { orderBy: { height: 'asc' } });
  const market = await devnetFeeMarket(em, 'ethereum');
  const tipHeight = (await devnetTip(em, 'ethereum')).height;
  const next = newest === tipHeight && market.model === 'eip1559' ? market.baseFeePerGas : BigInt((await em.findOneOrFail(DevnetBlock, { chain: 'ethereum', height: newest + 1 })).baseFeePerGas!);
  const reward = [];
  for (const block of blocks) {
    const baseFee = BigInt(block.baseFeePerGas!);
    const tips = (await provider.blockTransactions(em, block.height))
      .map((entry) => ({ tip: BigInt(entry.gas!.effectiveGasPrice!) - baseFee, gas: BigInt(entry.gas!.used) }))
      .sort((a, b) => (a.tip < b.tip ? -1 : a.tip > b.tip ? 1 : 0));
    const total = tips.reduce((sum, entry) => sum + entry.gas, 0n);
    reward.push(
      percentiles.map((percentile) => {
        if (!tips.length) return '0x0';
        // As geth: the tip of the transaction whose cumulative gas reaches the percentile of the block's gas.
        const threshold = (total * BigInt(Math.round(percentile * 100))) / 10_000n;
        let cumulative = 0n;
        for (const entry of tips) {
          cumulative += entry.gas;
          if (cumulative >= threshold) return quantity(entry.tip);
        }
        return quantity(tips.at(-1)!.tip);
      }),
    );
  }
  return result({
    oldestBlock: quantity(oldest),
    baseFeePerGas: [...blocks.map((block) => quantity(BigInt(block.baseFeePerGas!))), quantity(next)],
    gasUsedRatio: blocks.map((block) => Number(BigInt(block.gasUsed!)) / Number(GAS_LIMIT)),
    ...(percentiles.length ? { reward } : {}),
  });
}

/** eth_call on a devnet token contract: balanceOf and decimals; anything else reverts. */
async function tokenRead(em: EntityManager, call: RelayedCall): Promise<RelayedAnswer> {
  const request = param(call, 0, 'transaction') as { to?: unknown; data?: unknown; input?: unknown } | undefined;
  if (typeof request !== 'object' || request === null || typeof request.to !== 'string') throw new InvalidParams('the call object needs `to`');
  const refusal = await stateAt(em, param(call, 1, 'block'));
  if (refusal) return refusal;
  const to = request.to.toLowerCase();
  const assetId = Object.keys(DEVNET_TOKENS.ethereum).find((id) => DEVNET_TOKENS.ethereum[id]!.toLowerCase() === to);
  const data = (request.data ?? request.input ?? '0x') as Hex;
  if (!assetId) return result('0x');
  try {
    const read = decodeFunctionData({ abi: erc20Abi, data });
    if (read.functionName === 'balanceOf') return result(encodeAbiParameters([{ type: 'uint256' }], [await devnetBalance(em, 'ethereum', getAddress(read.args[0]), assetId)]));
    if (read.functionName === 'decimals') return result(encodeAbiParameters([{ type: 'uint8' }], [ASSETS.find((asset) => asset.id === assetId)!.decimals]));
  } catch {
    // Not an ERC-20 read: reverts below.
  }
  return rpcError(3, 'execution reverted');
}

/** The 2048-bit bloom filter of the logs' addresses and topics (yellow paper, M3:2048). */
function bloom(logs: { address: string; topics: string[] }[]): Hex {
  const bits = new Uint8Array(256);
  for (const log of logs) {
    for (const value of [log.address, ...log.topics]) {
      const hash = hexToBytes(keccak256(value as Hex));
      for (let pair = 0; pair < 6; pair += 2) {
        const bit = ((hash[pair]! << 8) | hash[pair + 1]!) & 2047;
        bits[255 - Math.floor(bit / 8)]! |= 1 << bit % 8;
      }
    }
  }
  return toHex(bits);
}
