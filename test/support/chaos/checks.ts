import { Client } from '@temporalio/client';
import { cardBalanceFlow } from '../../../src/cards/flows/balance';
import { cardProvisioningFlow } from '../../../src/cards/flows/provisioning';
import { type Orm } from '../../../src/db/orm';
import { verifyLedger } from '../../../src/ledger/invariants';
import { ledgerProjections } from '../../../src/registries';
import { transactionWorkflowId } from '../../../src/transactions/flows/transaction';
import { paymentWorkflowId } from '../../../src/lightning/flows/payment';
import { SERVICE_DESK_ORGANIZATION_ID } from '../../../src/payouts/desk';
import { payoutTripFlow } from '../../../src/payouts/flows/trip';
import { consolidationRunFlow } from '../../../src/consolidation/flows/run';
import { type SandboxOrganization } from '../sandbox-organizations';
import { WebhookReceiver } from '../webhook-receiver';
import { checkChain } from './chain-checks';
import { ChaosClient, Operation, idOf, workflowState } from './client';
import { Supervised } from './components';
import { expectedState } from './expected';
import { openWorkflows, type OpenWorkflows } from './open-workflows';
import { checkPayouts } from './payout-checks';
import { LoadOutcome } from './load';
import { Chain, ComponentName, ORGANIZATIONS, OrganizationName, sleep, textArray } from './model';
import type { Phases } from './phases';
import { ChaosOptions, ChaosResult } from './run';

export async function check(
  options: ChaosOptions,
  orm: Orm,
  temporal: Client,
  client: ChaosClient,
  load: LoadOutcome,
  receiver: WebhookReceiver,
  supervised: Supervised[],
  chain: Chain,
  env: NodeJS.ProcessEnv,
  organizations: Record<OrganizationName, SandboxOrganization>,
  /**
   * `recheck`: the checks run again on the same database after the planted faults, without what those postings cannot
   * change: the replays (check 2: they change no idempotency record) and the wait for work to settle (it had settled, or
   * its violation was reported, the first time). `phases`: marked as the checks go (the re-check is timed as one).
   */
  pass: { recheck: boolean; phases?: Phases },
): Promise<Omit<ChaosResult, 'processes' | 'phases'>> {
  const { operations } = load;
  const violations: string[] = [];
  const report: string[] = [];
  const sql = <T>(query: string, params: unknown[] = []) => orm.em.fork().getConnection().execute<T[]>(query, params);
  const settleDeadline = Date.now() + (pass.recheck ? 0 : options.settleSeconds * 1000);

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
  const replaying = pass.recheck ? [] : [...accepted];
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
  pass.phases?.end('answers and replays');

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
    workflows: await runningWorkflows(),
  });
  // What Temporal itself has running (its visibility, not the service's tables), less what stays open by design (kept for the report).
  let byDesign: OpenWorkflows['byDesign'] = [];
  const runningWorkflows = async () => {
    const found = await openWorkflows(temporal);
    byDesign = found.byDesign;
    return found.unexpected.map((id) => ({ id, status: 'running' }));
  };
  let open = await unsettled();
  const openCount = () => Object.values(open).reduce((sum, rows) => sum + rows.length, 0);
  while (openCount() > 0 && Date.now() < settleDeadline) {
    await sleep(1000);
    open = await unsettled();
  }
  // A sweep confirmed at the window's end leaves its deposit to the main wallet a scan behind (the send's workflow
  // reads the node, the credit waits for the scanner, which mining keeps busy): pending deposits get 30 s more,
  // and one still pending then is a violation.
  const depositsDeadline = Date.now() + (pass.recheck ? 0 : 30_000);
  while (open.deposits.length > 0 && Date.now() < depositsDeadline) {
    await sleep(1000);
    open = await unsettled();
  }
  options.log(`settled (${openCount()} open)`);
  report.push(`open after the settle window: ${open.workflows.length} workflows the run started; open by design: ${byDesign.join('; ') || 'none'}`);
  pass.phases?.end('settle');
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
  // A trip records the transfer to its address once (what its rail paid is checked against the load's quotes below).
  for (const row of await sql<{ trip_id: string }>(`select trip_id from payout_deposits group by trip_id having count(*) > 1`)) violations.push(`trip ${row.trip_id} recorded its deposit more than once`);

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
  const payouts = await checkPayouts(sql, accepted, violations, report);

  const { sweepsOnChain } = options.chain ? await checkChain(orm, client, chain, env, settleDeadline, byKind('sweep_run'), byKind('send'), violations, report) : { sweepsOnChain: 0 };

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
  for (const each of supervised) {
    if (each.ownExits > 0) violations.push(`${each.component.name} exited on its own ${each.ownExits} times; its output before the last: ${each.lastOwnExit.replaceAll('\n', ' | ')}`);
  }

  options.log('checked');
  pass.phases?.end('checks');
  const answered = (kind: Operation['kind']) => operations.filter((each) => each.kind === kind);
  const rate = (operations.length - load.setupOperations) / load.loadSeconds;
  const { ticks } = load;
  const killsInActivities = Object.values(load.killsInActivitiesOf).reduce((sum, count) => sum + count, 0);
  report.unshift(
    `load: ${ticks.due} ticks due in its ${options.loadSeconds} s window (${options.operationsPerSecond} a second), ${ticks.started} started, ${ticks.skipped} skipped (all slots busy); ` +
      `work started: ${Object.entries(ticks.byKind).map(([kind, count]) => `${kind} ${count}`).join(', ')}; ` +
      `${operations.length - load.setupOperations} operations in ${load.loadSeconds.toFixed(0)} s (${rate.toFixed(1)} a second) across ${ORGANIZATIONS.length} organizations; ` +
      `${load.killsTimed} kills timed on an accepted operation's workflow, ${killsInActivities} of them with an activity pending (${load.killsInSweepActivities} in a sweep run's)`,
    ...supervised.map(
      (each) =>
        `${each.component.name}: killed ${each.kills} times (${load.killsInActivitiesOf[each.component.name] ?? 0} inside an activity), exited on its own ${each.ownExits} times (restarted each time)`,
    ),
    ...(['credit', 'card', 'funding', 'invoice', 'payment', 'send', 'webhook_test', 'payout_quote', 'payout', 'payout_deposit', 'sweep_run'] as const).map(
      (kind) => `${kind}: ${answered(kind).length} sent, ${byKind(kind).length} accepted, ${answered(kind).filter((each) => each.attempts > 1).length} needed a retry`,
    ),
  );
  const kills: Partial<Record<ComponentName, number>> = Object.fromEntries(supervised.map((each) => [each.component.name, each.kills]));
  return {
    violations,
    report,
    operations: operations.length - load.setupOperations,
    operationsPerSecond: rate,
    killsInActivities,
    killsInActivitiesOf: load.killsInActivitiesOf,
    kills,
    ticks,
    completed: { sweepRuns: runIds.length, sweepsOnChain, trips: payouts.trips, tripsPaidAsQuoted: payouts.tripsPaidAsQuoted },
  };
}
