import { randomUUID } from 'node:crypto';
import { Client } from '@temporalio/client';
import { parseEther } from 'viem';
import { FINISHED_RUN_STATUSES, type RunStatus } from '../../../src/consolidation/entities';
import { anvilEthBalance } from '../anvil';
import { validCustomer } from '../customer';
import { WebhookReceiver } from '../webhook-receiver';
import { ChaosClient, Operation, idOf, workflowOfOperation } from './client';
import { Supervised } from './components';
import { COMPONENTS, Chain, ComponentName, INITIAL_CARD_FUNDING, ORGANIZATIONS, OrganizationName, PAYOUT_CORRIDORS, sleep } from './model';
import { describeSchedule, killSchedule, runKills } from './kills';
import type { Phases } from './phases';
import { ChaosOptions } from './run';
import { deposit, openWallet, walletEth } from './setup';

export interface LoadState {
  operations: Operation[];
  cards: { id: string; as: OrganizationName }[];
  webhookIds: Partial<Record<OrganizationName, string>>;
  /** Called with each accepted operation: a kill waiting for work in flight. */
  onAccepted: (() => void)[];
  /** The workflows of the latest accepted operations, newest last (at most RECENT_WORKFLOWS): a kill looks among them. */
  recentWorkflows: { workflowId: string; kind: Operation['kind'] }[];
  /** The workflows of the sweep runs in progress: a kill looks at them first. */
  sweepsRunning: Set<string>;
}

/** How many of the latest accepted operations' workflows a kill may time itself on. */
const RECENT_WORKFLOWS = 16;

/** What the load did: its operations, and how the kills landed. */
export interface LoadOutcome {
  operations: Operation[];
  loadSeconds: number;
  /** Per component, kills that fell while an accepted operation's workflow had an activity pending (Temporal's describe, just before the SIGKILL). */
  killsInActivitiesOf: Partial<Record<ComponentName, number>>;
  /** Of those, the kills that fell while a sweep run had an activity pending. */
  killsInSweepActivities: number;
  killsTimed: number;
  /** Operations sent before the load (the first credits): not counted in its rate. */
  setupOperations: number;
  /**
   * The schedule's ticks due inside the load's window (CHAOS_RATE a second for its seconds), counted as the load went:
   * those that started their work, those skipped (every slot busy), and the work each started, by kind. A tick due
   * inside the window and started late by a busy driver is still the window's: the count, never the clock, is its rate.
   */
  ticks: { due: number; started: number; skipped: number; byKind: Partial<Record<WorkKind, number>> };
}

/** What a tick of the load starts: one kind of work, drawn by weight. */
type WorkKind = 'deposit' | 'send' | 'sweep' | 'credit' | 'card' | 'funding' | 'payment' | 'webhook_test' | 'payout';

export async function runLoad(
  options: ChaosOptions,
  random: () => number,
  client: ChaosClient,
  receiver: WebhookReceiver,
  supervised: Supervised[],
  chain: Chain,
  temporal: Client,
  phases: Phases,
): Promise<LoadOutcome> {
  const setupDeadline = Date.now() + 120_000;
  const state: LoadState = { operations: [], cards: [], webhookIds: {}, onAccepted: [], recentWorkflows: [], sweepsRunning: new Set() };
  const accept = async (operation: Omit<Operation, 'attempts' | 'idempotencyKey'>, deadline: number): Promise<Operation> => {
    const sent: Operation = { ...operation, attempts: 0, idempotencyKey: randomUUID() };
    state.operations.push(sent);
    sent.answer = await client.send(sent, deadline);
    if (sent.answer && sent.answer.status < 300) {
      sent.id = idOf(sent.kind, sent.answer.body);
      const workflowId = workflowOfOperation(sent);
      if (workflowId) state.recentWorkflows = [...state.recentWorkflows.slice(1 - RECENT_WORKFLOWS), { workflowId, kind: sent.kind }];
      for (const waiter of state.onAccepted.splice(0)) waiter();
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
  phases.end('setup');

  const loadEnd = Date.now() + options.loadSeconds * 1000;
  // In-flight operations keep retrying past the load's end, until every component has been up a while.
  const answerDeadline = loadEnd + options.settleSeconds * 1000;
  const kinds: { kind: WorkKind; weight: number; run: () => Promise<unknown> }[] = [
    ...(options.chain
      ? [
          {
            kind: 'deposit' as const,
            weight: 1,
            run: () => {
              const as = pick(ORGANIZATIONS);
              return deposit(chain, chain.wallets[as]!, parseEther('0.01') * BigInt(1 + Math.floor(random() * 10)));
            },
          },
          {
            kind: 'send' as const,
            weight: 2,
            run: () => {
              const as = pick(ORGANIZATIONS);
              return accept({ kind: 'send', as, method: 'POST', route: '/v1/transactions', body: { wallet_id: chain.wallets[as]!.id, to_address: chain.outside, amount: '0.001', asset: 'ETH' } }, answerDeadline);
            },
          },
          {
            kind: 'sweep' as const,
            weight: 1,
            run: () => sweep(pick(ORGANIZATIONS), [random(), random()]),
          },
        ]
      : []),
    {
      kind: 'credit',
      weight: 1,
      run: () => accept({ kind: 'credit', as: pick(ORGANIZATIONS), method: 'POST', route: '/v1/sandbox/balances', body: { amount: '100000', currency: pick(['USD', 'sat']), reference: randomUUID() } }, answerDeadline),
    },
    {
      kind: 'card',
      weight: 2,
      run: async () => {
        const as = pick(ORGANIZATIONS);
        const card = await accept({ kind: 'card', as, method: 'POST', route: '/api/cards', body: { amount: INITIAL_CARD_FUNDING, card_type: 'virtual', currency: 'USD', name: 'Chaos card', customer: validCustomer() } }, answerDeadline);
        if (card.id) state.cards.push({ id: card.id, as });
      },
    },
    {
      kind: 'funding',
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
      kind: 'payment',
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
      kind: 'webhook_test',
      weight: 1,
      run: () => {
        const as = pick(ORGANIZATIONS);
        return accept({ kind: 'webhook_test', as, method: 'POST', route: `/v1/webhooks/${state.webhookIds[as]}/test`, body: {} }, answerDeadline);
      },
    },
    {
      kind: 'payout',
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

  const schedule = killSchedule(options, COMPONENTS[options.temporal], random);
  options.log(`kills: ${describeSchedule(schedule)}`);
  const startedAt = Date.now();
  const outcome: LoadOutcome = {
    operations: state.operations,
    loadSeconds: options.loadSeconds,
    killsInActivitiesOf: {},
    killsInSweepActivities: 0,
    killsTimed: 0,
    setupOperations: state.operations.length,
    ticks: { due: 0, started: 0, skipped: 0, byKind: {} },
  };
  const { ticks } = outcome;
  const killing = runKills(schedule, { options, state, temporal, supervised, outcome, startedAt });

  const running = new Set<Promise<unknown>>();
  // Ticks on a fixed schedule, a late one started at once: CHAOS_RATE ticks a second however busy the driver is.
  for (let tick = 0; startedAt + tick * (1000 / options.operationsPerSecond) < loadEnd; tick += 1) {
    await sleep(startedAt + tick * (1000 / options.operationsPerSecond) - Date.now());
    ticks.due += 1;
    if (running.size >= options.maxInFlight) ticks.skipped += 1;
    else {
      let ticket = random() * totalWeight;
      const kind = kinds.find((each) => (ticket -= each.weight) < 0) ?? kinds[0]!;
      ticks.started += 1;
      ticks.byKind[kind.kind] = (ticks.byKind[kind.kind] ?? 0) + 1;
      const operation = kind.run().finally(() => running.delete(operation));
      running.add(operation);
    }
  }
  outcome.loadSeconds = (Date.now() - startedAt) / 1000;
  phases.end('load');
  await killing;
  await Promise.all(running);
  await chain.depositing;
  options.log(`load: ${state.operations.length} operations sent, ${client.retries} retries, ${ticks.skipped} ticks of ${ticks.due} not started (all slots busy)`);
  phases.end("the last kills' down times and answers");
  return outcome;
}
