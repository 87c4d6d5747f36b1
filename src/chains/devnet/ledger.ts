import type { EntityManager } from '@mikro-orm/postgresql';
import { sha256 } from '@noble/hashes/sha256';
import type { ChainId } from '../../catalogue/service';
import { canonicalJson } from '../../shared/canonical-json';
import { TransactionRejectedError, type ChainTip, type FeeMarket } from '../provider';
import { DevnetBalance, DevnetBlock, DevnetNonce, DevnetOutput, DevnetTransaction, type StoredTransfer } from './entities';
import { levelsForQueue, nextBaseFee, type QueuedBid } from './fee-market';
import {
  BITCOIN_BLOCK_SUBSIDY,
  BITCOIN_DUST_LIMIT,
  DEVNET_ETHEREUM_CHAIN_ID,
  DEVNET_PARAMS,
  DEVNET_TOKENS,
  ETHEREUM_INITIAL_BASE_FEE,
  faucetPublicKey,
} from './params';
import { DEVNET_RULES } from './rules';
import { DevnetRejection, type AccountTransaction, type ChainRules, type SpentOutput, type UtxoTransaction } from './rules/types';

/**
 * The devnet's ledger: acceptance into the mempool, block production and the reads the provider
 * answers from. Every write to a chain runs in one transaction holding that chain's advisory lock,
 * so two broadcasts cannot both spend one output or one nonce, and blocks are produced one at a time.
 */

/** A transfer a transaction makes, as the provider reports it: `out:<vout>`, `native`, `log:<n>`, `ix:<n>`. */
export interface AcceptedTransaction {
  txid: string;
  transfers: { position: string; to: string; assetId: string; amount: bigint }[];
}

export function rulesFor(chain: ChainId): ChainRules {
  const rules = DEVNET_RULES[chain];
  if (!rules) throw new Error(`the devnet does not run ${chain}`);
  return rules;
}

export const faucetAddress = (chain: ChainId): string => rulesFor(chain).addressOf(faucetPublicKey(chain));

/** Runs `work` in a transaction holding the chain's lock, the genesis block in place. */
export async function underChainLock<T>(em: EntityManager, chain: ChainId, work: (tx: EntityManager) => Promise<T>): Promise<T> {
  return em.transactional(async (tx) => {
    await tx.execute('select pg_advisory_xact_lock(hashtext(?))', [`devnet:${chain}`]);
    await ensureGenesis(tx, chain);
    return work(tx);
  });
}

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

function storeUtxo(tx: EntityManager, chain: ChainId, decoded: UtxoTransaction, coinbase: boolean): DevnetTransaction {
  for (const output of decoded.outputs) {
    tx.create(DevnetOutput, { chain, txid: decoded.txid, vout: output.vout, script: output.script, address: output.address, amount: output.amount.toString(), spentBy: null });
  }
  return tx.create(DevnetTransaction, {
    chain,
    txid: decoded.txid,
    raw: decoded.raw,
    feeBid: feeRate(decoded.fee, decoded.vsize).toString(),
    maxFee: decoded.fee.toString(),
    vsize: decoded.vsize,
    coinbase,
  });
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
function owedByPending(pending: DevnetTransaction[], native: string): Map<string, bigint> {
  const owed = new Map<string, bigint>();
  const owe = (assetId: string, amount: bigint) => owed.set(assetId, (owed.get(assetId) ?? 0n) + amount);
  for (const entry of pending) {
    owe(native, BigInt(entry.maxFee));
    for (const transfer of entry.transfers) owe(transfer.assetId, BigInt(transfer.amount));
  }
  return owed;
}

/**
 * Keeps the faucet able to pay, whatever the sandbox takes from it (inside the chain's lock, before
 * it sends `amount` of `assetId`): when what it can still spend of that asset, or of the native one
 * for the fee, would leave less than half its genesis balance, it gets its genesis balance plus the
 * amount more. Bitcoin mines a block whose coinbase pays that on top of its subsidy (the regtest
 * way: mining to the faucet); account chains credit the faucet's balance, as a development node's
 * setBalance does. Nobody else's balance moves, so a faucet emptied by deposits is full again for the next.
 */
export async function replenishFaucet(tx: EntityManager, chain: ChainId, assetId: string, amount: bigint): Promise<void> {
  const params = DEVNET_PARAMS[chain];
  const faucet = faucetAddress(chain);
  const shortfall = (assetId: string, spendable: bigint, needed: bigint): bigint => {
    const genesis = params.genesis[assetId]!;
    return spendable - needed < genesis / 2n ? genesis + needed : 0n;
  };
  if (rulesFor(chain).buildCoinbase) {
    const unspent = await tx.find(DevnetOutput, { chain, address: faucet, spentBy: null });
    const topUp = shortfall(assetId, unspent.reduce((sum, output) => sum + BigInt(output.amount), 0n), amount);
    if (topUp > 0n) await mineBlock(tx, chain, (await tipBlock(tx, chain))!, null, topUp);
    return;
  }
  const owed = owedByPending(await tx.find(DevnetTransaction, { chain, sender: faucet, status: 'mempool' }), params.nativeAssetId);
  const needs = new Map([[params.nativeAssetId, 0n], [assetId, amount]]);
  for (const [id, needed] of needs) {
    const topUp = shortfall(id, (await devnetBalance(tx, chain, faucet, id)) - (owed.get(id) ?? 0n), needed);
    if (topUp > 0n) await moveBalance(tx, chain, faucet, id, topUp);
  }
}

/**
 * Mines `count` blocks at once under the chain's lock. With `producedBy` (a workflow step's id), a
 * request already carried out mines nothing more and answers the tip it produced: a retried activity
 * never mines twice.
 */
export function mineDevnetBlocks(em: EntityManager, chain: ChainId, count: number, producedBy?: string): Promise<ChainTip> {
  return underChainLock(em, chain, async (tx) => {
    if (producedBy) {
      const done = await tx.findOne(DevnetBlock, { chain, producedBy }, { orderBy: { height: 'desc' } });
      if (done) return { height: done.height, hash: done.hash };
    }
    let tip = (await tipBlock(tx, chain))!;
    for (let mined = 0; mined < count; mined++) tip = await mineBlock(tx, chain, tip, producedBy ?? null);
    return { height: tip.height, hash: tip.hash };
  });
}

/** `faucetTopUp`: Bitcoin, what the coinbase pays the faucet besides the subsidy and the fees (replenishFaucet). */
async function mineBlock(tx: EntityManager, chain: ChainId, parent: DevnetBlock, producedBy: string | null, faucetTopUp = 0n): Promise<DevnetBlock> {
  const params = DEVNET_PARAMS[chain];
  const rules = rulesFor(chain);
  const height = parent.height + 1;
  const mempool = await tx.find(DevnetTransaction, { chain, status: 'mempool' }, { orderBy: { acceptedAt: 'asc', txid: 'asc' } });
  let included: DevnetTransaction[];
  let baseFeePerGas: string | null = null;
  let gasUsed: string | null = null;
  if (rules.buildCoinbase) {
    const chosen = await selectUtxo(tx, chain, mempool, params.blockCapacity);
    const fees = chosen.reduce((sum, entry) => sum + BigInt(entry.maxFee), 0n);
    const coinbase = storeUtxo(tx, chain, rules.buildCoinbase({ height, address: faucetAddress(chain), amount: BITCOIN_BLOCK_SUBSIDY + fees + faucetTopUp }), true);
    included = [coinbase, ...chosen];
    await tx.flush();
    await applyUtxo(tx, chain, included);
  } else if (chain === 'ethereum') {
    const baseFee = nextBaseFee(BigInt(parent.baseFeePerGas ?? ETHEREUM_INITIAL_BASE_FEE), BigInt(parent.gasUsed ?? 0), params.blockCapacity);
    included = selectByNonce(mempool, baseFee, params.blockCapacity);
    baseFeePerGas = baseFee.toString();
    gasUsed = (await applyAccount(tx, chain, included, baseFee)).toString();
  } else {
    included = [...mempool].sort((a, b) => compareDesc(BigInt(a.feeBid), BigInt(b.feeBid))).slice(0, Number(params.blockCapacity));
    await applyAccount(tx, chain, included, null);
  }
  included.forEach((entry, index) => Object.assign(entry, { status: 'mined', blockHeight: height, blockIndex: index }));
  const time = blockTime(parent);
  const contents = { chain, height, parentHash: parent.hash, time: time.toISOString(), baseFeePerGas, txids: included.map((entry) => entry.txid) };
  const block = tx.create(DevnetBlock, { chain, height, hash: params.formatHash(sha256(canonicalJson(contents))), parentHash: parent.hash, time, baseFeePerGas, gasUsed, producedBy });
  await tx.flush();
  return block;
}

/** Highest fee rate first; a child only after the parents it spends are mined or in this block. */
async function selectUtxo(tx: EntityManager, chain: ChainId, mempool: DevnetTransaction[], capacity: bigint): Promise<DevnetTransaction[]> {
  const inMempool = new Set(mempool.map((entry) => entry.txid));
  const spent = mempool.length ? await tx.find(DevnetOutput, { chain, spentBy: { $in: [...inMempool] } }) : [];
  const parents = new Map<string, string[]>();
  for (const output of spent) parents.set(output.spentBy!, [...(parents.get(output.spentBy!) ?? []), output.txid]);
  const candidates = [...mempool].sort((a, b) => compareDesc(BigInt(a.feeBid), BigInt(b.feeBid)));
  const chosen: DevnetTransaction[] = [];
  const taken = new Set<string>();
  let room = capacity;
  for (let added = true; added; ) {
    added = false;
    for (const candidate of candidates) {
      if (taken.has(candidate.txid) || BigInt(candidate.vsize!) > room) continue;
      if (!(parents.get(candidate.txid) ?? []).every((parent) => !inMempool.has(parent) || taken.has(parent))) continue;
      chosen.push(candidate);
      taken.add(candidate.txid);
      room -= BigInt(candidate.vsize!);
      added = true;
    }
  }
  return chosen;
}

/**
 * Moves each mined output's value: the spent ones leave their address, the new ones reach theirs. Netted
 * per address first: an output made and spent in the same block (a chain of unconfirmed spends) would
 * otherwise be debited before it is credited.
 */
async function applyUtxo(tx: EntityManager, chain: ChainId, included: DevnetTransaction[]): Promise<void> {
  const txids = included.map((entry) => entry.txid);
  const outputs = await tx.find(DevnetOutput, { chain, $or: [{ txid: { $in: txids } }, { spentBy: { $in: txids } }] });
  const net = new Map<string, bigint>();
  const move = (address: string, delta: bigint) => net.set(address, (net.get(address) ?? 0n) + delta);
  for (const output of outputs) {
    if (!output.address) continue;
    if (output.spentBy && txids.includes(output.spentBy)) move(output.address, -BigInt(output.amount));
    if (txids.includes(output.txid)) move(output.address, BigInt(output.amount));
  }
  for (const [address, delta] of net) await moveBalance(tx, chain, address, 'BTC', delta);
  for (const entry of included) entry.feePaid = entry.maxFee;
}

/**
 * Ethereum: each sender's transactions in nonce order, the best-paying head first (its tip at this
 * base fee), those that cannot pay the base fee left for a later block, until the gas limit.
 */
function selectByNonce(mempool: DevnetTransaction[], baseFee: bigint, gasLimit: bigint): DevnetTransaction[] {
  const queues = new Map<string, DevnetTransaction[]>();
  for (const entry of mempool) queues.set(entry.sender!, [...(queues.get(entry.sender!) ?? []), entry]);
  for (const queue of queues.values()) queue.sort((a, b) => compareDesc(BigInt(b.nonce!), BigInt(a.nonce!)));
  const tip = (entry: DevnetTransaction) => min(BigInt(entry.gas!.maxPriorityFeePerGas), BigInt(entry.gas!.maxFeePerGas) - baseFee);
  const chosen: DevnetTransaction[] = [];
  let room = gasLimit;
  for (;;) {
    const heads = [...queues.values()]
      .map((queue) => queue[0])
      .filter((entry): entry is DevnetTransaction => entry !== undefined && BigInt(entry.gas!.maxFeePerGas) >= baseFee && BigInt(entry.gas!.used) <= room);
    if (!heads.length) return chosen;
    const best = heads.reduce((a, b) => (tip(b) > tip(a) ? b : a));
    chosen.push(best);
    room -= BigInt(best.gas!.used);
    queues.get(best.sender!)!.shift();
  }
}

/** Moves every transfer and charges the fee: gas used x the effective price (Ethereum), or the flat fee bid. Returns the gas used. */
async function applyAccount(tx: EntityManager, chain: ChainId, included: DevnetTransaction[], baseFee: bigint | null): Promise<bigint> {
  const native = DEVNET_PARAMS[chain].nativeAssetId;
  let gasUsed = 0n;
  for (const entry of included) {
    let fee = BigInt(entry.feeBid);
    if (baseFee !== null && entry.gas) {
      const price = min(BigInt(entry.gas.maxFeePerGas), baseFee + BigInt(entry.gas.maxPriorityFeePerGas));
      fee = BigInt(entry.gas.used) * price;
      gasUsed += BigInt(entry.gas.used);
      entry.gas = { ...entry.gas, effectiveGasPrice: price.toString() };
    }
    entry.feePaid = fee.toString();
    await moveBalance(tx, chain, entry.sender!, native, -fee);
    for (const transfer of entry.transfers) {
      await moveBalance(tx, chain, entry.sender!, transfer.assetId, -BigInt(transfer.amount));
      await moveBalance(tx, chain, transfer.to, transfer.assetId, BigInt(transfer.amount));
    }
    if (entry.nonce !== null) {
      await tx.execute(
        `insert into devnet_nonces (chain, address, nonce) values (?, ?, 1)
         on conflict (chain, address) do update set nonce = devnet_nonces.nonce + 1`,
        [chain, entry.sender],
      );
    }
  }
  return gasUsed;
}

/** Adds `delta` to a balance, or takes it away when negative; a debit must find the balance and leave it at zero or more. */
async function moveBalance(tx: EntityManager, chain: ChainId, address: string, assetId: string, delta: bigint): Promise<void> {
  if (delta === 0n) return;
  if (delta > 0n) {
    await tx.execute(
      `insert into devnet_balances (chain, address, asset_id, amount) values (?, ?, ?, ?)
       on conflict (chain, address, asset_id) do update set amount = devnet_balances.amount + excluded.amount`,
      [chain, address, assetId, delta.toString()],
    );
    return;
  }
  // The table's check refuses a negative balance; acceptance has made sure none arises.
  const updated = await tx.execute('update devnet_balances set amount = amount - ? where chain = ? and address = ? and asset_id = ? returning amount', [
    (-delta).toString(),
    chain,
    address,
    assetId,
  ]);
  if (updated.length !== 1) throw new Error(`the devnet ledger has no ${assetId} balance for ${address} to debit`);
}

/** Height 0 on first use: the faucet's genesis balances (on Bitcoin, a coinbase output paying them). */
async function ensureGenesis(tx: EntityManager, chain: ChainId): Promise<void> {
  if (await tx.findOne(DevnetBlock, { chain, height: 0 })) return;
  const params = DEVNET_PARAMS[chain];
  const faucet = faucetAddress(chain);
  const txids: string[] = [];
  const rules = rulesFor(chain);
  if (rules.buildCoinbase) {
    const coinbase = storeUtxo(tx, chain, rules.buildCoinbase({ height: 0, address: faucet, amount: params.genesis[params.nativeAssetId]! }), true);
    Object.assign(coinbase, { status: 'mined', blockHeight: 0, blockIndex: 0, feePaid: '0' });
    txids.push(coinbase.txid);
  }
  await tx.flush();
  for (const [assetId, amount] of Object.entries(params.genesis)) await moveBalance(tx, chain, faucet, assetId, amount);
  const time = new Date();
  const parentHash = params.formatHash(new Uint8Array(32));
  const baseFeePerGas = chain === 'ethereum' ? ETHEREUM_INITIAL_BASE_FEE.toString() : null;
  tx.create(DevnetBlock, {
    chain,
    height: 0,
    hash: params.formatHash(sha256(canonicalJson({ chain, height: 0, parentHash, time: time.toISOString(), baseFeePerGas, txids }))),
    parentHash,
    time,
    baseFeePerGas,
    gasUsed: chain === 'ethereum' ? '0' : null,
    producedBy: null,
  });
  await tx.flush();
}

/** The newest block, or null before genesis. */
export function tipBlock(em: EntityManager, chain: ChainId): Promise<DevnetBlock | null> {
  return em.findOne(DevnetBlock, { chain }, { orderBy: { height: 'desc' } });
}

/** The newest block, creating the genesis block on first use. */
export async function devnetTip(em: EntityManager, chain: ChainId): Promise<DevnetBlock> {
  const tip = await tipBlock(em, chain);
  if (tip) return tip;
  await underChainLock(em.fork(), chain, async () => undefined);
  return (await tipBlock(em, chain))!;
}

/** Read afresh: balances move by SQL (moveBalance), which an entity loaded earlier in the same EntityManager would not show. */
export async function devnetBalance(em: EntityManager, chain: ChainId, address: string, assetId: string): Promise<bigint> {
  const row = await em.findOne(DevnetBalance, { chain, address, assetId }, { refresh: true });
  return row ? BigInt(row.amount) : 0n;
}

/** How many of the account's transactions are mined: its next nonce at the tip. */
export async function minedNonce(em: EntityManager, chain: ChainId, address: string): Promise<bigint> {
  const row = await em.findOne(DevnetNonce, { chain, address });
  return row ? BigInt(row.nonce) : 0n;
}

/** The next nonce counting the account's mempool transactions (`pending`). */
export async function pendingNonce(em: EntityManager, chain: ChainId, address: string): Promise<bigint> {
  return (await minedNonce(em, chain, address)) + BigInt(await em.count(DevnetTransaction, { chain, sender: address, status: 'mempool' }));
}

/** The transfers of mined or pending transactions, by txid: Bitcoin outputs as `out:<vout>`, account chains as stored. */
export async function transfersOf(em: EntityManager, chain: ChainId, entries: DevnetTransaction[]): Promise<Map<string, AcceptedTransaction['transfers']>> {
  const result = new Map<string, AcceptedTransaction['transfers']>();
  const utxo = entries.filter((entry) => entry.vsize !== null);
  if (utxo.length) {
    const outputs = await em.find(DevnetOutput, { chain, txid: { $in: utxo.map((entry) => entry.txid) } }, { orderBy: { vout: 'asc' } });
    for (const entry of utxo) {
      result.set(entry.txid, utxoTransfers(outputs.filter((output) => output.txid === entry.txid).map((output) => ({ ...output, amount: BigInt(output.amount) }))));
    }
  }
  for (const entry of entries.filter((candidate) => candidate.vsize === null)) {
    result.set(entry.txid, entry.transfers.map((transfer) => ({ ...transfer, amount: BigInt(transfer.amount) })));
  }
  return result;
}

const utxoTransfers = (outputs: { vout: number; address: string | null; amount: bigint }[]) =>
  outputs.filter((output) => output.address !== null).map((output) => ({ position: `out:${output.vout}`, to: output.address!, assetId: 'BTC', amount: output.amount }));

/**
 * The fee market as the mempool and the tip make it: Ethereum's next base fee from the tip's
 * fullness (EIP-1559) and tips by mempool depth; Bitcoin's sat/vB and Tron's and Solana's flat
 * fee by mempool depth against block capacity.
 */
export async function devnetFeeMarket(em: EntityManager, chain: ChainId): Promise<FeeMarket> {
  const params = DEVNET_PARAMS[chain];
  const mempool = await em.find(DevnetTransaction, { chain, status: 'mempool' });
  if (chain === 'ethereum') {
    const tip = await devnetTip(em, chain);
    const queue: QueuedBid[] = mempool.map((entry) => ({ bid: BigInt(entry.gas!.maxPriorityFeePerGas), weight: BigInt(entry.gas!.used) }));
    return {
      model: 'eip1559',
      baseFeePerGas: nextBaseFee(BigInt(tip.baseFeePerGas ?? ETHEREUM_INITIAL_BASE_FEE), BigInt(tip.gasUsed ?? 0), params.blockCapacity),
      priorityFeePerGas: levelsForQueue(queue, params.blockCapacity, params.feeFloors),
    };
  }
  if (chain === 'bitcoin') {
    const queue = mempool.map((entry) => ({ bid: BigInt(entry.feeBid), weight: BigInt(entry.vsize!) }));
    return { model: 'per_byte', satPerVbyte: levelsForQueue(queue, params.blockCapacity, params.feeFloors) };
  }
  if (!params.feeMovesWithLoad) return { model: 'flat', transferFee: { ...params.feeFloors } };
  const queue = mempool.map((entry) => ({ bid: BigInt(entry.feeBid), weight: 1n }));
  return { model: 'flat', transferFee: levelsForQueue(queue, params.blockCapacity, params.feeFloors) };
}

/** One second after the parent at least: block times strictly increase, even for blocks mined at once. */
const blockTime = (parent: DevnetBlock) => new Date(Math.max(Date.now(), parent.time.getTime() + 1000));
const feeRate = (fee: bigint, vsize: number) => fee / BigInt(vsize);
const compareDesc = (a: bigint, b: bigint) => (a > b ? -1 : a < b ? 1 : 0);
const min = (a: bigint, b: bigint) => (a < b ? a : b);
