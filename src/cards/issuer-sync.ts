import type { EntityManager } from '@mikro-orm/postgresql';
import { uuid } from '../shared/ids';
import { recordStart } from '../temporal/starter';
import type { Card } from './entities';
import { cardIssuerSyncFlow } from './flows/issuer-sync';

/**
 * Records, in the caller's transaction, the start that carries a card's new status or limits to the
 * issuer's copy of it, when the issuer keeps one (live cards). Each change starts its own run; every
 * run sends the card as it then is, so the last one leaves the issuer where we are.
 */
export function recordIssuerSync(em: EntityManager, card: Card): void {
  if (card.issuerCardId) recordStart(em, cardIssuerSyncFlow, { cardId: card.id, change: uuid() }, card.organization.id);
}
