import { createApiKey } from '../../src/api-keys/service';
import { createOrm, migrate } from '../../src/db/orm';
import { createOrganization } from '../../src/organizations/service';

/** A sandbox organization made for a run against separate service processes: its id and its root key's secret. */
export interface SandboxOrganization {
  organizationId: string;
  secret: string;
}

/**
 * For runs against separate service processes (the chaos run, the memory benchmark): migrates the
 * database at `databaseUrl` and makes one sandbox organization per name, each with a root key.
 */
export async function sandboxOrganizations<Name extends string>(databaseUrl: string, label: string, names: readonly Name[]): Promise<Record<Name, SandboxOrganization>> {
  const orm = await createOrm(databaseUrl, 2);
  try {
    await migrate(orm);
    const em = orm.em.fork();
    const made = names.map((name) => {
      const organization = createOrganization(em, `${label} ${name}`);
      return [name, { organization, key: createApiKey(em, { organization, name: label, scopes: ['*'], environment: 'sandbox' }) }] as const;
    });
    await em.flush();
    return Object.fromEntries(made.map(([name, { organization, key }]) => [name, { organizationId: organization.id, secret: key.secret }])) as Record<Name, SandboxOrganization>;
  } finally {
    await orm.close();
  }
}

/** Two sandbox organizations, a payer and a payee: their root keys' secrets. */
export async function sandboxPayerAndPayee(databaseUrl: string, label: string): Promise<Record<'payer' | 'payee', string>> {
  const { payer, payee } = await sandboxOrganizations(databaseUrl, label, ['payer', 'payee'] as const);
  return { payer: payer.secret, payee: payee.secret };
}
