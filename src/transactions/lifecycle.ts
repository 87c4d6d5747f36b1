import { LockMode } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { assetById, type ChainId } from '../catalogue/service';
import type { ChainNodes } from '../chains/nodes';
import type { Config } from '../config';
import { NodeUnavailableError, TransactionRejectedError, type ChainProvider } from '../chains/provider';
import { signTransfer, type FeeTerms, type TransferToSign } from '../chains/transfers';
import { Address } from '../custody/entities';
import { postCustodyEntries, type CustodyEntry } from '../custody/journal';
import { keyLocation } from '../custody/service';
import { emit } from '../events/service';
import type { EventType } from '../events/event-types';
import type { KeyService } from '../keys/service';
import type { StoredFeeTerms } from '../movements/fee-terms';
import { OutgoingTransaction, TransactionReplacement, WalletOutput, type TransactionStatus } from './entities';
import { nativeAssetOf, presentTransaction } from './service';
import { recordChange, releaseOutputs, settleOutputs } from './wallet-outputs';
import { lockingOnlyItsRow } from '../db/row-lock';

/**
 * What the `transaction-<id>` workflow's activities do, one function each. Every step is
 * idempotent and decided under the transaction's row lock, so a retried activity, a restarted
 * worker or the reconciler's second run never signs twice, debits twice or releases twice.
 */

export interface LifecycleDeps {
  config: Config;
  chains: ChainNodes;
  keys: KeyService;
  /** A fresh EntityManager. */
  em: () => EntityManager;
  /** Runs `work` in a database transaction whose recorded starts (event deliveries) fire after commit. */
  transaction: <T>(work: (em: EntityManager) => Promise<T>) => Promise<T>;
  /** A settled send debited the wallet, in `em`'s transaction: a gas station's wallet is assessed again (gas-stations armRefillForWallet). */
  walletDebited: (em: EntityManager, walletId: string) => Promise<void>;
}

/**
 * Where a send stands once a step is done; crosses the workflow boundary. `replace`: unmined, and a
 * replacement waits to be signed and broadcast (asked for, or an automatic bump is due).
 */
export type StepOutcome = 'signed' | 'accepted' | 'unknown' | 'waiting' | 'missing' | 'settle' | 'replace' | TransactionStatus;

export const FINISHED: readonly TransactionStatus[] = ['confirmed', 'failed'];
/** Chains whose sends can be replaced at a higher fee: Ethereum by the same nonce, Bitcoin by BIP-125 on the same inputs. */
export const REPLACEABLE_CHAINS: readonly ChainId[] = ['ethereum', 'bitcoin'];

export const providerOf = (deps: LifecycleDeps, transaction: OutgoingTransaction): Promise<ChainProvider> => deps.chains.provider(transaction.chain, transaction.environment);

export const lockedRow = (em: EntityManager, transactionId: string) =>
  em.findOneOrFail(OutgoingTransaction, { id: transactionId }, { ...lockingOnlyItsRow(em, OutgoingTransaction), populate: ['fromAddress', 'wallet'] });

/** One signed form of a send the chain may mine: the original, or a replacement (same nonce, higher fee). */
interface Candidate {
  txHash: string;
  raw: string;
  replacement: TransactionReplacement | null;
}

/**
 * What the chain may mine for a send, newest first: its signed replacements no node refused, then
 * its own bytes. Only one can be mined (they share a nonce), so the send follows all of them.
 */
async function candidatesOf(em: EntityManager, transaction: OutgoingTransaction): Promise<Candidate[]> {
  const replacements = await em.find(TransactionReplacement, { transaction: transaction.id, txHash: { $ne: null }, status: { $ne: 'refused' } }, { orderBy: { createdAt: 'desc' } });
  const candidates: Candidate[] = replacements.map((replacement) => ({ txHash: replacement.txHash!, raw: replacement.signedTransaction!, replacement }));
  // Once a replacement is mined the send carries its hash: the original is that candidate then.
  if (!candidates.some((candidate) => candidate.txHash === transaction.txHash)) candidates.push({ txHash: transaction.txHash!, raw: transaction.signedTransaction!, replacement: null });
  return candidates;
}

const anyCandidateKnown = async (provider: ChainProvider, candidates: Candidate[]): Promise<boolean> => {
  for (const candidate of candidates) if ((await provider.transactionStatus(candidate.txHash)).state !== 'unknown') return true;
  return false;
};

export const feeTermsOf = (terms: StoredFeeTerms): FeeTerms => {
  switch (terms.model) {
    case 'eip1559':
      return { model: 'eip1559', gasLimit: BigInt(terms.gasLimit), maxFeePerGas: BigInt(terms.maxFeePerGas), maxPriorityFeePerGas: BigInt(terms.maxPriorityFeePerGas) };
    case 'per_byte':
      return { model: 'per_byte', satPerVbyte: BigInt(terms.satPerVbyte) };
    case 'flat':
      return { model: 'flat', fee: BigInt(terms.fee) };
  }
};

/**
 * Builds and signs the send once and stores the signed bytes with their hash before anything is
 * broadcast: every later broadcast sends these very bytes, so a retry can never spend twice.
 * Ethereum takes its nonce here, under the sending address's row lock: the lowest from the node's
 * pending count that none of the platform's live sends from the address holds.
 */
export async function signTransaction(deps: LifecycleDeps, transactionId: string): Promise<StepOutcome> {
  // What the node says is read before any row is locked: the devnet answers from this same database,
  // and a send holding a lock while it waits for a second connection could starve the pool.
  const unlocked = await deps.em().findOneOrFail(OutgoingTransaction, { id: transactionId }, { populate: ['fromAddress'] });
  if (unlocked.signedTransaction) return 'signed';
  if (FINISHED.includes(unlocked.status)) return unlocked.status;
  const provider = await providerOf(deps, unlocked);
  const node = {
    // Tron and Solana transactions name a recent block, which also bounds how long they can be broadcast.
    recentBlock: provider.recentBlock ? await provider.recentBlock() : undefined,
    chainId: unlocked.chain === 'ethereum' ? (await provider.identifyNetwork()).chainId : undefined,
    pendingNonce: unlocked.chain === 'ethereum' ? (await provider.nonces!(unlocked.fromAddress.address)).pending : undefined,
  };
  return deps.transaction(async (em) => {
    const transaction = await lockedRow(em, transactionId);
    if (transaction.signedTransaction) return 'signed';
    if (FINISHED.includes(transaction.status)) return transaction.status;
    const from = transaction.fromAddress;
    const asset = assetById(transaction.assetId);
    const transfer: TransferToSign = {
      chain: transaction.chain,
      testnet: transaction.environment === 'sandbox',
      from: from.address,
      to: transaction.toAddress,
      assetId: asset.id,
      amount: BigInt(transaction.recipientAmount),
      fee: feeTermsOf(transaction.feeTerms),
      reference: transaction.id,
      ...(node.recentBlock ? { recentBlock: node.recentBlock } : {}),
    };
    if (asset.type !== 'native') {
      const token = provider.tokenAddress(asset.id);
      if (!token) throw new Error(`no ${asset.id} contract is configured for ${transaction.chain} ${transaction.environment}`);
      transfer.tokenAddress = token;
    }
    if (transaction.chain === 'ethereum') {
      // Serializes nonce picks of one address. FOR NO KEY UPDATE, not FOR UPDATE: the journal entries and balance rows
      // that reference the address take key-share locks, which FOR UPDATE would queue behind (and deadlock with sends).
      await em.execute(`select id from addresses where id = ? for no key update`, [from.id]);
      // The lowest nonce from the node's pending count that no live send of ours holds: past our signed sends the
      // node has not seen yet, and into the gap a refused send left, without which those after it would never be mined.
      const [free] = await em.execute<{ nonce: string }[]>(
        `select min(candidate)::text as nonce from (
           select ?::bigint as candidate
           union all select nonce + 1 from transactions where from_address_id = ? and nonce is not null and status <> 'failed'
         ) candidates
         where candidate >= ? and not exists (
           select 1 from transactions held where held.from_address_id = ? and held.nonce = candidate and held.status <> 'failed')`,
        [node.pendingNonce!.toString(), from.id, node.pendingNonce!.toString(), from.id],
      );
      const nonce = BigInt(free!.nonce);
      transfer.ethereum = { chainId: node.chainId!, nonce };
      transaction.nonce = nonce.toString();
    }
    let signers: Address[] = [from];
    let change: { address: Address; amount: bigint } | null = null;
    if (transaction.chain === 'bitcoin') {
      const spent = await bitcoinInputsOf(em, transaction);
      signers = spent.signers;
      const changeAmount = spent.total - BigInt(transaction.recipientAmount) - BigInt(transaction.feeLimit);
      if (changeAmount < 0n) throw new Error(`transaction ${transaction.id}: its inputs do not cover amount and fee`);
      if (changeAmount > 0n) change = { address: from, amount: changeAmount };
      transfer.bitcoin = { inputs: spent.inputs, ...(change ? { change: { address: change.address.address, amount: change.amount } } : {}) };
    }

    const signed = await signWithKeysOf(deps, em, transaction, signers, transfer);
    transaction.signedTransaction = signed.raw;
    transaction.txHash = signed.txid;
    transaction.status = 'signed';
    // The change output (vout 1, after the recipient's) is the wallet's own, never a deposit.
    if (change) await recordChange(em, transaction, { txid: signed.txid, vout: 1, amount: change.amount, address: change.address });
    return 'signed';
  });
}

/**
 * The outputs a Bitcoin send locked, as the inputs of its transfer (the original and every
 * replacement spend exactly these): their total and the addresses whose keys sign them.
 */
export async function bitcoinInputsOf(em: EntityManager, transaction: OutgoingTransaction) {
  const outputs = await em.find(WalletOutput, { spentBy: transaction.id }, { populate: ['address'], orderBy: { txid: 'asc', vout: 'asc' } });
  const signers = [...new Map(outputs.map((output) => [output.address.id, output.address])).values()];
  return {
    signers,
    total: outputs.reduce((sum, output) => sum + BigInt(output.amount), 0n),
    inputs: outputs.map((output) => ({ txid: output.txid, vout: output.vout, amount: BigInt(output.amount), address: output.address.address, key: signers.findIndex((a) => a.id === output.address.id) })),
  };
}

/** Signs `transfer` with the keys of the send's wallet at `signers` (its addresses). */
export function signWithKeysOf(deps: LifecycleDeps, em: EntityManager, transaction: OutgoingTransaction, signers: Address[], transfer: TransferToSign) {
  const wallet = transaction.wallet;
  return deps.keys.withKeys(
    em,
    transaction.organization.id,
    signers.map((address) => keyLocation(wallet, address.format, address.addressIndex)),
    (keys) => {
      // A key that does not give the stored address means a wrong seed or master key: never sign with it.
      keys.forEach((key, index) => {
        if (key.address !== signers[index]!.address) throw new Error(`address ${signers[index]!.id} does not match its derived key`);
      });
      return signTransfer(transfer, keys);
    },
  );
}

/**
 * Sends the stored bytes to the node. Accepted (or already there): `accepted`. The node could not
 * be reached or did not answer: `unknown`, and nothing is released. Refused while the chain does not
 * know the transaction: at the bytes' first handing, no node ever held them and none will be given
 * them again, so it fails and the lock is released (save a nonce refused as too high while the sends
 * before it are under way: it waits). Once the
 * bytes may be in a node (an earlier handing accepted, unanswered or interrupted), a refusal proves
 * nothing (the node may have evicted them while another still has them): the send stays pending,
 * broadcast again and re-queried, and fails only on proof that it can never be mined (`proofOfLoss`).
 */
export async function broadcastTransaction(deps: LifecycleDeps, transactionId: string): Promise<StepOutcome> {
  const transaction = await deps.em().findOneOrFail(OutgoingTransaction, { id: transactionId }, { populate: ['fromAddress'] });
  if (FINISHED.includes(transaction.status)) return transaction.status;
  // Signed, or broadcast but no longer known to the node (dropped, reorganised out): the same bytes (again).
  if (transaction.status === 'confirming') return 'accepted';
  const provider = await providerOf(deps, transaction);
  // Recorded before the bytes leave, so a crash or a lost answer leaves them counted as possibly in a node.
  const handedBefore = transaction.broadcastAt != null;
  if (!handedBefore) await recordHanding(deps, transactionId, new Date());
  // The newest candidate: a replacement outbids the bytes it replaces, which a node would refuse now.
  const candidates = await candidatesOf(deps.em(), transaction);
  try {
    await provider.broadcast(candidates[0]!.raw);
  } catch (error) {
    if (error instanceof NodeUnavailableError) return 'unknown';
    if (!(error instanceof TransactionRejectedError)) throw error;
    let known: boolean;
    try {
      known = await anyCandidateKnown(provider, candidates);
    } catch (statusError) {
      if (statusError instanceof NodeUnavailableError) return 'unknown';
      throw statusError;
    }
    if (!known) {
      if (handedBefore) {
        const loss = await proofOfLoss(deps, provider, transaction);
        if (!loss) return 'unknown';
        await failTransaction(deps, transactionId, loss.reason, loss.message, loss.spentInputs);
        return 'failed';
      }
      await recordHanding(deps, transactionId, null); // refused at its first handing: no node ever held the bytes
      if (error.reason === 'nonce_too_high' && (await earlierNoncesOnTheirWay(deps, provider, transaction))) return 'unknown';
      await failTransaction(deps, transactionId, error.reason, error.message);
      return 'failed';
    }
  }
  await markBroadcast(deps, transactionId);
  return 'accepted';
}

/** `broadcastAt` of a send still `signed`: when its bytes were first handed to a node, or null while no node can hold them. */
async function recordHanding(deps: LifecycleDeps, transactionId: string, at: Date | null): Promise<void> {
  await deps.em().nativeUpdate(OutgoingTransaction, { id: transactionId, status: 'signed' }, { broadcastAt: at });
}

/** Why a send the chain does not know can never be mined, and which of its Bitcoin inputs a confirmed conflict spent. */
interface ProofOfLoss {
  reason: 'nonce_consumed' | 'inputs_spent' | 'expired';
  message: string;
  spentInputs?: string[];
}

/**
 * The proof that a send once handed to a node can never be mined, or null. Ethereum: the sender's
 * mined nonce count is past the send's nonce (another transaction consumed it). Bitcoin: one of its
 * inputs is spent by a mined transaction. Solana (solana-rpc): its recent blockhash expired at the
 * finalized state. Either way the send's hashes (its replacements' too) are asked again after the
 * proof is read, so the send mined meanwhile (which consumes its nonce and spends its inputs) is not
 * taken for a conflict. Tron would prove by its expiration, but the devnet (its only provider)
 * enforces none, and neither does the devnet's Solana: a send there is never proven lost once handed.
 */
async function proofOfLoss(deps: LifecycleDeps, provider: ChainProvider, transaction: OutgoingTransaction): Promise<ProofOfLoss | null> {
  let proof: ProofOfLoss | null = null;
  if (provider.nonces && transaction.nonce != null) {
    const { confirmed } = await provider.nonces(transaction.fromAddress.address);
    if (confirmed > BigInt(transaction.nonce)) {
      proof = { reason: 'nonce_consumed', message: `Another transaction was mined with this send's nonce ${transaction.nonce}: it can never be mined.` };
    }
  }
  if (provider.spentInChain) {
    const inputs = await deps.em().find(WalletOutput, { organization: transaction.organization, environment: transaction.environment, spentBy: transaction.id });
    const spent: WalletOutput[] = [];
    for (const input of inputs) if (await provider.spentInChain({ txid: input.txid, vout: input.vout })) spent.push(input);
    if (spent.length) {
      const outpoints = spent.map((input) => `${input.txid}:${input.vout}`);
      proof = { reason: 'inputs_spent', message: `A conflicting transaction spending ${outpoints.join(', ')} was mined: this send can never be mined.`, spentInputs: spent.map((input) => input.id) };
    }
  }
  if (provider.validityPassed && transaction.signedTransaction && (await provider.validityPassed(transaction.signedTransaction))) {
    proof = { reason: 'expired', message: "The send's recent blockhash expired before any block included it: it can never be mined." };
  }
  if (!proof) return null;
  return (await anyCandidateKnown(provider, await candidatesOf(deps.em(), transaction))) ? null : proof;
}

/**
 * Sends from one address are signed with consecutive nonces but broadcast by their own workflows,
 * so one can reach the node before its predecessor. Refused as too high, it waits while every
 * nonce between the node's next and its own belongs to a send of ours still under way; a gap
 * nobody will fill (a predecessor failed) means it can never be mined, and it fails.
 */
async function earlierNoncesOnTheirWay(deps: LifecycleDeps, provider: ChainProvider, transaction: OutgoingTransaction): Promise<boolean> {
  if (!provider.nonces || transaction.nonce == null) return false;
  const { pending } = await provider.nonces(transaction.fromAddress.address);
  const nonce = BigInt(transaction.nonce);
  if (pending >= nonce) return true;
  const [row] = await deps.em().execute<{ live: string }[]>(
    `select count(distinct nonce)::text as live from transactions
      where from_address_id = ? and nonce >= ? and nonce < ? and status in ('signed', 'broadcast', 'confirming')`,
    [transaction.fromAddress.id, pending.toString(), transaction.nonce],
  );
  return BigInt(row!.live) === nonce - pending;
}

/** signed -> broadcast, announced once. */
async function markBroadcast(deps: LifecycleDeps, transactionId: string): Promise<void> {
  await deps.transaction(async (em) => {
    const transaction = await lockedRow(em, transactionId);
    if (transaction.status !== 'signed') return;
    transaction.status = 'broadcast';
    transaction.broadcastAt ??= new Date();
    await announce(em, transaction, 'transaction.broadcast');
  });
}

/**
 * Where the signed transaction stands, asked for every candidate (the original and its
 * replacements): `settle` once one is mined at the confirmation count (also when it ran and
 * reverted: its fee was paid), `waiting` while pending or short of it, `missing` when the node
 * knows none (dropped, or reorganised out): the workflow broadcasts the newest again. `replace`
 * instead of `waiting` or `missing` when a replacement waits to be signed and broadcast.
 */
export async function checkTransaction(deps: LifecycleDeps, transactionId: string): Promise<StepOutcome> {
  const em = deps.em();
  const transaction = await em.findOneOrFail(OutgoingTransaction, { id: transactionId });
  if (FINISHED.includes(transaction.status)) return transaction.status;
  const provider = await providerOf(deps, transaction);
  let pending = false;
  let mined: { candidate: Candidate; status: Extract<Awaited<ReturnType<ChainProvider['transactionStatus']>>, { state: 'mined' }> } | null = null;
  for (const candidate of await candidatesOf(em, transaction)) {
    const status = await provider.transactionStatus(candidate.txHash);
    if (status.state === 'mined') {
      mined = { candidate, status };
      break;
    }
    if (status.state === 'pending') pending = true;
  }
  if (!mined && !pending) {
    if (transaction.status === 'confirming') {
      await deps.transaction(async (tx) => {
        const row = await lockedRow(tx, transactionId);
        if (row.status !== 'confirming') return;
        Object.assign(row, { status: 'broadcast', blockHeight: null, blockHash: null, confirmations: 0 });
      });
    }
    // A send the node dropped (evicted under a fee spike) is bumped as one it holds, unless it is proven
    // lost (its nonce consumed, its inputs spent by a conflict): the rebroadcast's refusal then fails it.
    if (transaction.status === 'signed' || !(await replacementDue(deps, provider, transaction))) return 'missing';
    await em.populate(transaction, ['fromAddress']);
    return (await proofOfLoss(deps, provider, transaction)) ? 'missing' : 'replace';
  }
  if (!mined) {
    if (transaction.status === 'signed') await markBroadcast(deps, transactionId);
    return (await replacementDue(deps, provider, transaction)) ? 'replace' : 'waiting';
  }
  const { candidate, status } = mined;
  await deps.transaction(async (tx) => {
    const row = await lockedRow(tx, transactionId);
    if (FINISHED.includes(row.status)) return;
    if (row.status === 'signed') {
      Object.assign(row, { status: 'broadcast', broadcastAt: row.broadcastAt ?? new Date() });
      await announce(tx, row, 'transaction.broadcast');
    }
    if (candidate.replacement && row.txHash !== candidate.txHash) settleOnReplacement(row, await tx.findOneOrFail(TransactionReplacement, { id: candidate.replacement.id }));
    Object.assign(row, { status: 'confirming', blockHeight: status.blockHeight, blockHash: status.blockHash, confirmations: status.confirmations });
    if (status.fee !== null) row.fee = status.fee.toString();
    // Mined again after a reorganisation, the outcome is the new block's: a failure an abandoned block recorded is cleared.
    row.failureReason = minedOutcome(status.succeeded, candidate.replacement?.kind === 'cancel');
  });
  return status.confirmations >= transaction.requiredConfirmations ? 'settle' : 'waiting';
}

/**
 * The send follows the replacement the chain mined: its hash, bytes and fee terms become the
 * send's, and what the recipient gets is the replacement's (nothing for a cancel, whose outcome
 * `cancelled` checkTransaction records).
 */
function settleOnReplacement(row: OutgoingTransaction, replacement: TransactionReplacement): void {
  Object.assign(row, {
    txHash: replacement.txHash,
    signedTransaction: replacement.signedTransaction,
    feeTerms: replacement.feeTerms,
    feeLimit: replacement.feeLimit,
    recipientAmount: replacement.recipientAmount,
    // A Bitcoin transaction pays exactly the fee it was signed with.
    ...(replacement.feeTerms.model === 'per_byte' ? { fee: replacement.feeLimit } : {}),
  });
  replacement.status = 'mined';
}

/** A mined send's failure reason: its call reverted, or it was cancelled (its cancel mined: nothing sent, the fee paid); else none. */
const minedOutcome = (succeeded: boolean, cancelled: boolean) => (!succeeded ? 'reverted' : cancelled ? 'cancelled' : null);

const FAILED_WHEN_MINED: Record<string, string> = {
  reverted: 'The transaction was mined but its call reverted: the fee was paid, nothing was sent.',
  cancelled: 'Cancelled: a zero-value transfer back to the sending address was mined with its nonce; the fee was paid, nothing was sent.',
};

/**
 * Whether an unmined send should be replaced now: a replacement was asked for, or (Ethereum or
 * Bitcoin, not sponsored, FEE_BUMP_AFTER_BLOCKS set) FEE_BUMP_AFTER_BLOCKS blocks passed since its latest
 * candidate was first seen unmined (waiting, or dropped). That height is recorded here the first time.
 */
async function replacementDue(deps: LifecycleDeps, provider: ChainProvider, transaction: OutgoingTransaction): Promise<boolean> {
  const em = deps.em();
  if ((await em.count(TransactionReplacement, { transaction: transaction.id, status: 'requested' })) > 0) return true;
  const after = deps.config.FEE_BUMP_AFTER_BLOCKS;
  if (after === 0 || !REPLACEABLE_CHAINS.includes(transaction.chain) || transaction.sponsorshipId != null) return false;
  const { height } = await provider.tip();
  if (transaction.waitingSinceHeight == null) {
    await em.nativeUpdate(OutgoingTransaction, { id: transaction.id, waitingSinceHeight: null }, { waitingSinceHeight: height });
    return false;
  }
  return height - transaction.waitingSinceHeight >= after;
}

/**
 * Settles a send mined at its confirmation count, once: the wallet is debited what left it (the
 * recipient's amount, unless the call reverted, and the fee actually paid) and its lock released
 * in full, so the part of the fee limit not used returns to the available balance.
 */
export async function settleTransaction(deps: LifecycleDeps, transactionId: string): Promise<TransactionStatus> {
  return deps.transaction(async (em) => {
    const transaction = await lockedRow(em, transactionId);
    if (FINISHED.includes(transaction.status)) return transaction.status;
    if (transaction.fee == null) throw new Error(`transaction ${transaction.id} is mined but its fee is not known yet`);
    await postCustodyEntries(em, [...lockReleases(transaction), ...(await replacementLockReleases(em, transaction)), ...debitEntries(transaction, debitsOf(transaction))]);
    if (transaction.chain === 'bitcoin') await settleOutputs(em, transaction.id, transaction.txHash!);
    await supersedeReplacements(em, transaction);
    await deps.walletDebited(em, transaction.wallet.id); // the wallet paid: if it is a gas station's, assess it again
    return recordOutcome(em, transaction);
  });
}

interface SendDebit {
  kind: 'send_debit' | 'fee_debit';
  assetId: string;
  amount: bigint;
}

/** What a mined send took from its wallet: the recipient's amount unless its call reverted, and the fee in the native asset. */
const debitsOf = (transaction: OutgoingTransaction): SendDebit[] => [
  { kind: 'send_debit', assetId: transaction.assetId, amount: transaction.failureReason === 'reverted' ? 0n : BigInt(transaction.recipientAmount) },
  { kind: 'fee_debit', assetId: nativeAssetOf(transaction).id, amount: BigInt(transaction.fee!) },
];

/** The entries that take `debits` (negative: give back) off the send's ledger, referencing its current settlement. */
function debitEntries(transaction: OutgoingTransaction, debits: SendDebit[]): CustodyEntry[] {
  const scope = { ...custodyScope(transaction), reference: { type: 'transaction', id: settlementOf(transaction) } };
  return debits.filter((debit) => debit.amount !== 0n).map((debit) => ({ ...scope, assetId: debit.assetId, kind: debit.kind, balance: -debit.amount }));
}

/** A mined send's status from its outcome (failed if its call reverted or it was cancelled, else confirmed), announced once per settlement. */
async function recordOutcome(em: EntityManager, transaction: OutgoingTransaction): Promise<TransactionStatus> {
  const now = new Date();
  const failureMessage = transaction.failureReason ? FAILED_WHEN_MINED[transaction.failureReason] : undefined;
  if (failureMessage) {
    Object.assign(transaction, { status: 'failed', failedAt: now, confirmedAt: null, failureMessage });
    await announce(em, transaction, 'transaction.failed');
    return 'failed';
  }
  Object.assign(transaction, { status: 'confirmed', confirmedAt: now, failedAt: null, failureMessage: null });
  await announce(em, transaction, 'transaction.confirmed');
  const asset = assetById(transaction.assetId);
  if (asset.symbol === 'USDC' || asset.symbol === 'USDT') {
    const data = await presentTransaction(em, transaction);
    await emit(em, {
      organizationId: transaction.organization.id,
      environment: transaction.environment,
      type: 'transfer.success',
      data: { ...data, transaction_id: transaction.id },
      dedupeKey: `transfer.success:${settlementOf(transaction)}`,
    });
  }
  return 'confirmed';
}

/** One settlement of a send: the send itself, and after each reorganisation that took its block away a new one (`<id>#<n>`). */
const settlementOf = (transaction: OutgoingTransaction) => (transaction.reorganisations ? `${transaction.id}#${transaction.reorganisations}` : transaction.id);

/**
 * A reorganisation replaced the blocks above `forkHeight`: the sends settled in them lose their
 * block (status, debit and lock stay as settled) until `resettleRemined` finds them mined again.
 */
export async function unplaceSettledSends(em: EntityManager, scope: { chain: OutgoingTransaction['chain']; environment: OutgoingTransaction['environment'] }, forkHeight: number): Promise<OutgoingTransaction[]> {
  const settled = await em.find(
    OutgoingTransaction,
    { chain: scope.chain, environment: scope.environment, status: { $in: [...FINISHED] }, blockHeight: { $gt: forkHeight } },
    { lockMode: LockMode.PESSIMISTIC_WRITE, refresh: true },
  );
  for (const transaction of settled) {
    Object.assign(transaction, { blockHeight: null, blockHash: null, confirmations: 0 });
    transaction.reorganisations += 1;
  }
  return settled;
}

/**
 * Settled sends a reorganisation took off the chain, mined again at their confirmation count: placed
 * in their new block, and where the outcome or the fee changed (a call that reverted in the
 * abandoned block succeeds in the new one, or the reverse) the status is the new outcome's, the
 * failure cleared or recorded, and the wallet's debit corrected by the difference. Those not mined
 * again (yet) are asked again at the next pass. Answers the sends re-settled.
 */
export async function resettleRemined(deps: Pick<LifecycleDeps, 'em' | 'transaction'>, provider: ChainProvider, scope: { chain: OutgoingTransaction['chain']; environment: OutgoingTransaction['environment'] }): Promise<OutgoingTransaction[]> {
  const unplaced = await deps.em().find(OutgoingTransaction, {
    chain: scope.chain,
    environment: scope.environment,
    blockHash: null,
    txHash: { $ne: null },
    $or: [{ status: 'confirmed' }, { status: 'failed', failureReason: { $in: ['reverted', 'cancelled'] } }],
  });
  const resettled: OutgoingTransaction[] = [];
  for (const candidate of unplaced) {
    const status = await provider.transactionStatus(candidate.txHash!);
    if (status.state !== 'mined' || status.confirmations < candidate.requiredConfirmations) continue;
    const done = await deps.transaction(async (em) => {
      const transaction = await lockedRow(em, candidate.id);
      if (transaction.blockHash != null || !FINISHED.includes(transaction.status)) return false;
      const before = debitsOf(transaction);
      const outcomeBefore = transaction.failureReason;
      Object.assign(transaction, { blockHeight: status.blockHeight, blockHash: status.blockHash, confirmations: status.confirmations });
      if (status.fee !== null) transaction.fee = status.fee.toString();
      transaction.failureReason = minedOutcome(status.succeeded, transaction.failureReason === 'cancelled');
      await postCustodyEntries(
        em,
        debitEntries(
          transaction,
          debitsOf(transaction).map((debit, index) => ({ ...debit, amount: debit.amount - before[index]!.amount })),
        ),
      );
      if (transaction.failureReason !== outcomeBefore) await recordOutcome(em, transaction);
      return true;
    });
    if (done) resettled.push(candidate);
  }
  return resettled;
}

/**
 * Fails a send that provably never reached the chain and never will: its lock (and Bitcoin outputs)
 * released, nothing debited, once. `spentInputs`: its inputs a conflicting mined transaction spent.
 */
export async function failTransaction(deps: LifecycleDeps, transactionId: string, reason: string, message: string, spentInputs: string[] = []): Promise<TransactionStatus> {
  return deps.transaction(async (em) => {
    const transaction = await lockedRow(em, transactionId);
    if (FINISHED.includes(transaction.status)) return transaction.status;
    await postCustodyEntries(em, [...lockReleases(transaction), ...(await replacementLockReleases(em, transaction))]);
    if (transaction.chain === 'bitcoin') await releaseOutputs(em, transaction.id, spentInputs);
    await supersedeReplacements(em, transaction);
    Object.assign(transaction, { status: 'failed', failedAt: new Date(), failureReason: reason, failureMessage: message });
    await announce(em, transaction, 'transaction.failed');
    return 'failed';
  });
}

/** A settled or failed send's replacements the chain did not mine: none will be followed again. */
async function supersedeReplacements(em: EntityManager, transaction: OutgoingTransaction): Promise<void> {
  await em.nativeUpdate(TransactionReplacement, { transaction: transaction.id, status: { $in: ['requested', 'broadcast'] } }, { status: 'superseded', updatedAt: new Date() });
}

/** The entries that take the send's lock off its ledger rows: of the asset sent, and of the native asset for the fee. */
function lockReleases(transaction: OutgoingTransaction): CustodyEntry[] {
  const native = nativeAssetOf(transaction);
  const releases =
    transaction.assetId === native.id
      ? [{ assetId: native.id, amount: BigInt(transaction.lockedAmount) + BigInt(transaction.lockedFee) }]
      : [
          { assetId: transaction.assetId, amount: BigInt(transaction.lockedAmount) },
          { assetId: native.id, amount: BigInt(transaction.lockedFee) },
        ];
  return releases.filter((release) => release.amount > 0n).map((release) => ({ ...custodyScope(transaction), assetId: release.assetId, kind: 'send_release', locked: -release.amount }));
}

/** The entries that take the extra fee each replacement locked off the ledger (under its own reference; one already released is skipped). */
async function replacementLockReleases(em: EntityManager, transaction: OutgoingTransaction): Promise<CustodyEntry[]> {
  const replacements = await em.find(TransactionReplacement, { transaction: transaction.id, lockedFee: { $ne: '0' } });
  return replacements.map((replacement) => replacementLockRelease(transaction, replacement));
}

/** The entry that takes a replacement's extra fee lock off the ledger. */
export const replacementLockRelease = (transaction: OutgoingTransaction, replacement: TransactionReplacement): CustodyEntry => ({
  ...replacementScope(transaction, replacement),
  assetId: nativeAssetOf(transaction).id,
  kind: 'send_release',
  locked: -BigInt(replacement.lockedFee),
});

/** A send's journal entries: its wallet, its sending address on account chains, the send as reference. */
function custodyScope(transaction: OutgoingTransaction) {
  return {
    walletId: transaction.wallet.id,
    addressId: transaction.chain === 'bitcoin' ? null : transaction.fromAddress.id,
    reference: { type: 'transaction', id: transaction.id },
  };
}

/** A replacement's extra fee lock and its release: the send's wallet and address, the replacement as reference. */
export const replacementScope = (transaction: OutgoingTransaction, replacement: TransactionReplacement) => ({
  ...custodyScope(transaction),
  reference: { type: 'transaction_replacement', id: replacement.id },
});

async function announce(em: EntityManager, transaction: OutgoingTransaction, type: EventType): Promise<void> {
  await em.flush();
  await emit(em, {
    organizationId: transaction.organization.id,
    environment: transaction.environment,
    type,
    data: await presentTransaction(em, transaction),
    dedupeKey: `${type}:${settlementOf(transaction)}`,
  });
}
