import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { chmod, mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { EntityManager } from '@mikro-orm/postgresql';
import { Client, Connection } from '@temporalio/client';
import { temporal as temporalProto } from '@temporalio/proto';
import { parseEther, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { cardBalanceFlow } from '../../src/cards/flows/balance';
import { cardProvisioningFlow } from '../../src/cards/flows/provisioning';
import { ChainNodes } from '../../src/chains/nodes';
import { loadConfig } from '../../src/config';
import { createOrm, type Orm } from '../../src/db/orm';
import { companyAccount, counterpartyAccount } from '../../src/ledger/accounts';
import { verifyLedger } from '../../src/ledger/invariants';
import { post } from '../../src/ledger/postings';
import { createLogger } from '../../src/logger';
import { ledgerProjections } from '../../src/modules';
import { compareLedgerWithChain } from '../../src/monitoring/ledger-check';
import { transactionWorkflowId } from '../../src/transactions/flows/transaction';
import { paymentWorkflowId } from '../../src/lightning/flows/payment';
import { SERVICE_DESK_ORGANIZATION_ID } from '../../src/payouts/desk';
import { payoutTripFlow } from '../../src/payouts/flows/trip';
import { FINISHED_RUN_STATUSES, type RunStatus } from '../../src/consolidation/entities';
import { consolidationRunFlow } from '../../src/consolidation/flows/run';
import { anvilEthBalance, anvilFunder, anvilMine, anvilReceipt, anvilSandboxConfig, deployAnvilToken, receiptFee, startAnvil, type Anvil } from './anvil';
import { validCustomer } from './customer';
import { eventually } from './eventually';
import { freeLoopbackPort } from './ports';
import { sandboxOrganizations, type SandboxOrganization } from './sandbox-organizations';
import { ServiceProcess } from './service-process';
import { WebhookReceiver } from './webhook-receiver';

/**
 * The chaos run of issues 18 and 34: PostgreSQL, the Temporal dev server, the API and the worker as separate
 * processes (the compose file's way), a mixed load of three organizations with idempotency keys (card creations
 * and fundings, Lightning invoices paid by another organization, on-chain sends, payout trips, sandbox credits,
 * webhook tests, every event delivered to a local receiver) while each component is killed with SIGKILL, each
 * kill timed on a workflow inside an activity, and started again; then the invariants: every accepted operation
 * done exactly once and settled, each organization's money and cards what the load's own model says, every
 * expected event delivered or scheduled, no component exiting on its own. `npm run chaos` runs it long
 * (bench/chaos.ts), test/chaos.test.ts short (and with planted faults, to show the checks fail).
 */
export interface ChaosOptions {
  seed: number;
  /** How long the load runs; the kills fall inside it. */
  loadSeconds: number;
  killsPerComponent: number;
  operationsPerSecond: number;
  maxInFlight: number;
  /** How long, after the load, operations may take to reach a final state before the checks. */
  settleSeconds: number;
  /** Sandbox Ethereum on anvil: deposits, sends and the wallet ledger against the chain. */
  chain: boolean;
  /**
   * For the test that shows the checks can fail: after the checks, the driver plants a doubled credit and a skipped debit
   * in the same database and runs every check again (`faulted`).
   */
  plantFaults?: boolean;
  log: (line: string) => void;
}

export interface ChaosResult {
  violations: string[];
  report: string[];
  /** With plantFaults: the start of the violation each planted fault must cause, and what the checks found after they were planted. */
  faulted?: { planted: string[]; violations: string[] };
  /** Operations the load sent (answered, setup excluded), and their rate over the load's wall-clock time. */
  operations: number;
  operationsPerSecond: number;
  /** Kills that fell while an accepted operation's workflow had an activity pending. */
  killsInActivities: number;
}

const ROOT = path.resolve(__dirname, '../../..');
const COMPONENTS = ['worker', 'api', 'temporal', 'postgres'] as const;
type ComponentName = (typeof COMPONENTS)[number];
/** The organizations of the load: each spends, pays the others over Lightning, funds cards, sends on chain and pays out. */
const ORGANIZATIONS = ['alpha', 'bravo', 'charlie'] as const;
type OrganizationName = (typeof ORGANIZATIONS)[number];

/** A new card's initial funding, in cents. */
const INITIAL_CARD_FUNDING = 500;
/** Cents charged per funding, in basis points: fees are part of the money check. */
const FUNDING_FEE_BPS = 100;
/** Blocks on top of a transfer's before it counts (anvil mines one a second here). */
const CONFIRMATIONS = 2;
/** Confirmations of a payout trip's deposit on the Tron devnet, whose blocks the driver mines (`mineTron`). */
const TRON_CONFIRMATIONS = 2;

/**
 * The payout trips of the load: USDT on the Tron devnet paid out to a Nigerian bank account or a
 * Kenyan M-Pesa wallet. No sandbox outcome is set, so both sandbox rails pay: a trip ends `success`.
 */
const PAYOUT_CORRIDORS = [
  {
    quote: { fromAsset: 'USDT', chain: 'tron', toCurrency: 'NGN', country: 'NG', paymentMethod: 'bank' },
    beneficiary: { type: 'bank', accountNumber: '0123456789', bankCode: '058', accountName: 'Ada Obi' },
  },
  {
    quote: { fromAsset: 'USDT', chain: 'tron', toCurrency: 'KES', country: 'KE', paymentMethod: 'mobile_money' },
    beneficiary: { type: 'mobile_money', phoneNumber: '+254712345678', network: 'MPESA', accountName: 'Wanjiru Kamau' },
  },
] as const;

/**
 * An organization's sweeps: a vault of its own whose wallet has two addresses the load deposits ETH to, and a manual
 * consolidation rule sweeping that ETH (native, each address paying its own fee) to the organization's main wallet.
 * One sweep at a time per organization: a run plans what the chain holds, so it starts once the ledger has booked the deposits.
 */
interface SweepSource {
  ruleId: string;
  walletId: string;
  addresses: Hex[];
  busy: boolean;
  /** Deposits booked and not swept yet: the setup's, so that the first sweeps run while the kills fall. */
  booked: boolean;
}

/** Sandbox Ethereum for the run: anvil (not killed: it stands for the network), a block a second, ETH deposited from its dev account and sent to an outside address. */
interface Chain {
  anvil: Anvil;
  outside: Hex;
  mining?: NodeJS.Timeout;
  /** Each organization's main wallet (what it sends from, where its sweeps land). */
  wallets: Partial<Record<OrganizationName, { id: string; address: Hex }>>;
  sweepSources: Partial<Record<OrganizationName, SweepSource>>;
  /** Wei the dev account sent to each wallet (by id), each mined. */
  deposited: Map<string, bigint>;
  depositing: Promise<void>;
}

/** mulberry32: a small seeded PRNG, so a run's kill schedule and load are reproduced by its seed. */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A PostgreSQL array literal of ids (letters, digits, '-', '_', ':', '.'), for `= any(?::text[])`: the driver would spread a JS array into a list. */
const textArray = (ids: string[]) => `{${ids.join(',')}}`;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Bash code using the helpers of scripts/lib.sh and scripts/postgres.sh (the same clusters and dev server `npm start` runs), with `args` as "$@"; its stdout. */
function shell(code: string, ...args: string[]): Promise<string> {
  const script = `source "${ROOT}/scripts/lib.sh"; source "${ROOT}/scripts/postgres.sh"; ${code}`;
  const command = [code, ...args];
  return new Promise((resolve, reject) =>
    execFile('bash', ['-c', script, 'chaos', ...args], { cwd: ROOT, env: { ...process.env, LIB_SCRIPT_NAME: 'chaos' } }, (error, stdout, stderr) =>
      error ? reject(new Error(`${command.join(' ')}: ${error.message}\n${stderr}`)) : resolve(stdout.trim()),
    ),
  );
}

/** Whether a process (not necessarily our child) runs: a zombie waiting for init to reap it does not. */
async function running(pid: number): Promise<boolean> {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
  return stat !== '' && stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
}

/** A component the chaos kills and starts again. */
interface Component {
  readonly name: ComponentName;
  start(): Promise<void>;
  /** SIGKILL, and wait until it is gone. */
  kill(): Promise<void>;
  alive(): Promise<boolean>;
  /** The graceful stop at the end. */
  stop(): Promise<void>;
  log(): string;
}

/**
 * A PostgreSQL cluster of its own (pg_start_cluster: fsync on, so a crash loses no commit). A kill is
 * SIGKILL to the postmaster's process group (pg_ctl starts it in a session of its own): every backend
 * dies with it, as when its container is killed.
 */
class PostgresComponent implements Component {
  readonly name = 'postgres' as const;
  private pid = 0;
  constructor(
    private readonly dir: string,
    private readonly port: number,
  ) {}

  async start() {
    await shell('pg_start_cluster "$@"', this.dir, String(this.port));
    this.pid = Number((await readFile(path.join(this.dir, 'data/postmaster.pid'), 'utf8')).split('\n')[0]);
  }

  async kill() {
    process.kill(-this.pid, 'SIGKILL');
    await eventually(async () => ((await this.alive()) ? undefined : true), 'postgres gone', 30_000, 100);
  }

  alive() {
    return running(this.pid);
  }

  async stop() {
    await shell('pg_stop_cluster "$@"', this.dir);
  }

  log() {
    return `postgres: see ${this.dir}/postgres.log`;
  }
}

/**
 * The Temporal dev server started on free ports, before anything is told its address: ports another
 * process took between their pick and the server's bind (four test processes pick ports at once) are
 * picked again. Every restart after that keeps them.
 */
async function startedTemporal(dir: string): Promise<TemporalComponent> {
  for (let attempt = 1; ; attempt += 1) {
    const temporal = new TemporalComponent(dir, await freeLoopbackPort(), await freeLoopbackPort());
    try {
      await temporal.start();
      return temporal;
    } catch (error) {
      if (attempt >= 3 || !(error as Error).message.includes('address already in use')) throw error;
    }
  }
}

/** The Temporal dev server as `npm start` runs it (temporal_dev_start: its SQLite file in WAL mode), the same file and port on every start. */
class TemporalComponent implements Component {
  readonly name = 'temporal' as const;
  private pid = 0;
  constructor(
    private readonly dir: string,
    readonly port: number,
    private readonly uiPort: number,
  ) {}

  async start() {
    this.pid = Number(
      await shell('temporal_dev_start "$@" >&2 && echo "$TEMPORAL_DEV_PID"', path.join(this.dir, 'temporal.db'), String(this.port), String(this.uiPort), path.join(this.dir, 'temporal.log')),
    );
  }

  async kill() {
    process.kill(this.pid, 'SIGKILL');
    await eventually(async () => ((await this.alive()) ? undefined : true), 'temporal gone', 30_000, 100);
  }

  alive() {
    return running(this.pid);
  }

  async stop() {
    if (await this.alive()) process.kill(this.pid, 'SIGTERM');
    await eventually(async () => ((await this.alive()) ? undefined : true), 'temporal stopped', 30_000, 100).catch(() => process.kill(this.pid, 'SIGKILL'));
  }

  log() {
    return `temporal: see ${this.dir}/temporal.log`;
  }
}

/** The API or the worker, `dist/src/<script>`, a new process on each start. */
class NodeComponent implements Component {
  private process?: ServiceProcess;
  private lastLog = '';
  constructor(
    readonly name: 'api' | 'worker',
    private readonly script: string,
    private readonly env: NodeJS.ProcessEnv,
  ) {}

  async start() {
    if (this.process) this.lastLog = this.process.log;
    this.process = new ServiceProcess(this.name, this.script, this.env);
  }

  async kill() {
    await this.process?.kill();
  }

  async alive() {
    return !!this.process && (await running(this.process.pid));
  }

  async stop() {
    await this.process?.stop();
  }

  log() {
    return `${this.lastLog}\n${this.process?.log ?? ''}`;
  }
}

/**
 * What the compose file's `restart: unless-stopped` does for one component: whatever makes it exit
 * (our SIGKILL, or a crash of its own, counted apart) it is started again, after a pause.
 */
class Supervised {
  kills = 0;
  ownExits = 0;
  /** The end of its output before the last exit of its own, to say why. */
  lastOwnExit = '';
  private held = false;
  private starting: Promise<void> | undefined;
  constructor(readonly component: Component) {}

  /** Starts it again if it is down and not held down by a kill in progress. */
  async tick(): Promise<void> {
    if (this.held || this.starting || (await this.component.alive()) || this.held) return;
    this.ownExits += 1;
    this.lastOwnExit = this.component.log().trim().slice(-600);
    await this.restart();
  }

  private restart(): Promise<void> {
    // A start that fails (what it needs is down too) is tried again on a later tick.
    const starting = (this.starting ??= this.component
      .start()
      .catch(async () => void (await sleep(1000)))
      .finally(() => (this.starting = undefined)));
    return starting;
  }

  /** SIGKILL, down for `downMs`, then started again (until it is up). */
  async killFor(downMs: number): Promise<void> {
    await this.starting;
    this.held = true;
    this.kills += 1;
    await this.component.kill();
    await sleep(downMs);
    this.held = false;
    while (!(await this.component.alive())) await this.restart();
  }
}

interface Answer {
  status: number;
  body: Record<string, any>;
}

/** An operation the load sent, and what the service answered to it in the end. */
interface Operation {
  kind: 'credit' | 'card' | 'funding' | 'invoice' | 'payment' | 'webhook_test' | 'send' | 'payout_quote' | 'payout' | 'payout_deposit' | 'sweep_run';
  as: OrganizationName;
  method: string;
  route: string;
  body: unknown;
  idempotencyKey: string;
  /** Send attempts: more than one when a component was down. */
  attempts: number;
  answer?: Answer;
  /** The id of what it created (card, card transaction, invoice, payment, event, payout quote, trip, deposit transfer, consolidation run). */
  id?: string;
  /** A payment: the invoice it pays (its organization, id and sats); a funding: its card. */
  pays?: { organization: OrganizationName; invoiceId: string; sats: bigint };
  cardId?: string;
}

const idOf = (kind: Operation['kind'], body: Record<string, any>): string | undefined =>
  ({
    card: body.data?.card?.id,
    funding: body.data?.transaction?.id,
    payment: body.data?.id,
    invoice: body.id,
    send: body.id,
    webhook_test: body.event_id,
    credit: 'credit',
    payout_quote: body.quoteId,
    payout: body.tripId,
    payout_deposit: body.txHash,
    sweep_run: body.id,
  })[kind];

/** The workflow an accepted operation started, if any: a kill timed on it lands while its activities run. */
const workflowOfOperation = (operation: Operation): string | undefined => {
  if (!operation.id) return undefined;
  switch (operation.kind) {
    case 'card':
      return cardProvisioningFlow.workflowId({ cardId: operation.id });
    case 'funding':
      return cardBalanceFlow.workflowId({ transactionId: operation.id });
    case 'payment':
      return paymentWorkflowId(operation.id);
    case 'send':
      return transactionWorkflowId(operation.id);
    case 'payout':
      return payoutTripFlow.workflowId({ tripId: operation.id });
    case 'sweep_run':
      return consolidationRunFlow.workflowId({ runId: operation.id });
    default:
      return undefined;
  }
};

/**
 * A client as a real one behaves while the service is failing over: every POST carries an
 * Idempotency-Key and is sent again with the same key after a connection error, a 5xx, a 429 or
 * idempotency_key_in_use (a request the killed API was running), until `deadline`.
 */
class ChaosClient {
  retries = 0;
  constructor(
    private readonly url: string,
    private readonly secrets: Record<OrganizationName, string>,
  ) {}

  async send(operation: Pick<Operation, 'as' | 'method' | 'route' | 'body' | 'idempotencyKey' | 'attempts'>, deadline: number): Promise<Answer | undefined> {
    for (let pause = 100; Date.now() < deadline; pause = Math.min(pause * 2, 2000)) {
      operation.attempts += 1;
      const answer = await this.once(operation.as, operation.method, operation.route, operation.body, operation.idempotencyKey);
      if (answer && !retryable(answer)) return answer;
      this.retries += 1;
      await sleep(pause);
    }
    return undefined;
  }

  /** A GET, retried the same way; undefined when the deadline passed. */
  async read(as: OrganizationName, route: string, deadline: number): Promise<Answer | undefined> {
    return this.send({ as, method: 'GET', route, body: undefined, idempotencyKey: '', attempts: 0 }, deadline);
  }

  private async once(as: OrganizationName, method: string, route: string, body: unknown, idempotencyKey: string): Promise<Answer | undefined> {
    try {
      const response = await fetch(`${this.url}${route}`, {
        method,
        headers: {
          authorization: `Bearer ${this.secrets[as]}`,
          ...(idempotencyKey ? { 'idempotency-key': idempotencyKey } : {}),
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        signal: AbortSignal.timeout(30_000),
      });
      const text = await response.text();
      return { status: response.status, body: text ? (JSON.parse(text) as Record<string, any>) : {} };
    } catch {
      return undefined;
    }
  }
}

const retryable = (answer: Answer) => answer.status >= 500 || answer.status === 429 || (answer.status === 409 && answer.body.error?.code === 'idempotency_key_in_use');

/** Runs the whole chaos: components up, load with kills, settle, checks. Everything it started is stopped before it returns. */
export async function runChaos(options: ChaosOptions): Promise<ChaosResult> {
  const random = seededRandom(options.seed);
  const dir = await mkdtemp(path.join(os.tmpdir(), 'custody-chaos-'));
  // The cluster's owner (the postgres user, when we run as root) must reach its folder inside.
  await chmod(dir, 0o711);
  const pgPort = await freeLoopbackPort();
  const apiPort = await freeLoopbackPort();
  const postgres = new PostgresComponent(path.join(dir, 'postgres'), pgPort);
  const temporal = await startedTemporal(path.join(dir, 'temporal'));
  const databaseUrl = `postgresql://postgres@127.0.0.1:${pgPort}/postgres`;
  const chain: Chain = { anvil: await startAnvil(), outside: privateKeyToAccount(generatePrivateKey()).address, wallets: {}, sweepSources: {}, deposited: new Map(), depositing: Promise.resolve() };
  const taskQueue = `chaos-${randomUUID()}`;
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    NODE_OPTIONS: '--max-semi-space-size=4',
    NODE_ENV: 'development',
    LOG_LEVEL: 'warn',
    DATA_DIR: path.join(dir, 'data'),
    DATABASE_URL: databaseUrl,
    TEMPORAL_ADDRESS: `127.0.0.1:${temporal.port}`,
    TEMPORAL_NAMESPACE: 'default',
    ...(options.chain ? anvilSandboxConfig(chain.anvil, taskQueue, await deployAnvilToken(chain.anvil), CONFIRMATIONS) : { TEMPORAL_TASK_QUEUE: taskQueue }),
    DEVNET_BLOCK_INTERVAL_SECONDS: '3600',
    RATE_LIMIT_PER_SECOND: '1000000',
    RATE_LIMIT_BURST: '1000000',
    WEBHOOK_ALLOW_INSECURE_LOOPBACK: 'true',
    CARD_FUNDING_FEE_BPS: String(FUNDING_FEE_BPS),
    CHAIN_CONFIRMATIONS_TRON: String(TRON_CONFIRMATIONS),
    // A request the killed API held is taken over by its retry after this long.
    IDEMPOTENCY_LOCK_SECONDS: '10',
  };
  const api = new NodeComponent('api', 'server.js', { ...env, HOST: '127.0.0.1', PORT: String(apiPort) });
  const worker = new NodeComponent('worker', 'worker.js', env);
  const supervised = Object.fromEntries([postgres, temporal, worker, api].map((component) => [component.name, new Supervised(component)])) as Record<ComponentName, Supervised>;
  const receiver = await new WebhookReceiver().start();
  let supervising: NodeJS.Timeout | undefined;
  let tronMining: { stop: () => Promise<void> } | undefined;
  try {
    options.log(`seed ${options.seed}; state in ${dir}`);
    chain.mining = setInterval(() => void anvilMine(chain.anvil, 1).catch(() => undefined), 1000);
    await postgres.start();
    const organizations = await sandboxOrganizations(databaseUrl, 'Chaos', ORGANIZATIONS);
    await worker.start();
    await api.start();
    supervising = setInterval(() => Object.values(supervised).forEach((each) => void each.tick()), 500);
    const url = `http://127.0.0.1:${apiPort}`;
    await eventually(async () => ((await fetch(`${url}/readyz`).catch(() => undefined))?.ok ? true : undefined), 'the API ready', 120_000, 200);
    const client = new ChaosClient(url, Object.fromEntries(ORGANIZATIONS.map((name) => [name, organizations[name].secret])) as Record<OrganizationName, string>);
    // The scan starts at the tip it first sees (transfers before it are not credited): deposits wait for it.
    const setupOrm = await createOrm(databaseUrl, 1);
    if (options.chain) await eventually(
      async () => ((await setupOrm.em.fork().getConnection().execute(`select 1 from chain_scan_cursors where chain = 'ethereum' and environment = 'sandbox'`)).length > 0 ? true : undefined),
      'the Ethereum scan started',
      120_000,
      500,
    ).finally(() => setupOrm.close());
    const temporalConnection = await Connection.connect({ address: `127.0.0.1:${temporal.port}` });
    const orm = await createOrm(databaseUrl, 2);
    try {
      const temporalClient = new Client({ connection: temporalConnection });
      tronMining = mineTron(client);
      const load = await runLoad(options, random, client, receiver, supervised, chain, temporalClient);
      options.log('load done; settling');
      const checked = () => check(options, orm, temporalClient, client, load, receiver, supervised, chain, env, organizations);
      const result = await checked();
      if (!options.plantFaults) return result;
      const planted = await plantFaults(orm, organizations);
      return { ...result, faulted: { planted, violations: (await checked()).violations } };
    } finally {
      await orm.close();
      await temporalConnection.close();
    }
  } catch (error) {
    throw new Error(`${(error as Error).message}\n${[api, worker, temporal, postgres].map((each) => each.log()).join('\n')}`);
  } finally {
    clearInterval(supervising);
    await tronMining?.stop();
    clearInterval(chain.mining);
    await chain.anvil.stop();
    await api.stop();
    await worker.stop();
    await temporal.stop().catch(() => undefined);
    await postgres.stop().catch(() => undefined);
    await receiver.close();
    await rm(dir, { recursive: true, force: true });
  }
}

/** A POST of the setup, which must succeed: its answer's body. */
async function setUp(client: ChaosClient, as: OrganizationName, route: string, body: unknown, deadline: number): Promise<Record<string, any>> {
  const answer = await client.send({ as, method: 'POST', route, body, idempotencyKey: randomUUID(), attempts: 0 }, deadline);
  if (!answer || answer.status >= 300) throw new Error(`POST ${route} of ${as} failed: ${JSON.stringify(answer)}`);
  return answer.body;
}

/**
 * A block a second on the Tron devnet (which mines none of its own here) through the sandbox's mining route, one call
 * at a time, from the load's start until the end of the checks: the confirmations of the trips' deposits.
 */
function mineTron(client: ChaosClient): { stop: () => Promise<void> } {
  let mining = true;
  const loop = (async () => {
    while (mining) {
      await client.send({ as: ORGANIZATIONS[0], method: 'POST', route: '/v1/sandbox/chains/tron/blocks', body: { count: 1 }, idempotencyKey: randomUUID(), attempts: 0 }, Date.now() + 30_000);
      await sleep(1000);
    }
  })();
  return {
    stop: async () => {
      mining = false;
      await loop;
    },
  };
}

/** A vault of `as` with an Ethereum wallet: their ids and the wallet's primary address. */
async function openVault(client: ChaosClient, as: OrganizationName, name: string, deadline: number): Promise<{ vaultId: string; walletId: string; address: Hex }> {
  const vault = await setUp(client, as, '/v1/vaults', { name }, deadline);
  const wallet = await setUp(client, as, '/v1/wallets', { name, chain: 'ethereum', vault_id: vault.id, wallet_type: 'hot' }, deadline);
  return { vaultId: vault.id as string, walletId: wallet.id as string, address: wallet.primary_address.address as Hex };
}

/**
 * An Ethereum wallet of `as`, with 100 ETH deposited and confirmed; and its sweep source: a vault of its own with a
 * wallet of two addresses, and a manual rule sweeping their ETH to the main wallet's vault (each address paying its own fee).
 */
async function openWallet(client: ChaosClient, chain: Chain, as: OrganizationName, setupDeadline: number): Promise<void> {
  const main = await openVault(client, as, 'Chaos', setupDeadline);
  const opened = { id: main.walletId, address: main.address };
  chain.wallets[as] = opened;
  const source = await openVault(client, as, 'Chaos sweeps', setupDeadline);
  const second = await setUp(client, as, `/v1/wallets/${source.walletId}/addresses`, { label: 'second' }, setupDeadline);
  const rule = await setUp(
    client,
    as,
    '/v1/consolidation/rules',
    { vault_id: source.vaultId, chain: 'ethereum', destination_type: 'vault', destination_vault_id: main.vaultId, gas_source: 'wallet', trigger_type: 'manual', assets: [{ is_native: true }] },
    setupDeadline,
  );
  chain.sweepSources[as] = { ruleId: rule.id as string, walletId: source.walletId, addresses: [source.address, second.address as Hex], busy: false, booked: true };
  await deposit(chain, opened, parseEther('100'));
  for (const address of chain.sweepSources[as]!.addresses) await deposit(chain, { id: source.walletId, address }, parseEther('0.05'));
  await eventually(
    async () =>
      ((await walletEth(client, as, opened.id, setupDeadline)) ?? 0n) > 0n && (await walletEth(client, as, source.walletId, setupDeadline)) === parseEther('0.1') ? true : undefined,
    'the first deposits confirmed',
    120_000,
    500,
  );
}

/** A wallet's ETH balance as the API shows it. */
async function walletEth(client: ChaosClient, as: OrganizationName, walletId: string, deadline: number): Promise<bigint | undefined> {
  const balances = (await client.read(as, `/v1/wallets/${walletId}/balances`, deadline))?.body.data as { asset_id: string; balance: string }[] | undefined;
  const eth = balances?.find((row) => row.asset_id === 'ETH');
  return eth ? BigInt(eth.balance) : undefined;
}

/** A deposit from anvil's dev account; one at a time (its nonce). */
function deposit(chain: Chain, wallet: { id: string; address: Hex }, wei: bigint): Promise<void> {
  chain.depositing = chain.depositing.then(async () => {
    await anvilFunder(chain.anvil).sendTransaction({ to: wallet.address, value: wei });
    chain.deposited.set(wallet.id, (chain.deposited.get(wallet.id) ?? 0n) + wei);
  });
  return chain.depositing;
}

interface LoadState {
  operations: Operation[];
  cards: { id: string; as: OrganizationName }[];
  webhookIds: Partial<Record<OrganizationName, string>>;
  /** Called with each accepted operation: a kill waiting for work in flight. */
  onAccepted: ((operation: Operation) => void)[];
  /** The workflows of the sweep runs in progress: a kill looks at them first. */
  sweepsRunning: Set<string>;
}

/** What the load did: its operations, and how the kills landed. */
interface LoadOutcome {
  operations: Operation[];
  loadSeconds: number;
  /** Kills that fell while an accepted operation's workflow had an activity pending (Temporal's describe, just before the SIGKILL). */
  killsInActivities: number;
  /** Of those, the kills that fell while a sweep run had an activity pending. */
  killsInSweepActivities: number;
  killsTimed: number;
  /** Operations sent before the load (the first credits): not counted in its rate. */
  setupOperations: number;
}

async function runLoad(
  options: ChaosOptions,
  random: () => number,
  client: ChaosClient,
  receiver: WebhookReceiver,
  supervised: Record<ComponentName, Supervised>,
  chain: Chain,
  temporal: Client,
): Promise<LoadOutcome> {
  const setupDeadline = Date.now() + 120_000;
  const state: LoadState = { operations: [], cards: [], webhookIds: {}, onAccepted: [], sweepsRunning: new Set() };
  const accept = async (operation: Omit<Operation, 'attempts' | 'idempotencyKey'>, deadline: number): Promise<Operation> => {
    const sent: Operation = { ...operation, attempts: 0, idempotencyKey: randomUUID() };
    state.operations.push(sent);
    sent.answer = await client.send(sent, deadline);
    if (sent.answer && sent.answer.status < 300) {
      sent.id = idOf(sent.kind, sent.answer.body);
      for (const waiter of state.onAccepted.splice(0)) waiter(sent);
    }
    return sent;
  };
  const pick = <T>(items: readonly T[]) => items[Math.floor(random() * items.length)]!;
  // Money to spend and a webhook endpoint for every event of each organization, before any kill.
  for (const as of ORGANIZATIONS) {
    for (const currency of ['USD', 'sat']) {
      await accept({ kind: 'credit', as, method: 'POST', route: '/v1/sandbox/balances', body: { amount: '100000000', currency, reference: randomUUID() } }, setupDeadline);
    }
    const endpoint = await client.send({ as, method: 'POST', route: '/v1/webhooks', body: { name: 'Chaos', url: receiver.url }, idempotencyKey: randomUUID(), attempts: 0 }, setupDeadline);
    if (!endpoint || endpoint.status !== 201) throw new Error(`webhook endpoint not created: ${JSON.stringify(endpoint)}`);
    state.webhookIds[as] = endpoint.body.id as string;
  }
  if (options.chain) await Promise.all(ORGANIZATIONS.map((as) => openWallet(client, chain, as, setupDeadline)));
  options.log('organizations set up; load starts');

  const loadEnd = Date.now() + options.loadSeconds * 1000;
  // In-flight operations keep retrying past the load's end, until every component has been up a while.
  const answerDeadline = loadEnd + options.settleSeconds * 1000;
  const kinds: { weight: number; run: () => Promise<unknown> }[] = [
    ...(options.chain
      ? [
          {
            weight: 1,
            run: () => {
              const as = pick(ORGANIZATIONS);
              return deposit(chain, chain.wallets[as]!, parseEther('0.01') * BigInt(1 + Math.floor(random() * 10)));
            },
          },
          {
            weight: 2,
            run: () => {
              const as = pick(ORGANIZATIONS);
              return accept({ kind: 'send', as, method: 'POST', route: '/v1/transactions', body: { wallet_id: chain.wallets[as]!.id, to_address: chain.outside, amount: '0.001', asset: 'ETH' } }, answerDeadline);
            },
          },
          {
            weight: 1,
            run: () => sweep(pick(ORGANIZATIONS), [random(), random()]),
          },
        ]
      : []),
    {
      weight: 1,
      run: () => accept({ kind: 'credit', as: pick(ORGANIZATIONS), method: 'POST', route: '/v1/sandbox/balances', body: { amount: '100000', currency: pick(['USD', 'sat']), reference: randomUUID() } }, answerDeadline),
    },
    {
      weight: 2,
      run: async () => {
        const as = pick(ORGANIZATIONS);
        const card = await accept({ kind: 'card', as, method: 'POST', route: '/api/cards', body: { amount: INITIAL_CARD_FUNDING, card_type: 'virtual', currency: 'USD', name: 'Chaos card', customer: validCustomer() } }, answerDeadline);
        if (card.id) state.cards.push({ id: card.id, as });
      },
    },
    {
      weight: 4,
      run: async () => {
        if (state.cards.length === 0) return;
        const card = pick(state.cards);
        const read = await client.read(card.as, `/api/cards/${card.id}`, answerDeadline);
        if (read?.body.data?.card?.status !== 'active') return;
        await accept(
          { kind: 'funding', as: card.as, cardId: card.id, method: 'POST', route: `/api/cards/${card.id}/balance`, body: { type: 'fund', amount: 1000 + Math.floor(random() * 1000), reference: randomUUID() } },
          answerDeadline,
        );
      },
    },
    {
      weight: 4,
      run: async () => {
        // Another organization pays: the internal route between two organizations of the service.
        const payee = pick(ORGANIZATIONS);
        const payer = pick(ORGANIZATIONS.filter((each) => each !== payee));
        const sats = 1000 + Math.floor(random() * 1000);
        const invoice = await accept({ kind: 'invoice', as: payee, method: 'POST', route: '/api/lightning/invoices', body: { amount: sats, description: 'chaos', reference: randomUUID() } }, answerDeadline);
        if (!invoice.id) return;
        await accept(
          { kind: 'payment', as: payer, pays: { organization: payee, invoiceId: invoice.id, sats: BigInt(sats) }, method: 'POST', route: '/api/lightning/payments', body: { request: invoice.answer!.body.request, reference: randomUUID() } },
          answerDeadline,
        );
      },
    },
    {
      weight: 1,
      run: () => {
        const as = pick(ORGANIZATIONS);
        return accept({ kind: 'webhook_test', as, method: 'POST', route: `/v1/webhooks/${state.webhookIds[as]}/test`, body: {} }, answerDeadline);
      },
    },
    {
      weight: 2,
      run: async () => {
        const as = pick(ORGANIZATIONS);
        const corridor = pick(PAYOUT_CORRIDORS);
        const amount = String(20 + Math.floor(random() * 80));
        const quote = await accept({ kind: 'payout_quote', as, method: 'POST', route: '/payouts/quotes', body: { ...corridor.quote, amount } }, answerDeadline);
        if (!quote.id) return;
        const trip = await accept(
          { kind: 'payout', as, method: 'POST', route: '/payouts/initialize', body: { quoteId: quote.id, reference: randomUUID(), beneficiary: corridor.beneficiary } },
          answerDeadline,
        );
        if (!trip.id) return;
        // The exact amount from the devnet's faucet: one transfer per Idempotency-Key however often it is retried. Its
        // confirmations come from the driver's Tron blocks (each helper call mining its own would queue them all on the devnet's producer).
        await accept(
          { kind: 'payout_deposit', as, method: 'POST', route: `/v1/sandbox/payouts/trips/${trip.id}/deposit`, body: { amount: quote.answer!.body.fromAmount } },
          answerDeadline,
        );
      },
    },
  ];
  const totalWeight = kinds.reduce((sum, kind) => sum + kind.weight, 0);

  /**
   * A sweep of `as` (skipped while its last one runs): ETH deposited to both source addresses (but for the first sweep,
   * which takes the setup's), then, once the source wallet's ledger has booked them (a run plans what the chain holds, and
   * a sweep of an amount the ledger has not booked is refused), a manual run of its rule, followed until it ends (the next
   * sweep of `as` waits for it).
   */
  async function sweep(as: OrganizationName, draws: number[]): Promise<void> {
    const source = chain.sweepSources[as]!;
    if (source.busy) return;
    source.busy = true;
    let running: string | undefined;
    try {
      if (!source.booked) {
        const amounts = draws.map((draw) => parseEther('0.01') * BigInt(1 + Math.floor(draw * 10)));
        const before = (await Promise.all(source.addresses.map((address) => anvilEthBalance(chain.anvil, address)))).reduce((sum, wei) => sum + wei, 0n);
        await Promise.all(source.addresses.map((address, index) => deposit(chain, { id: source.walletId, address }, amounts[index]!)));
        const booked = before + amounts.reduce((sum, wei) => sum + wei, 0n);
        while ((await walletEth(client, as, source.walletId, answerDeadline)) !== booked) {
          if (Date.now() > answerDeadline) return;
          await sleep(500);
        }
      }
      source.booked = false;
      const run = await accept({ kind: 'sweep_run', as, method: 'POST', route: `/v1/consolidation/rules/${source.ruleId}/runs`, body: undefined }, answerDeadline);
      running = workflowOfOperation(run);
      if (running) state.sweepsRunning.add(running);
      while (run.id && Date.now() < answerDeadline) {
        const status = (await client.read(as, `/v1/consolidation/runs/${run.id}`, answerDeadline))?.body.status as RunStatus | undefined;
        if (status && FINISHED_RUN_STATUSES.includes(status)) return;
        await sleep(500);
      }
    } finally {
      if (running) state.sweepsRunning.delete(running);
      source.busy = false;
    }
  }

  // The kill schedule: each component killed killsPerComponent times between 10% and 85% of the load, down 1 to 6 s each time.
  const loadMs = options.loadSeconds * 1000;
  const kills = COMPONENTS.flatMap((name) => Array.from({ length: options.killsPerComponent }, () => ({ name, atMs: loadMs * (0.1 + 0.75 * random()), downMs: 1000 + 5000 * random() }))).sort(
    (a, b) => a.atMs - b.atMs,
  );
  options.log(`kills: ${kills.map((kill) => `${kill.name} at ${(kill.atMs / 1000).toFixed(1)} s for ${(kill.downMs / 1000).toFixed(1)} s`).join(', ')}`);
  const startedAt = Date.now();
  const outcome: LoadOutcome = { operations: state.operations, loadSeconds: options.loadSeconds, killsInActivities: 0, killsInSweepActivities: 0, killsTimed: 0, setupOperations: state.operations.length };
  const killing = kills.map(async (kill) => {
    await sleep(kill.atMs);
    // Timed to land in work: on the next operations accepted that started a workflow (for at most 5 s), as soon as Temporal
    // says one of them is inside an activity (one pending, or a workflow task started: a local activity runs in it).
    const timedUntil = Date.now() + 5000;
    let workflowId: string | undefined;
    let inActivity = false;
    let onSweep = false;
    while (!inActivity && Date.now() < timedUntil) {
      // A sweep run in progress first: it is rarer than the other work, and its activities (scanning, submitting, following) are short.
      for (const sweepWorkflow of state.sweepsRunning) {
        if (!inActivity && (await insideActivity(temporal, sweepWorkflow))) {
          workflowId = sweepWorkflow;
          inActivity = true;
          onSweep = true;
        }
      }
      if (inActivity) break;
      const accepted = await new Promise<Operation | undefined>((resolve) => {
        const timer = setTimeout(() => resolve(undefined), timedUntil - Date.now());
        state.onAccepted.push((operation) => {
          clearTimeout(timer);
          resolve(operation);
        });
      });
      workflowId = accepted && workflowOfOperation(accepted);
      onSweep = accepted?.kind === 'sweep_run';
      if (workflowId) inActivity = await insideActivity(temporal, workflowId);
    }
    if (workflowId) outcome.killsTimed += 1;
    if (inActivity) outcome.killsInActivities += 1;
    if (inActivity && onSweep) outcome.killsInSweepActivities += 1;
    options.log(`${((Date.now() - startedAt) / 1000).toFixed(1)} s: SIGKILL ${kill.name}${workflowId ? ` (${workflowId}${inActivity ? ' inside an activity' : ''})` : ''}`);
    await supervised[kill.name].killFor(kill.downMs);
    options.log(`${((Date.now() - startedAt) / 1000).toFixed(1)} s: ${kill.name} up again`);
  });

  const running = new Set<Promise<unknown>>();
  let skipped = 0;
  // Ticks on a fixed schedule, a late one started at once: CHAOS_RATE ticks a second however busy the driver is.
  for (let tick = 0; startedAt + tick * (1000 / options.operationsPerSecond) < loadEnd; tick += 1) {
    await sleep(startedAt + tick * (1000 / options.operationsPerSecond) - Date.now());
    if (running.size >= options.maxInFlight) skipped += 1;
    else {
      let ticket = random() * totalWeight;
      const kind = kinds.find((each) => (ticket -= each.weight) < 0) ?? kinds[0]!;
      const operation = kind.run().finally(() => running.delete(operation));
      running.add(operation);
    }
  }
  outcome.loadSeconds = (Date.now() - startedAt) / 1000;
  await Promise.all(killing);
  await Promise.all(running);
  await chain.depositing;
  options.log(`load: ${state.operations.length} operations sent, ${client.retries} retries, ${skipped} not started (all slots busy)`);
  return outcome;
}

/**
 * On chain: with no block mined any more, scanning catches up with the tip; then each wallet's ledger is its chain balance,
 * and what the API shows for it is what was deposited to it less what its confirmed sends took (amounts and their network
 * fees, which the chain sets: read from the sends); the outside address holds exactly what the sends sent.
 */
async function checkChain(
  orm: Orm,
  client: ChaosClient,
  chain: Chain,
  env: NodeJS.ProcessEnv,
  settleDeadline: number,
  runs: Operation[],
  violations: string[],
  report: string[],
): Promise<void> {
  const sql = <T>(query: string, params: unknown[] = []) => orm.em.fork().getConnection().execute<T[]>(query, params);
  clearInterval(chain.mining);
  const tip = Number(await chain.anvil.call('eth_blockNumber'));
  const scanned = await eventually(
    async () => ((Number((await sql<{ n: string }>(`select coalesce(max(height), 0) as n from chain_scan_cursors where chain = 'ethereum' and environment = 'sandbox'`))[0]!.n)) >= tip ? true : undefined),
    'scanning caught up with the tip',
    // Its own minute once mining stops: under the suite's load the scan runs a few blocks behind a block a second.
    Math.max(60_000, settleDeadline - Date.now()),
    500,
  ).catch(() => false);
  if (!scanned) violations.push(`the chain scan did not reach the tip ${tip}`);
  const config = loadConfig(env);
  const provider = await new ChainNodes(config, createLogger('silent'), orm).provider('ethereum', 'sandbox');
  const ledger = await compareLedgerWithChain(orm.em.fork(), provider, { chain: 'ethereum', environment: 'sandbox', assetIds: ['ETH'] });
  for (const mismatch of ledger.mismatches) violations.push(`wallet ledger differs from the chain: ${JSON.stringify(mismatch, (_, value: unknown) => (typeof value === 'bigint' ? value.toString() : value))}`);
  const swept = await checkSweeps(client, chain, runs, violations, report);
  let sentTotal = 0n;
  for (const [as, wallet] of Object.entries(chain.wallets) as [OrganizationName, { id: string; address: Hex }][]) {
    const [sent] = await sql<{ amounts: string; fees: string }>(
      `select coalesce(sum(recipient_amount), 0) as amounts, coalesce(sum(fee), 0) as fees from transactions where status = 'confirmed' and wallet_id = ?`,
      [wallet.id],
    );
    sentTotal += BigInt(sent!.amounts);
    const deposited = chain.deposited.get(wallet.id) ?? 0n;
    const expected = deposited + swept[as] - BigInt(sent!.amounts) - BigInt(sent!.fees);
    const shown = await walletEth(client, as, wallet.id, Date.now() + 60_000);
    report.push(`money ETH (wei), ${as}'s wallet: deposited ${deposited} + swept in ${swept[as]} - sent ${sent!.amounts} - fees ${sent!.fees} = ${expected}; the API shows ${shown}`);
    if (shown !== expected) violations.push(`money ETH of ${as}'s wallet ${wallet.id}: expected ${expected}, the API shows ${shown}`);
  }
  const outsideHolds = await anvilEthBalance(chain.anvil, chain.outside);
  report.push(`the outside address holds ${outsideHolds}; ${ledger.wallets} wallet ledgers compared with the chain, ${ledger.mismatches.length} differ`);
  if (outsideHolds !== sentTotal) violations.push(`money ETH: the outside address holds ${outsideHolds}, the confirmed sends sent ${sentTotal}`);
}
/**
 * Sweeps, from what the chain says of each sweep's transaction (its value and the fee it was charged, gas used times
 * the effective gas price), per organization: the source wallet holds what was deposited to it less the values and the
 * fees of its sweeps; each run swept (amount_swept) what its transactions delivered. Returns the wei each organization's
 * main wallet gained from its sweeps.
 */
async function checkSweeps(client: ChaosClient, chain: Chain, runs: Operation[], violations: string[], report: string[]): Promise<Record<OrganizationName, bigint>> {
  const gained = Object.fromEntries(ORGANIZATIONS.map((name) => [name, 0n])) as Record<OrganizationName, bigint>;
  const readDeadline = Date.now() + 60_000;
  for (const as of ORGANIZATIONS) {
    const source = chain.sweepSources[as]!;
    const destination = chain.wallets[as]!.address.toLowerCase();
    let fees = 0n;
    let count = 0;
    for (const run of runs.filter((each) => each.as === as)) {
      const shown = (await client.read(as, `/v1/consolidation/runs/${run.id}`, readDeadline))?.body;
      const sweeps = ((await client.read(as, `/v1/consolidation/runs/${run.id}/sweeps?limit=100`, readDeadline))?.body.data ?? []) as { id: string; status: string; tx_hash: string | null }[];
      let delivered = 0n;
      for (const sweep of sweeps.filter((each) => each.status === 'confirmed')) {
        const sent = (await chain.anvil.call('eth_getTransactionByHash', [sweep.tx_hash])) as { from: string; to: string; value: Hex } | null;
        if (!sent || !source.addresses.some((address) => address.toLowerCase() === sent.from.toLowerCase()) || sent.to.toLowerCase() !== destination) {
          violations.push(`sweep ${sweep.id} of ${as}: its transaction ${sweep.tx_hash} is not from its source to its main wallet on the chain`);
          continue;
        }
        const receipt = await anvilReceipt(chain.anvil, sweep.tx_hash!);
        if (receipt.status !== '0x1') violations.push(`sweep ${sweep.id} of ${as}: its transaction ${sweep.tx_hash} reverted`);
        delivered += BigInt(sent.value);
        fees += receiptFee(receipt);
        count += 1;
      }
      gained[as] += delivered;
      const reported = (shown?.per_asset_totals as { amount_swept: string }[] | undefined)?.reduce((sum, total) => sum + parseEther(total.amount_swept), 0n) ?? 0n;
      if (reported !== delivered) violations.push(`consolidation run ${run.id} of ${as}: amount_swept ${reported} wei, its transactions delivered ${delivered}`);
    }
    const deposited = chain.deposited.get(source.walletId) ?? 0n;
    const expected = deposited - gained[as] - fees;
    const shown = await walletEth(client, as, source.walletId, readDeadline);
    report.push(`sweeps of ${as}: ${count} confirmed in ${runs.filter((each) => each.as === as).length} runs; source wallet: deposited ${deposited} - swept ${gained[as]} - fees ${fees} = ${expected}, the API shows ${shown}`);
    if (shown !== expected) violations.push(`money ETH of ${as}'s sweep source ${source.walletId}: expected ${expected}, the API shows ${shown}`);
  }
  return gained;
}

/**
 * Payouts, in the trips' asset (USDT on Tron, base units): what the load deposited is what the desk's
 * wallet holds (nothing refunded or swept here), and it is what the successful trips took (the
 * quoted amount: fees and what was converted), plus what trips credited back to the payer's usdt
 * balance, plus what the trips not (yet) successful received; the rails paid out exactly the quoted
 * fiat of the successful trips.
 */
async function checkPayoutMoney(
  sql: <T>(query: string, params?: unknown[]) => Promise<T[]>,
  deposits: Operation[],
  violations: string[],
  report: string[],
): Promise<void> {
  const deposited = deposits.reduce((sum, each) => sum + BigInt(each.answer!.body.amountRaw as string), 0n);
  const [desk] = await sql<{ total: string }>(
    `select coalesce(sum(balance + pending), 0) as total from wallet_balances
      where asset_id = 'USDT_TRX' and wallet_id in (select a.wallet_id from addresses a join payout_trips t on t.deposit_address_record_id = a.id)`,
  );
  const [trips] = await sql<{ paid_out: string; fees: string; credited: string; unfinished: string; successes: string; total: string }>(
    `select coalesce(sum(q.from_amount) filter (where t.status = 'success'), 0) as paid_out,
            coalesce(sum((select sum((fee->>'amount_raw')::numeric) from jsonb_array_elements(q.fees) fee)) filter (where t.status = 'success'), 0) as fees,
            coalesce(sum(t.credited_amount), 0) as credited,
            coalesce(sum((select coalesce(sum(i.amount), 0) from incoming_transfers i where i.address_id = t.deposit_address_record_id) - coalesce(t.credited_amount, 0))
                     filter (where t.status <> 'success'), 0) as unfinished,
            count(*) filter (where t.status = 'success') as successes, count(*) as total
       from payout_trips t join payout_quotes q on q.id = t.quote_id`,
  );
  const [balances] = await sql<{ total: string }>(`select coalesce(sum(available + reserved), 0) as total from company_balances where currency = 'usdt'`);
  const fiat = await sql<{ currency: string; paid: string; n: string }>(
    `select currency, sum(amount) as paid, count(*) as n from sandbox_rail_instructions where paid_at is not null group by currency order by currency`,
  );
  const accounted = BigInt(trips!.paid_out) + BigInt(trips!.credited) + BigInt(trips!.unfinished);
  report.push(
    `payouts: ${trips!.total} trips, ${trips!.successes} success`,
    `money USDT (Tron, base units): deposited ${deposited} = the desk's wallet ${desk!.total}; = paid out ${trips!.paid_out} (fees ${trips!.fees}) + credited to balances ${trips!.credited} + in trips not successful ${trips!.unfinished} (${accounted}); ` +
      `fiat paid out (minor units): ${fiat.map((row) => `${row.currency} ${row.paid} in ${row.n} payouts`).join(', ') || 'none'}`,
  );
  if (deposited !== BigInt(desk!.total)) violations.push(`money USDT: deposited ${deposited}, the desk's wallet holds ${desk!.total}`);
  if (deposited !== accounted) violations.push(`money USDT: deposited ${deposited}, the trips account for ${accounted}`);
  if (BigInt(balances!.total) !== BigInt(trips!.credited)) violations.push(`money USDT: usdt balances hold ${balances!.total}, the trips credited ${trips!.credited}`);
}

/** Whether a workflow is inside an activity: one pending, or its workflow task started (a local activity runs within it). */
async function insideActivity(temporal: Client, workflowId: string): Promise<boolean> {
  const described = await temporal.workflow
    .getHandle(workflowId)
    .describe()
    .catch(() => undefined);
  if (!described || described.status.name !== 'RUNNING') return false;
  return (described.raw.pendingActivities?.length ?? 0) > 0 || described.raw.pendingWorkflowTask?.state === temporalProto.api.enums.v1.PendingWorkflowTaskState.PENDING_WORKFLOW_TASK_STATE_STARTED;
}

/** Final state of a workflow the service started, or why it has none. */
async function workflowState(temporal: Client, workflowId: string): Promise<string> {
  try {
    return (await temporal.workflow.getHandle(workflowId).describe()).status.name;
  } catch (error) {
    return `not found (${(error as Error).message.slice(0, 80)})`;
  }
}

/** Cents charged on a card funding, as the service's fee schedule says (CARD_FUNDING_FEE_BPS, rounded down): recomputed, never read back. */
const fundingFee = (cents: bigint) => (cents * BigInt(FUNDING_FEE_BPS)) / 10_000n;

/** What each organization must hold after the load, from the operations it got a 2xx for alone. */
interface ExpectedState {
  /** Company balances (available + reserved, nothing reserved once settled), per organization, in the API's currencies. */
  balances: Record<OrganizationName, Record<'USD' | 'BTC' | 'USDT', bigint>>;
  /** Each card's balance: its initial funding and each accepted funding. */
  cards: Map<string, { as: OrganizationName; cents: bigint }>;
}

/**
 * The model: sandbox credits add to their organization; a card takes its initial funding and each funding takes its
 * amount, each plus the fee the schedule charges, from its organization's USD; a Lightning payment takes the invoice's
 * sats from the payer (the internal route charges no fee) and gives them to the invoice's organization; payout trips are
 * funded from outside and pay exactly their quote (nothing credited back to USDT).
 */
function expectedState(accepted: Operation[]): ExpectedState {
  const balances = Object.fromEntries(ORGANIZATIONS.map((name) => [name, { USD: 0n, BTC: 0n, USDT: 0n }])) as ExpectedState['balances'];
  const cards: ExpectedState['cards'] = new Map();
  for (const operation of accepted) {
    if (operation.kind === 'credit') {
      const body = operation.body as { amount: string; currency: string };
      balances[operation.as][body.currency === 'USD' ? 'USD' : 'BTC'] += BigInt(body.amount);
    } else if (operation.kind === 'card') {
      balances[operation.as].USD -= BigInt(INITIAL_CARD_FUNDING) + fundingFee(BigInt(INITIAL_CARD_FUNDING));
      cards.set(operation.id!, { as: operation.as, cents: BigInt(INITIAL_CARD_FUNDING) });
    } else if (operation.kind === 'funding') {
      const cents = BigInt((operation.body as { amount: number }).amount);
      balances[operation.as].USD -= cents + fundingFee(cents);
      const card = cards.get(operation.cardId!)!;
      card.cents += cents;
    } else if (operation.kind === 'payment') {
      balances[operation.as].BTC -= operation.pays!.sats;
      balances[operation.pays!.organization].BTC += operation.pays!.sats;
    }
  }
  return { balances, cards };
}

/**
 * The driver's own faults, for the test that shows the checks catch them (never a path of the service). The ledger
 * refuses a changed or deleted line, so each fault is a balanced posting the business never made, its balance row
 * moved to match (the ledger's invariants still hold; only the money checks can tell): a sats credit doubled (one
 * organization's first sandbox credit posted again) and a debit skipped (a completed card funding's amount and fee
 * credited back to its organization). Returns the violations each must cause.
 */
async function plantFaults(orm: Orm, organizations: Record<OrganizationName, SandboxOrganization>): Promise<string[]> {
  const nameOf = (organizationId: string) => ORGANIZATIONS.find((name) => organizations[name].organizationId === organizationId)!;
  const em = orm.em.fork();
  const [debited] = await em.execute<{ organization_id: string; id: string; total: string }[]>(
    `select organization_id, id, (amount + fee_amount)::text as total from card_transactions where status = 'completed' and type = 'funding' order by created_at limit 1`,
  );
  if (!debited) throw new Error('no completed card funding to skip the debit of');
  const credited = ORGANIZATIONS.find((name) => organizations[name].organizationId !== debited.organization_id)!;
  const [doubled] = await em.execute<{ reference_id: string; amount: string }[]>(
    `select reference_id, amount::text from company_balance_entries where organization_id = ? and currency = 'sat' and kind = 'credit' and reference_type = 'sandbox_credit' order by created_at limit 1`,
    [organizations[credited].organizationId],
  );
  if (!doubled) throw new Error(`no sats credit of ${credited} to double`);
  // Posted as the driver's own (`planted_fault`), so no count of the service's records changes.
  const credit = async (tx: EntityManager, organizationId: string, currency: 'usd' | 'sat', amount: bigint, id: string) => {
    const scope = { organizationId, environment: 'sandbox' as const };
    await post(tx, {
      ...scope,
      key: `planted/${organizationId}/${currency}/${id}`,
      kind: 'credit',
      reference: { type: 'planted_fault', id },
      lines: [
        { account: companyAccount(scope, currency, 'available'), amount },
        { account: counterpartyAccount(scope, 'sandbox_faucet', currency), amount: -amount },
      ],
    });
    await tx.execute(`update company_balances set available = available + ? where organization_id = ? and environment = 'sandbox' and currency = ?`, [amount.toString(), organizationId, currency]);
  };
  await em.transactional(async (tx) => {
    await credit(tx, debited.organization_id, 'usd', BigInt(debited.total), debited.id);
    await credit(tx, organizations[credited].organizationId, 'sat', BigInt(doubled.amount), doubled.reference_id);
  });
  return [`money USD of ${nameOf(debited.organization_id)}`, `money BTC of ${credited}`];
}

async function check(
  options: ChaosOptions,
  orm: Orm,
  temporal: Client,
  client: ChaosClient,
  load: LoadOutcome,
  receiver: WebhookReceiver,
  supervised: Record<ComponentName, Supervised>,
  chain: Chain,
  env: NodeJS.ProcessEnv,
  organizations: Record<OrganizationName, SandboxOrganization>,
): Promise<ChaosResult> {
  const { operations } = load;
  const violations: string[] = [];
  const report: string[] = [];
  const sql = <T>(query: string, params: unknown[] = []) => orm.em.fork().getConnection().execute<T[]>(query, params);
  const settleDeadline = Date.now() + options.settleSeconds * 1000;

  // 1. Every operation has its answer: one still unanswered is asked again with its key (the service kept its outcome).
  for (const operation of operations.filter((each) => !each.answer)) {
    operation.answer = await client.send(operation, settleDeadline);
    if (operation.answer && operation.answer.status < 300) operation.id = idOf(operation.kind, operation.answer.body);
    if (!operation.answer) violations.push(`${operation.method} ${operation.route} (key ${operation.idempotencyKey}) never answered`);
  }
  const accepted = operations.filter((each) => each.answer && each.answer.status < 300);
  const refused = operations.filter((each) => each.answer && each.answer.status >= 300);
  for (const operation of refused) violations.push(`${operation.kind} refused: ${operation.answer!.status} ${JSON.stringify(operation.answer!.body).slice(0, 200)}`);

  // 2. A replay of every accepted operation with its key answers with the same resource: one key, one effect (eight at a time).
  const replaying = [...accepted];
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      for (let operation = replaying.shift(); operation; operation = replaying.shift()) {
        const replay = await client.send({ ...operation, attempts: 0 }, Date.now() + 60_000);
        const replayedId = replay && replay.status < 300 ? idOf(operation.kind, replay.body) : `status ${replay?.status}`;
        if (replayedId !== operation.id) violations.push(`${operation.kind} ${operation.id}: its replay answered ${replayedId}`);
      }
    }),
  );
  options.log('every operation answered and replayed');

  // 3. Every accepted operation reaches its final state within the settle window: anything still running, reserved or pending then is a violation.
  const byKind = (kind: Operation['kind']) => accepted.filter((each) => each.kind === kind);
  const cardIds = byKind('card').map((each) => each.id!);
  const fundingIds = byKind('funding').map((each) => each.id!);
  const paymentIds = byKind('payment').map((each) => each.id!);
  const invoiceIds = byKind('invoice').map((each) => each.id!);
  const sendIds = byKind('send').map((each) => each.id!);
  const tripIds = byKind('payout').map((each) => each.id!);
  const runIds = byKind('sweep_run').map((each) => each.id!);
  const unsettled = async () => ({
    cards: await sql<{ id: string; status: string }>(`select id, status::text from cards where id::text = any(?::text[]) and status <> 'active'`, [textArray(cardIds)]),
    fundings: await sql<{ id: string; status: string }>(`select id, status::text from card_transactions where card_id::text = any(?::text[]) and status <> 'completed'`, [textArray(cardIds)]),
    payments: await sql<{ id: string; status: string }>(`select id, status::text from lightning_invoices where id::text = any(?::text[]) and status <> 'paid'`, [textArray(paymentIds)]),
    invoices: await sql<{ id: string; status: string }>(`select id, status::text from lightning_invoices where id::text = any(?::text[]) and status <> 'paid'`, [textArray(invoiceIds)]),
    sends: await sql<{ id: string; status: string }>(`select id, status::text from transactions where id::text = any(?::text[]) and status <> 'confirmed'`, [textArray(sendIds)]),
    trips: await sql<{ id: string; status: string }>(`select id, status::text from payout_trips where id::text = any(?::text[]) and status <> 'success'`, [textArray(tripIds)]),
    runs: await sql<{ id: string; status: string }>(`select id, status::text from consolidation_runs where id::text = any(?::text[]) and status <> 'completed'`, [textArray(runIds)]),
    sweeps: await sql<{ id: string; status: string }>(`select id, status::text from consolidation_sweeps where status <> 'confirmed'`),
    deliveries: await sql<{ id: string; status: string }>(`select id, status::text from event_deliveries where status <> 'delivered'`),
    // Named with what it holds pending, and the transfers still pending and the scan's cursor of its chain, so a failure says where it stopped.
    deposits: await sql<{ id: string; status: string }>(
      `select b.wallet_id || ' (' || w.chain || ' ' || b.asset_id || ')' as id,
              'pending ' || b.pending || ', ' || (select count(*) from incoming_transfers t where t.wallet_id = b.wallet_id and t.status = 'pending') || ' transfers pending'
                || ', scanned to ' || coalesce((select max(c.height)::text from chain_scan_cursors c where c.chain = w.chain and c.environment = w.environment), 'nothing') as status
         from wallet_balances b join wallets w on w.id = b.wallet_id where b.pending <> 0`,
    ),
    reserves: await sql<{ id: string; status: string }>(`select organization_id || ' ' || currency as id, 'reserved ' || reserved as status from company_balances where reserved <> 0`),
  });
  let open = await unsettled();
  const openCount = () => Object.values(open).reduce((sum, rows) => sum + rows.length, 0);
  while (openCount() > 0 && Date.now() < settleDeadline) {
    await sleep(1000);
    open = await unsettled();
  }
  // A sweep confirmed at the window's end leaves its deposit to the main wallet a scan behind (the send's workflow
  // reads the node, the credit waits for the scanner, which mining keeps busy): pending deposits get 30 s more,
  // and one still pending then is a violation.
  const depositsDeadline = Date.now() + 30_000;
  while (open.deposits.length > 0 && Date.now() < depositsDeadline) {
    await sleep(1000);
    open = await unsettled();
  }
  options.log(`settled (${openCount()} open)`);
  const workflowOf: Partial<Record<keyof typeof open, (id: string) => string>> = {
    cards: (id: string) => cardProvisioningFlow.workflowId({ cardId: id }),
    fundings: (id: string) => cardBalanceFlow.workflowId({ transactionId: id }),
    payments: paymentWorkflowId,
    sends: transactionWorkflowId,
    trips: (id: string) => payoutTripFlow.workflowId({ tripId: id }),
    runs: (id: string) => consolidationRunFlow.workflowId({ runId: id }),
  };
  for (const [what, rows] of Object.entries(open) as [keyof typeof open, { id: string; status: string }[]][]) {
    for (const row of rows) {
      // A delivery retries on its own schedule: scheduled is an outcome (checked with the events below), failed is not.
      if (what === 'deliveries' && row.status !== 'failed') continue;
      const workflow = workflowOf[what];
      violations.push(`${what} ${row.id} is ${row.status} after the settle window${workflow ? ` (its workflow ${await workflowState(temporal, workflow(row.id))})` : ''}`);
    }
  }
  // A paid payment paid its own invoice, and a paid invoice was paid by one of ours.
  const mismatched = await sql<{ id: string }>(
    `select p.id from lightning_invoices p left join lightning_invoices i on i.payment_hash = p.payment_hash and i.direction = 'incoming'
      where p.direction = 'outgoing' and (p.status = 'paid') <> coalesce(i.status = 'paid' and i.paid_by_payment_id = p.id, false)`,
  );
  for (const row of mismatched) violations.push(`payment ${row.id} and its invoice disagree on being paid`);
  for (const operation of byKind('payment')) {
    const [invoice] = await sql<{ organization_id: string; paid_by_payment_id: string | null }>(`select organization_id, paid_by_payment_id from lightning_invoices where id = ?`, [operation.pays!.invoiceId]);
    if (invoice?.organization_id !== organizations[operation.pays!.organization].organizationId || invoice.paid_by_payment_id !== operation.id)
      violations.push(`payment ${operation.id} of ${operation.as} did not pay ${operation.pays!.organization}'s invoice ${operation.pays!.invoiceId}`);
  }

  // 4. Exactly once in the database: one row per accepted operation, no more.
  const count = async (query: string, params: unknown[]) => Number((await sql<{ n: string }>(query, params))[0]!.n);
  const expected = [
    { what: 'cards', n: cardIds.length, rows: await count(`select count(*) as n from cards`, []) },
    { what: 'card fundings (one initial per card, plus each accepted)', n: cardIds.length + fundingIds.length, rows: await count(`select count(*) as n from card_transactions`, []) },
    { what: 'incoming invoices', n: invoiceIds.length, rows: await count(`select count(*) as n from lightning_invoices where direction = 'incoming'`, []) },
    { what: 'outgoing payments', n: paymentIds.length, rows: await count(`select count(*) as n from lightning_invoices where direction = 'outgoing'`, []) },
    { what: 'sends', n: sendIds.length, rows: await count(`select count(*) as n from transactions where id not in (select transaction_id from consolidation_sweeps where transaction_id is not null)`, []) },
    { what: 'consolidation runs', n: runIds.length, rows: await count(`select count(*) as n from consolidation_runs`, []) },
    {
      what: 'sweep transactions (one per sweep)',
      n: await count(`select count(*) as n from consolidation_sweeps`, []),
      rows: await count(`select count(*) as n from transactions where wallet_id::text = any(?::text[])`, [textArray(Object.values(chain.sweepSources).map((source) => source.walletId))]),
    },
    { what: 'sandbox credits', n: byKind('credit').length, rows: await count(`select count(*) as n from company_balance_entries where reference_type = 'sandbox_credit'`, []) },
    { what: 'payout quotes', n: byKind('payout_quote').length, rows: await count(`select count(*) as n from payout_quotes`, []) },
    { what: 'payout trips', n: tripIds.length, rows: await count(`select count(*) as n from payout_trips`, []) },
    {
      what: 'transfers to trip deposit addresses',
      n: byKind('payout_deposit').length,
      rows: await count(`select count(*) as n from incoming_transfers where address_id in (select deposit_address_record_id from payout_trips)`, []),
    },
    {
      what: 'trips that reached the rail',
      n: await count(`select count(*) as n from payout_trips where rail is not null`, []),
      rows: await count(`select count(*) as n from sandbox_rail_instructions where submissions > 0`, []),
    },
  ];
  for (const each of expected) if (each.n !== each.rows) violations.push(`${each.what}: ${each.n} accepted, ${each.rows} rows`);
  // A trip records the transfer to its address once; its rail pays once, what the trip quoted, and only a trip that succeeded.
  for (const row of await sql<{ trip_id: string }>(`select trip_id from payout_deposits group by trip_id having count(*) > 1`)) violations.push(`trip ${row.trip_id} recorded its deposit more than once`);
  const railMismatches = await sql<{ id: string; status: string; paid_at: string | null }>(
    `select t.id, t.status::text, r.paid_at from payout_trips t join payout_quotes q on q.id = t.quote_id left join sandbox_rail_instructions r on r.trip_id = t.id
      where (t.status = 'success') <> (r.paid_at is not null) or (t.status = 'success' and (r.amount <> q.to_amount or t.payout_amount <> q.to_amount or r.currency <> q.to_currency))`,
  );
  for (const row of railMismatches) violations.push(`trip ${row.id} is ${row.status} and its rail ${row.paid_at ? 'paid' : 'did not pay'} (or another amount than quoted)`);

  // 5. Money, per organization, against the load's own model: each company balance and each card as the API shows them.
  const model = expectedState(accepted);
  const readDeadline = Date.now() + 60_000;
  for (const as of ORGANIZATIONS) {
    const shown = (await client.read(as, '/v1/balances', readDeadline))?.body.data as { currency: string; available: string; reserved: string; total: string }[] | undefined;
    for (const [currency, cents] of Object.entries(model.balances[as]) as ['USD' | 'BTC' | 'USDT', bigint][]) {
      const row = shown?.find((each) => each.currency === currency);
      const total = BigInt(row?.total ?? 0);
      report.push(`money ${currency} of ${as}: expected ${cents}, the API says ${total} (reserved ${row?.reserved ?? 0})`);
      if (total !== cents) violations.push(`money ${currency} of ${as}: expected ${cents}, the API says ${total}`);
    }
  }
  for (const [cardId, card] of model.cards) {
    const shown = (await client.read(card.as, `/api/cards/${cardId}`, readDeadline))?.body.data?.card?.balance_amount as number | string | undefined;
    if (shown === undefined || BigInt(shown) !== card.cents) violations.push(`card ${cardId} of ${card.as}: expected ${card.cents} cents, the API says ${shown}`);
  }
  report.push(`cards: ${model.cards.size}, each balance compared with its fundings`);
  // The ledger proves itself: every posting balanced, every balance row the sum of its accounts (what `ledger:verify` runs).
  for (const broken of await verifyLedger(orm.em.fork(), ledgerProjections)) violations.push(`ledger invariant ${broken.invariant}: ${broken.subject} ${broken.asset} ledger ${JSON.stringify(broken.ledger)} found ${JSON.stringify(broken.found)}`);
  await checkPayoutMoney(sql, byKind('payout_deposit'), violations, report);

  if (options.chain) await checkChain(orm, client, chain, env, settleDeadline, byKind('sweep_run'), violations, report);

  // 6. Events: every event an accepted operation must cause exists in its organization and is delivered or scheduled; each delivered one reached the receiver.
  const received = new Map<string, number>();
  for (const attempt of receiver.attempts) received.set(attempt.headers['webhook-id']!, (received.get(attempt.headers['webhook-id']!) ?? 0) + 1);
  const dedupeKeys = (operation: Operation): string[] =>
    ({
      funding: [`card.transaction:${operation.id}`],
      payment: [`lightning.payment.paid:${operation.id}`],
      invoice: [`lightning.invoice.paid:${operation.id}`],
      payout: [`payouts.withdrawal.success:${operation.id}`],
      sweep_run: [`consolidation.run.started:${operation.id}`, `consolidation.run.completed:${operation.id}`],
    })[operation.kind as string] ?? [];
  const wanted = accepted.flatMap((operation) => [
    ...dedupeKeys(operation).map((key) => ({ as: operation.as, what: key, column: 'dedupe_key' })),
    ...(operation.kind === 'webhook_test' ? [{ as: operation.as, what: operation.id!, column: 'id' }] : []),
  ]);
  const found = await sql<{ organization_id: string; id: string; dedupe_key: string | null; deliveries: string; delivered: string }>(
    `select e.organization_id, e.id, e.dedupe_key, count(d.id) filter (where d.status in ('delivered', 'pending')) as deliveries, count(d.id) filter (where d.status = 'delivered') as delivered
       from events e left join event_deliveries d on d.event_id = e.id
      where e.dedupe_key = any(?::text[]) or e.id = any(?::text[]) group by e.organization_id, e.id, e.dedupe_key`,
    [textArray(wanted.filter((each) => each.column === 'dedupe_key').map((each) => each.what)), textArray(wanted.filter((each) => each.column === 'id').map((each) => each.what))],
  );
  let missing = 0;
  for (const each of wanted) {
    const event = found.find((row) => (each.column === 'id' ? row.id : row.dedupe_key) === each.what && row.organization_id === organizations[each.as].organizationId);
    if (!event) {
      missing += 1;
      violations.push(`event ${each.what} of ${each.as} is missing`);
    } else if (Number(event.deliveries) === 0) violations.push(`event ${each.what} of ${each.as} (${event.id}) is neither delivered nor scheduled`);
  }
  const deliveries = await sql<{ event_id: string; status: string }>(`select event_id, status::text from event_deliveries`);
  // The payout desk's own events (the transfers to trip deposit addresses) have nowhere to go: it is the service's organization, with no endpoint.
  const [events] = await sql<{ n: string; undelivered: string; desk: string }>(
    `select count(*) filter (where e.organization_id <> ?) as n,
            count(*) filter (where e.organization_id <> ? and not exists (select 1 from event_deliveries d where d.event_id = e.id)) as undelivered,
            count(*) filter (where e.organization_id = ?) as desk
       from events e`,
    [SERVICE_DESK_ORGANIZATION_ID, SERVICE_DESK_ORGANIZATION_ID, SERVICE_DESK_ORGANIZATION_ID],
  );
  if (Number(events!.undelivered) > 0) violations.push(`${events!.undelivered} events have no delivery`);
  for (const delivery of deliveries) if (delivery.status === 'delivered' && !received.has(delivery.event_id)) violations.push(`event ${delivery.event_id} marked delivered, never received`);
  report.push(
    `events: ${events!.n} emitted (and ${events!.desk} of the payout desk), ${deliveries.filter((each) => each.status === 'delivered').length} delivered, ${deliveries.filter((each) => each.status === 'pending').length} scheduled; ` +
      `${received.size} distinct received, ${[...received.values()].filter((n) => n > 1).length} received more than once; ${wanted.length} expected of the operations, ${missing} missing`,
  );

  // 7. A component that exited without the driver's SIGKILL is a violation.
  for (const name of COMPONENTS) {
    if (supervised[name].ownExits > 0) violations.push(`${name} exited on its own ${supervised[name].ownExits} times; its output before the last: ${supervised[name].lastOwnExit.replaceAll('\n', ' | ')}`);
  }

  options.log('checked');
  const answered = (kind: Operation['kind']) => operations.filter((each) => each.kind === kind);
  const rate = (operations.length - load.setupOperations) / load.loadSeconds;
  report.unshift(
    `load: ${operations.length - load.setupOperations} operations in ${load.loadSeconds.toFixed(0)} s (${rate.toFixed(1)} a second) across ${ORGANIZATIONS.length} organizations; ` +
      `${load.killsTimed} kills timed on an accepted operation's workflow, ${load.killsInActivities} of them with an activity pending (${load.killsInSweepActivities} in a sweep run's)`,
    ...COMPONENTS.map((name) => `${name}: killed ${supervised[name].kills} times, exited on its own ${supervised[name].ownExits} times (restarted each time)`),
    ...(['credit', 'card', 'funding', 'invoice', 'payment', 'send', 'webhook_test', 'payout_quote', 'payout', 'payout_deposit', 'sweep_run'] as const).map(
      (kind) => `${kind}: ${answered(kind).length} sent, ${byKind(kind).length} accepted, ${answered(kind).filter((each) => each.attempts > 1).length} needed a retry`,
    ),
  );
  return { violations, report, operations: operations.length - load.setupOperations, operationsPerSecond: rate, killsInActivities: load.killsInActivities };
}
