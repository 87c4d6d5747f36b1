import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { parseArgs } from 'node:util';
import type { EntityManager } from '@mikro-orm/postgresql';
import { ApiKey, type Environment } from './api-keys/entities';
import { SCOPES } from './api-keys/scopes';
import { createApiKey, presentApiKey } from './api-keys/service';
import type { ChainId } from './catalogue/service';
import { ConfigError, loadConfig } from './config';
import { nameConnections } from './db/application-name';
import { createOrm, migrate, type Orm } from './db/orm';
import { recordedInstanceSettings } from './cli/instance';
import { environmentOption, organization, required, text, UsageError, wholeNumber, type Options } from './cli/options';
import type { LiveSeedSeparation } from './keys/seeds';
import { createLogger } from './logger';
import type { LedgerDriftStatus } from './monitoring/entities';
import { DomainError } from './shared/errors';
import { iso } from './shared/time';
import { Member, ORG_ROLES, type OrgRole, Organization } from './organizations/entities';
import { createMember, createOrganization, createRole, findMember, presentMember, presentSettings, type SettingsPatch } from './organizations/service';

const USAGE = `Usage: npm run cli -- <command> [options]

  migrate                                   apply the committed database migrations
  bootstrap [--key-file PATH]               first start only: create an organization, its owner (a member)
                                            and a root key acting for the owner
  org:create --name NAME [--environment sandbox|live]
                                            create an organization, its owner and root key (scope *)
  key:create --org ID --name NAME --scopes a,b [--environment sandbox|live] [--user-id MEMBER_ID]
                                            a key acting for the member; without --user-id a service
                                            key, acting for no one: it never votes and mints no keys
  member:create --org ID --name NAME --email EMAIL --org-role owner|admin|approver|viewer
                                            members (and their keys, key:create --user-id) added here
                                            may vote on anyone's approval requests; members a key adds
                                            through the API may not vote on that key's member's requests;
                                            an owner, admin or approver added here is in the governance
                                            log with actor operator (through the API: a change request)
  role:create --org ID --name NAME [--description TEXT]
  org:configure --org ID [--policy-activation-approvals N] [--address-book-cooling-hours H [--environment live|sandbox]]
                                            approvals a policy activation (or an address-book entry's
                                            early use) needs (0: at once); hours a new address-book
                                            entry waits before whitelists and consolidation use it
                                            (of live entries unless --environment sandbox); applied at
                                            once and written to the governance log with actor operator
                                            (through the API, lowering either is a change request)
  ledger:drift [--org ID] [--environment sandbox|live] [--chain CHAIN] [--status open|suspected|credited|resolved]
                                            the differences the ledger reconciliation found between
                                            the custody ledger and the chains (default: open ones)
  ledger:suspense [--org ID] [--environment sandbox|live]
                                            what a reorganisation left in the ledger's suspense that
                                            the chain has not proven yet (mined again, or never to be),
                                            oldest first
  ledger:verify [--org ID]                  prove the double-entry ledger whole: every posting balanced
                                            per asset, every balance row the sum of its accounts and
                                            never negative; lists what is broken and exits 1 if any
  keys:rotate [--dry-run] [--batch-size N]  wrap every data key anew under the current master key
                                            (KEY_PROVIDER's) where a row names an older one, which must
                                            still be configured as previous (MASTER_KEY_PREVIOUS,
                                            PKCS11_PREVIOUS_KEY_LABELS); resumable, in batches of N rows
                                            (default 100); prints the rows left per table and exits 1
                                            while any are; --dry-run only counts (docs/custody.md)
  payout:resolve --trip ID --credit|--refund [--operator NAME]
                                            resolve what a payout trip holds (an underpayment held,
                                            late payments held, refunds that failed): credit it to
                                            the organization's balance or refund it to the trip's
                                            refund address; audited, refused when nothing is held
  lightning:held [--org ID] [--environment sandbox|live]
                                            Lightning payments held for an operator: their send or
                                            re-query kept failing for a transient reason; pending,
                                            reserve held, still re-queried (docs/lightning.md)
  lightning:resolve --payment ID            end a pending LND payment with what its node says of it
                                            (TrackPaymentV2): paid, failed, or failed not_sent when
                                            the node has no payment of it; in flight: nothing changes
  keys:seeds                                organizations whose live seed shares the sandbox mnemonic
                                            (seeds made before one seed per environment), with their
                                            live wallets and what to do
  keys:separate-live-seed --org ID          give live a fresh seed of its own; refused (and why) while
                                            a live wallet derives from the shared mnemonic
  doctor [--json] [--timeout-ms N]          check every provider the configuration enables: PostgreSQL,
                                            Temporal, key custody, chain nodes (reachable, network,
                                            tokens), LND (network, macaroon permissions), Stripe Issuing
                                            (key mode, Issuing read, webhook secrets), live prices
                                            (freshness, sequencer); one line each, ok, warn or fail, and
                                            what to do; exits 1 if any fails (each check waits N ms at
                                            most, default 5000; never prints a secret; README "Doctor")
  lnd:bake-macaroon --admin-macaroon PATH --out PATH [--environment sandbox|live] [--root-key-id N]
                                            bake a macaroon of only the permissions the service uses
                                            on the environment's LND (its configured URL and
                                            certificate), with the admin macaroon; write it to PATH
                                            (live refuses a broader one; docs/lightning.md)

Secrets are printed once; store them now.`;

const ROOT_KEY_NAME = 'Root key';
const OWNER = { name: 'Owner', email: 'owner@localhost', org_role: 'owner' } as const;

/** The organization's root key (scope *), acting for its owner: a member, so that approvals know who asks. */
async function createRootKey(em: EntityManager, org: Organization, environment: Environment) {
  const owner = await createMember(em, org, OWNER);
  return { owner, ...createApiKey(em, { organization: org, name: ROOT_KEY_NAME, scopes: ['*'], environment, member: owner }) };
}

/**
 * Root keys made before root keys acted for a member get their organization's owner now (the member
 * of the owner's email if there is one): the first start of an existing instance records them.
 */
async function recordRootKeyOwners(em: EntityManager): Promise<{ organization_id: string; owner_member_id: string }[]> {
  const keys = await em.find(ApiKey, { name: ROOT_KEY_NAME, member: null, createdByKeyId: null, revokedAt: null }, { orderBy: { createdAt: 'asc', id: 'asc' } });
  const recorded = [];
  for (const key of keys) {
    const owner = (await em.findOne(Member, { organization: key.organization, email: OWNER.email })) ?? (await createMember(em, key.organization, OWNER));
    key.member = owner;
    await em.flush();
    recorded.push({ organization_id: key.organization.id, owner_member_id: owner.id });
  }
  return recorded;
}

/** What the first start says about approvals: who the root key acts for, and how approvers who may vote are added. */
function approvalsHowTo(organizationId: string, ownerId: string): string[] {
  return [
    `The root key acts for member ${ownerId} (${OWNER.name}, org_role owner). A policy activation needs 1 approval by another owner,`,
    'admin or approver; members the requester added through the API cannot vote. Add an approver who may vote with the CLI:',
    `    npm run cli -- member:create --org ${organizationId} --name NAME --email EMAIL --org-role approver`,
    `    npm run cli -- key:create --org ${organizationId} --name NAME --scopes policies:read,policies:approve --user-id MEMBER_ID`,
    `or change the count (0 enforces at once): npm run cli -- org:configure --org ${organizationId} --policy-activation-approvals N`,
    'See docs/policies.md, "First approvers".',
  ];
}

type Command = (orm: Orm, options: Options) => Promise<unknown>;

const commands: Record<string, Command> = {
  async migrate(orm) {
    const applied = await migrate(orm);
    const [{ keyProviderFor }, { sealClearSigningSecrets }, { IdempotencyService }, { sealClearBeneficiaries }] = await Promise.all([
      import('./keys/provider'),
      import('./events/secrets'),
      import('./idempotency/service'),
      import('./payouts/trips'),
    ]);
    // Secrets (and payout beneficiaries) stored in clear before they were sealed: a migration cannot reach the KeyProvider, this step can.
    const keys = keyProviderFor(loadConfig());
    const em = orm.em.fork();
    const sealed = {
      signing_secrets: await sealClearSigningSecrets(em, keys),
      idempotent_responses: await new IdempotencyService(0, keys).sealClearResponses(em),
      payout_beneficiaries: await sealClearBeneficiaries(em, keys),
    };
    return { applied, sealed };
  },

  async bootstrap(orm, options) {
    return orm.em.fork().transactional(async (em) => {
      // One bootstrap at a time, even if two starts race.
      await em.getConnection().execute('select pg_advisory_xact_lock(?)', [0x626f6f74], 'run', em.getTransactionContext());
      if (await em.count(Organization, {})) return { bootstrapped: false, owners_recorded: await recordRootKeyOwners(em) };
      const org = createOrganization(em, 'Default organization');
      const { key, secret, owner } = await createRootKey(em, org, 'sandbox');
      await em.flush();
      const keyFile = text(options, 'key-file');
      if (keyFile) {
        await mkdir(path.dirname(keyFile), { recursive: true });
        await writeFile(keyFile, `${secret}\n`, { mode: 0o600 });
      }
      return { bootstrapped: true, organization_id: org.id, owner_member_id: owner.id, api_key: presentApiKey(key, secret), key_file: keyFile ?? null };
    });
  },

  async 'org:create'(orm, options) {
    const em = orm.em.fork();
    const org = createOrganization(em, required(options, 'name'));
    const { key, secret, owner } = await createRootKey(em, org, environmentOption(options));
    await em.flush();
    return { organization_id: org.id, owner_member_id: owner.id, api_key: presentApiKey(key, secret) };
  },

  async 'key:create'(orm, options) {
    const em = orm.em.fork();
    const org = await organization(em, required(options, 'org'));
    const scopes = required(options, 'scopes').split(',').map((scope) => scope.trim());
    const unknown = scopes.filter((scope) => !(SCOPES as readonly string[]).includes(scope));
    if (unknown.length) throw new UsageError(`unknown scopes: ${unknown.join(', ')}`);
    const userId = text(options, 'user-id');
    const member = userId ? await findMember(em, org.id, userId, 'user-id') : null;
    const { key, secret } = createApiKey(em, { organization: org, name: required(options, 'name'), scopes, environment: environmentOption(options), member });
    await em.flush();
    return presentApiKey(key, secret);
  },

  async 'member:create'(orm, options) {
    const em = orm.em.fork();
    const org = await organization(em, required(options, 'org'));
    const orgRole = required(options, 'org-role');
    if (!(ORG_ROLES as readonly string[]).includes(orgRole)) throw new UsageError(`--org-role must be one of ${ORG_ROLES.join(', ')}`);
    const { addMemberByOperator } = await import('./policies/governance');
    const member = await em.transactional((tx) => addMemberByOperator(tx, org, { name: required(options, 'name'), email: required(options, 'email'), org_role: orgRole as OrgRole }));
    return presentMember(member);
  },

  async 'org:configure'(orm, options) {
    const em = orm.em.fork();
    const org = await organization(em, required(options, 'org'));
    const approvals = text(options, 'policy-activation-approvals');
    const coolingHours = text(options, 'address-book-cooling-hours');
    if (approvals === undefined && coolingHours === undefined) throw new UsageError('--policy-activation-approvals or --address-book-cooling-hours is required');
    const patch: SettingsPatch = {};
    if (approvals !== undefined) patch.policy_activation_required_approvals = wholeNumber(approvals, 'policy-activation-approvals', 20);
    if (coolingHours !== undefined) {
      const hours = wholeNumber(coolingHours, 'address-book-cooling-hours', 720);
      // Live unless said otherwise: the cooling period protects real funds.
      const environment = text(options, 'environment') === undefined ? 'live' : environmentOption(options);
      patch.address_book_cooling_hours = { [environment]: hours };
    }
    // The operator's direct path: applied at once, each change in the governance log with actor operator.
    const { configureByOperator } = await import('./policies/governance');
    await em.transactional((tx) => configureByOperator(tx, org, patch));
    return { organization_id: org.id, ...presentSettings(org) };
  },

  async 'ledger:drift'(orm, options) {
    const [{ CHAIN_IDS }, { LEDGER_DRIFT_STATUSES, LedgerDrift }, { presentDrift }] = await Promise.all([import('./catalogue/service'), import('./monitoring/entities'), import('./monitoring/drifts')]);
    const em = orm.em.fork();
    const status = text(options, 'status') ?? 'open';
    if (!(LEDGER_DRIFT_STATUSES as readonly string[]).includes(status)) throw new UsageError(`--status must be one of ${LEDGER_DRIFT_STATUSES.join(', ')}`);
    const chain = text(options, 'chain');
    if (chain !== undefined && !(CHAIN_IDS as readonly string[]).includes(chain)) throw new UsageError(`--chain must be one of ${CHAIN_IDS.join(', ')}`);
    const drifts = await em.find(
      LedgerDrift,
      {
        status: status as LedgerDriftStatus,
        ...(text(options, 'org') ? { organization: (await organization(em, required(options, 'org'))).id } : {}),
        ...(text(options, 'environment') ? { environment: environmentOption(options) } : {}),
        ...(chain ? { chain: chain as ChainId } : {}),
      },
      { orderBy: { firstSeenAt: 'asc', id: 'asc' } },
    );
    const listed = [];
    for (const drift of drifts) listed.push({ ...(await presentDrift(em, drift)), organization_id: drift.organization.id, environment: drift.environment, last_seen_at: drift.lastSeenAt.toISOString() });
    return { status, count: listed.length, drifts: listed };
  },

  async 'ledger:suspense'(orm, options) {
    const { openSuspenseItems } = await import('./ledger/suspense');
    const em = orm.em.fork();
    const items = await openSuspenseItems(em, {
      ...(text(options, 'org') ? { organizationId: (await organization(em, required(options, 'org'))).id } : {}),
      ...(text(options, 'environment') ? { environment: environmentOption(options) } : {}),
    });
    return {
      count: items.length,
      items: items.map((item) => ({
        organization_id: item.organizationId,
        environment: item.environment,
        reference_type: item.reference.type,
        reference_id: item.reference.id,
        asset_id: item.assetId,
        counterparty: item.counterparty,
        amount_raw: item.amount.toString(),
        entered_at: iso(item.enteredAt),
      })),
    };
  },

  async 'ledger:verify'(orm, options) {
    const [{ ledgerBreaks, presentBreak }, { ledgerProjections }] = await Promise.all([import('./monitoring/ledger-invariants'), import('./registries')]);
    const organizationId = text(options, 'org') ? (await organization(orm.em.fork(), required(options, 'org'))).id : null;
    const broken = await ledgerBreaks(orm.em.fork(), ledgerProjections, organizationId);
    return {
      whole: broken.length === 0,
      checked: ledgerProjections.map((projection) => projection.name),
      breaks: broken.map((each) => ({ ...presentBreak(each), organization_id: each.organizationId, environment: each.environment })),
    };
  },

  async 'role:create'(orm, options) {
    const em = orm.em.fork();
    const org = await organization(em, required(options, 'org'));
    const role = createRole(em, org, required(options, 'name'), text(options, 'description') ?? '');
    await em.flush();
    return { id: role.id, object: 'role', name: role.name, organization_id: org.id };
  },

  async 'payout:resolve'(orm, options) {
    if (options.credit === options.refund) throw new UsageError('exactly one of --credit or --refund is required');
    const [{ ChainNodes }, { createKeyProvider, createSeedKeyProvider }, { KeyService }, { refundingTransaction }, { resolveHeldFunds }, { createTemporalClient }, { WorkflowStarter }] = await Promise.all([
      import('./chains/nodes'),
      import('./keys/provider'),
      import('./keys/service'),
      import('./payouts/refunds'),
      import('./payouts/resolution'),
      import('./temporal/client'),
      import('./temporal/starter'),
    ]);
    const config = loadConfig();
    const log = createLogger(config.LOG_LEVEL, 'cli');
    // A refund's send and its follow-up are workflows: started once the resolution commits (else by the start sweep).
    const temporal = createTemporalClient(config);
    const starter = new WorkflowStarter(temporal.client, config, log);
    const deps = {
      config,
      chains: new ChainNodes(config, log, orm),
      keys: new KeyService(createKeyProvider(config, log), createSeedKeyProvider(config, log, 'cli')),
      em: () => orm.em.fork(),
      transaction: <T>(work: (em: EntityManager) => Promise<T>) => starter.transaction(orm.em.fork(), work),
    };
    try {
      return await refundingTransaction(deps, (em, deps) =>
        resolveHeldFunds(em, deps, { tripId: required(options, 'trip'), resolution: options.credit ? 'credit' : 'refund', operator: text(options, 'operator') ?? 'cli' }),
      );
    } finally {
      await temporal.connection.close();
    }
  },
};

/**
 * The commands of their own modules, each module loaded when one of its commands runs: a command loads what it uses,
 * not the whole service (loading everything cost every call, `--help` included, about two seconds of CPU).
 */
const commandModules: Record<string, () => Promise<Record<string, Command>>> = {
  ...Object.fromEntries(['keys:rotate', 'keys:seeds', 'keys:separate-live-seed'].map((name) => [name, async () => (await import('./cli/keys')).keyCommands])),
  ...Object.fromEntries(['lightning:held', 'lightning:resolve'].map((name) => [name, async () => (await import('./cli/lightning')).lightningCommands])),
  'lnd:bake-macaroon': async () => (await import('./cli/lnd')).lndCommands,
};

/** The command of that name, loaded; undefined for no such command. */
async function loadCommand(name: string): Promise<Command | undefined> {
  if (Object.hasOwn(commands, name)) return commands[name];
  if (!Object.hasOwn(commandModules, name)) return undefined;
  const command = (await commandModules[name]!())[name];
  if (!command) throw new Error(`command ${name} is not in the module src/cli.ts names for it`);
  return command;
}

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  const run = command ? await loadCommand(command) : undefined;
  if (!run && command !== 'doctor') {
    console.error(USAGE);
    return command ? 2 : 0;
  }
  const { values } = parseArgs({
    args: rest,
    options: Object.fromEntries(
      ['key-file', 'name', 'environment', 'org', 'scopes', 'user-id', 'email', 'org-role', 'description', 'policy-activation-approvals', 'address-book-cooling-hours', 'chain', 'status', 'trip', 'operator', 'batch-size', 'payment', 'admin-macaroon', 'out', 'root-key-id', 'timeout-ms']
        .map((name): [string, { type: 'string' | 'boolean' }] => [name, { type: 'string' }])
        .concat([
          ['credit', { type: 'boolean' }],
          ['refund', { type: 'boolean' }],
          ['dry-run', { type: 'boolean' }],
          ['json', { type: 'boolean' }],
        ]),
    ),
  });
  // Without DATABASE_URL: the settings of this checkout's running `npm start`, said on stderr (stdout is the command's JSON).
  const recorded = recordedInstanceSettings(process.env);
  if (recorded.from) console.error(`using the settings of ${recorded.from}`);
  Object.assign(process.env, recorded.settings);
  const config = loadConfig();
  nameConnections('custody-cli');
  // Before any connection: the doctor reports an unreachable database as one of its checks. Silent: its report says it all.
  if (!run) return (await import('./cli/doctor')).doctorCommand(config, createLogger('silent', 'cli'), values as Options);
  const orm = await createOrm(config.DATABASE_URL, 2);
  try {
    const result = await run(orm, values as Options);
    if (command === 'bootstrap') printBootstrap(result as BootstrapResult);
    else console.log(JSON.stringify(result, null, 2));
    // A check that finds the ledger broken, a rotation that left rows under an old key, a held payment left pending, or a
    // refused separation of seeds fails: a script or cron job notices.
    if (command === 'ledger:verify') return (result as { whole: boolean }).whole ? 0 : 1;
    // A payment the node cannot settle yet stays pending: the operator asks again later.
    if (command === 'lightning:resolve') return (result as { resolved: boolean }).resolved ? 0 : 1;
    if (command === 'keys:rotate') {
      const rotation = result as { dry_run: boolean; rows_left: number };
      return rotation.dry_run || rotation.rows_left === 0 ? 0 : 1;
    }
    return command === 'keys:separate-live-seed' && (result as LiveSeedSeparation).outcome === 'refused' ? 1 : 0;
  } finally {
    await orm.close();
  }
}

type BootstrapResult =
  | { bootstrapped: false; owners_recorded: { organization_id: string; owner_member_id: string }[] }
  | { bootstrapped: true; organization_id: string; owner_member_id: string; api_key: { secret?: string }; key_file: string | null };

function printBootstrap(result: BootstrapResult) {
  if (!result.bootstrapped) {
    for (const recorded of result.owners_recorded) for (const line of approvalsHowTo(recorded.organization_id, recorded.owner_member_id)) console.log(line);
    return;
  }
  console.log(`Created organization ${result.organization_id} and its root API key (scope *, sandbox):`);
  console.log(`\n    ${result.api_key.secret}\n`);
  console.log(result.key_file ? `It is also in ${result.key_file}. It is shown only this once.` : 'It is shown only this once.');
  for (const line of approvalsHowTo(result.organization_id, result.owner_member_id)) console.log(line);
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    const parseError = String((error as { code?: unknown }).code ?? '').startsWith('ERR_PARSE_ARGS');
    if (parseError || error instanceof UsageError || error instanceof ConfigError || error instanceof DomainError) console.error((error as Error).message);
    else console.error(error);
    process.exit(1);
  },
);
