import { createApiKey } from '../../src/api-keys/service';
import { createOrm, migrate } from '../../src/db/orm';
import { createOrganization } from '../../src/organizations/service';

/**
 * For runs against separate service processes (the chaos run, the memory benchmark): migrates the
 * database at `databaseUrl` and makes two sandbox organizations, a payer and a payee, each with a root
 * key; returns the keys' secrets.
 */
export async function sandboxPayerAndPayee(databaseUrl: string, label: string): Promise<Record<'payer' | 'payee', string>> {
  const orm = await createOrm(databaseUrl, 2);
  try {
    await migrate(orm);
    const em = orm.em.fork();
    const payer = createApiKey(em, { organization: createOrganization(em, `${label} payer`), name: label, scopes: ['*'], environment: 'sandbox' });
    const payee = createApiKey(em, { organization: createOrganization(em, `${label} payee`), name: label, scopes: ['*'], environment: 'sandbox' });
    await em.flush();
    return { payer: payer.secret, payee: payee.secret };
  } finally {
    await orm.close();
  }
}
