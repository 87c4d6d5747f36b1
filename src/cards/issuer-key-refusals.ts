import { Entity, PrimaryKey, Property } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Logger } from '../logger';
import type { IssuerKeyRefused } from './issuer';

/**
 * The platform's Stripe key refused by Stripe for a call (a restricted key without a permission, or a key Stripe
 * does not take), per permission: what the operator grants the key (or replaces it with), and when it was last
 * needed. Counted in /metrics as `stripe_issuing_key_refusals_total{permission}` (stripe-metrics.ts). The key is the
 * platform's, so no organization: the card it happened on carries its own state (`card.issuer_sync_failed`, or a
 * failed provisioning).
 */
@Entity({ tableName: 'stripe_issuing_key_refusals' })
export class StripeIssuingKeyRefusal {
  /** Stripe's name of the permission the key lacks (`rak_issuing_card_write`), `authentication` for a key refused outright, `unnamed` when Stripe names none. */
  @PrimaryKey({ type: 'text' })
  permission!: string;

  /** The call last refused, in our words (`card's update`). */
  @Property({ type: 'text' })
  lastOperation!: string;

  @Property({ type: 'integer' })
  refusals!: number;

  @Property({ type: 'timestamptz' })
  firstSeenAt!: Date;

  @Property({ type: 'timestamptz' })
  lastSeenAt!: Date;
}

/** Counts the refusal in the caller's transaction (the one that records the card's state, if a card's) and tells the operator what to grant. */
export async function recordIssuerKeyRefusal(em: EntityManager, log: Logger, refusal: IssuerKeyRefused, cardId: string | null): Promise<void> {
  await em.execute(
    `insert into stripe_issuing_key_refusals (permission, last_operation, refusals, first_seen_at, last_seen_at) values (?, ?, 1, now(), now())
       on conflict (permission) do update set last_operation = excluded.last_operation, refusals = stripe_issuing_key_refusals.refusals + 1, last_seen_at = now()`,
    [refusal.permission, refusal.operation],
  );
  log.error(
    { card_id: cardId, permission: refusal.permission, operation: refusal.operation },
    refusal.permission === 'authentication'
      ? 'Stripe refused STRIPE_ISSUING_SECRET_KEY: replace it with a key Stripe takes'
      : `Stripe refused STRIPE_ISSUING_SECRET_KEY for the ${refusal.operation}: grant the restricted key the permission ${refusal.permission}`,
  );
}
