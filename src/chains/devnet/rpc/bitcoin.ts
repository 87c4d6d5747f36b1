import type { EntityManager } from '@mikro-orm/postgresql';
import { sha256 } from '@noble/hashes/sha256';
import { hex } from '@scure/base';
import { RawTx } from '@scure/btc-signer';
import { toDisplay } from '../../../shared/money';
import { TransactionRejectedError, type RelayedAnswer, type RelayedCall } from '../../provider';
import { DevnetBlock, DevnetOutput, DevnetTransaction } from '../entities';
import { acceptDevnetTransaction } from '../acceptance';
import { devnetFeeMarket, devnetTip } from '../ledger-reads';
import { canonicalTxid } from '../params';
import type { DevnetProvider } from '../provider';
import { InvalidParams, methodNotFound, param, requireString, result, rpcError, withParams } from './answers';

/** Bitcoin Core's RPC error codes (src/rpc/protocol.h). */
const RPC_INVALID_ADDRESS_OR_KEY = -5;
const RPC_INVALID_PARAMETER = -8;
const RPC_DESERIALIZATION_ERROR = -22;
const RPC_VERIFY_REJECTED = -26;
const BTC_DECIMALS = 8;

/**
 * The devnet's Bitcoin RPC core subset, answered as bitcoind does. Amounts are JSON numbers in BTC,
 * as bitcoind writes them; a satoshi amount below 2^53 with 8 decimals is written exactly.
 */
export function answerBitcoinCall(provider: DevnetProvider, em: EntityManager, call: RelayedCall): Promise<RelayedAnswer> {
  return withParams(async () => {
    switch (call.method) {
      case 'getblockcount':
        return result((await devnetTip(em, 'bitcoin')).height);
      case 'getbestblockhash':
        return result((await devnetTip(em, 'bitcoin')).hash);
      case 'getblockhash': {
        const height = param(call, 0, 'height');
        if (!Number.isInteger(height)) throw new InvalidParams('height must be an integer');
        const block = await em.findOne(DevnetBlock, { chain: 'bitcoin', height: height as number });
        return block ? result(block.hash) : rpcError(RPC_INVALID_PARAMETER, 'Block height out of range');
      }
      case 'getblock': {
        const block = await em.findOne(DevnetBlock, { chain: 'bitcoin', hash: requireString(param(call, 0, 'blockhash'), 'blockhash').toLowerCase() });
        if (!block) return rpcError(RPC_INVALID_ADDRESS_OR_KEY, 'Block not found');
        const verbosity = param(call, 1, 'verbosity') ?? 1;
        if (verbosity !== 1 && verbosity !== 2) return rpcError(RPC_INVALID_PARAMETER, 'The devnet answers getblock with verbosity 1 or 2: its blocks have no header serialization');
        return result(await presentBlock(provider, em, block, verbosity === 2));
      }
      case 'getrawtransaction': {
        const txid = canonicalTxid('bitcoin', requireString(param(call, 0, 'txid'), 'txid'));
        const entry = await em.findOne(DevnetTransaction, { chain: 'bitcoin', txid });
        if (!entry) return rpcError(RPC_INVALID_ADDRESS_OR_KEY, 'No such mempool or blockchain transaction');
        const verbose = param(call, 1, 'verbose');
        if (!verbose) return result(entry.raw);
        const tip = await devnetTip(em, 'bitcoin');
        const block = entry.blockHeight === null ? null : await em.findOneOrFail(DevnetBlock, { chain: 'bitcoin', height: entry.blockHeight });
        return result({
          ...(await presentTransaction(em, entry)),
          ...(block ? { blockhash: block.hash, confirmations: tip.height - block.height + 1, time: unixTime(block.time), blocktime: unixTime(block.time) } : {}),
        });
      }
      case 'sendrawtransaction':
        try {
          return result((await acceptDevnetTransaction(em, 'bitcoin', requireString(param(call, 0, 'hexstring'), 'hexstring'))).txid);
        } catch (error) {
          if (!(error instanceof TransactionRejectedError)) throw error;
          return rpcError(error.reason === 'malformed' ? RPC_DESERIALIZATION_ERROR : RPC_VERIFY_REJECTED, error.message, { reason: error.reason });
        }
      case 'estimatesmartfee': {
        const target = param(call, 0, 'conf_target');
        if (!Number.isInteger(target) || (target as number) < 1 || (target as number) > 1008) return rpcError(RPC_INVALID_PARAMETER, 'Invalid conf_target, must be between 1 and 1008');
        const market = await devnetFeeMarket(em, 'bitcoin');
        if (market.model !== 'per_byte') throw new Error('the Bitcoin devnet prices per byte');
        const level = (target as number) <= 1 ? 'high' : (target as number) <= 3 ? 'medium' : 'low';
        // sat/vB to BTC/kvB.
        return result({ feerate: btc(market.satPerVbyte[level] * 1000n), blocks: Math.max(target as number, 2) });
      }
      default:
        return methodNotFound(call, 'bitcoin');
    }
  });
}

async function presentBlock(provider: DevnetProvider, em: EntityManager, block: DevnetBlock, withTransactions: boolean) {
  const [tip, entries, next] = await Promise.all([
    devnetTip(em, 'bitcoin'),
    provider.blockTransactions(em, block.height),
    em.findOne(DevnetBlock, { chain: 'bitcoin', height: block.height + 1 }),
  ]);
  return {
    hash: block.hash,
    confirmations: tip.height - block.height + 1,
    height: block.height,
    time: unixTime(block.time),
    mediantime: unixTime(block.time),
    nTx: entries.length,
    ...(block.height > 0 ? { previousblockhash: block.parentHash } : {}),
    ...(next ? { nextblockhash: next.hash } : {}),
    tx: withTransactions ? await Promise.all(entries.map((entry) => presentTransaction(em, entry))) : entries.map((entry) => entry.txid),
  };
}

/** A transaction as getrawtransaction's verbose form writes it; the inputs from the outputs they spend. */
async function presentTransaction(em: EntityManager, entry: DevnetTransaction) {
  const outputs = await em.find(DevnetOutput, { chain: 'bitcoin', txid: entry.txid }, { orderBy: { vout: 'asc' } });
  const raw = hex.decode(entry.raw);
  const { inputs, witnesses } = RawTx.decode(raw);
  return {
    txid: entry.txid,
    // The wtxid: the hash of the serialization with witnesses.
    hash: hex.encode(sha256(sha256(raw)).reverse()),
    size: raw.length,
    vsize: entry.vsize,
    hex: entry.raw,
    vin: inputs.map((input, index) => {
      const witness = witnesses?.[index] ?? [];
      return {
        ...(entry.coinbase ? { coinbase: hex.encode(input.finalScriptSig) } : { txid: hex.encode(input.txid), vout: input.index, scriptSig: { hex: hex.encode(input.finalScriptSig) } }),
        ...(witness.length ? { txinwitness: witness.map((item) => hex.encode(item)) } : {}),
        sequence: input.sequence,
      };
    }),
    vout: outputs.map((output) => ({
      value: btc(BigInt(output.amount)),
      n: output.vout,
      scriptPubKey: { hex: output.script, ...(output.address ? { address: output.address } : {}) },
    })),
    ...(entry.coinbase ? {} : { fee: btc(BigInt(entry.maxFee)) }),
  };
}

const btc = (sats: bigint) => Number(toDisplay(sats, BTC_DECIMALS));
const unixTime = (time: Date) => Math.floor(time.getTime() / 1000);
