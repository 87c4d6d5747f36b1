/**
 * Creating a send: its fee planned, its funds locked from the first address that holds them, the
 * movement gate's decision, the row, and its workflow (or its sponsorship) started after commit.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import type { AssetInfo } from '../catalogue/service';
import type { ChainNodes } from '../chains/nodes';
import type { FeeLevel, FeeMarket, TransferComputeBudget } from '../chains/provider';
import type { Config } from '../config';
import { Address, type Wallet } from '../custody/entities';
import { lockCustodyFunds, spendableByAddress } from '../custody/journal';
import type { Tenant } from '../custody/service';
import { emit } from '../events/service';
import { requiredConfirmations } from '../monitoring/service';
import { accountFeeTerms, type SendGas, type StoredFeeTerms } from '../movements/fee-terms';
import { chooseFunding, sponsoredFee, sponsoredLevel, type FeeSponsor, type Funding } from '../movements/funding';
import { isAutomation, judgeMovement, type MovementInitiator } from '../movements/gate';
import { heldSendSubject } from '../policies/held-sends';
import type { DestinationType, OperationType } from '../policies/schema';
import type { EvaluationResult } from '../policies/evaluator';
import { errors } from '../shared/errors';
import { uuid } from '../shared/ids';
import { toDisplay } from '../shared/money';
import { recordStart } from '../temporal/starter';
import { bitcoinSendOptions, planBitcoinSend } from './bitcoin';
import { OutgoingTransaction, type PinnedInput, type RecordedDecision } from './entities';
import { transactionFlow } from './flows/transaction';
import { lockOutputs } from './wallet-outputs';
import { readSendFromNode, type SendNodeReads } from './node-reads';
import { presentTransaction } from './presenters';
import { checkSendOptions, resolveTransfer, type CreateTransactionInput, type ResolvedTransfer } from './validation';

/**
 * What a send's caller says that the API does not offer: the kind of movement the gate judges
 * (a refill, a sweep, fuel; else a transfer or a sponsored transfer), a destination whose type the
 * kind decides, and for an automation (a consolidation sweep) the sending address (any of the
 * wallet's, not only its primary) and who pays a sponsored fee.
 */
export interface AutomatedSend {
  operationType?: OperationType;
  destinationType?: DestinationType;
  fromAddress?: Address;
  funding?: Funding;
  /** Pays the fee of a sponsored send (gas-stations sponsorSendFee, given by the entry points): required when the send is sponsored. */
  feeSponsor?: FeeSponsor;
  /** The chain's fee market, read by the caller before it took its locks: a send made under a lock must not wait on a node. */
  market?: FeeMarket;
  /** What the node said of this send (readSendFromNode), read before the caller's transaction opened. */
  nodeReads?: SendNodeReads;
  /** A send asked through the API, with its Idempotency-Key if any: a require_approval hold opens an approval request bound to it. */
  asked?: { idempotencyKey: string | null };
}

/** The fee a send is signed with, the most it can cost (what is locked), and for Bitcoin the coins it spends. */
interface FeePlan {
  terms: StoredFeeTerms;
  feeLimit: bigint;
  /** What the recipient gets: the amount, or with gross the amount less the fee limit. */
  recipientAmount: bigint;
  /** Bitcoin: the outputs to lock for this send. */
  outputIds?: string[];
}

/**
 * Accepts a send (spec "Create transaction", rule 3): everything is checked first, then the funds
 * are locked on the wallet's ledger in one conditional statement per row (so concurrent sends can
 * never lock more than is available), then the enforced policies decide, and the
 * `transaction-<id>` workflow is recorded to start after commit. A refusal at any step rolls the
 * whole request back: nothing is locked, recorded or announced.
 */
export async function createTransaction(em: EntityManager, config: Config, chains: ChainNodes, auth: MovementInitiator, input: CreateTransactionInput, automation: AutomatedSend = {}) {
  // Read here (inside the caller's transaction) only by callers that did not read it before.
  const reads = automation.nodeReads ?? (await readSendFromNode(em, config, chains, auth, input, automation));
  const transfer = await resolveTransfer(em, auth, input);
  checkSendOptions(transfer, input);
  const { wallet, chain, asset, native, toAddress, amount, gross } = transfer;
  const { market } = reads;
  const pinned = input.inputs?.map(pinnedInput);
  // Sponsored: the organization's gas station (else the platform's sponsorship) pays the fee, priced at the station's strategy unless the caller names a level.
  const funding = input.sponsor ? (automation.funding ?? (await chooseFunding(em, config, auth, chain.id))) : null;
  if (funding && !automation.feeSponsor) throw new Error('a sponsored send needs its fee sponsor (AutomatedSend.feeSponsor)');
  const level = funding ? sponsoredLevel(funding.station, input.fee_level) : (input.fee_level ?? 'medium');

  // The lock's reference is the send's id, known before the row is written.
  const transactionId = uuid();
  const { from, plan, lockedAmount, lockedFee } = await planAndLock(em, {
    wallet,
    asset,
    native,
    amount,
    reference: { type: 'transaction', id: transactionId },
    senders: await readSenders(em, wallet, reads),
    plan: async (sender) => {
      // Net: amount to the recipient, fee on top. Gross: the recipient gets amount - fee limit, and the whole amount is locked.
      // Sponsored: the fee arrives as fuel from the station before the send is signed, so nothing of the wallet's is locked for it.
      const read = reads.senders.find((candidate) => candidate.addressId === sender.id);
      const planned: FeePlan =
        chain.id === 'bitcoin'
          ? await planBitcoinSend(em, transfer, market, level, bitcoinSendOptions(input, pinned ?? null, market, config.FEE_MARKET_MAX_MULTIPLE))
          : accountFeePlan(transfer, market, level, read?.gas, read?.budget);
      return { plan: planned, lockedAmount: planned.recipientAmount, lockedFee: funding ? 0n : planned.feeLimit };
    },
  });

  const { request: policyRequest, evaluation, actor } = await judgeMovement(em, config, auth, {
    operationType: automation.operationType ?? (funding ? 'sponsored_transfer' : 'transfer'),
    wallet: { id: wallet.id, chain: chain.id, network: wallet.network, environment: wallet.environment, vault: wallet.vault },
    fromAddress: from.address,
    destination: { address: toAddress, ...(automation.destinationType ? { type: automation.destinationType } : {}) },
    value: { asset, amount },
    feeRaw: plan.feeLimit,
    txType: asset.type === 'native' ? 'native_transfer' : 'token_transfer',
    velocity: () => velocity(em, auth, new Date()),
    ...(automation.asked ? { heldSend: heldSendSubject({ ...input }, automation.asked.idempotencyKey, transactionId) } : {}),
  });
  const amountUsd = typeof policyRequest.amount_usd === 'string' ? policyRequest.amount_usd : null;

  const transaction = em.create(OutgoingTransaction, {
    id: transactionId,
    organization: wallet.organization,
    environment: wallet.environment,
    wallet,
    chain: chain.id,
    network: wallet.network,
    assetId: asset.id,
    fromAddress: from,
    toAddress,
    amount: amount.toString(),
    gross,
    recipientAmount: plan.recipientAmount.toString(),
    // Bitcoin and flat-fee chains pay what was signed (an SPL transfer also any token account's rent, read when mined); EVM pays the gas used, known once mined.
    fee: plan.terms.model === 'eip1559' ? null : plan.terms.model === 'flat' ? plan.terms.fee : plan.feeLimit.toString(),
    feeLimit: plan.feeLimit.toString(),
    feeTerms: plan.terms,
    feeLevel: level,
    feeRate: input.fee_rate ?? null,
    maxFeeRate: input.max_fee_rate ?? null,
    pinnedInputs: pinned ?? null,
    fillFeeFromUnselected: input.fill_fee_from_unselected ?? false,
    lockedAmount: lockedAmount.toString(),
    lockedFee: lockedFee.toString(),
    note: input.note ?? '',
    requiredConfirmations: requiredConfirmations(config, chain.id),
    amountUsd,
    policyRequest,
    policyDecision: recordedDecision(evaluation),
    // An automation's send names the key that set it up (or "system").
    apiKeyId: isAutomation(auth) ? actor.id : auth.apiKeyId,
    createdAt: new Date(),
    updatedAt: new Date(),
  });
  await em.flush();
  if (plan.outputIds) await lockOutputs(em, transaction.id, plan.outputIds);
  if (funding) {
    // The sponsorship's workflow starts this send once the station's fuel is confirmed.
    const fee = sponsoredFee(plan.terms, plan.feeLimit);
    const sponsorship = await automation.feeSponsor!(em, config, chains, auth, funding, { senderAddress: from.address, fee, market, transactionId: transaction.id });
    transaction.sponsorshipId = sponsorship.id;
    await em.flush();
  } else {
    recordStart(em, transactionFlow, { transactionId: transaction.id, checkSeconds: config.CHAIN_CHECK_SECONDS }, wallet.organization.id);
  }
  const presented = await presentTransaction(em, transaction);
  await emit(em, { organizationId: wallet.organization.id, environment: wallet.environment, type: 'transaction.created', data: presented, dedupeKey: `transaction.created:${transaction.id}` });
  return presented;
}

const TXID = /^[0-9a-fA-F]{64}$/;

/** A coin-control input: the schema checked the txid's length; here its hex and the output index. */
function pinnedInput(input: { txid: string; vout: string }, index: number): PinnedInput {
  if (!TXID.test(input.txid)) throw errors.validation(`inputs[${index}].txid must be 64 hexadecimal characters.`, `inputs[${index}].txid`);
  if (!/^\d{1,6}$/.test(input.vout)) throw errors.validation(`inputs[${index}].vout must be an output index (a non-negative integer).`, `inputs[${index}].vout`);
  return { txid: input.txid.toLowerCase(), vout: Number(input.vout) };
}

function accountFeePlan(transfer: ResolvedTransfer, market: FeeMarket, level: FeeLevel, gas?: SendGas, budget?: TransferComputeBudget): FeePlan {
  const { asset, amount, gross } = transfer;
  const { terms, feeLimit } = accountFeeTerms(market, asset, level, gas, budget);
  if (gross && amount <= feeLimit) {
    throw errors.invalid('amount_below_fee', `The amount does not exceed the ${level} fee limit: the recipient would get nothing.`, {
      param: 'amount',
      details: { fee_limit: toDisplay(feeLimit, transfer.native.decimals) },
    });
  }
  return { terms, feeLimit, recipientAmount: gross ? amount - feeLimit : amount };
}

interface SendAttempt {
  plan: FeePlan;
  lockedAmount: bigint;
  lockedFee: bigint;
}

/**
 * Plans the send from each candidate sending address in turn and locks what it needs on the first
 * that holds it (on Bitcoin, the wallet: its coins are the wallet's). The native row carries the
 * fee (and the amount when the asset is native). None holds it: 400 `insufficient_funds`, naming
 * what each address can spend.
 */
async function planAndLock(
  em: EntityManager,
  send: {
    wallet: Wallet;
    asset: AssetInfo;
    native: AssetInfo;
    amount: bigint;
    reference: { type: string; id: string };
    senders: Address[];
    plan: (sender: Address) => Promise<SendAttempt>;
  },
): Promise<SendAttempt & { from: Address }> {
  const { wallet, asset, native } = send;
  const perAddress = wallet.chain !== 'bitcoin';
  let shortfall: { assetId: string; available: bigint; needed: bigint; fee: bigint } = { assetId: asset.id, available: 0n, needed: send.amount, fee: 0n };
  for (const sender of send.senders) {
    if (sender.wallet.id !== wallet.id) throw new Error(`address ${sender.id} is not of wallet ${wallet.id}`);
    const attempt = await send.plan(sender);
    const needs =
      asset.id === native.id
        ? [{ assetId: native.id, amount: attempt.lockedAmount + attempt.lockedFee }]
        : [
            { assetId: asset.id, amount: attempt.lockedAmount },
            { assetId: native.id, amount: attempt.lockedFee },
          ];
    const outcome = await lockCustodyFunds(em, { walletId: wallet.id, addressId: perAddress ? sender.id : null, reference: send.reference }, needs);
    if (outcome.locked) return { ...attempt, from: sender };
    shortfall = { ...outcome.short, fee: attempt.lockedFee };
  }
  throw await insufficientFunds(em, send, shortfall, perAddress);
}

/** The sending addresses the node was asked about, as entities of this transaction, in their order. */
async function readSenders(em: EntityManager, wallet: Wallet, reads: SendNodeReads): Promise<Address[]> {
  const ids = reads.senders.map((read) => read.addressId);
  const found = await em.find(Address, { id: { $in: ids }, wallet });
  return ids.map((id) => found.find((address) => address.id === id)).filter((address): address is Address => address !== undefined);
}

async function insufficientFunds(
  em: EntityManager,
  send: { wallet: Wallet; asset: AssetInfo; native: AssetInfo },
  short: { assetId: string; available: bigint; needed: bigint; fee: bigint },
  perAddress: boolean,
) {
  const { asset, native } = send;
  const shortAsset = short.assetId === asset.id ? asset : native;
  const feeNote = short.assetId === native.id && short.fee > 0n ? ` (including a fee of up to ${toDisplay(short.fee, native.decimals)} ${native.id})` : '';
  const details: Record<string, unknown> = { asset_id: shortAsset.id, available: toDisplay(short.available, shortAsset.decimals), needed: toDisplay(short.needed, shortAsset.decimals) };
  const param = short.assetId === asset.id ? 'amount' : undefined;
  const addresses = perAddress ? await em.find(Address, { wallet: send.wallet }, { orderBy: { addressIndex: 'asc' } }) : [];
  if (addresses.length <= 1) {
    return errors.invalid('insufficient_funds', `The wallet has ${details.available} ${shortAsset.id} available; this send needs ${details.needed}${feeNote}.`, { param, details });
  }
  const assetIds = [...new Set([asset.id, native.id])];
  const spendable = await spendableByAddress(em, { walletId: send.wallet.id }, assetIds);
  const listed = addresses.map((address) => ({
    address: address.address,
    available: Object.fromEntries(
      assetIds.map((assetId) => [assetId, toDisplay(spendable.get(address.id)?.get(assetId) ?? 0n, (assetId === asset.id ? asset : native).decimals)]),
    ),
  }));
  const said = listed.map((entry) => `${entry.address} has ${assetIds.map((assetId) => `${entry.available[assetId]} ${assetId}`).join(' and ')}`).join('; ');
  return errors.invalid(
    'insufficient_funds',
    `No address of the wallet holds what this send needs: ${details.needed} ${shortAsset.id}${feeNote}, from one address. Spendable: ${said}.`,
    { param, details: { ...details, addresses: listed } },
  );
}

/**
 * The velocity fields: what the organization sent in this environment in the rolling hour and day
 * before `at`, failed sends excluded. Read by the movement gate once the enforced policies are known,
 * under the organization's velocity lock when one tests them (so every earlier send is committed). A window holding a send of unknown USD value has no USD sum:
 * the request then says price_unavailable, so USD velocity rules fail closed.
 */
async function velocity(em: EntityManager, auth: Tenant, at: Date) {
  const [row] = await em.execute<{ usd_1h: string; usd_24h: string; unpriced: string; count_1h: string; count_24h: string }[]>(
    `select coalesce(sum(amount_usd::numeric) filter (where created_at >= ?::timestamptz - interval '1 hour'), 0)::text as usd_1h,
            coalesce(sum(amount_usd::numeric), 0)::text as usd_24h,
            count(*) filter (where amount_usd is null)::text as unpriced,
            count(*) filter (where created_at >= ?::timestamptz - interval '1 hour')::text as count_1h,
            count(*)::text as count_24h
       from transactions
      where organization_id = ? and environment = ? and status <> 'failed' and created_at >= ?::timestamptz - interval '24 hours'`,
    [at.toISOString(), at.toISOString(), auth.organizationId, auth.environment, at.toISOString()],
  );
  const usd = row!.unpriced === '0' ? { velocity_amount_usd_1h: row!.usd_1h, velocity_amount_usd_24h: row!.usd_24h } : { price_unavailable: true };
  return { ...usd, velocity_count_1h: row!.count_1h, velocity_count_24h: row!.count_24h };
}

/** The policy engine's decision as a send or replacement records it. */
export function recordedDecision(evaluation: EvaluationResult): RecordedDecision {
  const matched = evaluation.trace?.find((entry) => entry.terminal);
  return { result: evaluation.result, policy_id: evaluation.policy_id, rule_id: evaluation.rule_id, action: matched?.action ?? null };
}
