/**
 * What the steps of a send share: the `transaction-<id>` workflow's activities, one function each,
 * live by stage in signing.ts, broadcasting.ts, checking.ts and settlement.ts. Every step is
 * idempotent and decided under the transaction's row lock, so a retried activity, a restarted
 * worker or the reconciler's second run never signs twice, debits twice or releases twice.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import type { ChainId } from '../catalogue/service';
import type { ChainNodes } from '../chains/nodes';
import type { Config } from '../config';
import type { ChainProvider } from '../chains/provider';
import type { FeeTerms } from '../chains/transfers';
import type { KeyService } from '../keys/service';
import type { StoredFeeTerms } from '../movements/fee-terms';
import { OutgoingTransaction, TransactionReplacement, type TransactionStatus } from './entities';
import { lockingOnlyItsRow } from '../db/row-lock';

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

/**
 * One signed form of a send the chain may mine: its own (the original, kept on its row), or a
 * replacement (same nonce or inputs, higher fee). Only one can be mined; the send settles on it,
 * paying what it pays.
 */
export interface Candidate {
  txHash: string;
  raw: string;
  /** Null for the send's own bytes. */
  replacement: TransactionReplacement | null;
  /** What the recipient gets if it is mined (0 for a cancel). */
  recipientAmount: string;
  feeTerms: StoredFeeTerms;
  feeLimit: string;
}

/** The send's own candidate, from its row. */
const originalCandidate = (transaction: OutgoingTransaction): Candidate => ({
  txHash: transaction.txHash!,
  raw: transaction.signedTransaction!,
  replacement: null,
  recipientAmount: transaction.recipientAmount,
  feeTerms: transaction.feeTerms,
  feeLimit: transaction.feeLimit,
});

/**
 * What the chain may mine for a send, newest first: its signed replacements no node refused, then
 * its own bytes. Only one can be mined (they share a nonce, or inputs), so the send follows all of them.
 */
export async function candidatesOf(em: EntityManager, transaction: OutgoingTransaction): Promise<Candidate[]> {
  const replacements = await em.find(TransactionReplacement, { transaction: transaction.id, txHash: { $ne: null }, status: { $ne: 'refused' } }, { orderBy: { createdAt: 'desc' } });
  const candidates: Candidate[] = replacements.map((replacement) => ({
    txHash: replacement.txHash!,
    raw: replacement.signedTransaction!,
    replacement,
    recipientAmount: replacement.recipientAmount,
    feeTerms: replacement.feeTerms,
    feeLimit: replacement.feeLimit,
  }));
  // Sends settled before issue 48 carry their mined replacement's hash: that candidate stands for the original then.
  if (!candidates.some((candidate) => candidate.txHash === transaction.txHash)) candidates.push(originalCandidate(transaction));
  return candidates;
}

/** The candidate the send is mined as (`minedTxHash`); throws when it names none of them. */
export async function minedCandidateOf(em: EntityManager, transaction: OutgoingTransaction): Promise<Candidate> {
  const mined = (await candidatesOf(em, transaction)).find((candidate) => candidate.txHash === transaction.minedTxHash);
  if (!mined) throw new Error(`transaction ${transaction.id} is mined as ${transaction.minedTxHash ?? 'nothing'}, none of its candidates`);
  return mined;
}

/**
 * The send is mined as `candidate`: it is recorded as the mined one (`minedTxHash`, its replacement
 * `mined`), and a replacement an abandoned block had mined is a candidate again. The send's own
 * hash and bytes stay its original's, so a reorganisation that mines another candidate finds them.
 */
export async function markMinedCandidate(em: EntityManager, row: OutgoingTransaction, candidate: Candidate): Promise<void> {
  row.minedTxHash = candidate.txHash;
  await em.nativeUpdate(TransactionReplacement, { transaction: row.id, status: 'mined', txHash: { $ne: candidate.txHash } }, { status: 'broadcast', updatedAt: new Date() });
  if (candidate.replacement) await em.nativeUpdate(TransactionReplacement, { id: candidate.replacement.id }, { status: 'mined', updatedAt: new Date() });
}

/**
 * The fee a mined candidate paid: the chain's figure (EVM gas used, Bitcoin inputs less outputs), or
 * where a provider cannot tell, a Bitcoin candidate's own (it pays exactly what it was signed with).
 */
export const minedFee = (row: OutgoingTransaction, candidate: Candidate, chainFee: bigint | null): string | null =>
  chainFee !== null ? chainFee.toString() : candidate.feeTerms.model === 'per_byte' ? candidate.feeLimit : (row.fee ?? null);

export const anyCandidateKnown = async (provider: ChainProvider, candidates: Candidate[]): Promise<boolean> => {
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
      return {
        model: 'flat',
        fee: BigInt(terms.fee),
        ...(terms.computeUnitLimit === undefined ? {} : { computeBudget: { unitLimit: BigInt(terms.computeUnitLimit), unitPrice: BigInt(terms.computeUnitPrice ?? '0') } }),
      };
  }
};
