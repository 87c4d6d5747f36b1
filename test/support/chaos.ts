import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { chmod, mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { parseEther, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { cardBalanceFlow } from '../../src/cards/flows/balance';
import { cardProvisioningFlow } from '../../src/cards/flows/provisioning';
import { ChainNodes } from '../../src/chains/nodes';
import { loadConfig } from '../../src/config';
import { createOrm, type Orm } from '../../src/db/orm';
import { createLogger } from '../../src/logger';
import { compareLedgerWithChain } from '../../src/monitoring/ledger-check';
import { transactionWorkflowId } from '../../src/transactions/flows/transaction';
import { paymentWorkflowId } from '../../src/lightning/flows/payment';
import { SERVICE_DESK_ORGANIZATION_ID } from '../../src/payouts/desk';
import { FINAL_TRIP_STATUSES, type TripStatus } from '../../src/payouts/entities';
import { payoutTripFlow } from '../../src/payouts/flows/trip';
import { anvilEthBalance, anvilFunder, anvilMine, anvilSandboxConfig, deployAnvilToken, startAnvil, type Anvil } from './anvil';
import { validCustomer } from './cards';
import { eventually } from './eventually';
import { freeLoopbackPort } from './ports';
import { sandboxPayerAndPayee } from './sandbox-organizations';
import { ServiceProcess } from './service-process';
import { WebhookReceiver } from './webhook-receiver';

/**
 * The chaos run of issue 18: PostgreSQL, the Temporal dev server, the API and the worker as separate
 * processes (the compose file's way), a mixed load with idempotency keys (card creations and fundings,
 * Lightning invoices and internal payments, payout trips, sandbox credits, webhook tests, every event
 * delivered to a local receiver) while each component is killed with SIGKILL at seeded random moments and started
 * again, then the invariants: every accepted operation done exactly once or still running and
 * visible, every event delivered or scheduled, no money created or destroyed. `npm run chaos` runs
 * it long (bench/chaos.ts), test/chaos.test.ts short.
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
  log: (line: string) => void;
}

export interface ChaosResult {
  violations: string[];
  report: string[];
}

const ROOT = path.resolve(__dirname, '../../..');
const COMPONENTS = ['worker', 'api', 'temporal', 'postgres'] as const;
type ComponentName = (typeof COMPONENTS)[number];
/** Cents charged per funding, in basis points: fees are part of the money check. */
const FUNDING_FEE_BPS = 100;
/** Blocks on top of a transfer's before it counts (anvil mines one a second here). */
const CONFIRMATIONS = 2;
/** Confirmations of a payout trip's deposit on the Tron devnet, whose blocks the load mines itself. */
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

/** Sandbox Ethereum for the run: anvil (not killed: it stands for the network), a block a second, ETH deposited from its dev account and sent to an outside address. */
interface Chain {
  anvil: Anvil;
  outside: Hex;
  mining?: NodeJS.Timeout;
  wallet?: { id: string; address: Hex };
  /** Wei the dev account sent to the wallet, each mined. */
  deposited: bigint;
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
  kind: 'credit' | 'card' | 'funding' | 'invoice' | 'payment' | 'webhook_test' | 'send' | 'payout_quote' | 'payout' | 'payout_deposit';
  as: 'payer' | 'payee';
  method: string;
  route: string;
  body: unknown;
  idempotencyKey: string;
  /** Send attempts: more than one when a component was down. */
  attempts: number;
  answer?: Answer;
  /** The id of what it created (card, card transaction, invoice, payment, event, payout quote, trip, deposit transfer). */
  id?: string;
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
    payout_deposit: body.tx_hash,
  })[kind];

/**
 * A client as a real one behaves while the service is failing over: every POST carries an
 * Idempotency-Key and is sent again with the same key after a connection error, a 5xx, a 429 or
 * idempotency_key_in_use (a request the killed API was running), until `deadline`.
 */
class ChaosClient {
  retries = 0;
  constructor(
    private readonly url: string,
    private readonly secrets: Record<'payer' | 'payee', string>,
  ) {}

  async send(operation: Operation, deadline: number): Promise<Answer | undefined> {
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
  async read(as: 'payer' | 'payee', route: string, deadline: number): Promise<Answer | undefined> {
    return this.send({ kind: 'credit', as, method: 'GET', route, body: undefined, idempotencyKey: '', attempts: 0 }, deadline);
  }

  private async once(as: 'payer' | 'payee', method: string, route: string, body: unknown, idempotencyKey: string): Promise<Answer | undefined> {
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
  const temporal = new TemporalComponent(path.join(dir, 'temporal'), await freeLoopbackPort(), await freeLoopbackPort());
  const databaseUrl = `postgresql://postgres@127.0.0.1:${pgPort}/postgres`;
  const chain: Chain = { anvil: await startAnvil(), outside: privateKeyToAccount(generatePrivateKey()).address, deposited: 0n, depositing: Promise.resolve() };
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
  try {
    options.log(`seed ${options.seed}; state in ${dir}`);
    chain.mining = setInterval(() => void anvilMine(chain.anvil, 1).catch(() => undefined), 1000);
    await postgres.start();
    const secrets = await sandboxPayerAndPayee(databaseUrl, 'Chaos');
    await temporal.start();
    await worker.start();
    await api.start();
    supervising = setInterval(() => Object.values(supervised).forEach((each) => void each.tick()), 500);
    const url = `http://127.0.0.1:${apiPort}`;
    await eventually(async () => ((await fetch(`${url}/readyz`).catch(() => undefined))?.ok ? true : undefined), 'the API ready', 120_000, 200);
    const client = new ChaosClient(url, secrets);
    // The scan starts at the tip it first sees (transfers before it are not credited): deposits wait for it.
    const setupOrm = await createOrm(databaseUrl, 1);
    if (options.chain) await eventually(
      async () => ((await setupOrm.em.fork().getConnection().execute(`select 1 from chain_scan_cursors where chain = 'ethereum' and environment = 'sandbox'`)).length > 0 ? true : undefined),
      'the Ethereum scan started',
      120_000,
      500,
    ).finally(() => setupOrm.close());
    const operations = await runLoad(options, random, client, receiver, supervised, chain);
    options.log('load done; settling');
    const orm = await createOrm(databaseUrl, 2);
    const temporalConnection = await Connection.connect({ address: `127.0.0.1:${temporal.port}` });
    try {
      return await check(options, orm, new Client({ connection: temporalConnection }), client, operations, receiver, supervised, chain, env);
    } finally {
      await temporalConnection.close();
      await orm.close();
    }
  } catch (error) {
    throw new Error(`${(error as Error).message}\n${[api, worker, temporal, postgres].map((each) => each.log()).join('\n')}`);
  } finally {
    clearInterval(supervising);
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

/** The payer's Ethereum wallet, with 100 ETH deposited and confirmed. */
async function openWallet(client: ChaosClient, chain: Chain, setupDeadline: number): Promise<void> {
  const vault = await client.send({ kind: 'credit', as: 'payer', method: 'POST', route: '/v1/vaults', body: { name: 'Chaos' }, idempotencyKey: randomUUID(), attempts: 0 }, setupDeadline);
  const wallet = await client.send(
    { kind: 'credit', as: 'payer', method: 'POST', route: '/v1/wallets', body: { name: 'Chaos', chain: 'ethereum', vault_id: vault?.body.id, wallet_type: 'hot' }, idempotencyKey: randomUUID(), attempts: 0 },
    setupDeadline,
  );
  if (!wallet || wallet.status !== 201) throw new Error(`wallet not created: ${JSON.stringify(wallet)}`);
  chain.wallet = { id: wallet.body.id as string, address: wallet.body.primary_address.address as Hex };
  await deposit(chain, parseEther('100'));
  await eventually(
    async () => {
      const balances = (await client.read('payer', `/v1/wallets/${chain.wallet!.id}/balances`, setupDeadline))?.body.data as { asset_id: string; balance: string }[] | undefined;
      return balances?.some((row) => row.asset_id === 'ETH' && BigInt(row.balance) > 0n) ? true : undefined;
    },
    'the first deposit confirmed',
    120_000,
    500,
  );
}

/** A deposit from anvil's dev account; one at a time (its nonce). */
function deposit(chain: Chain, wei: bigint): Promise<void> {
  chain.depositing = chain.depositing.then(async () => {
    await anvilFunder(chain.anvil).sendTransaction({ to: chain.wallet!.address, value: wei });
    chain.deposited += wei;
  });
  return chain.depositing;
}

interface LoadState {
  operations: Operation[];
  cards: string[];
  webhookId: string;
}

async function runLoad(
  options: ChaosOptions,
  random: () => number,
  client: ChaosClient,
  receiver: WebhookReceiver,
  supervised: Record<ComponentName, Supervised>,
  chain: Chain,
): Promise<Operation[]> {
  const setupDeadline = Date.now() + 120_000;
  const state: LoadState = { operations: [], cards: [], webhookId: '' };
  const accept = async (operation: Omit<Operation, 'attempts' | 'idempotencyKey'>, deadline: number): Promise<Operation> => {
    const sent: Operation = { ...operation, attempts: 0, idempotencyKey: randomUUID() };
    state.operations.push(sent);
    sent.answer = await client.send(sent, deadline);
    if (sent.answer && sent.answer.status < 300) sent.id = idOf(sent.kind, sent.answer.body);
    return sent;
  };
  // Money to spend and a webhook endpoint for every event of both organizations, before any kill.
  for (const currency of ['USD', 'sat']) {
    await accept({ kind: 'credit', as: 'payer', method: 'POST', route: '/v1/sandbox/balances', body: { amount: '100000000', currency, reference: randomUUID() } }, setupDeadline);
  }
  for (const as of ['payer', 'payee'] as const) {
    const endpoint = await client.send({ kind: 'credit', as, method: 'POST', route: '/v1/webhooks', body: { name: 'Chaos', url: receiver.url }, idempotencyKey: randomUUID(), attempts: 0 }, setupDeadline);
    if (!endpoint || endpoint.status !== 201) throw new Error(`webhook endpoint not created: ${JSON.stringify(endpoint)}`);
    if (as === 'payer') state.webhookId = endpoint.body.id as string;
  }
  if (options.chain) await openWallet(client, chain, setupDeadline);

  const loadEnd = Date.now() + options.loadSeconds * 1000;
  // In-flight operations keep retrying past the load's end, until every component has been up a while.
  const answerDeadline = loadEnd + options.settleSeconds * 1000;
  const pick = <T>(items: readonly T[]) => items[Math.floor(random() * items.length)]!;
  const kinds: { weight: number; run: () => Promise<unknown> }[] = [
    ...(options.chain
      ? [
          { weight: 1, run: () => deposit(chain, parseEther('0.01') * BigInt(1 + Math.floor(random() * 10))) },
          {
            weight: 2,
            run: () => accept({ kind: 'send', as: 'payer', method: 'POST', route: '/v1/transactions', body: { wallet_id: chain.wallet!.id, to_address: chain.outside, amount: '0.001', asset: 'ETH' } }, answerDeadline),
          },
        ]
      : []),
    { weight: 1, run: () => accept({ kind: 'credit', as: 'payer', method: 'POST', route: '/v1/sandbox/balances', body: { amount: '100000', currency: pick(['USD', 'sat']), reference: randomUUID() } }, answerDeadline) },
    {
      weight: 2,
      run: async () => {
        const card = await accept({ kind: 'card', as: 'payer', method: 'POST', route: '/api/cards', body: { amount: 500, card_type: 'virtual', currency: 'USD', name: 'Chaos card', customer: validCustomer() } }, answerDeadline);
        if (card.id) state.cards.push(card.id);
      },
    },
    {
      weight: 4,
      run: async () => {
        if (state.cards.length === 0) return;
        const cardId = pick(state.cards);
        const read = await client.read('payer', `/api/cards/${cardId}`, answerDeadline);
        if (read?.body.data?.card?.status !== 'active') return;
        await accept({ kind: 'funding', as: 'payer', method: 'POST', route: `/api/cards/${cardId}/balance`, body: { type: 'fund', amount: 1000 + Math.floor(random() * 1000), reference: randomUUID() } }, answerDeadline);
      },
    },
    {
      weight: 4,
      run: async () => {
        const invoice = await accept({ kind: 'invoice', as: 'payee', method: 'POST', route: '/api/lightning/invoices', body: { amount: 1000 + Math.floor(random() * 1000), description: 'chaos', reference: randomUUID() } }, answerDeadline);
        if (!invoice.id) return;
        await accept({ kind: 'payment', as: 'payer', method: 'POST', route: '/api/lightning/payments', body: { request: invoice.answer!.body.request, reference: randomUUID() } }, answerDeadline);
      },
    },
    { weight: 1, run: () => accept({ kind: 'webhook_test', as: 'payer', method: 'POST', route: `/v1/webhooks/${state.webhookId}/test`, body: {} }, answerDeadline) },
    {
      weight: 2,
      run: async () => {
        const corridor = pick(PAYOUT_CORRIDORS);
        const amount = String(20 + Math.floor(random() * 80));
        const quote = await accept({ kind: 'payout_quote', as: 'payer', method: 'POST', route: '/payouts/quotes', body: { ...corridor.quote, amount } }, answerDeadline);
        if (!quote.id) return;
        const trip = await accept(
          { kind: 'payout', as: 'payer', method: 'POST', route: '/payouts/initialize', body: { quoteId: quote.id, reference: randomUUID(), beneficiary: corridor.beneficiary } },
          answerDeadline,
        );
        if (!trip.id) return;
        // The exact amount, from the devnet's faucet to the trip's deposit address. The generic sandbox deposit commits
        // its transfer with its Idempotency-Key (the payout helper does not: it mines, waiting on Temporal, outside it).
        const deposit = await accept(
          { kind: 'payout_deposit', as: 'payer', method: 'POST', route: '/v1/sandbox/deposits', body: { chain: 'tron', address: trip.answer!.body.depositAddress, asset: 'USDT', amount: quote.answer!.body.fromAmount } },
          answerDeadline,
        );
        if (!deposit.id) return;
        // Blocks for its confirmations (more, mined by a repeat, do no harm).
        await client.send(
          { kind: 'credit', as: 'payer', method: 'POST', route: '/v1/sandbox/chains/tron/blocks', body: { count: TRON_CONFIRMATIONS }, idempotencyKey: randomUUID(), attempts: 0 },
          answerDeadline,
        );
      },
    },
  ];
  const totalWeight = kinds.reduce((sum, kind) => sum + kind.weight, 0);

  // The kill schedule: each component killed killsPerComponent times between 10% and 85% of the load, down 1 to 6 s each time.
  const loadMs = options.loadSeconds * 1000;
  const kills = COMPONENTS.flatMap((name) => Array.from({ length: options.killsPerComponent }, () => ({ name, atMs: loadMs * (0.1 + 0.75 * random()), downMs: 1000 + 5000 * random() }))).sort(
    (a, b) => a.atMs - b.atMs,
  );
  options.log(`kills: ${kills.map((kill) => `${kill.name} at ${(kill.atMs / 1000).toFixed(1)} s for ${(kill.downMs / 1000).toFixed(1)} s`).join(', ')}`);
  const startedAt = Date.now();
  const killing = kills.map(async (kill) => {
    await sleep(kill.atMs);
    options.log(`${((Date.now() - startedAt) / 1000).toFixed(1)} s: SIGKILL ${kill.name}`);
    await supervised[kill.name].killFor(kill.downMs);
    options.log(`${((Date.now() - startedAt) / 1000).toFixed(1)} s: ${kill.name} up again`);
  });

  const inFlight = new Set<Promise<unknown>>();
  let skipped = 0;
  while (Date.now() < loadEnd) {
    if (inFlight.size >= options.maxInFlight) skipped += 1;
    else {
      let ticket = random() * totalWeight;
      const kind = kinds.find((each) => (ticket -= each.weight) < 0) ?? kinds[0]!;
      const running = kind.run().finally(() => inFlight.delete(running));
      inFlight.add(running);
    }
    await sleep(1000 / options.operationsPerSecond);
  }
  await Promise.all(killing);
  await Promise.all(inFlight);
  await chain.depositing;
  options.log(`load: ${state.operations.length} operations sent, ${client.retries} retries, ${skipped} not started (all slots busy)`);
  return state.operations;
}

/** On chain: with no block mined any more, scanning catches up with the tip; then the wallet's ledger is its chain balance,
 * what was deposited less what the confirmed sends took (amounts and fees) is its ledger balance, and the outside address holds exactly what they sent. */
async function checkChain(orm: Orm, chain: Chain, env: NodeJS.ProcessEnv, settleDeadline: number, violations: string[], report: string[]): Promise<void> {
  const sql = <T>(query: string, params: unknown[] = []) => orm.em.fork().getConnection().execute<T[]>(query, params);
  clearInterval(chain.mining);
  const tip = Number(await chain.anvil.call('eth_blockNumber'));
  const scanned = await eventually(
    async () => ((Number((await sql<{ n: string }>(`select coalesce(max(height), 0) as n from chain_scan_cursors where chain = 'ethereum' and environment = 'sandbox'`))[0]!.n)) >= tip ? true : undefined),
    'scanning caught up with the tip',
    Math.max(10_000, settleDeadline - Date.now()),
    500,
  ).catch(() => false);
  if (!scanned) violations.push(`the chain scan did not reach the tip ${tip}`);
  const config = loadConfig(env);
  const provider = await new ChainNodes(config, createLogger('silent'), orm).provider('ethereum', 'sandbox');
  const ledger = await compareLedgerWithChain(orm.em.fork(), provider, { chain: 'ethereum', environment: 'sandbox', assetIds: ['ETH'] });
  for (const mismatch of ledger.mismatches) violations.push(`wallet ledger differs from the chain: ${JSON.stringify(mismatch, (_, value: unknown) => (typeof value === 'bigint' ? value.toString() : value))}`);
  const [sent] = await sql<{ amounts: string; fees: string }>(
    `select coalesce(sum(recipient_amount), 0) as amounts, coalesce(sum(fee), 0) as fees from transactions where status = 'confirmed'`,
  );
  const [walletBalance] = await sql<{ balance: string; locked: string }>(`select balance, locked from wallet_balances where wallet_id = ? and asset_id = 'ETH'`, [chain.wallet!.id]);
  const outsideHolds = await anvilEthBalance(chain.anvil, chain.outside);
  report.push(
    `money ETH (wei): deposited ${chain.deposited} - sent ${sent!.amounts} - fees ${sent!.fees} = wallet ledger ${walletBalance?.balance} (locked ${walletBalance?.locked}); ` +
      `the outside address holds ${outsideHolds}; ${ledger.wallets} wallet ledgers compared with the chain, ${ledger.mismatches.length} differ`,
  );
  if (chain.deposited - BigInt(sent!.amounts) - BigInt(sent!.fees) !== BigInt(walletBalance?.balance ?? 0)) violations.push('money ETH: deposits less sends and fees differ from the wallet ledger');
  if (outsideHolds !== BigInt(sent!.amounts)) violations.push(`money ETH: the outside address holds ${outsideHolds}, the confirmed sends sent ${sent!.amounts}`);
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
  const deposited = deposits.reduce((sum, each) => sum + BigInt(each.answer!.body.amount_raw as string), 0n);
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

/** Final state of a workflow the service started, or why it has none. */
async function workflowState(temporal: Client, workflowId: string): Promise<string> {
  try {
    return (await temporal.workflow.getHandle(workflowId).describe()).status.name;
  } catch (error) {
    return `not found (${(error as Error).message.slice(0, 80)})`;
  }
}

async function check(
  options: ChaosOptions,
  orm: Orm,
  temporal: Client,
  client: ChaosClient,
  operations: Operation[],
  receiver: WebhookReceiver,
  supervised: Record<ComponentName, Supervised>,
  chain: Chain,
  env: NodeJS.ProcessEnv,
): Promise<ChaosResult> {
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

  // 2. A replay of every accepted operation with its key answers with the same resource: one key, one effect.
  for (const operation of accepted) {
    const replay = await client.send({ ...operation, attempts: 0 }, Date.now() + 60_000);
    const replayedId = replay && replay.status < 300 ? idOf(operation.kind, replay.body) : `status ${replay?.status}`;
    if (replayedId !== operation.id) violations.push(`${operation.kind} ${operation.id}: its replay answered ${replayedId}`);
  }

  // 3. Every accepted operation reaches its final state, or is still running and visible.
  const byKind = (kind: Operation['kind']) => accepted.filter((each) => each.kind === kind);
  const cardIds = byKind('card').map((each) => each.id!);
  const fundingIds = byKind('funding').map((each) => each.id!);
  const paymentIds = byKind('payment').map((each) => each.id!);
  const invoiceIds = byKind('invoice').map((each) => each.id!);
  const sendIds = byKind('send').map((each) => each.id!);
  const tripIds = byKind('payout').map((each) => each.id!);
  const unsettled = async () => ({
    cards: await sql<{ id: string; status: string }>(`select id, status::text from cards where id::text = any(?::text[]) and status <> 'active'`, [textArray(cardIds)]),
    fundings: await sql<{ id: string; status: string }>(`select id, status::text from card_transactions where card_id::text = any(?::text[]) and status <> 'completed'`, [textArray(cardIds)]),
    payments: await sql<{ id: string; status: string }>(`select id, status::text from lightning_invoices where id::text = any(?::text[]) and status <> 'paid'`, [textArray(paymentIds)]),
    invoices: await sql<{ id: string; status: string }>(`select id, status::text from lightning_invoices where id::text = any(?::text[]) and status <> 'paid'`, [textArray(invoiceIds)]),
    sends: await sql<{ id: string; status: string }>(`select id, status::text from transactions where id::text = any(?::text[]) and status <> 'confirmed'`, [textArray(sendIds)]),
    trips: await sql<{ id: string; status: string }>(`select id, status::text from payout_trips where id::text = any(?::text[]) and status <> 'success'`, [textArray(tripIds)]),
    deliveries: await sql<{ id: string; status: string }>(`select id, status::text from event_deliveries where status <> 'delivered'`),
    deposits: await sql<{ id: string; status: string }>(`select wallet_id as id, 'pending' as status from wallet_balances where pending <> 0`),
  });
  let open = await unsettled();
  const openCount = () => Object.values(open).reduce((sum, rows) => sum + rows.length, 0);
  while (openCount() > 0 && Date.now() < settleDeadline) {
    await sleep(1000);
    open = await unsettled();
  }
  const workflowOf = {
    cards: (id: string) => cardProvisioningFlow.workflowId({ cardId: id }),
    fundings: (id: string) => cardBalanceFlow.workflowId({ transactionId: id }),
    payments: paymentWorkflowId,
    sends: transactionWorkflowId,
    trips: (id: string) => payoutTripFlow.workflowId({ tripId: id }),
  };
  for (const [what, rows] of Object.entries(open) as [keyof typeof open, { id: string; status: string }[]][]) {
    for (const row of rows) {
      if (row.status === 'failed') violations.push(`${what} ${row.id} failed`);
      // A trip's workflow outlives its end (it watches for late payments): any other end than success is one.
      else if (what === 'trips' && FINAL_TRIP_STATUSES.includes(row.status as TripStatus)) violations.push(`trips ${row.id} ended ${row.status}`);
      // Deliveries retry on their own schedule; an invoice waits for its payment and a deposit for its confirmations, each checked on its own.
      else if (what === 'deliveries' || what === 'invoices' || what === 'deposits') report.push(`${what} ${row.id} still ${row.status}`);
      else {
        const state = await workflowState(temporal, workflowOf[what](row.id));
        if (state === 'RUNNING') report.push(`${what} ${row.id} still ${row.status}, its workflow running`);
        else violations.push(`${what} ${row.id} is ${row.status} and its workflow is ${state}`);
      }
    }
  }
  // A paid payment paid its own invoice, and a paid invoice was paid by one of ours.
  const mismatched = await sql<{ id: string }>(
    `select p.id from lightning_invoices p left join lightning_invoices i on i.payment_hash = p.payment_hash and i.direction = 'incoming'
      where p.direction = 'outgoing' and (p.status = 'paid') <> coalesce(i.status = 'paid' and i.paid_by_payment_id = p.id, false)`,
  );
  for (const row of mismatched) violations.push(`payment ${row.id} and its invoice disagree on being paid`);

  // 4. Exactly once in the database: one row per accepted operation, no more.
  const count = async (query: string, params: unknown[]) => Number((await sql<{ n: string }>(query, params))[0]!.n);
  const expected = [
    { what: 'cards', n: cardIds.length, rows: await count(`select count(*) as n from cards`, []) },
    { what: 'card fundings (one initial per card, plus each accepted)', n: cardIds.length + fundingIds.length, rows: await count(`select count(*) as n from card_transactions`, []) },
    { what: 'incoming invoices', n: invoiceIds.length, rows: await count(`select count(*) as n from lightning_invoices where direction = 'incoming'`, []) },
    { what: 'outgoing payments', n: paymentIds.length, rows: await count(`select count(*) as n from lightning_invoices where direction = 'outgoing'`, []) },
    { what: 'sends', n: sendIds.length, rows: await count(`select count(*) as n from transactions`, []) },
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

  // Each card holds exactly its completed fundings, each counted once.
  const fundedBy = new Map<string, bigint>(cardIds.map((id) => [id, 500n]));
  const completedFundings = new Set((await sql<{ id: string }>(`select id from card_transactions where status = 'completed'`)).map((row) => row.id));
  for (const operation of byKind('funding')) {
    if (!completedFundings.has(operation.id!)) continue;
    const cardId = operation.route.split('/')[3]!;
    fundedBy.set(cardId, fundedBy.get(cardId)! + BigInt((operation.body as { amount: number }).amount));
  }
  for (const card of await sql<{ id: string; balance: string }>(`select id, balance from cards where id::text = any(?::text[])`, [textArray(cardIds)])) {
    const initialCompleted = (await count(`select count(*) as n from card_transactions where card_id = ? and status = 'completed' and id::text <> all(?::text[])`, [card.id, textArray(fundingIds)])) === 1;
    const expectedBalance = fundedBy.get(card.id)! - (initialCompleted ? 0n : 500n);
    if (BigInt(card.balance) !== expectedBalance) violations.push(`card ${card.id}: balance ${card.balance}, its completed fundings add up to ${expectedBalance}`);
  }

  // 5. Money: what was credited equals what is held (company balances, reserves, cards) plus what left as fees.
  const credited = { usd: 0n, sat: 0n };
  for (const operation of byKind('credit')) {
    const body = operation.body as { amount: string; currency: string };
    credited[body.currency === 'USD' ? 'usd' : 'sat'] += BigInt(body.amount);
  }
  const [company] = await sql<{ usd: string; sat: string }>(
    `select coalesce(sum(available + reserved) filter (where currency = 'usd'), 0) as usd, coalesce(sum(available + reserved) filter (where currency = 'sat'), 0) as sat from company_balances`,
  );
  const [cards] = await sql<{ total: string }>(`select coalesce(sum(balance), 0) as total from cards`);
  const [cardFees] = await sql<{ total: string }>(`select coalesce(sum(fee_amount), 0) as total from card_transactions where status = 'completed'`);
  const [lightningFees] = await sql<{ total: string }>(`select coalesce(sum(ceil(fee_msat / 1000.0)), 0) as total from lightning_invoices where direction = 'outgoing' and status = 'paid'`);
  const held = { usd: BigInt(company!.usd) + BigInt(cards!.total) + BigInt(cardFees!.total), sat: BigInt(company!.sat) + BigInt(lightningFees!.total) };
  report.push(
    `money USD (cents): credited ${credited.usd} = company balances and reserves ${company!.usd} + cards ${cards!.total} + funding fees ${cardFees!.total} (${held.usd})`,
    `money BTC (sats): credited ${credited.sat} = Lightning balances and reserves ${company!.sat} + payment fees ${lightningFees!.total} (${held.sat})`,
  );
  for (const currency of ['usd', 'sat'] as const) if (credited[currency] !== held[currency]) violations.push(`money ${currency}: credited ${credited[currency]}, held ${held[currency]}`);
  // Each balance row is the sum of its journal.
  const drifted = await sql<{ organization_id: string; currency: string }>(
    `select b.organization_id, b.currency::text from company_balances b
       left join (select organization_id, environment, currency,
                         sum(case kind when 'credit' then amount when 'debit' then -amount when 'reserve' then -amount when 'release' then amount else 0 end) as available,
                         sum(case kind when 'reserve' then amount when 'release' then -amount when 'capture' then -amount else 0 end) as reserved
                    from company_balance_entries group by 1, 2, 3) j using (organization_id, environment, currency)
      where b.available <> coalesce(j.available, 0) or b.reserved <> coalesce(j.reserved, 0)`,
  );
  for (const row of drifted) violations.push(`company balance ${row.organization_id} ${row.currency} differs from its journal`);
  await checkPayoutMoney(sql, byKind('payout_deposit'), violations, report);

  if (options.chain) await checkChain(orm, chain, env, settleDeadline, violations, report);

  // 6. Events: each delivered one reached the receiver; none failed; the rest are scheduled. Duplicates at the receiver are at-least-once, counted.
  const received = new Map<string, number>();
  for (const attempt of receiver.attempts) received.set(attempt.headers['webhook-id']!, (received.get(attempt.headers['webhook-id']!) ?? 0) + 1);
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
  const expectedEvents = await count(
    `select count(*) as n from events where dedupe_key::text = any(?::text[])`,
    [
      textArray([
        ...fundingIds.filter((id) => completedFundings.has(id)).map((id) => `card.transaction:${id}`),
        ...paymentIds.map((id) => `lightning.payment.paid:${id}`),
        ...invoiceIds.map((id) => `lightning.invoice.paid:${id}`),
        ...tripIds.map((id) => `payouts.withdrawal.success:${id}`),
      ]),
    ],
  );
  report.push(
    `events: ${events!.n} emitted (and ${events!.desk} of the payout desk), ${deliveries.filter((each) => each.status === 'delivered').length} delivered, ${deliveries.filter((each) => each.status === 'pending').length} scheduled; ` +
      `${received.size} distinct received, ${[...received.values()].filter((n) => n > 1).length} received more than once; ${expectedEvents} for completed fundings, paid payments/invoices and successful payouts`,
  );

  const answered = (kind: Operation['kind']) => operations.filter((each) => each.kind === kind);
  report.unshift(
    ...COMPONENTS.map(
      (name) =>
        `${name}: killed ${supervised[name].kills} times, exited on its own ${supervised[name].ownExits} times (restarted each time)` +
        (supervised[name].lastOwnExit ? `; its output before the last: ${supervised[name].lastOwnExit.replaceAll('\n', ' | ')}` : ''),
    ),
    ...(['credit', 'card', 'funding', 'invoice', 'payment', 'send', 'webhook_test', 'payout_quote', 'payout', 'payout_deposit'] as const).map(
      (kind) => `${kind}: ${answered(kind).length} sent, ${byKind(kind).length} accepted, ${answered(kind).filter((each) => each.attempts > 1).length} needed a retry`,
    ),
  );
  return { violations, report };
}
