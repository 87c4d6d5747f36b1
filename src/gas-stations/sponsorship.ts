import { LockMode } from '@mikro-orm/core';
import { parseTransaction, type Hex } from 'viem';
import type { EntityManager } from '@mikro-orm/postgresql';
import { priceSourceFor, usdValue } from '../catalogue/prices';
import { ASSETS, assetById, findChain, type AssetInfo, type ChainId } from '../catalogue/service';
import { GWEI_DECIMALS, readFeeMarket } from '../chains/fees';
import type { ChainNodes } from '../chains/nodes';
import { NodeUnavailableError, TransactionRejectedError, type ChainProvider, type FeeLevel, type FeeMarket } from '../chains/provider';
import type { Config } from '../config';
import type { Tenant } from '../custody/service';
import { requiredConfirmations } from '../monitoring/service';
import { Organization } from '../organizations/entities';
import { emit } from '../events/service';
import { DomainError, errors } from '../shared/errors';
import { isUuid } from '../shared/ids';
import { toDisplay } from '../shared/money';
import { iso } from '../shared/time';
import { recordStart } from '../temporal/starter';
import { OutgoingTransaction } from '../transactions/entities';
import { transactionFlow } from '../transactions/flows/transaction';
import type { LifecycleDeps } from '../transactions/lifecycle';
import { failTransaction } from '../transactions/settlement';
import { createTransaction } from '../transactions/service';
import { accountFeeTerms } from '../movements/fee-terms';
import { assessFunding, chooseFunding, type FeeSponsor, type Funding, type SponsoredFee } from '../movements/funding';
import { isAutomation, type MovementInitiator } from '../movements/gate';
import { Sponsorship, STRATEGY_FEE_LEVEL, type GasStation, type SponsorshipKind, type SponsorshipStatus } from './entities';
import { sponsorshipFlow } from './flows/sponsorship';
import { checkSignedTransfer, requireFeeWithinNeed, requireGasCovered, requireNextNonce, sponsorableChainOf, type SponsorBroadcastClaim } from './signed-transfers';

/**
 * Fee sponsorship: a gas station pays someone else's network fee by sending the sender exactly
 * that fee first (Fireblocks calls it auto-fuel), then the sponsored transaction goes out and pays
 * its fee from the fuel, so the sender's native balance ends where it began. Two payers: the
 * organization's own station (`customer_gas_station`) and the platform's sponsorship
 * (`provider_sponsorship`, `hedge_paymaster`: the stations of HEDGE_PAYMASTER_ORGANIZATION_ID, with
 * a daily USD budget per organization). Bitcoin is not sponsored: a UTXO's fee is paid by its inputs.
 */

const nativeOf = (chain: ChainId): AssetInfo => assetById(findChain(chain).nativeAssetId);

export interface SponsorshipRequest {
  kind: SponsorshipKind;
  /** Where the fuel goes: the sponsored transaction's sender. */
  senderAddress: string;
  fee: SponsoredFee;
  market: FeeMarket;
  /** The fee level of the station's fuel send; its strategy's when omitted. */
  fuelLevel?: FeeLevel;
  sponsoredTransaction?: OutgoingTransaction;
  broadcast?: { signedTransaction: string; txHash: string; toAddress: string; assetId: string; amount: bigint };
}

/**
 * Reserves the fee in the caller's transaction: under the paying station's row lock (and, for the
 * platform's sponsorship, the organization's budget lock) the funding is assessed again, the
 * station's fuel send is submitted through the sending machinery (a system send of the station's
 * organization, workflow `transaction-<id>`), and workflow `sponsorship-<id>` is recorded to start
 * after commit. A station that cannot pay is 400 `sponsorship_unavailable` naming the reason.
 */
export async function sponsorFee(
  em: EntityManager,
  config: Config,
  chains: ChainNodes,
  tenant: MovementInitiator,
  funding: Funding,
  request: SponsorshipRequest,
): Promise<Sponsorship> {
  const { station, model } = funding;
  await em.execute('select id from gas_stations where id = ? for update', [station.id]);
  // Two sends of one organization draw on the platform's budget one at a time.
  if (model === 'provider_sponsorship') await em.execute(`select pg_advisory_xact_lock(hashtext('provider_sponsorship:' || ?))`, [tenant.organizationId]);
  const assessment = await assessFunding(em, config, tenant, station.chain, request.market, model, station, request.fee, request.fuelLevel);
  if (!assessment.available) {
    throw errors.invalid('sponsorship_unavailable', assessment.message, { param: 'sponsor', details: { reason: assessment.reason, funding_model: model } });
  }
  const native = nativeOf(station.chain);
  let fuel: Awaited<ReturnType<typeof createTransaction>>;
  try {
    fuel = await createTransaction(
      em,
      config,
      chains,
      { organizationId: station.organization.id, environment: station.environment, automationRuleId: station.id, actorKeyId: fuelActorKey(tenant, station) },
      {
        wallet_id: station.wallet.id,
        to_address: request.senderAddress,
        amount: toDisplay(request.fee.fuel, native.decimals),
        asset: native.id,
        fee_level: request.fuelLevel ?? STRATEGY_FEE_LEVEL[station.gasStrategy],
        note: `Fee sponsorship by gas station ${station.id}`,
      },
      // The market the sponsored send was priced at: nothing here calls a node while the station's row is locked.
      { operationType: 'fuel_send', destinationType: 'sponsored_sender', market: request.market },
    );
  } catch (error) {
    if (!(error instanceof DomainError)) throw error;
    const unavailable = errors.invalid('sponsorship_unavailable', `The gas station could not send the fee: ${error.message}`, {
      param: 'sponsor',
      details: { reason: error.code, funding_model: model },
    });
    // A policy's refusal of the fuel is audited once this transaction has rolled back: whoever answers waits for that.
    unavailable.settling = error.settling;
    throw unavailable;
  }
  const budgetCharge = request.fee.fuel + BigInt(fuel.fee_limit_raw);
  const sponsorship = em.create(Sponsorship, {
    organization: em.getReference(Organization, tenant.organizationId),
    environment: tenant.environment,
    kind: request.kind,
    fundingModel: model,
    station,
    chain: station.chain,
    senderAddress: request.senderAddress,
    fuelAmount: request.fee.fuel.toString(),
    fuelTransaction: em.getReference(OutgoingTransaction, fuel.id),
    budgetCharge: budgetCharge.toString(),
    budgetChargeUsd: model === 'provider_sponsorship' ? usdValue(priceSourceFor(config, tenant.environment), native, budgetCharge) : null,
    sponsoredTransaction: request.sponsoredTransaction ?? null,
    signedTransaction: request.broadcast?.signedTransaction ?? null,
    txHash: request.broadcast?.txHash ?? null,
    toAddress: request.broadcast?.toAddress ?? null,
    assetId: request.broadcast?.assetId ?? null,
    amount: request.broadcast?.amount.toString() ?? null,
    status: 'funding',
  });
  await em.flush();
  recordStart(em, sponsorshipFlow, { sponsorshipId: sponsorship.id, checkSeconds: config.CHAIN_CHECK_SECONDS }, tenant.organizationId);
  return sponsorship;
}

/** The FeeSponsor the entry points give the sending machinery: a sponsored send's fuel and its sponsorship (sponsorFee). */
export const sponsorSendFee: FeeSponsor = (em, config, chains, initiator, funding, send) =>
  sponsorFee(em, config, chains, initiator, funding, {
    kind: 'transaction',
    senderAddress: send.senderAddress,
    fee: send.fee,
    market: send.market,
    sponsoredTransaction: em.getReference(OutgoingTransaction, send.transactionId),
  });

/**
 * Who the station's policies see behind its fuel: the key that caused the sponsored movement when
 * the station is the organization's own, else (the platform's station) the key that created it.
 */
function fuelActorKey(initiator: MovementInitiator, station: GasStation): string | null {
  if (station.organization.id !== initiator.organizationId) return station.createdByKeyId ?? null;
  return isAutomation(initiator) ? initiator.actorKeyId : initiator.apiKeyId;
}

/**
 * `POST /v1/gas-stations/sponsor-broadcast`: checks the client-signed transaction against the claim
 * (signer, recipient, asset, amount, network: 400 naming the field), refuses one the chain already
 * knows, one not carrying the sender's next nonce, and one whose fee cap exceeds its need by more than
 * SPONSORSHIP_FEE_MARGIN_PERCENT; then reserves that fee cap as fuel from the organization's station
 * (else the platform's sponsorship), counted against the budgets; workflow `sponsorship-<id>`
 * broadcasts it once the fuel is confirmed. The same signed transaction again answers the same
 * sponsorship. The node is asked everything first, outside any transaction (`em` holds none); the
 * reservation is one short transaction (`transaction`) that calls no node, so neither a pooled
 * connection nor the station's row lock waits on a slow node.
 */
export async function sponsorBroadcast(
  em: EntityManager,
  transaction: <T>(work: (tx: EntityManager) => Promise<T>) => Promise<T>,
  config: Config,
  chains: ChainNodes,
  tenant: MovementInitiator,
  claim: SponsorBroadcastClaim & { fee_level?: FeeLevel | undefined },
) {
  const chain = sponsorableChainOf(claim);
  const provider = await chains.provider(chain, tenant.environment);
  const tokens = Object.fromEntries(
    ASSETS.filter((asset) => asset.chain === chain && asset.type !== 'native').flatMap((asset) => {
      const token = provider.tokenAddress(asset.id);
      return token ? [[asset.id, token]] : [];
    }),
  );
  const chainId = chain === 'ethereum' ? (await provider.identifyNetwork()).chainId : undefined;
  const checked = checkSignedTransfer(claim, { environment: tenant.environment, tokens, ...(chainId === undefined ? {} : { chainId }) });

  const existing = await existingSponsorship(em, tenant, chain, checked.txHash);
  if (existing) return { sponsorship: existing, created: false };
  // Ethereum: the node must find its gas limit enough and its call not failing, or the fuel would pay for a refusal.
  const gasNeeded = await requireGasCovered(checked, provider);
  if ((await provider.transactionStatus(checked.txHash)).state !== 'unknown') {
    throw errors.invalid('already_broadcast', 'The chain already has this transaction: there is no fee left to sponsor.', { param: 'signed_tx' });
  }
  // Read first without the lock, so a sender's second transaction is told to wait for its first before the node is asked its nonce.
  if (checked.nonce !== null) await requireNoUnbroadcastSponsorship(em, tenant, chain, checked.from);
  await requireNextNonce(checked, provider);
  const market = await readFeeMarket(chains, chain, tenant.environment);
  requireFeeWithinNeed(checked, accountFeeTerms(market, checked.asset, 'high', gasNeeded === null ? undefined : { limit: gasNeeded, sponsored: true }).terms, config.SPONSORSHIP_FEE_MARGIN_PERCENT);
  // Ethereum: the price a station's max_gas_price caps is the client's max fee per gas.
  const priceInFeeUnit = checked.gas ? toDisplay(checked.gas.maxFeePerGas, GWEI_DECIMALS) : checked.maxFee.toString();

  return transaction(async (tx) => {
    if (checked.nonce !== null) {
      await lockSponsoredSender(tx, tenant, chain, checked.from);
      await requireNoUnbroadcastSponsorship(tx, tenant, chain, checked.from);
    }
    // Asked again in the reservation: another request may have reserved these bytes while the node was asked.
    const concurrent = await existingSponsorship(tx, tenant, chain, checked.txHash);
    if (concurrent) return { sponsorship: concurrent, created: false };
    const funding = await chooseFunding(tx, config, tenant, chain);
    const sponsorship = await sponsorFee(tx, config, chains, tenant, funding, {
      kind: 'broadcast',
      senderAddress: checked.from,
      fee: { fuel: checked.maxFee, priceInFeeUnit },
      market,
      ...(claim.fee_level ? { fuelLevel: claim.fee_level } : {}),
      broadcast: { signedTransaction: checked.raw, txHash: checked.txHash, toAddress: checked.to, assetId: checked.asset.id, amount: checked.amount },
    });
    return { sponsorship, created: true };
  });
}

/** The sponsorship of these signed bytes, when the organization already has one; another organization's is 409 `already_sponsored`. */
async function existingSponsorship(em: EntityManager, tenant: Tenant, chain: ChainId, txHash: string): Promise<Sponsorship | null> {
  const existing = await em.findOne(Sponsorship, { environment: tenant.environment, chain, txHash });
  if (existing && existing.organization.id !== tenant.organizationId) throw errors.conflict('already_sponsored', 'This signed transaction is already sponsored.', {});
  return existing;
}

/** Sponsor-broadcasts of one sender reserve one at a time (to the commit): see requireNoUnbroadcastSponsorship. */
const lockSponsoredSender = (em: EntityManager, tenant: Tenant, chain: ChainId, sender: string) =>
  em.execute(`select pg_advisory_xact_lock(hashtext(?))`, [`sponsored-sender:${tenant.environment}:${chain}:${sender}`]);

/**
 * Ethereum: the node's pending nonce does not count a sponsored transaction still waiting for its fuel,
 * so a second one signed with the same nonce would pass and be fuelled too, and only one of them can
 * ever be mined. Under a lock on the sender (lockSponsoredSender), one sponsored transaction of an address
 * is waiting for its broadcast at a time: another is 409 `sponsorship_pending` (naming it) until a node has taken the first.
 */
async function requireNoUnbroadcastSponsorship(em: EntityManager, tenant: Tenant, chain: ChainId, sender: string): Promise<void> {
  const waiting = await em.findOne(Sponsorship, { environment: tenant.environment, chain, senderAddress: sender, kind: 'broadcast', status: { $in: ['funding', 'broadcasting'] }, broadcastAccepted: false });
  if (waiting) {
    throw errors.conflict('sponsorship_pending', `A sponsored transaction of ${sender} (sponsorship ${waiting.id}) is still waiting for its broadcast: sponsor the next once a node has taken it.`, {
      sponsorship_id: waiting.id,
    });
  }
}

export async function findSponsorBroadcast(em: EntityManager, tenant: Tenant, id: string): Promise<Sponsorship> {
  const sponsorship = isUuid(id) ? await em.findOne(Sponsorship, { id, kind: 'broadcast', organization: tenant.organizationId, environment: tenant.environment }) : null;
  if (!sponsorship) throw errors.notFound('sponsor_broadcast', id);
  return sponsorship;
}

/**
 * The Sponsor broadcast response. sponsor_amount_sun / sponsor_amount_trx on Tron as the
 * specification names them; on every chain sponsor_amount / sponsor_amount_raw in the native coin
 * (sponsor_asset_id). gas_station_id is the caller's own station (null when the platform paid).
 */
export function presentSponsorBroadcast(sponsorship: Sponsorship) {
  const native = nativeOf(sponsorship.chain);
  const tron = sponsorship.chain === 'tron';
  return {
    id: sponsorship.id,
    object: 'sponsor_broadcast' as const,
    status: sponsorship.status,
    broadcast_accepted: sponsorship.broadcastAccepted,
    tx_hash: sponsorship.txHash!,
    chain: sponsorship.chain,
    mode: sponsorship.fundingModel,
    gas_station_id: sponsorship.fundingModel === 'customer_gas_station' ? sponsorship.station.id : null,
    sponsor_tx_id: sponsorship.fuelTransaction.id,
    // A sponsorship here is never re-sponsored (a replacement is a new sponsor-broadcast): it is its own root.
    root_sponsor_tx_id: sponsorship.fuelTransaction.id,
    sponsor_amount_sun: tron ? sponsorship.fuelAmount : null,
    sponsor_amount_trx: tron ? toDisplay(sponsorship.fuelAmount, native.decimals) : null,
    sponsor_amount: toDisplay(sponsorship.fuelAmount, native.decimals),
    sponsor_amount_raw: sponsorship.fuelAmount,
    sponsor_asset_id: native.id,
    failure_reason: sponsorship.failureReason ?? null,
    failure_message: sponsorship.failureMessage ?? null,
    workflow_id: sponsorshipFlow.workflowId({ sponsorshipId: sponsorship.id }),
    created_at: iso(sponsorship.createdAt),
    updated_at: iso(sponsorship.updatedAt),
  };
}

// ---- The `sponsorship-<id>` workflow's steps (activities/gas-stations.ts) ----

export interface SponsorshipDeps {
  config: Config;
  chains: ChainNodes;
  lifecycle: LifecycleDeps;
}

const FINAL: readonly SponsorshipStatus[] = ['funded', 'confirmed', 'failed'];

const lockedSponsorship = (em: EntityManager, id: string) =>
  em.findOneOrFail(Sponsorship, { id }, { lockMode: LockMode.PESSIMISTIC_WRITE, populate: ['fuelTransaction', 'sponsoredTransaction'] });

/**
 * The fuel is confirmed: the budget is charged what the fuel send really cost, and the sponsored
 * send's workflow is recorded to start (kind transaction: `funded`, final here), or the client's
 * transaction is to be broadcast (kind broadcast: `broadcasting`). Once.
 */
export async function releaseSponsorship(deps: SponsorshipDeps, sponsorshipId: string): Promise<SponsorshipStatus> {
  return deps.lifecycle.transaction(async (em) => {
    const sponsorship = await lockedSponsorship(em, sponsorshipId);
    if (sponsorship.status !== 'funding') return sponsorship.status;
    const fuel = sponsorship.fuelTransaction;
    sponsorship.budgetCharge = (BigInt(sponsorship.fuelAmount) + BigInt(fuel.fee ?? fuel.feeLimit)).toString();
    if (sponsorship.kind === 'transaction') {
      sponsorship.status = 'funded';
      recordStart(em, transactionFlow, { transactionId: sponsorship.sponsoredTransaction!.id, checkSeconds: deps.config.CHAIN_CHECK_SECONDS }, sponsorship.organization.id);
    } else {
      sponsorship.status = 'broadcasting';
    }
    return sponsorship.status;
  });
}

/**
 * Fails the sponsorship, once: a fuel send that never reached the chain charges the budget nothing,
 * and the sponsored send (never signed: it waited for the fuel) is failed with its lock released.
 * Any fuel that reached the chain stays charged to the budgets (the station's, and for the platform's
 * sponsorship the organization's). A client-signed one is announced (`sponsor_broadcast.failed`).
 */
export async function failSponsorship(deps: SponsorshipDeps, sponsorshipId: string, reason: string, message: string): Promise<SponsorshipStatus> {
  const sponsoredId = await deps.lifecycle.transaction(async (em) => {
    const sponsorship = await lockedSponsorship(em, sponsorshipId);
    if (sponsorship.status === 'failed' || sponsorship.status === 'confirmed') return null;
    if (sponsorship.fuelTransaction.status === 'failed' && sponsorship.fuelTransaction.fee == null) sponsorship.budgetCharge = '0';
    Object.assign(sponsorship, { status: 'failed', failureReason: reason, failureMessage: message });
    if (sponsorship.kind === 'transaction') return sponsorship.sponsoredTransaction!.id;
    await em.flush();
    await emit(em, {
      organizationId: sponsorship.organization.id,
      environment: sponsorship.environment,
      type: 'sponsor_broadcast.failed',
      data: { ...presentSponsorBroadcast(sponsorship), budget_charge_raw: sponsorship.budgetCharge, budget_charge_usd: sponsorship.budgetChargeUsd ?? null },
      dedupeKey: `sponsor_broadcast.failed:${sponsorship.id}`,
    });
    return null;
  });
  if (sponsoredId) await failTransaction(deps.lifecycle, sponsoredId, reason, message);
  return 'failed';
}

const sponsoredProvider = async (deps: SponsorshipDeps, sponsorship: Sponsorship) => deps.chains.provider(sponsorship.chain, sponsorship.environment);

/**
 * Broadcasts the client's bytes: `accepted` (or already known to the node), `unknown` when no node
 * answered (re-queried, never given up), `failed` when refused and unknown to the chain.
 */
export async function broadcastSponsored(deps: SponsorshipDeps, sponsorshipId: string): Promise<'accepted' | 'unknown' | 'failed'> {
  const sponsorship = await deps.lifecycle.em().findOneOrFail(Sponsorship, { id: sponsorshipId });
  if (sponsorship.status === 'failed') return 'failed';
  if (sponsorship.status === 'confirmed') return 'accepted';
  const provider = await sponsoredProvider(deps, sponsorship);
  const unlessNodeUnavailable = <T>(ask: Promise<T>) => ask.catch((error: unknown) => (error instanceof NodeUnavailableError ? ('unknown' as const) : Promise.reject(error)));
  // Its nonce was checked when the fuel was reserved, but the sender holds the fuel since: asked again right before the relay.
  const spent = await unlessNodeUnavailable(nonceSpent(provider, sponsorship));
  if (spent === 'unknown') return 'unknown';
  if (spent) return forfeitSponsorship(deps, sponsorship);
  try {
    await provider.broadcast(sponsorship.signedTransaction!);
  } catch (error) {
    if (error instanceof NodeUnavailableError) return 'unknown';
    if (!(error instanceof TransactionRejectedError)) throw error;
    const known = await unlessNodeUnavailable(provider.transactionStatus(sponsorship.txHash!));
    if (known === 'unknown') return 'unknown';
    if (known.state === 'unknown') {
      // Refused: the nonce may have been spent between the check and the relay.
      const spentSince = await unlessNodeUnavailable(nonceSpent(provider, sponsorship));
      if (spentSince === 'unknown') return 'unknown';
      if (spentSince) return forfeitSponsorship(deps, sponsorship);
      await failSponsorship(deps, sponsorshipId, error.reason, `The node refused the signed transaction: ${error.message}`);
      return 'failed';
    }
  }
  await deps.lifecycle.em().nativeUpdate(Sponsorship, { id: sponsorshipId, broadcastAccepted: false }, { broadcastAccepted: true, updatedAt: new Date() });
  return 'accepted';
}

/**
 * Ethereum: whether the sender spent the sponsored transaction's nonce on another transaction (the node
 * counts that nonce, mined or pending, and does not know ours), so that ours can never be mined. Tron
 * has no nonce: false.
 */
async function nonceSpent(provider: ChainProvider, sponsorship: Sponsorship): Promise<boolean> {
  if (sponsorship.chain !== 'ethereum') return false;
  if (!provider.nonces) throw new Error(`the ${provider.chain} provider cannot read nonces`);
  const nonce = BigInt(parseTransaction(sponsorship.signedTransaction! as Hex).nonce ?? 0);
  // The nonce first, then our transaction: ours taken in between is then known, never mistaken for another.
  if ((await provider.nonces(sponsorship.senderAddress)).pending <= nonce) return false;
  return (await provider.transactionStatus(sponsorship.txHash!)).state === 'unknown';
}

/**
 * The sender spent its nonce after the fuel reached it: nothing is relayed, and the fuel, which cannot be
 * taken back from an address we do not hold, stays charged to the organization's sponsorship budgets
 * (the station's daily budget; for the platform's sponsorship also the organization's USD budget);
 * `sponsor_broadcast.failed` with failure_reason `nonce_spent` tells the organization what it was charged.
 */
async function forfeitSponsorship(deps: SponsorshipDeps, sponsorship: Sponsorship): Promise<'failed'> {
  await failSponsorship(
    deps,
    sponsorship.id,
    'nonce_spent',
    `${sponsorship.senderAddress} spent the transaction's nonce on another transaction after its fuel arrived: it can never be mined. The fuel stays at the sender's address, charged to the organization's sponsorship budget.`,
  );
  return 'failed';
}

/** The client's transaction: `waiting`, `missing` (broadcast again), or mined at the confirmation count: confirmed (failed if its call reverted). */
export async function checkSponsored(deps: SponsorshipDeps, sponsorshipId: string): Promise<'waiting' | 'missing' | 'confirmed' | 'failed'> {
  const sponsorship = await deps.lifecycle.em().findOneOrFail(Sponsorship, { id: sponsorshipId });
  if (sponsorship.status === 'confirmed' || sponsorship.status === 'failed') return sponsorship.status;
  const status = await (await sponsoredProvider(deps, sponsorship)).transactionStatus(sponsorship.txHash!);
  if (status.state === 'unknown') return 'missing';
  if (status.state === 'pending') return 'waiting';
  if (status.confirmations < requiredConfirmations(deps.config, sponsorship.chain)) return 'waiting';
  if (!status.succeeded) {
    await failSponsorship(deps, sponsorshipId, 'reverted', 'The transaction was mined but its call reverted: the sponsored fee was paid, nothing was sent.');
    return 'failed';
  }
  await deps.lifecycle.transaction(async (em) => {
    const row = await lockedSponsorship(em, sponsorshipId);
    if (!FINAL.includes(row.status)) row.status = 'confirmed';
  });
  return 'confirmed';
}
