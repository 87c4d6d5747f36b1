import { TransactionContext } from '@mikro-orm/core';
import pg from 'pg';

/** What knex's Client and a MikroORM transaction's context look like here: only what is read. */
interface KnexClientPrototype {
  acquireConnection(this: unknown): Promise<unknown>;
}
interface OpenTransaction {
  isCompleted?: () => boolean;
}
interface ContextWithEnclosing {
  em: { getTransactionContext(): OpenTransaction | undefined };
  /** The transaction context this one was created inside (set by the patched TransactionContext.create). */
  enclosing?: ContextWithEnclosing;
  /** Where it was created: the service's frames that opened its transaction (an acquire's own stack may end in knex's promises). */
  openedAt?: string;
}

// knex ships no types for its lib/ modules; the ORM's knex (one copy in node_modules) is the one patched.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const KnexClient = require('knex/lib/client') as { prototype: KnexClientPrototype };

/** The open transaction the current async context runs inside (any enclosing one counts), if any. */
function openTransaction(): ContextWithEnclosing | undefined {
  for (let context = TransactionContext.currentTransactionContext() as ContextWithEnclosing | undefined; context; context = context.enclosing) {
    const transaction = context.em.getTransactionContext();
    if (transaction && transaction.isCompleted?.() !== true) return context;
  }
  return undefined;
}

const NO_SERVICE_FRAME = '(no frame of the service)';

/** The current call's frames in the service's code (dist/src, dist/activities), innermost first. */
function serviceFrames(): string {
  const frames = new Error().stack!.split('\n').slice(1).map((line) => line.trim());
  return frames.filter((line) => /\/dist\/(src|activities)\//.test(line)).slice(0, 8).join(' <- ') || NO_SERVICE_FRAME;
}

/**
 * Records every pooled database connection acquired (from knex's pool, the ORM's, or the `pg` statement pool of
 * src/db/lean.ts) by code running inside a database transaction that holds one already, by the app and the workers
 * of this process, until stopped. Such a request holds a pooled connection (and its locks) while it waits for a
 * second: with every connection held by such requests, none is ever released and each waits out the pool's
 * acquire timeout (503 database_unavailable). MikroORM keeps the transaction's EntityManager in an
 * AsyncLocalStorage (TransactionContext); a transaction opened inside another replaces it there, so the context
 * it was created in is kept beside it and every enclosing one is checked. Each record is the acquire's stack.
 */
export function watchPoolWaits(): { waits: string[]; stop: () => void } {
  const waits: string[] = [];
  const record = (pool: string) => {
    const holding = openTransaction();
    // A transaction a test opened itself (to hold a lock the service must wait on, say) is the test's to hold.
    if (!holding || holding.openedAt === NO_SERVICE_FRAME) return;
    const innermost = TransactionContext.currentTransactionContext() as ContextWithEnclosing;
    const opening = innermost !== holding ? `; a transaction opened at ${innermost.openedAt}` : '';
    waits.push(`${pool}: acquired at ${serviceFrames()}${opening}; while the transaction opened at ${holding.openedAt} holds one`);
  };

  const acquire = KnexClient.prototype.acquireConnection;
  KnexClient.prototype.acquireConnection = function (this: unknown) {
    record('knex pool');
    return acquire.call(this);
  };
  const connect = pg.Pool.prototype.connect;
  pg.Pool.prototype.connect = function (this: pg.Pool, ...args: unknown[]) {
    record('statement pool');
    return (connect as (...forwarded: unknown[]) => unknown).apply(this, args);
  } as typeof connect;
  const create = TransactionContext.create.bind(TransactionContext);
  TransactionContext.create = <T>(em: Parameters<typeof TransactionContext.create>[0], next: (...args: unknown[]) => T): T => {
    const enclosing = TransactionContext.currentTransactionContext();
    const openedAt = serviceFrames();
    return create(em, () => {
      Object.assign(TransactionContext.currentTransactionContext() as ContextWithEnclosing, { enclosing, openedAt });
      return next();
    });
  };

  return {
    waits,
    stop: () => {
      KnexClient.prototype.acquireConnection = acquire;
      pg.Pool.prototype.connect = connect;
      TransactionContext.create = create;
    },
  };
}
