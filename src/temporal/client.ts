import { readFileSync } from 'node:fs';
import { Client, Connection } from '@temporalio/client';
import type { Config } from '../config';

type ConnectionConfig = Pick<Config, 'TEMPORAL_ADDRESS' | 'TEMPORAL_API_KEY' | 'TEMPORAL_TLS' | 'TEMPORAL_TLS_CERT_PATH' | 'TEMPORAL_TLS_KEY_PATH'>;

/**
 * How to reach Temporal: the dev server in plain gRPC; a cluster with TLS or mTLS; Temporal Cloud
 * with an API key (over TLS) or mTLS. The client and the worker's native connection both use it.
 */
export function temporalConnectionOptions(config: ConnectionConfig): {
  address: string;
  tls?: true | { clientCertPair: { crt: Buffer; key: Buffer } };
  apiKey?: string;
} {
  const clientCertPair =
    config.TEMPORAL_TLS_CERT_PATH && config.TEMPORAL_TLS_KEY_PATH
      ? { crt: readFileSync(config.TEMPORAL_TLS_CERT_PATH), key: readFileSync(config.TEMPORAL_TLS_KEY_PATH) }
      : undefined;
  const tls = config.TEMPORAL_TLS ?? (config.TEMPORAL_API_KEY !== undefined || clientCertPair !== undefined);
  return {
    address: config.TEMPORAL_ADDRESS,
    ...(tls ? { tls: clientCertPair ? { clientCertPair } : true } : {}),
    ...(config.TEMPORAL_API_KEY ? { apiKey: config.TEMPORAL_API_KEY } : {}),
  };
}

/** One lazily connecting client per process: the API starts, and /readyz tells, even while Temporal is down. */
export function createTemporalClient(config: ConnectionConfig & Pick<Config, 'TEMPORAL_NAMESPACE'>): {
  connection: Connection;
  client: Client;
} {
  const connection = Connection.lazy(temporalConnectionOptions(config));
  const client = new Client({ connection, namespace: config.TEMPORAL_NAMESPACE });
  return { connection, client };
}
