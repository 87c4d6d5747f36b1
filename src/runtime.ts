import { collectDefaultMetrics, Registry } from 'prom-client';
import { ApiKeyCache } from './api-keys/key-cache';
import { LastUsedTracker } from './api-keys/service';
import { ChainNodes } from './chains/nodes';
import type { Config } from './config';
import { createOrm, createOrmWaiting, type Orm } from './db/orm';
import type { AppDeps } from './http/context';
import { KeyedConcurrencyLimit, KeyedSerialQueue, SharedTokenBucket, TokenBucketLimiter } from './http/rate-limit';
import { IdempotencyService } from './idempotency/service';
import { createKeyProvider, createSeedKeyProvider } from './keys/provider';
import { KeyService } from './keys/service';
import type { Logger } from './logger';
import { registerLedgerInvariantMetrics } from './monitoring/ledger-invariants';
import { registerReconciliationMetrics, registerScanMetrics } from './monitoring/metrics';
import { registerLightningMetrics } from './lightning/held';
import { sponsorSendFee } from './gas-stations/sponsorship';
import { pauseAutomationsOf } from './automations/ownership';
import { logKeyRevocation } from './policies/governance';
import { createTemporalClient } from './temporal/client';
import { WorkflowStarter } from './temporal/starter';
import { signerFor } from './custody/signer';
import { stripeIssuingFor } from './cards/providers/stripe-issuer';
import { registerCardIssuerDriftMetrics, registerStripeKeyRefusalMetrics, stripeIssuingMetrics } from './cards/stripe-metrics';

/** Wires the process-wide dependencies of the API from configuration. */
export function createAppDeps(config: Config, orm: Orm, log: Logger, temporal = createTemporalClient(config)): AppDeps {
  const metrics = new Registry();
  collectDefaultMetrics({ register: metrics });
  registerReconciliationMetrics(metrics, () => orm.em.fork());
  registerScanMetrics(metrics, () => orm.em.fork());
  registerLedgerInvariantMetrics(metrics, () => orm.em.fork());
  stripeIssuingMetrics(metrics);
  registerCardIssuerDriftMetrics(metrics, () => orm.em.fork());
  registerStripeKeyRefusalMetrics(metrics, () => orm.em.fork());
  // Read now: a Stripe key of the other mode than STRIPE_ISSUING_MODE (a test key for live cards) stops the start.
  stripeIssuingFor(config);
  registerLightningMetrics(metrics, () => orm.em.fork());
  const keys = createKeyProvider(config, log);
  const keyService = new KeyService(keys, createSeedKeyProvider(config, log, 'api'));
  const starter = new WorkflowStarter(temporal.client, config, log);
  return {
    config,
    orm,
    log,
    temporal,
    metrics,
    rateLimiter: new SharedTokenBucket(config.RATE_LIMIT_BURST, config.RATE_LIMIT_PER_SECOND),
    authFailureLimiter: new TokenBucketLimiter(
      config.AUTH_FAILURE_RATE_LIMIT_BURST,
      config.AUTH_FAILURE_RATE_LIMIT_PER_SECOND,
      config.AUTH_FAILURE_RATE_LIMIT_MAX_ADDRESSES,
    ),
    throttledLookups: new KeyedSerialQueue(),
    idempotency: new IdempotencyService(config.IDEMPOTENCY_LOCK_SECONDS, keys),
    keyCache: new ApiKeyCache(config.DATABASE_URL, config.API_KEY_CACHE_SECONDS * 1000, config.API_KEY_CACHE_MAX_KEYS, log),
    lastUsed: new LastUsedTracker(config.API_KEY_LAST_USED_RESOLUTION_SECONDS * 1000),
    keys: keyService,
    signer: signerFor(orm, keyService, starter),
    starter,
    chains: new ChainNodes(config, log, orm),
    rpcConcurrency: new KeyedConcurrencyLimit(config.RPC_CONCURRENCY_PER_ORGANIZATION),
    feeSponsor: sponsorSendFee,
    keyRevoked: async (em, key, revokedBy) => {
      await pauseAutomationsOf(em, key);
      await logKeyRevocation(em, key, revokedBy);
    },
  };
}

export { createOrm, createOrmWaiting };
