/** What a connection is for, the second half of its application_name. */
export type ConnectionPurpose = 'orm' | 'statements' | 'listen' | 'probe';

/** The first half of every application_name: the process's part (`custody-api`, `custody-worker`, `custody-cli`). */
let processName = 'custody';

/** Names this process's connections from now on (each process's entry point calls it before it connects). */
export function nameConnections(name: string): void {
  processName = name;
}

/**
 * `custody-api:orm`, `custody-worker:listen`…: what pg_stat_activity shows of each connection, so that an operator (and
 * the failover drill) can tell which process and which pool holds them. PostgreSQL keeps its first 63 bytes.
 */
export const applicationName = (purpose: ConnectionPurpose): string => `${processName}:${purpose}`;
