import type { EntityManager } from '@mikro-orm/postgresql';
import { sha256 } from '@noble/hashes/sha256';
import type { ChainId } from '../../catalogue/service';
import { canonicalJson } from '../../shared/canonical-json';
import { DevnetBlock, DevnetOutput, DevnetTransaction } from './entities';
import { DEVNET_PARAMS, ETHEREUM_INITIAL_BASE_FEE, faucetPublicKey } from './params';
import { DEVNET_RULES } from './rules';
import type { ChainRules, UtxoTransaction } from './rules/types';

/**
 * The devnet's ledger: acceptance into the mempool, block production and the reads the provider
 * answers from. Every write to a chain runs in one transaction holding that chain's advisory lock,
 * so two broadcasts cannot both spend one output or one nonce, and blocks are produced one at a time.
 * This file holds that lock, the genesis block and the writes acceptance and production share
 * (outputs stored, balances moved); acceptance.ts takes transactions into the mempool,
 * block-production.ts mines them, ledger-reads.ts answers the reads, and faucet.ts pays from the faucet.
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

export function storeUtxo(tx: EntityManager, chain: ChainId, decoded: UtxoTransaction, coinbase: boolean): DevnetTransaction {
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

/** Adds `delta` to a balance, or takes it away when negative; a debit must find the balance and leave it at zero or more. */
export async function moveBalance(tx: EntityManager, chain: ChainId, address: string, assetId: string, delta: bigint): Promise<void> {
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

export const feeRate = (fee: bigint, vsize: number) => fee / BigInt(vsize);
