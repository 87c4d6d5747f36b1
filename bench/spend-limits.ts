import type { EntityManager } from '@mikro-orm/postgresql';
import { performance } from 'node:perf_hooks';
import { authorizePurchase } from '../src/cards/authorization';
import { Card } from '../src/cards/entities';
import { CreateCardBody } from '../src/cards/schemas';
import type { CardTenant } from '../src/cards/lookups';
import { createCard, type CardCreator } from '../src/cards/service';
import { loadConfig, type Config } from '../src/config';
import { createOrm, migrate, type Orm } from '../src/db/orm';
import { keyProviderFor } from '../src/keys/provider';
import { createApiKey } from '../src/api-keys/service';
import { createOrganization } from '../src/organizations/service';
import { LATEST_API_VERSION } from '../src/shared/api-versions';
import { BENCH_CARD_BODY, BENCH_SECONDS, report, runBenchmark } from './support';

const HOUR = 3600_000;
const YEAR = 365.25 * 24 * HOUR;
/** High enough never to decline: every authorization runs the whole approval path. */
const LIMIT = 10n ** 15n;

/**
 * Sandbox authorizations with all five window limits set (daily, weekly, monthly, yearly, all
 * time), in process and in one transaction each as the route runs them (card lock, window sums,
 * purchase row, event), one after another on one card (they serialize on its lock anyway). The
 * baseline card has 10 past purchases in the last 10 hours; the other has 100,000 spread evenly
 * over the 10 years before now, so only the share inside the current calendar year lies in a window
 * (reported as `purchases_this_year`, the bench's own purchases included). The two are measured in alternating one-second slices so a
 * busy machine weighs on both alike.
 */
async function main() {
  const config = loadConfig({ ...process.env, LOG_LEVEL: 'silent' });
  const orm = await createOrm(config.DATABASE_URL, config.DATABASE_POOL_MAX);
  await migrate(orm);
  const em = orm.em.fork();
  const organization = createOrganization(em, 'Benchmark');
  const { key } = createApiKey(em, { organization, name: 'Benchmark', scopes: ['*'], environment: 'sandbox' });
  await em.flush();
  const tenant: CardTenant = { organizationId: organization.id, environment: 'sandbox' };
  const creator = { ...tenant, apiKeyId: key.id, memberId: null, apiVersion: LATEST_API_VERSION };
  const now = Date.now();
  const light = await cardWithHistory(orm, config, creator, 10, now - 10 * HOUR, now);
  const heavy = await cardWithHistory(orm, config, creator, 100_000, now - 10 * YEAR, now);
  await orm.em.fork().execute('vacuum analyze card_transactions');

  const targets = [
    { target: 'card with 10 past purchases (baseline)', cardId: light, latencies: [] as number[] },
    { target: 'card with 100,000 past purchases', cardId: heavy, latencies: [] as number[] },
  ];
  for (const { cardId } of targets) await authorizeFor(orm, tenant, cardId, 2_000, []);
  for (let slice = 0; slice < BENCH_SECONDS; slice++) {
    for (const { cardId, latencies } of targets) await authorizeFor(orm, tenant, cardId, 1_000, latencies);
  }

  const yearStart = new Date(Date.UTC(new Date(now).getUTCFullYear(), 0, 1));
  const rows = await Promise.all(
    targets.map(async ({ target, cardId, latencies }) => {
      const [{ count }] = await orm.em.fork().execute<{ count: string }[]>(
        `select count(*)::text as count from card_transactions where card_id = ? and type = 'purchase' and status = 'completed' and created_at >= ?`,
        [cardId, yearStart],
      );
      const sorted = [...latencies].sort((a, b) => a - b);
      const seconds = latencies.reduce((sum, latency) => sum + latency, 0) / 1000;
      return {
        target,
        purchases_this_year: Number(count),
        authorizations_per_second: Math.round(latencies.length / seconds),
        latency_p50_ms: round(sorted[Math.floor(sorted.length * 0.5)]!),
        latency_p99_ms: round(sorted[Math.floor(sorted.length * 0.99)]!),
      };
    }),
  );
  await report('spend-limits', rows, [
    { name: '100,000 past purchases / 10 past purchases', value: rows[1]!.authorizations_per_second / rows[0]!.authorizations_per_second, goal: 0.8 },
  ]);
  await orm.close();
}

/**
 * An active, funded card with every window limited, and `count` approved purchases of 1 cent evenly
 * from `from` to `to` inserted by one statement that also adds them to the card's all-time total.
 */
async function cardWithHistory(orm: Orm, config: Config, creator: CardCreator, count: number, from: number, to: number): Promise<string> {
  const { card } = await orm.em.fork().transactional((tx) =>
    createCard(tx, creator, CreateCardBody.parse(BENCH_CARD_BODY), { config, allowInsecureLoopback: true, keys: keyProviderFor(config), liveIssuer: false }),
  );
  const limits = { daily: LIMIT, weekly: LIMIT, monthly: LIMIT, yearly: LIMIT, all_time: LIMIT };
  const em: EntityManager = orm.em.fork();
  await em.nativeUpdate(Card, { id: card.id }, { status: 'active', balance: String(LIMIT), spendingLimits: Object.fromEntries(Object.entries(limits).map(([window, cents]) => [window, cents.toString()])) });
  await em.execute(
    `with history as (
       insert into card_transactions (id, organization_id, environment, card_id, type, status, amount, balance_before, balance_after, fee_amount, created_at, updated_at)
       select gen_random_uuid(), cards.organization_id, cards.environment, cards.id, 'purchase', 'completed', 1, 0, 0, 0,
              to_timestamp((? + (? - ?) * n / ?::numeric) / 1000), now()
       from cards, generate_series(1, ?) as n where cards.id = ?
       returning amount)
     update cards set spent_all_time = spent_all_time + (select sum(amount) from history) where id = ?`,
    [from, to, from, count, count, card.id, card.id],
  );
  return card.id;
}

/** Authorizes 1 cent at the current instant, one after another for `milliseconds`, recording each latency. */
async function authorizeFor(orm: Orm, tenant: CardTenant, cardId: string, milliseconds: number, latencies: number[]): Promise<void> {
  const until = performance.now() + milliseconds;
  while (performance.now() < until) {
    const started = performance.now();
    const { declineReason } = await orm.em.fork().transactional((tx) => authorizePurchase(tx, tenant, cardId, { amount: 1, merchantName: 'Benchmark', at: new Date() }));
    if (declineReason) throw new Error(`authorization declined: ${declineReason}`);
    latencies.push(performance.now() - started);
  }
}

const round = (milliseconds: number) => Math.round(milliseconds * 100) / 100;

runBenchmark(main);
