import { proxyActivities } from '@temporalio/workflow';
import type { createCustodyActivities } from '../activities/custody';
import type { seedPublicKeysFlow } from '../src/custody/flows/signer';
import type { WorkflowOf } from '../src/temporal/flow';

const { storeSeedPublicKeys } = proxyActivities<ReturnType<typeof createCustodyActivities>>({
  // Opens one seed (PBKDF2 and a few derivations) and inserts a row or three.
  startToCloseTimeout: '30 seconds',
  // The API waits for the answer a bounded time: past a few attempts it has answered 503, and a retry asks anew.
  retry: { initialInterval: '1 second', maximumAttempts: 5 },
});

/** `seed-public-keys-<requestId>`: the signer stores the public side of hardened nodes of a seed and returns it. */
export const seedPublicKeysWorkflow: WorkflowOf<typeof seedPublicKeysFlow> = (input) =>
  storeSeedPublicKeys({ organizationId: input.organizationId, environment: input.environment, locations: input.locations });
