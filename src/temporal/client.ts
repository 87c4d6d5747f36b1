import { Client, Connection } from '@temporalio/client';
import type { Config } from '../config';

/** One lazily connecting client per process: the API starts, and /readyz tells, even while Temporal is down. */
export function createTemporalClient(config: Pick<Config, 'TEMPORAL_ADDRESS' | 'TEMPORAL_NAMESPACE'>): {
  connection: Connection;
  client: Client;
} {
  const connection = Connection.lazy({ address: config.TEMPORAL_ADDRESS });
  const client = new Client({ connection, namespace: config.TEMPORAL_NAMESPACE });
  return { connection, client };
}
