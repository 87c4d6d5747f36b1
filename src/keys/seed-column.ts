import { keyColumns, type SealedColumn } from './rotation';
import { dataKeyContext as seedDataKeyContext } from './service';

/** Where keys:rotate finds the organization seeds' data keys. */
export const organizationSeedColumn: SealedColumn = keyColumns('organization_seeds', ['organization_id'], (row) => seedDataKeyContext(row.organization_id as string));
