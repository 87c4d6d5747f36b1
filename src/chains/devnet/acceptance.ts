/**
 * The devnet's mempool door: a signed transaction decoded by its chain's rules, then checked as a
 * node would (outputs unspent and none dust, nonce next, fee at least the market's low level, funds
 * covering it and the sender's pending ones) and stored as pending, or refused with
 * TransactionRejectedError. A transaction sent again is answered as the first time.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import type { ChainId } from '../../catalogue/service';
import { TransactionRejectedError } from '../provider';
import { DevnetOutput, DevnetTransaction, type StoredTransfer } from './entities';
import { feeRate, rulesFor, storeUtxo, underChainLock, type AcceptedTransaction } from './ledger';
import { devnetBalance, devnetFeeMarket, minedNonce, transfersOf, utxoTransfers } from './ledger-reads';
import { BITCOIN_DUST_LIMIT, DEVNET_ETHEREUM_CHAIN_ID, DEVNET_PARAMS, DEVNET_TOKENS } from './params';
import { DevnetRejection, type AccountTransaction, type SpentOutput, type UtxoTransaction } from './rules/types';

/** Accepts a signed transaction into the mempool, or throws TransactionRejectedError with the reason. */
export function acceptDevnetTransaction(em: EntityManager, chain: ChainId, raw: string): Promise<AcceptedTransaction> {
  return underChainLock(em, chain, (tx) => acceptLocked(tx, chain, raw));
}

/** Acceptance inside the chain's lock (the faucet builds and submits under one lock). */
export async function acceptLocked(tx: EntityManager, chain: ChainId, raw: string): Promise<AcceptedTransaction> {
  try {
    const rules = rulesFor(chain);
    const spendable = new Map<string, DevnetOutput>();
    if (rules.spends) {
      const outpoints = rules.spends(raw);
      const keys = outpoints.map(({ txid, vout }) => `${txid}:${vout}`);
      if (new Set(keys).size !== keys.length) throw new DevnetRejection('malformed', 'The transaction spends one output twice.');
      const rows = outpoints.length ? await tx.find(DevnetOutput, { chain, $or: outpoints.map(({ txid, vout }) => ({ txid, vout })) }) : [];
      for (const row of rows) spendable.set(`${row.txid}:${row.vout}`, row);
    }
    const decoded = rules.decode(raw, {
      spentOutput: (txid, vout): SpentOutput | null => {
        const row = spendable.get(`${txid}:${vout}`);
        return row ? { txid, vout, script: row.script, amount: BigInt(row.amount) } : null;
      },
      tokens: DEVNET_TOKENS[chain],
      chainId: chain === 'ethereum' ? DEVNET_ETHEREUM_CHAIN_ID : undefined,
    });
    const known = await tx.findOne(DevnetTransaction, { chain, txid: decoded.txid });
    // A transaction sent again is answered with its id, as a node does for one it already has.
    if (known) return { txid: known.txid, transfers: await transfersOf(tx, chain, [known]).then((all) => all.get(known.txid) ?? []) };
    return decoded.model === 'utxo' ? await acceptUtxo(tx, chain, decoded, spendable) : await acceptAccount(tx, chain, decoded);
  } catch (error) {
    if (error instanceof DevnetRejection) throw new TransactionRejectedError(error.reason, error.message);
    throw error;
  }
}

async function acceptUtxo(tx: EntityManager, chain: ChainId, decoded: UtxoTransaction, spendable: Map<string, DevnetOutput>): Promise<AcceptedTransaction> {
  for (const input of decoded.inputs) {
    const output = spendable.get(`${input.txid}:${input.vout}`)!;
    // First seen wins: the output is taken by a transaction in the mempool or in a block.
    if (output.spentBy) throw new DevnetRejection('double_spend', `${input.txid}:${input.vout} is already spent by ${output.spentBy}.`);
  }
  const dust = decoded.outputs.find((output) => output.address !== null && output.amount < BITCOIN_DUST_LIMIT);
  if (dust) throw new DevnetRejection('dust_output', `Output ${dust.vout} pays ${dust.amount} sat, below the ${BITCOIN_DUST_LIMIT} sat dust limit.`);
  const market = await devnetFeeMarket(tx, chain);
  const low = market.model === 'per_byte' ? market.satPerVbyte.low : 0n;
  if (decoded.fee < low * BigInt(decoded.vsize)) {
    throw new DevnetRejection('fee_too_low', `The fee pays ${feeRate(decoded.fee, decoded.vsize)} sat/vB; the devnet relays ${low} sat/vB or more now.`);
  }
  for (const input of decoded.inputs) spendable.get(`${input.txid}:${input.vout}`)!.spentBy = decoded.txid;
  storeUtxo(tx, chain, decoded, false);
  await tx.flush();
  return { txid: decoded.txid, transfers: utxoTransfers(decoded.outputs) };
}

async function acceptAccount(tx: EntityManager, chain: ChainId, decoded: AccountTransaction): Promise<AcceptedTransaction> {
  const pending = await tx.find(DevnetTransaction, { chain, sender: decoded.from, status: 'mempool' });
  if (decoded.nonce !== null) {
    const expected = (await minedNonce(tx, chain, decoded.from)) + BigInt(pending.length);
    if (decoded.nonce < expected) throw new DevnetRejection('nonce_too_low', `nonce too low: the account's next nonce is ${expected}, the transaction has ${decoded.nonce}.`);
    if (decoded.nonce > expected) throw new DevnetRejection('nonce_too_high', `nonce too high: the account's next nonce is ${expected}, the transaction has ${decoded.nonce}.`);
  }
  const market = await devnetFeeMarket(tx, chain);
  if (market.model === 'eip1559' && decoded.gas && decoded.gas.maxFeePerGas < market.baseFeePerGas) {
    throw new DevnetRejection('fee_too_low', `max fee per gas less than the next block's base fee (${decoded.gas.maxFeePerGas} < ${market.baseFeePerGas}).`);
  }
  if (market.model === 'flat' && decoded.feeBid < market.transferFee.low) {
    throw new DevnetRejection('fee_too_low', `The fee ${decoded.feeBid} is below the ${market.transferFee.low} the devnet takes now.`);
  }
  // What the sender's confirmed balances must cover: this transaction and the ones it already has in the mempool.
  const native = DEVNET_PARAMS[chain].nativeAssetId;
  const owed = owedByPending(pending, native);
  const owe = (assetId: string, amount: bigint) => owed.set(assetId, (owed.get(assetId) ?? 0n) + amount);
  const needed = new Set<string>([native]);
  owe(native, decoded.maxFee);
  for (const transfer of decoded.transfers) {
    owe(transfer.assetId, transfer.amount);
    needed.add(transfer.assetId);
  }
  for (const assetId of needed) {
    const held = await devnetBalance(tx, chain, decoded.from, assetId);
    if (held < owed.get(assetId)!) {
      throw new DevnetRejection('insufficient_funds', `insufficient funds: ${decoded.from} holds ${held} of ${assetId}, the transaction and its pending ones need ${owed.get(assetId)}.`);
    }
  }
  const transfers: StoredTransfer[] = decoded.transfers.map((transfer) => ({ ...transfer, amount: transfer.amount.toString() }));
  tx.create(DevnetTransaction, {
    chain,
    txid: decoded.txid,
    raw: decoded.raw,
    sender: decoded.from,
    nonce: decoded.nonce === null ? null : decoded.nonce.toString(),
    feeBid: decoded.feeBid.toString(),
    maxFee: decoded.maxFee.toString(),
    transfers,
    gas: decoded.gas
      ? {
          limit: decoded.gas.limit.toString(),
          maxFeePerGas: decoded.gas.maxFeePerGas.toString(),
          maxPriorityFeePerGas: decoded.gas.maxPriorityFeePerGas.toString(),
          used: decoded.gas.used.toString(),
          effectiveGasPrice: null,
        }
      : null,
  });
  await tx.flush();
  return { txid: decoded.txid, transfers: decoded.transfers };
}

/** What an account's mempool transactions may take of each asset: their transfers, and their most fee in the native one. */
export function owedByPending(pending: DevnetTransaction[], native: string): Map<string, bigint> {
  const owed = new Map<string, bigint>();
  const owe = (assetId: string, amount: bigint) => owed.set(assetId, (owed.get(assetId) ?? 0n) + amount);
  for (const entry of pending) {
    owe(native, BigInt(entry.maxFee));
    for (const transfer of entry.transfers) owe(transfer.assetId, BigInt(transfer.amount));
  }
  return owed;
}
