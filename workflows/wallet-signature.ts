import { proxyActivities } from '@temporalio/workflow';
import type { createCustodyActivities } from '../activities/custody';
import type { walletSignatureFlow } from '../src/custody/flows/signer';
import type { WorkflowOf } from '../src/temporal/flow';

const { signWithAddressKey } = proxyActivities<ReturnType<typeof createCustodyActivities>>({
  // Opens one seed and signs one message.
  startToCloseTimeout: '30 seconds',
  // The API waits for the answer a bounded time: past a few attempts it has answered 503, and a retry asks anew.
  retry: { initialInterval: '1 second', maximumAttempts: 5 },
});

/** `wallet-signature-<signatureId>`: the signer signs a payload the API has judged; the private key never leaves the activity. */
export const walletSignatureWorkflow: WorkflowOf<typeof walletSignatureFlow> = (input) => signWithAddressKey(input);
