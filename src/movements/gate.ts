import type { EntityManager } from '@mikro-orm/postgresql';
import { addressBookEntryIdsOf } from '../address-book/service';
import { ApiKey, type Environment } from '../api-keys/entities';
import { priceSourceFor, usdValue } from '../catalogue/prices';
import { assetById, findChain, type AssetInfo, type ChainId } from '../catalogue/service';
import type { Config } from '../config';
import { Address } from '../custody/entities';
import { sql } from '../db/lean';
import { decideTransaction } from '../policies/decisions';
import { resolveActor, type Caller, type PolicyActor, type PolicyScope } from '../policies/service';
import type { EvaluablePolicy, EvaluationRequest, EvaluationResult } from '../policies/evaluator';
import { resolveHeldSend, type HeldSendSubject } from '../policies/held-sends';
import { VELOCITY_FIELDS, type DestinationType, type OperationType, type SourceType, type TxType } from '../policies/schema';
import { toDisplay } from '../shared/money';

/**
 * The movement gate: the one decision every movement of value out of the organization passes
 * before anything is signed, reserved or sent. Out of a custody address: sends, sponsored sends, a
 * station's fuel, refills, consolidation sweeps, payout refunds and signatures. Out of a balance the
 * service holds: Lightning payments, card fundings and card withdrawals. All come here with who
 * caused them, what moves, its USD value, its fee and where it goes; the organization's enforced policies decide (policies/service
 * `decideTransaction`: block 403, approval or delay 400, alert recorded, every decision audited).
 * A send asked through the API and held for approval opens an approval request bound to it, and
 * passes once that is approved (policies/held-sends.ts).
 */

/**
 * An automation acting for an organization: a gas station's refill or fuel, a consolidation rule's
 * sweep, a payout trip's refund. `actorKeyId` is the key that caused it (created the station or
 * rule, or triggered the manual run); null when none did (the service's own payout desk).
 */
export interface AutomationInitiator {
  organizationId: string;
  environment: Environment;
  automationRuleId: string;
  actorKeyId: string | null;
}

/** Who causes a movement: a caller's key (acting for a member or not), or an automation. */
export type MovementInitiator = Caller | AutomationInitiator;

export const isAutomation = (initiator: MovementInitiator): initiator is AutomationInitiator => 'automationRuleId' in initiator;

/** What every movement says: its kind, what it costs in fees, where it goes. */
interface MovementCommon {
  operationType: OperationType;
  /** The most the fee can cost: for a wallet, in base units of the chain's native coin; for a balance, in the balance's own unit. */
  feeRaw?: bigint;
  txType: TxType;
  /**
   * The velocity fields (on-chain sends): read once the enforced policies are known, under the
   * organization's velocity lock when a policy tests one (see judgeMovement).
   */
  velocity?: () => Promise<EvaluationRequest>;
  /** A send asked through the API: a require_approval hold is bound to it (policies/held-sends.ts). Other movements are refused as they are. */
  heldSend?: HeldSendSubject;
  /** Only a rule naming its operation_type may let it through; with no enforced policy it is refused (raw signing in live). */
  namedAllowRequired?: boolean;
}

/** What leaves a custody address, to where, at what fee. */
export interface WalletMovement extends MovementCommon {
  wallet: { id: string; chain: ChainId; network: string; environment: Environment; vault: { id: string } };
  fromAddress: string;
  /**
   * The destination and, when the kind decides it (a station, a sponsored sender), its type; otherwise
   * it is looked up. Absent only for a signature whose payload names none: destination_type unknown.
   */
  destination?: { address: string; type?: DestinationType };
  /** The asset and base units moved; absent when unknown (a signature whose payload says no amount, or of a token the catalogue does not know). */
  value?: { asset: AssetInfo; amount: bigint };
  /** What a signature's payload also says: the token contract it moves or approves, base units of a token outside the catalogue, who it lets spend. */
  authorizes?: { tokenAddress?: string; amountRaw?: bigint; spender?: string };
}

/** US dollars as the company balance and cards count them: cents, each worth exactly itself (no price is read). */
export const USD_CENTS = { symbol: 'USD', decimals: 2 } as const;

/**
 * What leaves a balance the service holds for the organization: its Lightning balance (sats of
 * BTC, priced as BTC is), its USD company balance, or a card's balance (cents). `source.id` names
 * the card; the destination is the payee node, the card funded, or the company balance.
 */
export interface BalanceMovement extends MovementCommon {
  source: { type: Extract<SourceType, 'lightning_balance' | 'company_balance' | 'card'>; id?: string; environment: Environment };
  destination: { address?: string; type: DestinationType };
  value: { asset: AssetInfo | typeof USD_CENTS; amount: bigint };
}

export type Movement = WalletMovement | BalanceMovement;

const isWalletMovement = (movement: Movement): movement is WalletMovement => 'wallet' in movement;
const environmentOf = (movement: Movement): Environment => (isWalletMovement(movement) ? movement.wallet.environment : movement.source.environment);

export interface MovementDecision {
  request: EvaluationRequest;
  evaluation: EvaluationResult;
  actor: PolicyActor;
}

/** Judges `movement` for `initiator`: the evaluation when it may go; throws the policy refusal otherwise. */
export async function judgeMovement(em: EntityManager, config: Config, initiator: MovementInitiator, movement: Movement): Promise<MovementDecision> {
  const actor = await movementActor(em, initiator);
  const fields = isWalletMovement(movement) ? await walletFields(em, config, initiator, movement) : balanceFields(config, movement);
  const deciding = { ...actor, environment: environmentOf(movement) };
  const { heldSend, velocity, namedAllowRequired } = movement;
  const { request, evaluation } = await decideTransaction(em, { ...(await actorFields(em, initiator)), ...fields }, deciding, {
    ...(heldSend ? { resolveHold: (held) => resolveHeldSend(em, deciding, heldSend, held) } : {}),
    ...(namedAllowRequired ? { namedAllowRequired } : {}),
    ...(velocity
      ? {
          addFields: async (policies) => {
            await lockVelocityIfTested(em, deciding, policies);
            return velocity();
          },
        }
      : {}),
  });
  return { request, evaluation, actor };
}

/**
 * Velocity rules count what the organization sent in this environment before the movement judged;
 * concurrent movements would each count without the others. So when an enforced policy tests a
 * velocity field, the movement takes the organization's velocity lock (per environment,
 * transaction-scoped) before its velocity is read, and holds it until its own row is committed:
 * the next one waits, then reads a history that counts it. Without such a rule nothing waits.
 */
async function lockVelocityIfTested(em: EntityManager, scope: PolicyScope, policies: readonly EvaluablePolicy[]): Promise<void> {
  const tested = policies.some((policy) => policy.rules.some((rule) => rule.conditions.some((condition) => VELOCITY_FIELDS.has(condition.field))));
  if (tested) await sql(em, 'select pg_advisory_xact_lock(hashtextextended($1, 0))', [`velocity:${scope.organizationId}:${scope.environment}`]);
}

/** The actor the audit log names: the member or key, or for an automation the system acting for the key that set it up. */
async function movementActor(em: EntityManager, initiator: MovementInitiator): Promise<PolicyActor> {
  if (!isAutomation(initiator)) return resolveActor(em, initiator);
  const { organizationId, environment, actorKeyId, automationRuleId } = initiator;
  return { organizationId, environment, id: actorKeyId ?? 'system', name: `System (automation ${automationRuleId})`, type: 'system', apiKeyId: actorKeyId };
}

async function actorFields(em: EntityManager, initiator: MovementInitiator): Promise<EvaluationRequest> {
  if (!isAutomation(initiator)) {
    return { actor_type: 'apikey', actor_id: initiator.apiKeyId, ...(initiator.memberId ? { user_id: initiator.memberId } : {}), is_automated: false };
  }
  const key = initiator.actorKeyId ? await em.findOne(ApiKey, { id: initiator.actorKeyId }, { fields: ['member'] }) : null;
  return {
    actor_type: 'system',
    actor_id: initiator.actorKeyId ?? 'system',
    ...(key?.member ? { user_id: key.member.id } : {}),
    is_automated: true,
    automation_rule_id: initiator.automationRuleId,
  };
}

async function walletFields(em: EntityManager, config: Config, tenant: MovementInitiator, movement: WalletMovement): Promise<EvaluationRequest> {
  const { wallet, value, feeRaw, destination, authorizes } = movement;
  const prices = priceSourceFor(config, wallet.environment);
  const native = assetById(findChain(wallet.chain).nativeAssetId);
  const amountUsd = value ? usdValue(prices, value.asset, value.amount) : null;
  const feeUsd = feeRaw === undefined ? null : usdValue(prices, native, feeRaw);
  // A signature that does not say its value (any digest may be a transaction's) is priced as unknown.
  const priceUnavailable = amountUsd === null || (feeRaw !== undefined && feeUsd === null);
  return {
    operation_type: movement.operationType,
    tx_type: movement.txType,
    source_type: 'wallet',
    chain: wallet.chain,
    network: wallet.network,
    wallet_id: wallet.id,
    vault_id: wallet.vault.id,
    from_address: movement.fromAddress,
    ...(value
      ? { amount: toDisplay(value.amount, value.asset.decimals), amount_raw: value.amount.toString(), asset_symbol: value.asset.symbol }
      : {}),
    ...(authorizes?.amountRaw !== undefined ? { amount_raw: authorizes.amountRaw.toString() } : {}),
    ...(authorizes?.tokenAddress ? { token_address: authorizes.tokenAddress } : {}),
    ...(authorizes?.spender ? { spender: authorizes.spender } : {}),
    ...(amountUsd !== null ? { amount_usd: amountUsd } : {}),
    ...(feeRaw !== undefined ? { fee_raw: feeRaw.toString() } : {}),
    ...(feeUsd !== null ? { fee_usd: feeUsd } : {}),
    price_unavailable: priceUnavailable,
    ...(destination
      ? { to_address: destination.address, destination_type: destination.type ?? (await destinationType(em, { organizationId: tenant.organizationId, environment: wallet.environment }, wallet, destination.address)) }
      : { destination_type: 'unknown' }),
  };
}

/**
 * A balance's movement: its amount in the balance's unit and in USD (cents are their own value; sats
 * are priced as BTC, and without a price the request says price_unavailable), its fee in the same
 * unit, and where it goes. No chain, wallet or address: the source is the balance (or the card).
 */
function balanceFields(config: Config, movement: BalanceMovement): EvaluationRequest {
  const { source, value, feeRaw, destination } = movement;
  const { asset } = value;
  const inUsd = (amount: bigint) => ('id' in asset ? usdValue(priceSourceFor(config, source.environment), asset, amount) : toDisplay(amount, USD_CENTS.decimals));
  const amountUsd = inUsd(value.amount);
  const feeUsd = feeRaw === undefined ? null : inUsd(feeRaw);
  return {
    operation_type: movement.operationType,
    tx_type: movement.txType,
    source_type: source.type,
    ...(source.id ? { from_address: source.id } : {}),
    amount: toDisplay(value.amount, asset.decimals),
    amount_raw: value.amount.toString(),
    asset_symbol: asset.symbol,
    ...(amountUsd !== null ? { amount_usd: amountUsd } : {}),
    ...(feeRaw !== undefined ? { fee_raw: feeRaw.toString() } : {}),
    ...(feeUsd !== null ? { fee_usd: feeUsd } : {}),
    price_unavailable: amountUsd === null || (feeRaw !== undefined && feeUsd === null),
    ...(destination.address ? { to_address: destination.address } : {}),
    destination_type: destination.type,
  };
}

/**
 * Where a destination stands for the organization: one of its own custody addresses (vault), an
 * address-book entry usable now (address_book), or any other address (one_time_address).
 */
async function destinationType(em: EntityManager, tenant: { organizationId: string; environment: Environment }, wallet: WalletMovement['wallet'], address: string): Promise<DestinationType> {
  const own = await em.findOne(Address, { organization: tenant.organizationId, chain: wallet.chain, network: wallet.network, address }, { fields: ['id'] });
  if (own) return 'vault';
  return (await addressBookEntryIdsOf(em, tenant, wallet.chain, address)).length > 0 ? 'address_book' : 'one_time_address';
}
