import type { EntityManager } from '@mikro-orm/postgresql';
import { sha256 } from '@noble/hashes/sha256';
import { base58check, hex } from '@scure/base';
import { TransactionRejectedError, type RelayedAnswer, type RelayedCall } from '../../provider';
import { DevnetBlock, DevnetTransaction } from '../entities';
import { acceptDevnetTransaction } from '../acceptance';
import { devnetBalance, devnetTip } from '../ledger-reads';
import { canonicalTxid, DEVNET_TOKENS, DEVNET_TRON_CHAIN_ID } from '../params';
import type { DevnetProvider } from '../provider';
import { InvalidParams, methodNotFound, param, quantity, requireString, result, rpcError, withParams } from './answers';

const TRON_ADDRESS_PREFIX = 0x41;
const REFUSED = -32000;
const base58Address = base58check(sha256);

/**
 * The devnet's Tron subset: the eth-compatible JSON-RPC names java-tron serves (hex addresses
 * without the 41 prefix, amounts in sun) and `broadcasthex`, the JSON-RPC form of /wallet/broadcasthex.
 */
export function answerTronCall(provider: DevnetProvider, em: EntityManager, call: RelayedCall): Promise<RelayedAnswer> {
  return withParams(async () => {
    switch (call.method) {
      case 'eth_chainId':
        return result(quantity(DEVNET_TRON_CHAIN_ID));
      case 'eth_blockNumber':
        return result(quantity((await devnetTip(em, 'tron')).height));
      case 'eth_getBalance':
        return result(quantity(await devnetBalance(em, 'tron', tronAddress(param(call, 0, 'address')), 'TRX')));
      case 'eth_getTransactionByHash': {
        const entry = await transactionParam(em, call);
        return result(entry ? await presentTransaction(em, entry) : null);
      }
      case 'eth_getTransactionReceipt': {
        const entry = await transactionParam(em, call);
        if (entry?.status !== 'mined') return result(null);
        const block = await em.findOneOrFail(DevnetBlock, { chain: 'tron', height: entry.blockHeight! });
        const earlierLogs = (await provider.blockTransactions(em, block.height))
          .slice(0, entry.blockIndex!)
          .reduce((sum, earlier) => sum + earlier.transfers.filter((transfer) => transfer.position.startsWith('log:')).length, 0);
        return result({
          transactionHash: `0x${entry.txid}`,
          transactionIndex: quantity(entry.blockIndex!),
          blockHash: `0x${block.hash}`,
          blockNumber: quantity(block.height),
          from: hexAddress(entry.sender!),
          status: '0x1',
          logs: entry.transfers
            .filter((transfer) => transfer.position.startsWith('log:'))
            .map((transfer, index) => ({
              address: hexAddress(DEVNET_TOKENS.tron[transfer.assetId]!),
              topics: ['0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef', word(hexAddress(entry.sender!)), word(hexAddress(transfer.to))],
              data: word(quantity(BigInt(transfer.amount))),
              logIndex: quantity(earlierLogs + index),
              transactionHash: `0x${entry.txid}`,
              blockHash: `0x${block.hash}`,
              blockNumber: quantity(block.height),
              removed: false,
            })),
        });
      }
      case 'broadcasthex':
        try {
          return result({ result: true, txid: (await acceptDevnetTransaction(em, 'tron', requireString(param(call, 0, 'transaction'), 'transaction'))).txid });
        } catch (error) {
          if (error instanceof TransactionRejectedError) return rpcError(REFUSED, error.message, { reason: error.reason });
          throw error;
        }
      default:
        return methodNotFound(call, 'tron');
    }
  });
}

async function transactionParam(em: EntityManager, call: RelayedCall): Promise<DevnetTransaction | null> {
  return em.findOne(DevnetTransaction, { chain: 'tron', txid: canonicalTxid('tron', requireString(param(call, 0, 'hash'), 'the transaction hash')) });
}

async function presentTransaction(em: EntityManager, entry: DevnetTransaction) {
  const block = entry.blockHeight === null ? null : await em.findOneOrFail(DevnetBlock, { chain: 'tron', height: entry.blockHeight });
  const native = entry.transfers.find((transfer) => transfer.position === 'native');
  const first = entry.transfers[0];
  return {
    hash: `0x${entry.txid}`,
    blockHash: block ? `0x${block.hash}` : null,
    blockNumber: block ? quantity(block.height) : null,
    transactionIndex: entry.blockIndex === null ? null : quantity(entry.blockIndex),
    from: hexAddress(entry.sender!),
    to: native ? hexAddress(native.to) : first ? hexAddress(DEVNET_TOKENS.tron[first.assetId] ?? first.to) : null,
    value: quantity(BigInt(native?.amount ?? 0)),
  };
}

/** A Tron address given as base58check (T...), 0x41-prefixed hex or 20-byte hex, in base58check. */
function tronAddress(value: unknown): string {
  if (typeof value !== 'string') throw new InvalidParams('the address must be a string');
  if (/^T[1-9A-HJ-NP-Za-km-z]{33}$/.test(value)) return value;
  const body = value.replace(/^0x/i, '');
  if (/^41[0-9a-fA-F]{40}$/.test(body)) return base58Address.encode(hex.decode(body.toLowerCase()));
  if (/^[0-9a-fA-F]{40}$/.test(body)) return base58Address.encode(Uint8Array.from([TRON_ADDRESS_PREFIX, ...hex.decode(body.toLowerCase())]));
  throw new InvalidParams('the address must be base58check (T...) or hex');
}

/** The 20-byte hex form java-tron's JSON-RPC writes. */
const hexAddress = (address: string) => `0x${hex.encode(base58Address.decode(address).slice(1))}`;
const word = (value: string) => `0x${value.replace(/^0x/, '').padStart(64, '0')}`;
