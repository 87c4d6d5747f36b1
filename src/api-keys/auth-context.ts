import type { Environment } from './entities';

/** The calling key, resolved from `Authorization: Bearer`; what services take to know who acts. */
export interface AuthContext {
  organizationId: string;
  apiKeyId: string;
  memberId: string | null;
  scopes: string[];
  environment: Environment;
  /** Effective version: the `Api-Version` header, else the key's pinned version. */
  apiVersion: string;
  lastUsedAt: Date;
}
