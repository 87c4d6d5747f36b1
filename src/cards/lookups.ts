/**
 * The tenant's cards and customers: the scope every lookup filters by, the card and customer reads,
 * the card list's filter and page info; and what every card step names: the destinations of a
 * card's events and the 409 of a step its state forbids.
 */
import type { FilterQuery } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { AuthContext } from '../api-keys/auth-context';
import { findOneByColumns, readOneByColumns } from '../db/lean';
import { errors } from '../shared/errors';
import { isUuid } from '../shared/ids';
import type { Page } from '../shared/pagination';
import { Card, Customer } from './entities';
import { lockingOnlyItsRow } from '../db/row-lock';

export const invalidStateTransition = (message: string) => errors.conflict('invalid_state_transition', message);

export const cardDestinations = (card: Card) => (card.webhookUrl ? [{ kind: 'card' as const, id: card.id, url: card.webhookUrl }] : []);

/** Whose and which environment's cards a request may see and touch: the calling key's. */
export type CardTenant = Pick<AuthContext, 'organizationId' | 'environment'>;

/** Every card, customer and card transaction lookup filters by both: the other environment's record is another company's. */
export const tenantFilter = (tenant: CardTenant) => ({ organization: tenant.organizationId, environment: tenant.environment });

/** The caller's card, or 404 (another company's or the other environment's card and a malformed id look the same). */
export async function findCard(em: EntityManager, tenant: CardTenant, cardId: string, lock = false): Promise<Card> {
  if (!isUuid(cardId)) throw errors.notFound('card', cardId, 'cardId');
  const card = lock
    ? await em.findOne(Card, { id: cardId, ...tenantFilter(tenant) }, { populate: ['customer'], ...lockingOnlyItsRow(em, Card) })
    : await findOneByColumns(em, Card, { id: cardId, ...tenantFilter(tenant) });
  if (!card) throw errors.notFound('card', cardId, 'cardId');
  // Unlocked reads present the card alone: its customer is a reference, whose id the card's row holds.
  return card;
}

/** What a presented card never needs: its sealed PAN and CVV, and its webhook signing secrets. */
export const CARD_SECRETS = ['secrets', 'webhookSecrets'] as const;

/**
 * The card as its row says, detached (src/db/lean.ts), its secrets neither read nor set: for a read that
 * presents it and passes it to no entity manager.
 */
export async function readCard(em: EntityManager, tenant: CardTenant, cardId: string): Promise<Card> {
  const card = isUuid(cardId) ? await readOneByColumns(em, Card, { id: cardId, ...tenantFilter(tenant) }, CARD_SECRETS) : null;
  if (!card) throw errors.notFound('card', cardId, 'cardId');
  return card;
}

export async function findCustomer(em: EntityManager, tenant: CardTenant, customerId: string): Promise<Customer> {
  const customer = isUuid(customerId) ? await findOneByColumns(em, Customer, { id: customerId, ...tenantFilter(tenant) }) : null;
  if (!customer) throw errors.notFound('customer', customerId, 'customerId');
  return customer;
}

/** The /api page_info of a keyset page. */
export const pageInfo = (page: Page<unknown>, limit: number) => ({ next_cursor: page.nextCursor, has_more: page.hasMore, limit });

const escapeLike = (value: string) => value.replace(/[\\%_]/g, (character) => `\\${character}`);

export function cardListFilter(tenant: CardTenant, query: { card_type?: string; status?: string; search?: string }): FilterQuery<Card> {
  const where: Record<string, unknown> = { ...tenantFilter(tenant) };
  if (query.card_type) where.cardType = query.card_type;
  if (query.status) where.status = query.status;
  if (query.search) {
    const pattern = `%${escapeLike(query.search)}%`;
    where.$or = [
      ...(/^\d{4}$/.test(query.search) ? [{ lastFour: query.search }] : []),
      { name: { $ilike: pattern } },
      { customer: { firstName: { $ilike: pattern } } },
      { customer: { lastName: { $ilike: pattern } } },
    ];
  }
  return where as FilterQuery<Card>;
}
