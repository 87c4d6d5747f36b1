import type { EntityManager } from '@mikro-orm/postgresql';
import { ASSETS, assetById, findChain, networkFor } from '../catalogue/service';
import { canonicalAddress } from '../chains/addresses';
import type { ObservedBlock } from '../chains/provider';
import { Address } from '../custody/entities';
import { postCustodyEntry } from '../custody/journal';
import { emit } from '../events/service';
import { Sponsorship } from '../gas-stations/entities';
import { toDisplay } from '../shared/money';
import { iso } from '../shared/time';
import { OutgoingTransaction, TransactionReplacement, WalletOutput } from '../transactions/entities';
import { failedUnminedByHash, recordMinedAfterFailure, type LateDebits } from '../transactions/mined-after-failure';
import { OutgoingTransfer } from './entities';
import { releaseReplacedSpend } from './suspense';
import { provenanceOf, subscriptionsOn, type BlockPlace, type ChainEnvironment } from './service';

/** One transfer out of a custody address as the block shows it, before it is recorded. */
interface SeenSpend {
  txid: string;
  position: string;
  address: Address;
  assetId: string;
  amount: bigint;
  /** Native base units the address paid for the transaction; only ever on a native-asset spend. */
  fee: bigint;
  to: string | null;
}

/**
 * Records every transfer out of a custody address that one block made, once per organization and
 * (txid, position), and announces each (`outgoing_native_tx` / `outgoing_token_tx`). A transfer whose
 * transaction is none of the platform's sends (no `transactions` row has its hash) is a spend the
 * platform did not make: the chain is the truth, so the wallet is debited what left the address (and,
 * on account chains, the fee it paid) here, once, and `wallet.unexpected_spend` is raised. A send of
 * the platform's is never debited here: the hash of each of its candidates is stored before its bytes
 * leave (signing), so the scanner knows it whenever it sees it, and its settlement debits it once,
 * before or after this. Save a send failed without being mined (its lock released): mined after all, it
 * is debited here the same way and settled as mined with an alarm (transactions/mined-after-failure.ts).
 */
export async function recordOutgoing(em: EntityManager, scope: ChainEnvironment, block: ObservedBlock): Promise<OutgoingTransfer[]> {
  const spends = scope.chain === 'bitcoin' ? await spentOutputs(em, scope, block) : await accountSpends(em, scope, block);
  if (spends.length === 0) return [];
  const txids = [...new Set(spends.map((spend) => spend.txid))];
  const sends = await platformSends(em, scope, txids);
  const failed = await failedUnminedByHash(em, scope, txids);
  const place: BlockPlace = { height: block.height, hash: block.hash };
  const recorded: OutgoingTransfer[] = [];
  for (const spend of spends) {
    const organizationId = spend.address.wallet.organization.id;
    const matching = sends.filter((candidate) => candidate.txHash === spend.txid && candidate.organizationId === organizationId);
    // Two sends carry one hash when a send refused at its first handing is followed by one signing the very same bytes (its nonce, fee and transfer): the live one is the chain's.
    const send = matching.find((candidate) => failed.get(spend.txid) !== candidate.id) ?? matching[0];
    // A send failed without being mined released its lock and was never debited: the chain's spend is debited here like one the platform did not expect.
    const row = await recordOne(em, scope, spend, { ...place, ...provenanceOf(block, spend.txid) }, send?.id ?? null, !send || failed.get(spend.txid) === send.id);
    if (row) recorded.push(row);
  }
  await raiseUnexpectedSpends(em, scope, recorded.filter((row) => row.unexpected && row.transactionId == null));
  await settleLateMined(em, place, recorded.filter((row) => row.unexpected && row.transactionId != null));
  return recorded;
}

/** Failed sends a block mined after all: each settled as mined with what scanning debited for it (src/transactions/mined-after-failure.ts). */
async function settleLateMined(em: EntityManager, place: BlockPlace, rows: OutgoingTransfer[]): Promise<void> {
  const bySend = new Map<string, OutgoingTransfer[]>();
  for (const row of rows) bySend.set(row.transactionId!, [...(bySend.get(row.transactionId!) ?? []), row]);
  for (const [transactionId, transfers] of bySend) {
    const debits: LateDebits = new Map();
    for (const row of transfers) debits.set(row.assetId, (debits.get(row.assetId) ?? 0n) + BigInt(row.amount) + BigInt(row.fee));
    await recordMinedAfterFailure(em, transactionId, transfers[0]!.txid, place, debits);
  }
}

/**
 * The platform's sends among these transaction hashes. Every hash the platform hands to a node must be
 * found here (a send's is stored when it is signed, before its bytes leave; so is a replacement's, a
 * speed-up or cancel of a send, which is that send's), or scanning takes its transaction for a spend
 * the platform did not make and debits it a second time.
 */
async function platformSends(em: EntityManager, scope: ChainEnvironment, txids: string[]): Promise<{ id: string; txHash: string; organizationId: string }[]> {
  const sends = await em.find(OutgoingTransaction, { chain: scope.chain, environment: scope.environment, txHash: { $in: txids } }, { fields: ['id', 'txHash', 'organization'] });
  const replacements = await em.find(TransactionReplacement, { environment: scope.environment, transaction: { chain: scope.chain }, txHash: { $in: txids } }, { fields: ['txHash', 'organization', 'transaction'] });
  return [
    ...sends.map((send) => ({ id: send.id, txHash: send.txHash!, organizationId: send.organization.id })),
    ...replacements.map((replacement) => ({ id: replacement.transaction.id, txHash: replacement.txHash!, organizationId: replacement.organization.id })),
  ];
}

/**
 * Account chains: each transfer from a custody address (value or token), and the fee each
 * transaction it signed paid, carried by its native transfer or, when it has none, by a row at
 * position `fee` of amount 0 (a token transfer, a contract call, a reverted call).
 */
async function accountSpends(em: EntityManager, scope: ChainEnvironment, block: ObservedBlock): Promise<SeenSpend[]> {
  const known = new Set(ASSETS.filter((asset) => asset.chain === scope.chain).map((asset) => asset.id));
  const canonical = (address: string | null) => (address === null ? null : canonicalAddress(scope.chain, scope.environment, address));
  const senders = new Set([...block.transfers.map((transfer) => canonical(transfer.from)), ...block.payments.map((payment) => canonical(payment.from))].filter((address) => address !== null));
  if (senders.size === 0) return [];
  const custody = await custodyAddresses(em, scope, [...senders]);
  if (custody.size === 0) return [];
  const native = findChain(scope.chain).nativeAssetId;
  const spends: SeenSpend[] = [];
  for (const transfer of block.transfers) {
    const address = custody.get(canonical(transfer.from) ?? '');
    if (!address || transfer.amount <= 0n || !known.has(transfer.assetId)) continue;
    spends.push({ txid: transfer.txid, position: transfer.position, address, assetId: transfer.assetId, amount: transfer.amount, fee: 0n, to: canonical(transfer.to) ?? transfer.to });
  }
  for (const payment of block.payments) {
    const address = custody.get(canonical(payment.from) ?? '');
    if (!address || payment.fee <= 0n) continue;
    const carrier = spends.find((spend) => spend.txid === payment.txid && spend.address === address && spend.assetId === native);
    if (carrier) carrier.fee += payment.fee;
    else spends.push({ txid: payment.txid, position: 'fee', address, assetId: native, amount: 0n, fee: payment.fee, to: null });
  }
  return spends;
}

/** Bitcoin: each output of a custody wallet (a deposit or a change the platform recorded) an input of the block spends, its whole amount. */
async function spentOutputs(em: EntityManager, scope: ChainEnvironment, block: ObservedBlock): Promise<SeenSpend[]> {
  if (block.inputs.length === 0) return [];
  // A block spends thousands of outputs: matched as two arrays, one statement whatever their number.
  const ids = await em.execute<{ id: string }[]>(
    `select o.id from wallet_outputs o join unnest(?::text[], ?::int[]) as spent(txid, vout) on o.txid = spent.txid and o.vout = spent.vout where o.environment = ?`,
    [`{${block.inputs.map((input) => input.spends.txid.toLowerCase()).join(',')}}`, `{${block.inputs.map((input) => input.spends.vout).join(',')}}`, scope.environment],
  );
  if (ids.length === 0) return [];
  const outputs = await em.find(WalletOutput, { id: { $in: ids.map((row) => row.id) } }, { populate: ['address', 'wallet'] });
  const byOutpoint = new Map(outputs.map((output) => [`${output.txid}:${output.vout}`, output]));
  return block.inputs.flatMap((input) => {
    const outpoint = `${input.spends.txid.toLowerCase()}:${input.spends.vout}`;
    const output = byOutpoint.get(outpoint);
    return output ? [{ txid: input.txid, position: `in:${outpoint}`, address: output.address, assetId: findChain(scope.chain).nativeAssetId, amount: BigInt(output.amount), fee: 0n, to: null }] : [];
  });
}

/** The custody addresses among `addresses` (canonical forms) in the environment, keyed by address, with their wallets. */
async function custodyAddresses(em: EntityManager, scope: ChainEnvironment, addresses: string[]): Promise<Map<string, Address>> {
  const network = networkFor(findChain(scope.chain), scope.environment);
  const rows = await em.find(Address, { chain: scope.chain, network, address: { $in: addresses }, wallet: { environment: scope.environment } }, { populate: ['wallet'] });
  return new Map(rows.map((row) => [row.address, row]));
}

/**
 * Inserts the transfer once; the first time, debits an unexpected one and announces it. Seen again
 * (a reorganisation mined it in another block): only its block moves, and an unexpected one's
 * debit leaves suspense.
 */
async function recordOne(
  em: EntityManager,
  scope: ChainEnvironment,
  spend: SeenSpend,
  block: BlockPlace & ReturnType<typeof provenanceOf>,
  transactionId: string | null,
  unexpected: boolean,
): Promise<OutgoingTransfer | null> {
  const organizationId = spend.address.wallet.organization.id;
  const [written] = await em.execute<{ id: string; inserted: boolean; unexpected: boolean; reorganisations: number }[]>(
    `insert into outgoing_transfers (id, organization_id, environment, wallet_id, address_id, chain, network, asset_id, amount, fee, txid, position,
       from_address, to_address, block_height, block_hash, transaction_id, unexpected, payer, payer_nonce, recent_blockhash, created_at)
     values (gen_random_uuid(), ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, now())
     on conflict (organization_id, environment, chain, txid, position) do update set block_height = excluded.block_height, block_hash = excluded.block_hash
     returning id, (xmax = 0) as inserted, unexpected, reorganisations`,
    [
      organizationId,
      scope.environment,
      spend.address.wallet.id,
      spend.address.id,
      scope.chain,
      networkFor(findChain(scope.chain), scope.environment),
      spend.assetId,
      spend.amount.toString(),
      spend.fee.toString(),
      spend.txid,
      spend.position,
      spend.address.address,
      spend.to,
      block.height,
      block.hash,
      transactionId,
      unexpected,
      block.payer,
      block.payerNonce,
      block.recentBlockhash,
    ],
  );
  // xmax is 0 only on a row this statement inserted, not on one it updated.
  if (!written?.inserted) {
    // Placed again after a reorganisation took its block: what it debited is proven, and leaves suspense.
    if (written?.unexpected && written.reorganisations > 0) await placeSpendAgain(em, await em.findOneOrFail(OutgoingTransfer, { id: written.id }, { refresh: true }), spend.fee);
    return null;
  }
  const row = await em.findOneOrFail(OutgoingTransfer, { id: written.id }, { refresh: true });
  if (row.unexpected) {
    await debitUnexpectedSpend(em, row, row.id, BigInt(row.amount) + BigInt(row.fee));
    if (row.chain === 'bitcoin') await markOutputSpent(em, row);
  }
  if (BigInt(row.amount) > 0n) await announce(em, row);
  return row;
}

/**
 * The chain says the address paid what the platform did not send: the ledger follows, one
 * `unexpected_spend` entry on the address (the wallet on Bitcoin) per transfer. The fee only ever
 * rides on a native-asset row, so the entry covers both.
 */
async function debitUnexpectedSpend(em: EntityManager, row: OutgoingTransfer, referenceId: string, amount: bigint): Promise<void> {
  await postCustodyEntry(em, {
    walletId: row.wallet.id,
    addressId: row.chain === 'bitcoin' ? null : row.address.id,
    assetId: row.assetId,
    kind: 'unexpected_spend',
    reference: { type: 'outgoing_transfer', id: referenceId },
    balance: -amount,
  });
}

/**
 * An unexpected spend a reorganisation had taken off the chain, in a block of the new chain: the
 * round's debit leaves suspense as it entered, then the ledger follows what the new block charged
 * (the same bytes pay the new block's base fee), under the round's reference.
 */
async function placeSpendAgain(em: EntityManager, row: OutgoingTransfer, feeNow: bigint): Promise<void> {
  await releaseReplacedSpend(em, row);
  const difference = feeNow - BigInt(row.fee);
  if (difference === 0n) return;
  await debitUnexpectedSpend(em, row, `${row.id}#${row.reorganisations}`, difference);
  row.fee = feeNow.toString();
  await em.flush();
}

/**
 * An output spent by a transaction not the platform's can never be selected again. One a send of
 * ours has locked stays its send's: that spend is the send's proof of loss (proofOfLoss reads the
 * send's locked inputs), and the send's release then marks it spent (releaseOutputs).
 */
async function markOutputSpent(em: EntityManager, row: OutgoingTransfer): Promise<void> {
  const [txid, vout] = row.position.slice('in:'.length).split(':');
  await em.execute(`update wallet_outputs set status = 'spent', updated_at = now() where environment = ? and txid = ? and vout = ? and status in ('available', 'unconfirmed')`, [
    row.environment,
    txid,
    Number(vout),
  ]);
}

/** `outgoing_native_tx` or `outgoing_token_tx` to the organization's endpoints and its subscriptions watching the address, once per transfer. */
async function announce(em: EntityManager, row: OutgoingTransfer): Promise<void> {
  const type = assetById(row.assetId).type === 'native' ? 'outgoing_native_tx' : 'outgoing_token_tx';
  const subscriptions = await subscriptionsOn(em, row, [row.fromAddress], row.organization.id);
  await emit(em, {
    organizationId: row.organization.id,
    environment: row.environment,
    type,
    data: presentOutgoingTransfer(row),
    destinations: subscriptions.map((subscription) => ({ kind: 'subscription' as const, id: subscription.id })),
    dedupeKey: `${type}:${row.chain}:${row.txid}:${row.position}`,
  });
}

/**
 * One `wallet.unexpected_spend` per wallet and transaction the platform did not make, with what was
 * debited per asset (amounts and the fee) and the transfers it was seen as. A transaction the platform
 * only relayed (a sponsored broadcast of a client's signature) names its sponsorship.
 */
async function raiseUnexpectedSpends(em: EntityManager, scope: ChainEnvironment, rows: OutgoingTransfer[]): Promise<void> {
  if (rows.length === 0) return;
  const sponsorships = await em.find(Sponsorship, { environment: scope.environment, chain: scope.chain, txHash: { $in: [...new Set(rows.map((row) => row.txid))] } }, { fields: ['id', 'txHash'] });
  const groups = new Map<string, OutgoingTransfer[]>();
  for (const row of rows) groups.set(`${row.wallet.id}:${row.txid}`, [...(groups.get(`${row.wallet.id}:${row.txid}`) ?? []), row]);
  for (const group of groups.values()) {
    const first = group[0]!;
    const debited = new Map<string, bigint>();
    for (const row of group) debited.set(row.assetId, (debited.get(row.assetId) ?? 0n) + BigInt(row.amount) + BigInt(row.fee));
    await emit(em, {
      organizationId: first.organization.id,
      environment: first.environment,
      type: 'wallet.unexpected_spend',
      data: {
        wallet_id: first.wallet.id,
        chain: first.chain,
        network: first.network,
        tx_hash: first.txid,
        block_height: first.blockHeight,
        block_hash: first.blockHash,
        sponsorship_id: sponsorships.find((sponsorship) => sponsorship.txHash === first.txid)?.id ?? null,
        debits: presentAssetAmounts(debited),
        transfers: group.map(presentOutgoingTransfer),
      },
      dedupeKey: `wallet.unexpected_spend:${first.chain}:${first.txid}:${first.wallet.id}`,
    });
  }
}

/** Amounts per asset (base units) as events carry them: display and base units, exact strings. */
export const presentAssetAmounts = (amounts: Map<string, bigint>) =>
  [...amounts].map(([assetId, amount]) => ({ asset: assetById(assetId).symbol, asset_id: assetId, amount: toDisplay(amount.toString(), assetById(assetId).decimals), amount_raw: amount.toString() }));

/** The event payload of an outgoing transfer: amounts as exact strings, display and base units. */
export function presentOutgoingTransfer(row: OutgoingTransfer) {
  const asset = assetById(row.assetId);
  const native = assetById(findChain(row.chain).nativeAssetId);
  return {
    id: row.id,
    object: 'outgoing_transfer' as const,
    wallet_id: row.wallet.id,
    address_id: row.address.id,
    chain: row.chain,
    network: row.network,
    asset: asset.symbol,
    asset_id: asset.id,
    amount: toDisplay(row.amount, asset.decimals),
    amount_raw: row.amount,
    fee: toDisplay(row.fee, native.decimals),
    fee_raw: row.fee,
    from_address: row.fromAddress,
    to_address: row.toAddress ?? null,
    tx_hash: row.txid,
    position: row.position,
    block_height: row.blockHeight,
    block_hash: row.blockHash,
    transaction_id: row.transactionId ?? null,
    unexpected: row.unexpected,
    created_at: iso(row.createdAt),
  };
}
