import type { EntityManager } from '@mikro-orm/postgresql';
import type { Environment } from '../api-keys/entities';
import type { Address } from '../custody/entities';
import type { BitcoinAddressFormat } from '../keys/derivation';
import { errors } from '../shared/errors';
import type { SpendableOutput } from './coin-selection';
import { OutgoingTransaction, WalletOutput, type PinnedInput, type WalletOutputStatus } from './entities';

/**
 * The Bitcoin outputs a wallet holds, from deposit to spend. A send's request path runs, in one
 * database transaction: `spendableOutputs` / `pinnedOutputs` (which lock the wallet's available
 * outputs, so concurrent sends from one wallet take turns), coin selection, then `lockOutputs`.
 * The send's workflow then records its change, and settles or releases them exactly once.
 */

interface OutputRow {
  id: string;
  txid: string;
  vout: number;
  amount: string;
  address: string;
  format: BitcoinAddressFormat;
}

const toSpendable = (row: OutputRow): SpendableOutput => ({ id: row.id, txid: row.txid, vout: row.vout, amount: BigInt(row.amount), address: row.address, format: row.format });

/**
 * The wallet's available outputs with their address and its script type, by outpoint. With `lock`
 * (the default, for the send path) they are locked FOR UPDATE in id order until the transaction
 * ends: a second send from the wallet waits here for the first to commit and then sees only what
 * the first left available, so no two sends select one output. The estimate reads without lock.
 */
export async function spendableOutputs(em: EntityManager, wallet: { id: string }, options: { lock?: boolean } = {}): Promise<SpendableOutput[]> {
  const lock = options.lock ?? true;
  const rows = await em.execute<OutputRow[]>(
    `select o.id, o.txid, o.vout, o.amount::text as amount, a.address, a.format
     from wallet_outputs o join addresses a on a.id = o.address_id
     where o.wallet_id = ? and o.status = 'available'
     order by o.id ${lock ? 'for update of o' : ''}`,
    [wallet.id],
  );
  return rows.map(toSpendable).sort((a, b) => (a.txid !== b.txid ? (a.txid < b.txid ? -1 : 1) : a.vout - b.vout));
}

/**
 * The caller's coin-control inputs as outputs of the wallet, in the caller's order, locked as
 * `spendableOutputs` locks them. Each must be an available output of this wallet: 400
 * `input_not_found` (unknown, or another wallet's) or `input_not_spendable` (unconfirmed, locked
 * by another send, spent) with param `inputs[i]`; naming one twice is 400 `duplicate_input`.
 */
export async function pinnedOutputs(em: EntityManager, wallet: { id: string }, inputs: PinnedInput[]): Promise<SpendableOutput[]> {
  const available = new Map((await spendableOutputs(em, wallet)).map((output) => [`${output.txid}:${output.vout}`, output]));
  const seen = new Set<string>();
  const pinned: SpendableOutput[] = [];
  for (const [index, input] of inputs.entries()) {
    const key = `${input.txid.toLowerCase()}:${input.vout}`;
    const param = `inputs[${index}]`;
    if (seen.has(key)) throw errors.invalid('duplicate_input', `inputs[${index}] names ${key} again.`, { param });
    seen.add(key);
    const output = available.get(key);
    if (output) {
      pinned.push(output);
      continue;
    }
    const row = await em.findOne(WalletOutput, { wallet: wallet.id, txid: input.txid.toLowerCase(), vout: input.vout });
    if (!row) throw errors.invalid('input_not_found', `${key} is not an output of this wallet.`, { param });
    throw errors.invalid('input_not_spendable', `${key} is ${row.status}: only confirmed outputs no other send holds can be spent.`, {
      param,
      details: { status: row.status },
    });
  }
  return pinned;
}

/**
 * Marks the outputs a send will spend: available -> locked, spent_by the send. All or nothing in
 * one statement: when any of them is not an available output of the send's wallet, none is locked
 * and 409 `outputs_unavailable` is thrown (the request path's locking makes that a bug, not a race).
 */
export async function lockOutputs(em: EntityManager, transactionId: string, outputIds: string[]): Promise<void> {
  if (outputIds.length === 0) return;
  const ids = [...new Set(outputIds)];
  const locked = await em.execute<{ id: string }[]>(
    `with wanted as (
       select o.id from wallet_outputs o join transactions t on t.id = ? and t.wallet_id = o.wallet_id
       where o.id = any(?::uuid[]) and o.status = 'available' for update of o)
     update wallet_outputs set status = 'locked', spent_by_id = ?, updated_at = now()
     where id in (select id from wanted) and (select count(*) from wanted) = ?
     returning id`,
    [transactionId, `{${ids.join(',')}}`, transactionId, ids.length],
  );
  if (locked.length !== ids.length) {
    throw errors.conflict('outputs_unavailable', 'Some of the outputs chosen for this send are no longer available; nothing was locked.', { outputs: ids });
  }
}

export interface ChangeOutput {
  txid: string;
  vout: number;
  amount: bigint;
  /** One of the send's wallet's addresses (the send's fromAddress). */
  address: Address;
}

/**
 * The send's change output, once its txid is known (record it before broadcasting: block scanning
 * then knows it is no deposit). Unconfirmed until the send confirms. Idempotent for a retried
 * activity; the same outpoint already known otherwise is an invariant broken, and throws.
 */
export async function recordChange(em: EntityManager, transaction: OutgoingTransaction, change: ChangeOutput): Promise<WalletOutput> {
  const walletId = transaction.wallet.id;
  const address = change.address;
  if (address.wallet.id !== walletId) throw new Error(`change address ${address.id} is not an address of wallet ${walletId}`);
  const txid = change.txid.toLowerCase();
  await em.execute(
    `insert into wallet_outputs (id, organization_id, environment, wallet_id, address_id, txid, vout, amount, origin, status, created_by_id, created_at, updated_at)
     values (gen_random_uuid(), ?, ?, ?, ?, ?, ?, ?, 'change', 'unconfirmed', ?, now(), now())
     on conflict (environment, txid, vout) do nothing`,
    [transaction.organization.id, transaction.environment, walletId, address.id, txid, change.vout, change.amount.toString(), transaction.id],
  );
  const row = await em.findOneOrFail(WalletOutput, { environment: transaction.environment, txid, vout: change.vout }, { refresh: true });
  if (row.origin !== 'change' || row.createdBy?.id !== transaction.id || row.amount !== change.amount.toString()) {
    throw new Error(`output ${txid}:${change.vout} is already recorded as ${row.origin} of another transaction or amount`);
  }
  return row;
}

/**
 * The send confirmed as `minedTxid` (its original or one of its replacements): what it spent is
 * spent and the mined candidate's change becomes spendable. The change of every other candidate stays
 * recorded, unconfirmed (never spendable): scanning then never takes it for a deposit should a
 * reorganisation mine that candidate instead (`moveChange`). Idempotent.
 */
export async function settleOutputs(em: EntityManager, transactionId: string, minedTxid: string): Promise<void> {
  await em.execute(`update wallet_outputs set status = 'spent', updated_at = now() where spent_by_id = ? and status = 'locked'`, [transactionId]);
  await em.execute(`update wallet_outputs set status = 'available', updated_at = now() where created_by_id = ? and txid = ? and status = 'unconfirmed'`, [transactionId, minedTxid.toLowerCase()]);
}

/**
 * A reorganisation mined another candidate of a settled send: the change spendable is the new one's, and
 * the abandoned one's is unconfirmed again, unless a later send already locked or spent it (that send
 * spends what the chain no longer has, and its own proof decides its fate).
 */
export async function moveChange(em: EntityManager, transactionId: string, fromTxid: string, toTxid: string): Promise<void> {
  await em.execute(`update wallet_outputs set status = 'unconfirmed', updated_at = now() where created_by_id = ? and txid = ? and status = 'available'`, [transactionId, fromTxid.toLowerCase()]);
  await settleOutputs(em, transactionId, toTxid);
}

/**
 * The send provably failed: what it locked is available again, save `spentElsewhere` (ids of its
 * inputs a conflicting mined transaction spent: spent, by no send of ours), and its change never
 * existed. Idempotent; throws when the send was already settled (its outputs spent or its change confirmed).
 */
export async function releaseOutputs(em: EntityManager, transactionId: string, spentElsewhere: string[] = []): Promise<void> {
  const settled = await em.execute<{ status: WalletOutputStatus }[]>(
    `select status from wallet_outputs where (spent_by_id = ? and status = 'spent') or (created_by_id = ? and status <> 'unconfirmed') limit 1`,
    [transactionId, transactionId],
  );
  if (settled.length) throw new Error(`transaction ${transactionId} is settled: its outputs cannot be released`);
  await em.execute(
    `update wallet_outputs set status = case when id = any(?::uuid[]) then 'spent'::wallet_output_status else 'available'::wallet_output_status end, spent_by_id = null, updated_at = now()
     where spent_by_id = ? and status = 'locked'`,
    [`{${spentElsewhere.join(',')}}`, transactionId],
  );
  await em.execute(`delete from wallet_outputs where created_by_id = ? and status = 'unconfirmed'`, [transactionId]);
}

/**
 * A settled send a reorganisation took off the chain, proven never to be mined (another transaction
 * spent an input): its change never existed, and its inputs are the wallet's to spend again save
 * `spentElsewhere` (ids of those the conflicting transaction spent). False, changing nothing, while a
 * later send holds its change (locked or spent): that send's fate comes first.
 */
export async function unsettleOutputs(em: EntityManager, transactionId: string, spentElsewhere: string[]): Promise<boolean> {
  const held = await em.execute(`select 1 from wallet_outputs where created_by_id = ? and status in ('locked', 'spent') limit 1`, [transactionId]);
  if (held.length) return false;
  await em.execute(
    `update wallet_outputs set status = case when id = any(?::uuid[]) then 'spent'::wallet_output_status else 'available'::wallet_output_status end, spent_by_id = null, updated_at = now()
     where spent_by_id = ? and status = 'spent'`,
    [`{${spentElsewhere.join(',')}}`, transactionId],
  );
  await em.execute(`delete from wallet_outputs where created_by_id = ?`, [transactionId]);
  return true;
}

/** A Bitcoin transfer block scanning recorded as a deposit to one of a wallet's addresses. */
export interface DepositOutput {
  organizationId: string;
  environment: Environment;
  walletId: string;
  addressId: string;
  txid: string;
  /** The transfer's position, `out:<vout>`. */
  position: string;
  amount: string;
}

/** The output index of a Bitcoin transfer's position (`out:<vout>`). */
function voutOf(position: string): number {
  const match = /^out:(\d+)$/.exec(position);
  if (!match) throw new Error(`'${position}' is not a Bitcoin output position`);
  return Number(match[1]);
}

/**
 * Which of these Bitcoin transfers (txid and `out:<vout>` position) pay the change of one of the
 * platform's own sends: those are no deposits. Keys `txid:position`.
 */
export async function changeOutputsAmong(em: EntityManager, environment: Environment, transfers: { txid: string; position: string }[]): Promise<Set<string>> {
  const outpoints = transfers.filter((transfer) => /^out:\d+$/.test(transfer.position)).map((transfer) => ({ txid: transfer.txid.toLowerCase(), vout: voutOf(transfer.position) }));
  if (outpoints.length === 0) return new Set();
  const rows = await em.find(WalletOutput, { environment, origin: 'change', $or: outpoints });
  return new Set(rows.map((row) => `${row.txid}:out:${row.vout}`));
}

/** A deposit seen (in the mempool or a block): its output, unconfirmed until the deposit confirms. Idempotent. */
export async function recordDepositOutput(em: EntityManager, deposit: DepositOutput): Promise<void> {
  await em.execute(
    `insert into wallet_outputs (id, organization_id, environment, wallet_id, address_id, txid, vout, amount, origin, status, created_at, updated_at)
     values (gen_random_uuid(), ?, ?, ?, ?, ?, ?, ?, 'deposit', 'unconfirmed', now(), now())
     on conflict (environment, txid, vout) do nothing`,
    [deposit.organizationId, deposit.environment, deposit.walletId, deposit.addressId, deposit.txid.toLowerCase(), voutOf(deposit.position), deposit.amount],
  );
}

/** The deposit reached the chain's confirmation count: its output can be spent. */
export async function confirmDepositOutput(em: EntityManager, deposit: Pick<DepositOutput, 'environment' | 'txid' | 'position'>): Promise<void> {
  await em.execute(`update wallet_outputs set status = 'available', updated_at = now() where environment = ? and txid = ? and vout = ? and origin = 'deposit' and status = 'unconfirmed'`, [
    deposit.environment,
    deposit.txid.toLowerCase(),
    voutOf(deposit.position),
  ]);
}

/**
 * A reorganisation took away a confirmed deposit: its output is gone, unless a send already locked or
 * spent it (that send spends what the chain no longer has, and its own fate decides). Whether a send
 * holds it.
 */
export async function reverseDepositOutput(em: EntityManager, deposit: Pick<DepositOutput, 'environment' | 'txid' | 'position'>): Promise<boolean> {
  const outpoint = [deposit.environment, deposit.txid.toLowerCase(), voutOf(deposit.position)];
  await em.execute(`delete from wallet_outputs where environment = ? and txid = ? and vout = ? and origin = 'deposit' and status in ('unconfirmed', 'available')`, outpoint);
  const held = await em.execute<{ id: string }[]>(`select id from wallet_outputs where environment = ? and txid = ? and vout = ? and origin = 'deposit'`, outpoint);
  return held.length > 0;
}

/**
 * A reorganisation dropped the deposit before it confirmed: its output is gone (it comes back with
 * the deposit if the new chain carries it). Only confirmed outputs are ever locked, so an
 * unconfirmed one has no send to undo.
 */
export async function dropDepositOutput(em: EntityManager, deposit: Pick<DepositOutput, 'environment' | 'txid' | 'position'>): Promise<void> {
  await em.execute(`delete from wallet_outputs where environment = ? and txid = ? and vout = ? and origin = 'deposit' and status = 'unconfirmed'`, [
    deposit.environment,
    deposit.txid.toLowerCase(),
    voutOf(deposit.position),
  ]);
}
