import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';

/** The knex client of an ORM, as far as releasing a pooled connection goes. */
interface KnexClient {
  releaseConnection(connection: object): Promise<void>;
}

/** Work waiting for a pooled connection's transaction to end, by that connection (a savepoint's is its transaction's). */
const waiting = new WeakMap<object, (() => void)[]>();
const hookedClients = new WeakSet<object>();

/**
 * Lets `afterTransaction` work run when an ORM's transaction hands its pooled connection back: knex releases the
 * connection of a transaction once it has committed or rolled back, whichever it did, and the work starts then.
 * createOrm (src/db/orm.ts) calls it for every ORM of the service.
 */
export function attachAfterTransaction(orm: MikroORM): void {
  const client = orm.em.getKnex().client as unknown as KnexClient;
  const release = client.releaseConnection.bind(client);
  client.releaseConnection = (connection: object) => {
    const released = release(connection);
    const works = waiting.get(connection);
    waiting.delete(connection);
    for (const start of works ?? []) start();
    return released;
  };
  hookedClients.add(client);
}

/**
 * Runs `work` once the transaction `em` runs in (its outermost one: a savepoint shares its connection) has ended
 * and released its pooled connection, or at once outside any transaction; resolves as the work does. For what must
 * outlive a transaction that rolls back, such as a refusal's audit entry, written on a connection of its own
 * without the request holding the transaction's while it waits for that one (issue 53): with every connection held
 * by such requests, none would ever come free.
 */
export async function afterTransaction<T>(em: EntityManager, work: () => Promise<T>): Promise<T> {
  const transaction = em.getTransactionContext<{ client: { acquireConnection(): Promise<object> } }>();
  if (!transaction) return work();
  if (!hookedClients.has(em.getKnex().client)) throw new Error('this ORM runs no work after its transactions: make it with createOrm (src/db/orm.ts)');
  // The transaction's own connection (its client hands out no other): what its end releases. Registered a microtask
  // from here, long before the COMMIT or ROLLBACK that ends the transaction has made its round trip.
  const connection = await transaction.client.acquireConnection();
  return new Promise<T>((resolve, reject) => {
    waiting.set(connection, [...(waiting.get(connection) ?? []), () => void work().then(resolve, reject)]);
  });
}
