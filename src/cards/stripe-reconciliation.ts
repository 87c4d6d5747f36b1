import type { EntityManager } from '@mikro-orm/postgresql';
import type Stripe from 'stripe';
import { sql } from '../db/lean';
import type { Logger } from '../logger';
import { isUuid } from '../shared/ids';
import type { StripeIssuingReconciliationInput, StripeIssuingReconciliationResult } from './flows/issuer-reconciliation';
import { CardIssuerDrift, judgeIssuerComparison, type IssuerComparison } from './issuer-drifts';

/**
 * The Stripe Issuing reconciliation (Schedule `stripe-issuing-reconciliation`, docs/cards.md):
 * Stripe's open authorizations on our cards and its Issuing balance against our cards' money.
 * - Each authorization Stripe holds money for on one of our cards, and each our cards are charged
 *   for with no capture yet, compared by amount: Stripe's held `amount` (0 when it no longer lists
 *   it pending) against the card's charge for it (its purchases less its reversals). A difference
 *   is an event we never got (a reversal, an expiry) or a decision Stripe did not follow.
 * - Stripe's available Issuing balance (USD) against what every live card may still spend (its
 *   balance less holds, when above zero): Stripe holding less means purchases we would approve
 *   cannot be paid. Platform-wide, so compared only by an unscoped pass.
 * Each difference is a drift judged as the ledger's are (issuer-drifts.ts).
 */

/**
 * How far back an open charge is looked for (by its authorization's first purchase): Stripe closes an authorization it holds
 * past 31 days at the latest. Its later movements are read over twice that.
 */
const LOOKBACK_DAYS = 35;

interface Held {
  organizationId: string;
  cardId: string | null;
  amount: bigint;
}

export async function reconcileStripeIssuing(
  deps: { em: () => EntityManager; log: Logger; stripe: Stripe },
  input: StripeIssuingReconciliationInput,
): Promise<StripeIssuingReconciliationResult> {
  const stripeHolds = await heldByStripe(deps.stripe, input.organizationId);
  const em = deps.em();
  const charges = new Map((await chargedByUs(em, input.organizationId)).map((charge) => [charge.authorization_id, charge]));
  const comparisons: IssuerComparison[] = [];
  for (const id of new Set([...stripeHolds.keys(), ...charges.keys()])) {
    const held = stripeHolds.get(id);
    const charge = charges.get(id);
    const ours = charge ? BigInt(charge.charged) : 0n;
    const issuer = held?.amount ?? 0n;
    comparisons.push({
      subject: 'authorization',
      subjectId: id,
      organizationId: charge?.organization_id ?? held!.organizationId,
      cardId: charge?.card_id ?? held?.cardId ?? null,
      ours,
      issuer,
      differs: ours !== issuer,
    });
  }
  if (!input.organizationId) comparisons.push(await balanceComparison(em, deps.stripe));

  let openDrifts = 0;
  await em.transactional(async (tx) => {
    const open = await tx.find(CardIssuerDrift, { status: 'open', environment: 'live', ...(input.organizationId ? { organization: input.organizationId } : {}) });
    const unjudged = new Map(open.map((drift) => [`${drift.subject}:${drift.subjectId}`, drift]));
    for (const comparison of comparisons) {
      const key = `${comparison.subject}:${comparison.subjectId}`;
      const drift = unjudged.get(key) ?? null;
      unjudged.delete(key);
      if (await judgeIssuerComparison(tx, deps.log, comparison, drift)) openDrifts += 1;
    }
    // An open drift no comparison names any more (an authorization closed on both sides): they agree now. A scoped pass
    // reads only its organization's drifts, so the platform's balance drift is never among them.
    for (const drift of unjudged.values()) Object.assign(drift, { status: 'resolved', resolvedAt: new Date(), lastSeenAt: new Date() });
  });
  return { authorizationsCompared: comparisons.filter((comparison) => comparison.subject === 'authorization').length, openDrifts };
}

/** Stripe's pending USD authorizations on our cards (their metadata names our organization), by id. */
async function heldByStripe(stripe: Stripe, organizationId: string | undefined): Promise<Map<string, Held>> {
  const held = new Map<string, Held>();
  for await (const authorization of stripe.issuing.authorizations.list({ status: 'pending', limit: 100 })) {
    const owner = authorization.card.metadata.organization_id;
    if (!owner || !isUuid(owner) || authorization.currency !== 'usd') continue;
    if (organizationId && owner !== organizationId) continue;
    const cardId = authorization.card.metadata.card_id;
    held.set(authorization.id, { organizationId: owner, cardId: cardId && isUuid(cardId) ? cardId : null, amount: BigInt(authorization.amount) });
  }
  return held;
}

/** Our live cards' charges for Stripe authorizations with no capture recorded, still above zero. */
function chargedByUs(em: EntityManager, organizationId: string | undefined) {
  return sql<{ organization_id: string; card_id: string; authorization_id: string; charged: string }>(
    em,
    `select c.organization_id, c.id as card_id, split_part(t.reference, ':', 2) as authorization_id,
            sum(t.balance_before - t.balance_after)::text as charged
       from card_transactions t join cards c on c.id = t.card_id
      where t.environment = 'live' and c.issuer_card_id is not null and ($1::uuid is null or t.organization_id = $1::uuid)
        and t.type in ('purchase', 'reversal', 'capture_adjustment') and starts_with(t.reference, 'issuer_authorization:')
        and t.created_at > now() - make_interval(days => ${2 * LOOKBACK_DAYS})
      group by 1, 2, 3
     having min(t.created_at) > now() - make_interval(days => ${LOOKBACK_DAYS})
        and not bool_or(t.reference like 'issuer_authorization:%:capture:%') and sum(t.balance_before - t.balance_after) > 0`,
    [organizationId ?? null],
  );
}

/** Stripe's available USD Issuing balance against what every live card may still spend. */
async function balanceComparison(em: EntityManager, stripe: Stripe): Promise<IssuerComparison> {
  const balance = await stripe.balance.retrieve();
  const available = BigInt(balance.issuing?.available.find((entry) => entry.currency === 'usd')?.amount ?? 0);
  const [row] = await sql<{ spendable: string }>(
    em,
    `select coalesce(sum(greatest(balance - held, 0)), 0)::text as spendable from cards where environment = 'live' and issuer_card_id is not null and status in ('active', 'frozen')`,
    [],
  );
  const spendable = BigInt(row!.spendable);
  return { subject: 'issuing_balance', subjectId: 'usd', organizationId: null, cardId: null, ours: spendable, issuer: available, differs: available < spendable };
}
