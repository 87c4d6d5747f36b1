import type { IssuerProvider } from '../src/cards/issuer';
import { ChainNodes } from '../src/chains/nodes';
import type { Config } from '../src/config';
import type { Orm } from '../src/db/orm';
import { cardDestinationResolver } from '../src/cards/webhook-destination';
import { subscriptionDestinationResolver, webhookDestinationResolver, type DestinationResolvers } from '../src/events/destinations';
import type { IdempotencyService } from '../src/idempotency/service';
import type { RemoteProviders } from '../src/lightning/provider';
import type { Logger } from '../src/logger';
import { createCardActivities } from './cards';
import { createChainActivities } from './chains';
import { createConsolidationRuleActivities } from './consolidation-rules';
import { createCustodyActivities } from './custody';
import { createDurableWorkActivities } from './durable-work';
import { createEventActivities } from './events';
import { createConsolidationActivities } from './consolidation';
import { createGasStationActivities } from './gas-stations';
import { createIdempotencyActivities } from './idempotency';
import { createPolicyActivities } from './policies';
import { createLightningActivities } from './lightning';
import { createMonitoringActivities } from './monitoring';
import { createPayoutActivities } from './payouts';
import { createTransactionActivities } from './transactions';
import { createKeyProvider, createSeedKeyProvider } from '../src/keys/provider';
import { KeyService } from '../src/keys/service';

/** Everything an activity may touch; each domain factory takes what it needs. */
export interface ActivityDeps {
  config: Config;
  orm: Orm;
  log: Logger;
  idempotency: IdempotencyService;
  /** Tests only: another card issuer than the sandbox one. */
  cardIssuer?: IssuerProvider;
  /** Tests only: other remote Lightning providers than the sandbox network. */
  lightningProviders?: RemoteProviders;
  /** Tests only: replaces the resolver of some destination kinds. */
  destinationResolvers?: Partial<DestinationResolvers>;
  /** The chain nodes; built from the configuration when not given. */
  chains?: ChainNodes;
}

/** Every kind of webhook destination, resolved by the domain that owns it. */
const destinationResolvers = (): DestinationResolvers => ({
  webhook: webhookDestinationResolver,
  subscription: subscriptionDestinationResolver,
  card: cardDestinationResolver,
});

/** Every activity of every domain, registered on the one worker. */
export const createActivities = (deps: ActivityDeps) => {
  const chains = deps.chains ?? new ChainNodes(deps.config, deps.log, deps.orm);
  // Checked at worker start, in the background as the API does: an activity's first use inside a database transaction then finds its node checked.
  void chains.checkAll();
  // The worker is the signer: it holds the seed role (in production it refuses to start without its key).
  const keys = new KeyService(createKeyProvider(deps.config, deps.log), createSeedKeyProvider(deps.config, deps.log, 'worker'));
  return {
    ...createIdempotencyActivities(deps),
    ...createCustodyActivities({ ...deps, keys }),
    ...createMonitoringActivities({ ...deps, chains }),
    ...createTransactionActivities({ ...deps, chains, keys }),
    ...createDurableWorkActivities(deps),
    ...createEventActivities({ ...deps, destinations: { ...destinationResolvers(), ...deps.destinationResolvers } }),
    ...createPolicyActivities(deps),
    ...createLightningActivities(deps),
    ...createCardActivities(deps),
    ...createChainActivities(deps),
    ...createGasStationActivities({ ...deps, chains, keys }),
    ...createConsolidationActivities({ ...deps, chains }),
    ...createConsolidationRuleActivities(deps),
    ...createPayoutActivities({ ...deps, chains, keys }),
  };
};

export type Activities = ReturnType<typeof createActivities>;
