/** Reads of sends: one of the tenant's sends, and the Transaction resource as the API presents one send or a page. */
import type { EntityManager } from '@mikro-orm/postgresql';
import { assetById, findChain, type AssetInfo } from '../catalogue/service';
import { Address } from '../custody/entities';
import { readByColumns, readOneByColumns, readOneWithChildren } from '../db/lean';
import { errors } from '../shared/errors';
import { isUuid } from '../shared/ids';
import { toDisplay } from '../shared/money';
import { iso } from '../shared/time';
import { OutgoingTransaction, TransactionReplacement, WalletOutput } from './entities';
import { transactionWorkflowId } from './flows/transaction';

export async function findTransaction(em: EntityManager, tenant: { organizationId: string; environment: string }, id: string): Promise<OutgoingTransaction> {
  const transaction = isUuid(id)
    ? await em.findOne(OutgoingTransaction, { id, organization: tenant.organizationId, environment: tenant.environment as OutgoingTransaction['environment'] }, { populate: ['fromAddress'] })
    : null;
  if (!transaction) throw errors.notFound('transaction', id);
  return transaction;
}

/**
 * One of the tenant's sends as a GET presents it, read by prepared statements into detached copies
 * (src/db/lean.ts; never in an entity manager, so `em` may be the process's own): the send with its
 * replacements in one statement, its from-address in another, and a Bitcoin send's inputs in a third.
 * What `findTransaction` and `presentTransaction` give, without the ORM's query building and hydration.
 */
export async function readPresentedTransaction(em: EntityManager, tenant: { organizationId: string; environment: string }, id: string) {
  const read = isUuid(id)
    ? await readOneWithChildren(em, OutgoingTransaction, { id, organization: tenant.organizationId, environment: tenant.environment }, { entity: TransactionReplacement, parentKey: 'transaction' })
    : null;
  if (!read) throw errors.notFound('transaction', id);
  const { row: transaction, children: replacements } = read;
  const fromAddress = await readOneByColumns(em, Address, { id: transaction.fromAddress.id });
  if (!fromAddress) throw new Error(`send ${transaction.id}: its from-address ${transaction.fromAddress.id} is gone`);
  transaction.fromAddress = fromAddress;
  const outputs = transaction.chain === 'bitcoin' ? (await readByColumns(em, WalletOutput, { spentBy: transaction.id })).sort(byOutpoint) : [];
  return presentWithInputs(transaction, outputs, replacements.sort((a, b) => a.createdAt.getTime() - b.createdAt.getTime()));
}

/** The order `transactionPresenter` reads a send's inputs in (txid, then vout). */
const byOutpoint = (a: WalletOutput, b: WalletOutput) => (a.txid < b.txid ? -1 : a.txid > b.txid ? 1 : a.vout - b.vout);

/** The hash a send is known by: the candidate the chain mined, else its own. */
export const sendHash = (transaction: Pick<OutgoingTransaction, 'txHash' | 'minedTxHash'>): string | null => transaction.minedTxHash ?? transaction.txHash ?? null;

/** The Transaction resource, with `inputs_used` (Bitcoin: the outputs it locked or spent). */
export async function presentTransaction(em: EntityManager, transaction: OutgoingTransaction) {
  return (await transactionPresenter(em, [transaction]))(transaction);
}

function presentWithInputs(transaction: OutgoingTransaction, outputs: WalletOutput[], replacements: TransactionReplacement[]) {
  const asset = assetById(transaction.assetId);
  const native = nativeAssetOf(transaction);
  // Once a replacement is mined, what the send pays is that candidate's.
  const mined = replacements.find((replacement) => replacement.txHash != null && replacement.txHash === transaction.minedTxHash);
  const recipientAmount = mined?.recipientAmount ?? transaction.recipientAmount;
  const feeLimit = mined?.feeLimit ?? transaction.feeLimit;
  const display = (raw: string | null | undefined, decimals: number) => (raw == null ? null : toDisplay(raw, decimals));
  return {
    id: transaction.id,
    object: 'transaction' as const,
    wallet_id: transaction.wallet.id,
    chain: transaction.chain,
    network: transaction.network,
    asset: asset.symbol,
    asset_id: asset.id,
    from_address: transaction.fromAddress.address,
    to_address: transaction.toAddress,
    amount: toDisplay(transaction.amount, asset.decimals),
    amount_raw: transaction.amount,
    recipient_amount: toDisplay(recipientAmount, asset.decimals),
    recipient_amount_raw: recipientAmount,
    treat_as_gross_amount: transaction.gross,
    fee: display(transaction.fee, native.decimals),
    fee_raw: transaction.fee ?? null,
    fee_limit: toDisplay(feeLimit, native.decimals),
    fee_limit_raw: feeLimit,
    fee_asset_id: native.id,
    fee_level: transaction.feeLevel,
    fee_rate: transaction.feeRate ?? null,
    max_fee_rate: transaction.maxFeeRate ?? null,
    inputs: transaction.pinnedInputs?.map((input) => ({ txid: input.txid, vout: String(input.vout) })) ?? null,
    fill_fee_from_unselected: transaction.fillFeeFromUnselected,
    inputs_used: outputs.map((output) => ({ txid: output.txid, vout: String(output.vout), amount: toDisplay(output.amount, 8), amount_raw: output.amount })),
    nonce: transaction.nonce ?? null,
    replacements: replacements.map((replacement) => ({
      id: replacement.id,
      kind: replacement.kind,
      origin: replacement.origin,
      status: replacement.status,
      tx_hash: replacement.txHash ?? null,
      fee_limit: toDisplay(replacement.feeLimit, native.decimals),
      fee_limit_raw: replacement.feeLimit,
      policy_decision: replacement.policyDecision,
      failure_message: replacement.failureMessage ?? null,
      created_at: iso(replacement.createdAt),
      broadcast_at: replacement.broadcastAt ? iso(replacement.broadcastAt) : null,
    })),
    status: transaction.status,
    tx_hash: sendHash(transaction),
    block_height: transaction.blockHeight ?? null,
    confirmations: transaction.confirmations,
    required_confirmations: transaction.requiredConfirmations,
    note: transaction.note,
    sponsor: transaction.sponsorshipId != null,
    sponsorship_id: transaction.sponsorshipId ?? null,
    policy_decision: transaction.policyDecision,
    failure_reason: transaction.failureReason ?? null,
    failure_message: transaction.failureMessage ?? null,
    workflow_id: transactionWorkflowId(transaction.id),
    created_at: iso(transaction.createdAt),
    updated_at: iso(transaction.updatedAt),
    broadcast_at: transaction.broadcastAt ? iso(transaction.broadcastAt) : null,
    confirmed_at: transaction.confirmedAt ? iso(transaction.confirmedAt) : null,
    failed_at: transaction.failedAt ? iso(transaction.failedAt) : null,
    mined_after_failure_at: transaction.minedAfterFailureAt ? iso(transaction.minedAfterFailureAt) : null,
  };
}

/** The presenter of one page: the Bitcoin inputs and the replacements of all its transactions, one query each. */
export async function transactionPresenter(em: EntityManager, transactions: OutgoingTransaction[]) {
  const bitcoin = transactions.filter((transaction) => transaction.chain === 'bitcoin').map((transaction) => transaction.id);
  const outputs = bitcoin.length ? await em.find(WalletOutput, { spentBy: { $in: bitcoin } }, { orderBy: { txid: 'asc', vout: 'asc' } }) : [];
  const replaceable = transactions.filter((transaction) => transaction.chain === 'ethereum' || transaction.chain === 'bitcoin').map((transaction) => transaction.id);
  const replacements = replaceable.length ? await em.find(TransactionReplacement, { transaction: { $in: replaceable } }, { orderBy: { createdAt: 'asc' } }) : [];
  return (transaction: OutgoingTransaction) =>
    presentWithInputs(
      transaction,
      outputs.filter((output) => output.spentBy?.id === transaction.id),
      replacements.filter((replacement) => replacement.transaction.id === transaction.id),
    );
}

export const nativeAssetOf = (transaction: Pick<OutgoingTransaction, 'chain'>): AssetInfo => assetById(findChain(transaction.chain).nativeAssetId);
