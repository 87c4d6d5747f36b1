// What the worker and the CLI need of every domain, apart from its routes (src/modules.ts): loading every route
// module (zod schemas, the OpenAPI registry, Koa's router) cost each worker and CLI process memory and start-up time.
import { companyBalanceProjection } from './balances/service';
import { cardSecretsColumn } from './cards/issuer';
import { cardBalanceProjection } from './cards/ledger';
import { custodyBalanceProjection } from './custody/journal';
import { signingSecretColumns } from './events/secrets';
import { idempotentResponseColumn } from './idempotency/service';
import type { SealedColumn } from './keys/rotation';
import { organizationSeedColumn } from './keys/seed-column';
import type { ProjectionCheck } from './ledger/invariants';
import { nodeKeyColumn } from './lightning/node-key';
import { beneficiaryColumn } from './payouts/beneficiaries';

/** Every domain's balance rows kept as projections of the ledger; a domain that keeps one adds its check here. */
export const ledgerProjections: ProjectionCheck[] = [custodyBalanceProjection, companyBalanceProjection, cardBalanceProjection];

/**
 * Every column holding a data key wrapped under a master key, for `keys:rotate`; a domain that seals
 * something new (src/keys/envelope.ts, KeyService.seal, its own wrapping) declares its column and adds it here.
 */
export const sealedColumns: SealedColumn[] = [organizationSeedColumn, nodeKeyColumn, ...signingSecretColumns, cardSecretsColumn, beneficiaryColumn, idempotentResponseColumn];
