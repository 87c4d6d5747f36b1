import { LockMode } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';

/**
 * Find options that lock the entity's own row FOR UPDATE and no other. MikroORM joins a populated
 * to-one relation into the same query, and a bare `lockMode` then locks every joined row too (a
 * send's wallet and address, a card's customer). Each insert that references such a row takes a
 * key-share lock on it, which FOR UPDATE blocks: a send's settling step (transaction, address,
 * then wallet) and another send being created (wallet, then address) deadlocked that way (40P01).
 * The root alias is the one MikroORM's naming strategy gives a query's first table.
 */
export function lockingOnlyItsRow(em: EntityManager, entity: { name: string }): { lockMode: LockMode.PESSIMISTIC_WRITE; lockTableAliases: string[] } {
  return { lockMode: LockMode.PESSIMISTIC_WRITE, lockTableAliases: [em.config.getNamingStrategy().aliasName(entity.name, 0)] };
}
