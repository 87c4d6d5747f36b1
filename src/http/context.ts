import type { RouterContext } from '@koa/router';
import type { Client, Connection } from '@temporalio/client';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Registry } from 'prom-client';
import type { AuthContext } from '../api-keys/auth-context';
import type { ApiKeyCache } from '../api-keys/key-cache';
import type { LastUsedTracker } from '../api-keys/service';
import type { ChainNodes } from '../chains/nodes';
import type { Config } from '../config';
import type { Orm } from '../db/orm';
import type { IdempotencyService } from '../idempotency/service';
import type { Signer } from '../custody/signer';
import type { KeyService } from '../keys/service';
import type { Logger } from '../logger';
import type { KeyRevocationHook } from '../api-keys/service';
import type { FeeSponsor } from '../movements/funding';
import type { WorkflowStarter } from '../temporal/starter';
import type { KeyedConcurrencyLimit, KeyedSerialQueue, SharedTokenBucket, TokenBucketLimiter } from './rate-limit';

export interface AppState {
  requestId: string;
  /** Set when the request carries a valid `Api-Version` header. */
  requestedApiVersion?: string;
  auth?: AuthContext;
  body?: unknown;
  /** Route pattern, for metrics and logs (never the raw path with ids). */
  routePattern?: string;
}

export type AppContext = RouterContext<AppState>;

/** What every route handler can reach; built once per process. */
export interface AppDeps {
  config: Config;
  orm: Orm;
  log: Logger;
  temporal: { connection: Connection; client: Client };
  metrics: Registry;
  rateLimiter: SharedTokenBucket;
  /** Per client address, counts only requests whose key is missing or invalid. */
  authFailureLimiter: TokenBucketLimiter;
  /** Key lookups of client addresses over that limit, one at a time per address. */
  throttledLookups: KeyedSerialQueue;
  idempotency: IdempotencyService;
  /** Key lookups by secret hash, evicted on every change of a key by any process. */
  keyCache: ApiKeyCache;
  lastUsed: LastUsedTracker;
  /** Seeds, derivation and signing: the one holder of key material. */
  keys: KeyService;
  /** Opens seeds for the API, which holds no seed key in production: the worker, through a short workflow each (src/custody/signer.ts). */
  signer: Signer;
  /** Fires the workflow starts a request recorded, right after its transaction commits; sends messages to running workflows. */
  starter: WorkflowStarter;
  /** The configured chain nodes, per chain and environment. */
  chains: ChainNodes;
  /** JSON-RPC pass-through requests in flight in this process, per organization and environment (RPC_CONCURRENCY_PER_ORGANIZATION). */
  rpcConcurrency: KeyedConcurrencyLimit;
  /** Pays a sponsored send's fee (the gas stations' sponsorSendFee): given to the sending machinery, which the stations send through. */
  feeSponsor: FeeSponsor;
  /** Pauses what a revoked key owned (the automations' pauseAutomationsOf), in the revocation's transaction: handed in, since automations sit above the keys. */
  keyRevoked: KeyRevocationHook;
}

export type { AuthContext, EntityManager };
