/**
 * A process's state that belongs to one database: kept per ORM configuration, so the databases of
 * one process (a test run's) never share it, and created on first use.
 */
export function perDatabase<T>(store: WeakMap<object, T>, em: { config: object }, create: () => T): T {
  let state = store.get(em.config);
  if (state === undefined) store.set(em.config, (state = create()));
  return state;
}
