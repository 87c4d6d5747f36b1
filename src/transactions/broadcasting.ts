import type { EntityManager } from '@mikro-orm/postgresql';
/**
 * The broadcast step of a send: its signed bytes handed to the node, and what a refusal proves
 * (a send never held by a node fails; one that may be held fails only on proof it can never be mined).
 */
import { NodeUnavailableError, TransactionRejectedError, type ChainProvider } from '../chains/provider';
import { OutgoingTransaction, WalletOutput } from './entities';
import { anyCandidateKnown, candidatesOf, FINISHED, lockedRow, providerOf, type LifecycleDeps, type StepOutcome } from './lifecycle';
import { announce, failTransaction } from './settlement';

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
  /** Bitcoin: the send whose change this one spends, proven never to be mined (so this one never will be). */
  changeOf?: string;
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
export async function proofOfLoss(deps: Pick<LifecycleDeps, 'em'>, provider: ChainProvider, transaction: OutgoingTransaction): Promise<ProofOfLoss | null> {
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
    } else {
      const orphan = await changeOfLostSend(deps.em(), inputs);
      if (orphan) {
        const message = `Its input ${orphan.txid}:${orphan.vout} is the change of send ${orphan.createdBy!.id}, which a reorganisation took and the chain proves will never be mined: this send can never be mined.`;
        proof = { reason: 'inputs_spent', message, changeOf: orphan.createdBy!.id };
      }
    }
  }
  if (provider.validityPassed && transaction.signedTransaction && (await provider.validityPassed(transaction.signedTransaction))) {
    proof = { reason: 'expired', message: "The send's recent blockhash expired before any block included it: it can never be mined." };
  }
  if (!proof) return null;
  return (await anyCandidateKnown(provider, await candidatesOf(deps.em(), transaction))) ? null : proof;
}

/**
 * Bitcoin: an input that is the change of a settled send a reorganisation took, whose loss the chain
 * proves (src/transactions/reorged-out.ts records where it was first seen): that output will never exist.
 */
async function changeOfLostSend(em: EntityManager, inputs: WalletOutput[]): Promise<WalletOutput | undefined> {
  const creators = inputs.filter((input) => input.origin === 'change' && input.createdBy).map((input) => input.createdBy!.id);
  if (creators.length === 0) return undefined;
  const lost = new Set((await em.find(OutgoingTransaction, { id: { $in: creators }, blockHash: null, lossSeenAtHeight: { $ne: null } }, { fields: ['id'] })).map((row) => row.id));
  return inputs.find((input) => input.createdBy && lost.has(input.createdBy.id));
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
export async function markBroadcast(deps: LifecycleDeps, transactionId: string): Promise<void> {
  await deps.transaction(async (em) => {
    const transaction = await lockedRow(em, transactionId);
    if (transaction.status !== 'signed') return;
    transaction.status = 'broadcast';
    transaction.broadcastAt ??= new Date();
    await announce(em, transaction, 'transaction.broadcast');
  });
}
