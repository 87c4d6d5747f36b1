import type { Environment } from '../shared/environments';
import { keyColumns, type SealedColumn } from './rotation';
import { seedContexts } from './service';

/**
 * Where keys:rotate finds the organization seeds' data keys (their context depends on the row's envelope
 * version and environment): the seed role's, rotated on a signer host under the seed key.
 */
export const organizationSeedColumn: SealedColumn = keyColumns(
  'organization_seeds',
  ['organization_id', 'environment', 'envelope_version'],
  (row) => seedContexts({ envelopeVersion: Number(row.envelope_version), organizationId: row.organization_id as string, environment: row.environment as Environment }).dataKey,
  'seed',
);
