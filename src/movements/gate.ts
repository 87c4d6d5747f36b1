import type { EntityManager } from '@mikro-orm/postgresql';
import { addressBookEntryIdsOf } from '../address-book/service';
import type { AuthContext } from '../api-keys/auth-context';
import { ApiKey, type Environment } from '../api-keys/entities';
import { priceSourceFor, usdValue } from '../catalogue/prices';
import { assetById, findChain, type AssetInfo, type ChainId } from '../catalogue/service';
import type { Config } from '../config';
import { Address } from '../custody/entities';
import { decideTransaction, resolveActor, type PolicyActor } from '../policies/service';
import type { EvaluationRequest, EvaluationResult } from '../policies/evaluator';
import { resolveHeldSend, type HeldSendSubject } from '../policies/held-sends';
import type { DestinationType, OperationType, TxType } from '../policies/schema';
import { toDisplay } from '../shared/money';

/**
 * The movement gate: the one decision every movement of value out of a custody address passes
 * before anything is signed. Sends, sponsored sends, a station's fuel, refills, consolidation
 * sweeps, payout refunds and signatures all come here with who caused them, what moves, its USD
 * value, its fee and where it goes; the organization's enforced policies decide (policies/service
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
export type MovementInitiator = AuthContext | AutomationInitiator;

export const isAutomation = (initiator: MovementInitiator): initiator is AutomationInitiator => 'automationRuleId' in initiator;

/** What leaves, from where, to where, at what fee. */
export interface Movement {
  operationType: OperationType;
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
  /** The most the network fee can cost, in base units of the chain's native coin. */
  feeRaw?: bigint;
  txType: TxType;
  /** Fields the caller computed (the sending velocity). */
  extra?: EvaluationRequest;
  /** A send asked through the API: a require_approval hold is bound to it (policies/held-sends.ts). Other movements are refused as they are. */
  heldSend?: HeldSendSubject;
  /** Only a rule naming its operation_type may let it through; with no enforced policy it is refused (raw signing in live). */
  namedAllowRequired?: boolean;
}

export interface MovementDecision {
  request: EvaluationRequest;
  evaluation: EvaluationResult;
  actor: PolicyActor;
}

/** Judges `movement` for `initiator`: the evaluation when it may go; throws the policy refusal otherwise. */
export async function judgeMovement(em: EntityManager, config: Config, initiator: MovementInitiator, movement: Movement): Promise<MovementDecision> {
  const actor = await movementActor(em, initiator);
  const request = { ...(await actorFields(em, initiator)), ...(await movementFields(em, config, initiator, movement)), ...movement.extra };
  const deciding = { ...actor, environment: movement.wallet.environment };
  const { heldSend, namedAllowRequired } = movement;
  const evaluation = await decideTransaction(em, request, deciding, {
    ...(heldSend ? { resolveHold: (held) => resolveHeldSend(em, deciding, heldSend, held) } : {}),
    ...(namedAllowRequired ? { namedAllowRequired } : {}),
  });
  return { request, evaluation, actor };
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

async function movementFields(em: EntityManager, config: Config, tenant: MovementInitiator, movement: Movement): Promise<EvaluationRequest> {
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
 * Where a destination stands for the organization: one of its own custody addresses (vault), an
 * address-book entry usable now (address_book), or any other address (one_time_address).
 */
async function destinationType(em: EntityManager, tenant: { organizationId: string; environment: Environment }, wallet: Movement['wallet'], address: string): Promise<DestinationType> {
  const own = await em.findOne(Address, { organization: tenant.organizationId, chain: wallet.chain, network: wallet.network, address }, { fields: ['id'] });
  if (own) return 'vault';
  return (await addressBookEntryIdsOf(em, tenant, wallet.chain, address)).length > 0 ? 'address_book' : 'one_time_address';
}
