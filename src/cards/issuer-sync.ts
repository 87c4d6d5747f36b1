import type { EntityManager } from '@mikro-orm/postgresql';
import { lockingOnlyItsRow } from '../db/row-lock';
import { emit } from '../events/service';
import { uuid } from '../shared/ids';
import { iso } from '../shared/time';
import { recordStart } from '../temporal/starter';
import { Card } from './entities';
import { cardIssuerSyncFlow } from './flows/issuer-sync';
import { cardDestinations } from './lookups';

/**
 * Records, in the caller's transaction, the start that carries a card's new status or limits to the
 * issuer's copy of it, when the issuer keeps one (live cards). Each change starts its own run; every
 * run sends the card as it then is, so the last one leaves the issuer where we are.
 */
export function recordIssuerSync(em: EntityManager, card: Card): void {
  if (card.issuerCardId) recordStart(em, cardIssuerSyncFlow, { cardId: card.id, change: uuid() }, card.organization.id);
}

/**
 * The issuer refused to take the card as it is (IssuerDeclined): the sync ends here, recorded on the
 * card (`issuer_sync_failure`, `issuer_sync_failed_at`) and announced once per refusal as
 * `card.issuer_sync_failed`; asking again would be refused again. Our own decisions stay authoritative
 * meanwhile (a frozen card is declined here whatever the issuer's copy says).
 */
export async function recordIssuerSyncRefusal(em: EntityManager, cardId: string, reason: string): Promise<void> {
  const card = await em.findOneOrFail(Card, { id: cardId }, { populate: ['customer'], ...lockingOnlyItsRow(em, Card) });
  const failedAt = new Date();
  Object.assign(card, { issuerSyncFailure: reason, issuerSyncFailedAt: failedAt });
  await em.flush();
  await emit(em, {
    organizationId: card.organization.id,
    environment: card.environment,
    type: 'card.issuer_sync_failed',
    data: { card_id: card.id, status: card.status, failure_reason: reason, failed_at: iso(failedAt) },
    destinations: cardDestinations(card),
  });
}

/** A sync the issuer took clears an earlier refusal. */
export async function clearIssuerSyncRefusal(em: EntityManager, cardId: string): Promise<void> {
  await em.nativeUpdate(Card, { id: cardId, issuerSyncFailedAt: { $ne: null } }, { issuerSyncFailure: null, issuerSyncFailedAt: null });
}
