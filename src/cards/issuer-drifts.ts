import { Entity, Enum, Index, ManyToOne, PrimaryKey, Property } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { ENVIRONMENTS, type Environment } from '../api-keys/entities';
import { emit } from '../events/service';
import type { Logger } from '../logger';
import { Organization } from '../organizations/entities';
import { prefixedId } from '../shared/ids';
import { iso, isoOrNull } from '../shared/time';
import { Card } from './entities';

/**
 * What a drift between Stripe Issuing and our cards compares (src/cards/stripe-reconciliation.ts):
 * - `authorization`: what Stripe holds for one authorization on one of our cards (0 when it no longer
 *   lists it pending) against what our card is charged for it (its purchases less reversals, no capture yet);
 * - `issuing_balance`: Stripe's available Issuing balance against what every live card may still spend
 *   (the platform's, no organization): Stripe short of it means purchases we would approve cannot be paid.
 */
export const ISSUER_DRIFT_SUBJECTS = ['authorization', 'issuing_balance'] as const;
export type IssuerDriftSubject = (typeof ISSUER_DRIFT_SUBJECTS)[number];

/**
 * A difference found by the Stripe Issuing reconciliation: `open` when found (announced once as
 * `card_issuer.drift` to its organization, logged, counted in /metrics), its figures updated while it
 * lasts, `resolved` once they agree again.
 */
@Entity({ tableName: 'card_issuer_drifts' })
@Index({ properties: ['status', 'subject', 'subjectId'] })
export class CardIssuerDrift {
  @PrimaryKey({ type: 'text' })
  id: string = prefixedId('idrift');

  /** The organization of the card; null for the platform's Issuing balance. */
  @ManyToOne(() => Organization, { deleteRule: 'cascade', nullable: true })
  organization?: Organization | null;

  /** Live: Stripe Issuing serves live cards only. */
  @Enum({ items: () => ENVIRONMENTS, nativeEnumName: 'environment' })
  environment!: Environment;

  @Property({ type: 'text' })
  subject!: IssuerDriftSubject;

  /** The Stripe authorization (`iauth_...`), or the balance's currency. */
  @Property({ type: 'text' })
  subjectId!: string;

  @ManyToOne(() => Card, { deleteRule: 'cascade', nullable: true })
  card?: Card | null;

  /** Cents: what our cards say (the authorization's charge; what live cards may spend). */
  @Property({ type: 'decimal', columnType: 'numeric(38,0)' })
  ourAmount!: string;

  /** Cents: what Stripe says (the amount it holds; its available Issuing balance). */
  @Property({ type: 'decimal', columnType: 'numeric(38,0)' })
  issuerAmount!: string;

  @Property({ type: 'text' })
  status!: 'open' | 'resolved';

  @Property({ type: 'timestamptz' })
  firstSeenAt: Date = new Date();

  @Property({ type: 'timestamptz' })
  lastSeenAt: Date = new Date();

  @Property({ type: 'timestamptz', nullable: true })
  resolvedAt?: Date | null;
}

/** One comparison of a reconciliation pass: whether the two figures are apart is the drift's verdict. */
export interface IssuerComparison {
  subject: IssuerDriftSubject;
  subjectId: string;
  organizationId: string | null;
  cardId: string | null;
  ours: bigint;
  issuer: bigint;
  /** The balance is a floor, not an equality: Stripe holding more than cards may spend is no drift. */
  differs: boolean;
}

/**
 * The verdict on one comparison against its open drift, as the ledger's drifts are judged
 * (src/monitoring/drifts.ts): opened (logged, and announced as `card_issuer.drift` once, to the card's
 * organization), its figures updated while it lasts, or resolved once the figures agree.
 */
export async function judgeIssuerComparison(em: EntityManager, log: Logger, comparison: IssuerComparison, open: CardIssuerDrift | null): Promise<CardIssuerDrift | null> {
  const now = new Date();
  if (!comparison.differs) {
    if (open) Object.assign(open, { status: 'resolved', resolvedAt: now, lastSeenAt: now });
    return null;
  }
  const figures = { ourAmount: comparison.ours.toString(), issuerAmount: comparison.issuer.toString(), lastSeenAt: now };
  if (open) return Object.assign(open, figures);
  const drift = em.create(CardIssuerDrift, {
    organization: comparison.organizationId ? em.getReference(Organization, comparison.organizationId) : null,
    environment: 'live',
    subject: comparison.subject,
    subjectId: comparison.subjectId,
    card: comparison.cardId ? em.getReference(Card, comparison.cardId) : null,
    ...figures,
    status: 'open',
    firstSeenAt: now,
  });
  await em.flush();
  log.warn(
    { drift_id: drift.id, subject: drift.subject, subject_id: drift.subjectId, organization_id: comparison.organizationId, ours: drift.ourAmount, issuer: drift.issuerAmount },
    `card issuer drift: Stripe Issuing's ${drift.subject} differs from our cards`,
  );
  if (comparison.organizationId) {
    await emit(em, { organizationId: comparison.organizationId, environment: drift.environment, type: 'card_issuer.drift', data: presentIssuerDrift(drift), dedupeKey: `card_issuer.drift:${drift.id}` });
  }
  return drift;
}

export function presentIssuerDrift(drift: CardIssuerDrift) {
  return {
    id: drift.id,
    object: 'card_issuer_drift',
    subject: drift.subject,
    authorization_id: drift.subject === 'authorization' ? drift.subjectId : null,
    card_id: drift.card?.id ?? null,
    our_amount: drift.ourAmount,
    issuer_amount: drift.issuerAmount,
    difference: (BigInt(drift.issuerAmount) - BigInt(drift.ourAmount)).toString(),
    status: drift.status,
    first_seen_at: iso(drift.firstSeenAt),
    resolved_at: isoOrNull(drift.resolvedAt),
  };
}
