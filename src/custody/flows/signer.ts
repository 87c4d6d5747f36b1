import type { PublicKeysRequest, StoredPublicKeys } from '../../keys/public-keys';
import type { HashFunction } from '../entities';
import { defineFlow } from '../../temporal/flow';

/**
 * The signer's two short flows, run on the worker (which holds the seed key) for an API process that
 * holds none (docs/custody.md, "Key custody"): each is one activity that opens the seed, and what
 * crosses the payload either way is public (paths, an xpub, a digest, a signature). Carried by
 * workflows/seed-public-keys.ts and workflows/wallet-signature.ts. Workflow-safe: no Node APIs.
 */

export interface SeedPublicKeysInput extends PublicKeysRequest {
  /** A fresh id per request: a start is recorded once per workflow id. */
  requestId: string;
}

export const seedPublicKeysFlow = defineFlow<SeedPublicKeysInput, StoredPublicKeys>({
  workflowType: 'seedPublicKeysWorkflow',
  workflowId: (input) => `seed-public-keys-${input.requestId}`,
  resource: (input) => ({ type: 'organization_seed', id: `${input.organizationId}/${input.environment}` }),
  // Storing is idempotent: a closed one may run again (the start sweep, the reconciler).
  idReusePolicy: 'ALLOW_DUPLICATE',
  idConflictPolicy: 'USE_EXISTING',
});

/**
 * A payload the API has validated and the movement gate has let through, to be signed with one address's key;
 * the signer records the activity row with the signature, so no signature exists without its audit row.
 */
export interface WalletSignatureInput {
  /** The signature's activity_id. */
  signatureId: string;
  organizationId: string;
  environment: PublicKeysRequest['environment'];
  walletId: string;
  addressId: string;
  /** The bytes signed (a digest for secp256k1), hex. */
  message: string;
  /** For the activity row: the API key that asked, the hash function named, SHA-256 of the payload as decoded (hex). */
  apiKeyId: string;
  hashFunction: HashFunction;
  payloadSha256: string;
}

/** A signature and the public key that made it, hex, and when its activity row says it was made (ISO 8601). */
export interface WalletSignature {
  r: string;
  s: string;
  recoveryId: number;
  bytes: string;
  publicKey: string;
  signedAt: string;
}

export const walletSignatureFlow = defineFlow<WalletSignatureInput, WalletSignature>({
  workflowType: 'walletSignatureWorkflow',
  workflowId: (input) => `wallet-signature-${input.signatureId}`,
  resource: (input) => ({ type: 'wallet', id: input.walletId }),
  idReusePolicy: 'ALLOW_DUPLICATE',
  idConflictPolicy: 'USE_EXISTING',
});
