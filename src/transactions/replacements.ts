import type { EntityManager } from '@mikro-orm/postgresql';
import type { AuthContext } from '../api-keys/auth-context';
import { ApiKey } from '../api-keys/entities';
import { assetAmount, assetById } from '../catalogue/service';
import { NATIVE_TRANSFER_GAS, readFeeMarket } from '../chains/fees';
import type { ChainNodes } from '../chains/nodes';
import { NodeUnavailableError, TransactionRejectedError, type ChainProvider, type Eip1559FeeMarket, type FeeLevel, type FeeMarket } from '../chains/provider';
import type { TransferToSign } from '../chains/transfers';
import type { Config } from '../config';
import { lockCustodyFunds, postCustodyEntry } from '../custody/journal';
import { judgeMovement, type MovementInitiator } from '../movements/gate';
import { DomainError, errors } from '../shared/errors';
import { toDisplay } from '../shared/money';
import type { StoredFeeTerms } from '../movements/fee-terms';
import { OutgoingTransaction, TransactionReplacement, type ReplacementKind } from './entities';
import { transactionWorkflowId } from './flows/transaction';
import { bitcoinReplacementTerms, bitcoinSendOptions } from './bitcoin';
import { recordChange } from './wallet-outputs';
import { feeTermsOf, FINISHED, lockedRow, REPLACEABLE_CHAINS, providerOf, type LifecycleDeps, type StepOutcome } from './lifecycle';
import { findTransaction, nativeAssetOf, presentTransaction } from './presenters';
import { recordedDecision } from './service';
import { replacementLockRelease, replacementScope } from './settlement';
import { bitcoinInputsOf, signWithKeysOf } from './signing';
import { withArticle } from '../shared/articles';
import { lockingOnlyItsRow } from '../db/row-lock';

/**
 * Fee bumping (issue 31 part 5): a broadcast send replaced at a higher fee, paying its recipient
 * (`speed_up`) or nothing but the fee (`cancel`): on Ethereum by the same nonce (a cancel is a
 * zero-value transfer to the sending address), on Bitcoin by BIP-125 replace-by-fee, the same
 * inputs (a cancel pays them back to the wallet's address, less the fee). A
 * replacement is recorded (its extra fee locked under its own reference, the movement gate asked)
 * by the API or by the send's workflow when the send waited FEE_BUMP_AFTER_BLOCKS unmined; the
 * workflow signs and broadcasts it, follows every candidate and settles on the one mined
 * (checking.ts `checkTransaction`), debiting once and releasing every lock.
 */

type Eip1559Terms = Extract<StoredFeeTerms, { model: 'eip1559' }>;

export interface ReplacementRequest {
  fee_level?: FeeLevel | undefined;
  max_fee?: string | undefined;
  /** Bitcoin: sat/vB, overrides fee_level. */
  fee_rate?: string | undefined;
}

/** 10% above, and one more: what nodes (geth, anvil) require of both fee fields of a same-nonce replacement. */
const outbid = (value: bigint): bigint => value + value / 10n + 1n;
const larger = (a: bigint, b: bigint): bigint => (a > b ? a : b);

/**
 * The fee terms of a replacement of `previous` (the newest candidate): the market's price at
 * `level`, raised to outbid the previous terms. With a `cap` on the fee limit (automatic bumps),
 * a price above it is lowered to it; null when the capped price cannot outbid the previous one.
 */
export function replacementTerms(previous: Eip1559Terms, market: Eip1559FeeMarket, level: FeeLevel, gasLimit: bigint, cap: bigint | null): { terms: Eip1559Terms; feeLimit: bigint } | null {
  const minimumPriority = outbid(BigInt(previous.maxPriorityFeePerGas));
  const minimumMaxFee = outbid(BigInt(previous.maxFeePerGas));
  let priority = larger(market.priorityFeePerGas[level], minimumPriority);
  let maxFee = larger(2n * market.baseFeePerGas + priority, minimumMaxFee);
  if (cap !== null && gasLimit * maxFee > cap) {
    maxFee = cap / gasLimit;
    if (priority > maxFee) priority = maxFee;
    if (maxFee < minimumMaxFee || priority < minimumPriority) return null;
  }
  return {
    terms: { model: 'eip1559', gasLimit: gasLimit.toString(), maxFeePerGas: maxFee.toString(), maxPriorityFeePerGas: priority.toString() },
    feeLimit: gasLimit * maxFee,
  };
}

/**
 * The fee terms of a replacement outbidding the send's newest candidate (Ethereum: `replacementTerms`;
 * Bitcoin: `bitcoinReplacementTerms`), or null when a capped price cannot outbid.
 */
async function priceReplacement(em: EntityManager, config: Config, transaction: OutgoingTransaction, plan: ReplacementPlan): Promise<{ terms: StoredFeeTerms; feeLimit: bigint } | null> {
  const newest = await newestReplacement(em, transaction.id);
  const previous = newest?.feeTerms ?? transaction.feeTerms;
  const { market } = plan;
  if (market.model === 'per_byte' && previous.model === 'per_byte') {
    const rate = plan.feeRate === undefined ? market.satPerVbyte[plan.level] : bitcoinSendOptions({ fee_rate: plan.feeRate }, null, market, config.FEE_MARKET_MAX_MULTIPLE).feeRate!;
    return bitcoinReplacementTerms({
      kind: plan.kind,
      inputTotal: (await bitcoinInputsOf(em, transaction)).total,
      recipientAmount: BigInt(transaction.recipientAmount),
      previous,
      previousFee: BigInt(newest?.feeLimit ?? transaction.feeLimit),
      rate,
      cap: plan.cap,
    });
  }
  if (market.model !== 'eip1559' || previous.model !== 'eip1559') throw new Error(`a ${previous.model} ${transaction.chain} send replaced on a ${market.model} fee market`);
  const gasLimit = plan.kind === 'cancel' ? NATIVE_TRANSFER_GAS : BigInt(previous.gasLimit);
  return replacementTerms(previous, market, plan.level, gasLimit, plan.cap);
}

/** The newest candidate's replacement (none refused), or null while the original is the newest. */
const newestReplacement = (em: EntityManager, transactionId: string) =>
  em.findOne(TransactionReplacement, { transaction: transactionId, status: { $ne: 'refused' } }, { orderBy: { createdAt: 'desc' } });

interface ReplacementPlan {
  kind: ReplacementKind;
  origin: 'api' | 'automatic';
  level: FeeLevel;
  /** Bitcoin: the caller's fee_rate (sat/vB), overriding `level`. */
  feeRate: string | undefined;
  /** A caller's max_fee: a price above it is refused (400 max_fee_exceeded). */
  maxFee: bigint | null;
  /** Automatic bumps: the fee limit the price is lowered to. */
  cap: bigint | null;
  apiKeyId: string;
  /** The chain's fee market, read before the caller's transaction opened (no lock waits on the node). */
  market: FeeMarket;
}

/**
 * Records a replacement of the locked, broadcast send `transaction`: priced to outbid its newest
 * candidate, the fee beyond what the send and its earlier replacements locked locked under the
 * replacement's own reference (400 insufficient_funds), then judged by the movement gate (a
 * refusal throws; the caller's transaction rolls back). Null when a capped price cannot outbid.
 */
async function recordReplacement(
  em: EntityManager,
  config: Config,
  initiator: MovementInitiator,
  transaction: OutgoingTransaction,
  plan: ReplacementPlan,
): Promise<TransactionReplacement | null> {
  const priced = await priceReplacement(em, config, transaction, plan);
  if (!priced) return null;
  const native = nativeAssetOf(transaction);
  if (plan.maxFee !== null && priced.feeLimit > plan.maxFee) {
    throw errors.invalid('max_fee_exceeded', `This replacement's fee can reach ${toDisplay(priced.feeLimit, native.decimals)} ${native.id}, above max_fee; nothing was replaced.`, {
      param: 'max_fee',
      details: { fee_limit: toDisplay(priced.feeLimit, native.decimals), max_fee: toDisplay(plan.maxFee, native.decimals) },
    });
  }

  const replacement = em.create(TransactionReplacement, {
    organization: transaction.organization,
    environment: transaction.environment,
    transaction,
    kind: plan.kind,
    origin: plan.origin,
    recipientAmount: plan.kind === 'cancel' ? '0' : transaction.recipientAmount,
    feeTerms: priced.terms,
    feeLimit: priced.feeLimit.toString(),
    lockedFee: '0',
    policyDecision: { result: 'allow', policy_id: null, rule_id: null, action: null },
    apiKeyId: plan.apiKeyId,
  });
  const earlier = await em.find(TransactionReplacement, { transaction: transaction.id, status: { $ne: 'refused' } });
  const locked = earlier.reduce((sum, row) => sum + BigInt(row.lockedFee), BigInt(transaction.lockedFee));
  const extra = priced.feeLimit > locked ? priced.feeLimit - locked : 0n;
  const scope = replacementScope(transaction, replacement);
  const outcome = await lockCustodyFunds(em, { walletId: scope.walletId, addressId: scope.addressId, reference: scope.reference }, [{ assetId: native.id, amount: extra }]);
  if (!outcome.locked) {
    const available = toDisplay(outcome.short.available, native.decimals);
    throw errors.invalid('insufficient_funds', `The sending address has ${available} ${native.id} available; this replacement needs ${toDisplay(extra, native.decimals)} more for its fee.`, {
      details: { asset_id: native.id, available, needed: toDisplay(extra, native.decimals) },
    });
  }
  replacement.lockedFee = extra.toString();

  const asset = assetById(transaction.assetId);
  const wallet = transaction.wallet;
  const from = transaction.fromAddress;
  const { evaluation } = await judgeMovement(em, config, initiator, {
    operationType: plan.kind,
    wallet: { id: wallet.id, chain: transaction.chain, network: wallet.network, environment: wallet.environment, vault: wallet.vault },
    fromAddress: from.address,
    destination: plan.kind === 'cancel' ? { address: from.address, type: 'vault' } : { address: transaction.toAddress },
    value: plan.kind === 'cancel' ? { asset: native, amount: 0n } : { asset, amount: BigInt(transaction.recipientAmount) },
    feeRaw: priced.feeLimit,
    txType: plan.kind === 'cancel' || asset.type === 'native' ? 'native_transfer' : 'token_transfer',
  });
  replacement.policyDecision = recordedDecision(evaluation);
  await em.flush();
  return replacement;
}

/**
 * `POST /v1/transactions/:id/speed-up` and `/cancel`: checks the send can be replaced, then records
 * the replacement, which the send's workflow signs and broadcasts at its next check. A send not
 * broadcast yet, or mined, or final: 409 invalid_state_transition. Only Ethereum (same nonce) and
 * Bitcoin (BIP-125) sends are replaced; a sponsored send's fee is the station's exact fuel: 400.
 */
export async function requestReplacement(em: EntityManager, config: Config, auth: AuthContext, id: string, kind: ReplacementKind, body: ReplacementRequest, market: FeeMarket) {
  const found = await findTransaction(em, auth, id);
  const transaction = await em.findOneOrFail(OutgoingTransaction, { id: found.id }, { ...lockingOnlyItsRow(em, OutgoingTransaction), populate: ['fromAddress', 'wallet'] });
  if (body.fee_rate !== undefined && transaction.chain !== 'bitcoin') {
    throw errors.invalid('bitcoin_only', `fee_rate is a Bitcoin fee rate; ${withArticle(transaction.chain)} send cannot use it.`, { param: 'fee_rate' });
  }
  if (!REPLACEABLE_CHAINS.includes(transaction.chain)) {
    throw errors.invalid('replacement_unsupported', `Speed-up and cancel replace Ethereum sends (the same nonce) and Bitcoin sends (BIP-125, the same inputs) at a higher fee; ${withArticle(transaction.chain)} send cannot be replaced.`, { param: 'id' });
  }
  if (transaction.sponsorshipId != null) {
    throw errors.invalid('sponsored_replacement', 'A sponsored send is funded with exactly its fee by a gas station: it cannot be replaced at a higher fee.', { param: 'id' });
  }
  if (transaction.status !== 'broadcast') {
    const why = FINISHED.includes(transaction.status) || transaction.status === 'confirming' ? 'is already mined or final' : 'is not broadcast yet: there is nothing to replace';
    throw errors.conflict('invalid_state_transition', `The transaction ${why} (status ${transaction.status}).`, { status: transaction.status });
  }
  const newest = await newestReplacement(em, transaction.id);
  if (newest?.status === 'requested') {
    throw errors.conflict('replacement_pending', 'A replacement of this transaction is waiting to be broadcast; ask again once it is.', { replacement_id: newest.id });
  }
  if (kind === 'speed_up' && newest?.kind === 'cancel') {
    throw errors.conflict('invalid_state_transition', 'The transaction is being cancelled: speed up the cancel with POST /cancel instead.', { status: transaction.status });
  }
  const native = nativeAssetOf(transaction);
  const maxFee = body.max_fee === undefined ? null : assetAmount(body.max_fee, native, 'max_fee', false);
  const replacement = await recordReplacement(em, config, auth, transaction, {
    kind,
    origin: 'api',
    level: body.fee_level ?? 'high',
    feeRate: body.fee_rate,
    maxFee,
    cap: null,
    apiKeyId: auth.apiKeyId,
    market,
  });
  if (!replacement) throw new Error('an uncapped replacement price is always found');
  return presentTransaction(em, transaction);
}

/** The fee market a speed-up or cancel of send `id` is priced on, read before the request's transaction opens (404 for a send not the caller's). */
export async function readReplacementMarket(em: EntityManager, chains: ChainNodes, auth: AuthContext, id: string): Promise<FeeMarket> {
  const transaction = await findTransaction(em, auth, id);
  return readFeeMarket(chains, transaction.chain, transaction.environment, em);
}

/**
 * The workflow's replacement step, when a check answered `replace`: the replacement asked for, or
 * (none asked for, the bump due) an automatic one recorded now, at the high level capped by
 * `automaticBumpCap`; then it is signed once and
 * broadcast. An automatic bump the cap, the gate or the funds refuse is not recorded: the count of
 * blocks starts again, so it is tried once per FEE_BUMP_AFTER_BLOCKS.
 */
export async function replaceTransaction(deps: LifecycleDeps, transactionId: string): Promise<StepOutcome> {
  const transaction = await deps.em().findOneOrFail(OutgoingTransaction, { id: transactionId }, { populate: ['fromAddress'] });
  if (FINISHED.includes(transaction.status)) return transaction.status;
  if (transaction.status !== 'broadcast') return 'waiting';
  const provider = await providerOf(deps, transaction);
  const requested = await deps.em().findOne(TransactionReplacement, { transaction: transactionId, status: 'requested' }, { orderBy: { createdAt: 'desc' } });
  const replacementId = requested?.id ?? (await bumpAutomatically(deps, provider, transaction));
  if (!replacementId) return 'waiting';
  await signReplacement(deps, provider, transactionId, replacementId);
  return broadcastReplacement(deps, provider, transactionId, replacementId);
}

async function bumpAutomatically(deps: LifecycleDeps, provider: ChainProvider, transaction: OutgoingTransaction): Promise<string | null> {
  const { height } = await provider.tip();
  const after = deps.config.FEE_BUMP_AFTER_BLOCKS;
  if (after === 0 || transaction.waitingSinceHeight == null || height - transaction.waitingSinceHeight < after) return null;
  // Automatic bumps act for the key that sent: once it is revoked they stop (a key may still speed up or cancel by hand).
  if (await deps.em().count(ApiKey, { id: transaction.apiKeyId, revokedAt: { $ne: null } })) return null;
  const initiator: MovementInitiator = {
    organizationId: transaction.organization.id,
    environment: transaction.environment,
    automationRuleId: transactionWorkflowId(transaction.id),
    actorKeyId: transaction.apiKeyId === 'system' ? null : transaction.apiKeyId,
  };
  const market = await readFeeMarket(deps.chains, transaction.chain, transaction.environment);
  try {
    const recorded = await deps.transaction(async (em) => {
      const row = await lockedRow(em, transaction.id);
      if (row.status !== 'broadcast') return null;
      const newest = await newestReplacement(em, row.id);
      return recordReplacement(em, deps.config, initiator, row, {
        kind: newest?.kind ?? 'speed_up',
        origin: 'automatic',
        level: 'high',
        feeRate: undefined,
        maxFee: null,
        cap: automaticBumpCap(row, deps.config),
        apiKeyId: row.apiKeyId,
        market,
      });
    });
    if (recorded) return recorded.id;
  } catch (error) {
    if (!(error instanceof DomainError)) throw error;
  }
  await deps.em().nativeUpdate(OutgoingTransaction, { id: transaction.id }, { waitingSinceHeight: height });
  return null;
}

/**
 * The most an automatic bump may pay: FEE_BUMP_MAX_MULTIPLE times the fee limit the send was
 * accepted with, and on Bitcoin no more than the send's own max_fee_rate allows at its size.
 */
function automaticBumpCap(row: OutgoingTransaction, config: Config): bigint {
  const multiple = BigInt(row.feeLimit) * BigInt(config.FEE_BUMP_MAX_MULTIPLE);
  if (row.maxFeeRate == null || row.feeTerms.model !== 'per_byte') return multiple;
  const stated = BigInt(row.maxFeeRate) * BigInt(row.feeTerms.vsize);
  return stated < multiple ? stated : multiple;
}

/**
 * Signs a replacement once, the same bytes for every broadcast of it: with the send's nonce
 * (Ethereum), or spending the send's inputs (Bitcoin), its change (a speed-up's, vout 1) or its one
 * output back to the sending address (a cancel's, vout 0) recorded as the send's change under its own txid.
 */
async function signReplacement(deps: LifecycleDeps, provider: ChainProvider, transactionId: string, replacementId: string): Promise<void> {
  const chainId = (await provider.identifyNetwork()).chainId;
  await deps.transaction(async (em) => {
    const transaction = await lockedRow(em, transactionId);
    const replacement = await em.findOneOrFail(TransactionReplacement, { id: replacementId });
    if (replacement.txHash) return;
    const from = transaction.fromAddress;
    const asset = assetById(transaction.assetId);
    const cancel = replacement.kind === 'cancel';
    const transfer: TransferToSign = {
      chain: transaction.chain,
      testnet: transaction.environment === 'sandbox',
      from: from.address,
      to: cancel ? from.address : transaction.toAddress,
      assetId: cancel ? nativeAssetOf(transaction).id : asset.id,
      amount: BigInt(replacement.recipientAmount),
      fee: feeTermsOf(replacement.feeTerms),
      reference: transaction.id,
      ...(transaction.chain === 'ethereum' ? { ethereum: { chainId: chainId!, nonce: BigInt(transaction.nonce!) } } : {}),
    };
    let signers = [from];
    let kept: { vout: number; amount: bigint } | null = null;
    if (transaction.chain === 'bitcoin') {
      const spent = await bitcoinInputsOf(em, transaction);
      signers = spent.signers;
      const amount = spent.total - BigInt(replacement.feeLimit) - BigInt(replacement.recipientAmount);
      kept = { vout: cancel ? 0 : 1, amount };
      if (cancel) transfer.amount = amount;
      transfer.bitcoin = { inputs: spent.inputs, ...(cancel ? {} : { change: { address: from.address, amount } }) };
    }
    if (!cancel && asset.type !== 'native') {
      const token = provider.tokenAddress(asset.id);
      if (!token) throw new Error(`no ${asset.id} contract is configured for ${transaction.chain} ${transaction.environment}`);
      transfer.tokenAddress = token;
    }
    const signed = await signWithKeysOf(deps, em, transaction, signers, transfer);
    Object.assign(replacement, { signedTransaction: signed.raw, txHash: signed.txid });
    if (kept) await recordChange(em, transaction, { txid: signed.txid, vout: kept.vout, amount: kept.amount, address: from });
  });
}

/**
 * Hands a signed replacement to the node. Taken (or already there): `broadcast`. Refused at its
 * first handing while the node knows nothing of it: `refused`, its extra lock released (no node ever
 * held it). Either way the blocks before another automatic bump count from the tip. Refused after an
 * earlier handing: still a candidate, followed like the others. No answer: tried again next check.
 */
async function broadcastReplacement(deps: LifecycleDeps, provider: ChainProvider, transactionId: string, replacementId: string): Promise<StepOutcome> {
  const replacement = await deps.em().findOneOrFail(TransactionReplacement, { id: replacementId });
  const handedBefore = replacement.broadcastAt != null;
  if (!handedBefore) await deps.em().nativeUpdate(TransactionReplacement, { id: replacementId }, { broadcastAt: new Date() });
  let refusal: TransactionRejectedError | null = null;
  try {
    await provider.broadcast(replacement.signedTransaction!);
  } catch (error) {
    if (error instanceof NodeUnavailableError) return 'unknown';
    if (!(error instanceof TransactionRejectedError)) throw error;
    if ((await provider.transactionStatus(replacement.txHash!)).state === 'unknown') refusal = error;
  }
  const { height } = await provider.tip();
  await deps.transaction(async (em) => {
    const transaction = await lockedRow(em, transactionId);
    const row = await em.findOneOrFail(TransactionReplacement, { id: replacementId });
    if (row.status !== 'requested') return;
    // Taken or refused, the blocks before the next automatic bump count from here: a refused bump is tried again once per FEE_BUMP_AFTER_BLOCKS, not at every check.
    transaction.waitingSinceHeight = height;
    if (refusal && !handedBefore) {
      Object.assign(row, { status: 'refused', broadcastAt: null, failureMessage: refusal.message });
      await postCustodyEntry(em, replacementLockRelease(transaction, row));
      return;
    }
    row.status = 'broadcast';
  });
  return refusal && !handedBefore ? 'waiting' : 'accepted';
}
