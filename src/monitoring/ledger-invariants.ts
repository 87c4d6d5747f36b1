/**
 * The ledger proving itself on a schedule: the `ledger-invariant-check` Schedule runs
 * `verifyLedger` (src/ledger/invariants.ts) over every organization, records the run for /metrics,
 * and raises `ledger.invariant_broken` to each organization whose ledger it found broken, with the
 * figures, once per distinct finding. `npm run cli -- ledger:verify` runs the same check read-only.
 */
import { createHash } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { Gauge, type Registry } from 'prom-client';
import { emit } from '../events/service';
import { LedgerInvariantCheck } from '../ledger/entities';
import { verifyLedger, type LedgerBreak, type ProjectionCheck } from '../ledger/invariants';
import { openSuspenseItems } from '../ledger/suspense';
import type { Logger } from '../logger';
import { canonicalJson } from '../shared/canonical-json';
import { iso } from '../shared/time';
import { LedgerDrift } from './entities';

export interface LedgerInvariantDeps {
  log: Logger;
  em: () => EntityManager;
  transaction: <T>(work: (em: EntityManager) => Promise<T>) => Promise<T>;
  projections: ProjectionCheck[];
}

export const presentBreak = (broken: LedgerBreak) => ({
  invariant: broken.invariant,
  subject: broken.subject,
  asset: broken.asset,
  ledger: broken.ledger,
  found: broken.found,
});

/**
 * The ledger's invariants (verifyLedger) less the negative balances an open `overdrawn` drift already
 * reports: a reorganisation reversed a deposit the holder had spent, the chain's doing, said to the
 * organization as `ledger.drift` (src/monitoring/suspense.ts); the books are not broken by it. The
 * holder's wallet row is negative with its address's.
 */
export async function ledgerBreaks(em: EntityManager, projections: ProjectionCheck[], organizationId: string | null): Promise<LedgerBreak[]> {
  const found = await verifyLedger(em, projections, organizationId);
  if (!found.some((broken) => broken.invariant === 'negative_balance')) return found;
  const overdrawn = await em.find(LedgerDrift, { figure: 'overdrawn', status: 'open' });
  const acknowledged = new Set(overdrawn.flatMap((drift) => [`wallet_balances:${drift.wallet.id}/${drift.assetId}`, ...(drift.address ? [`address_balances:${drift.address.id}/${drift.assetId}`] : [])]));
  return found.filter((broken) => broken.invariant !== 'negative_balance' || !acknowledged.has(`${broken.subject}/${broken.asset}`));
}

/** Runs the check; `organizationId` narrows it (tests). Returns how many invariants it found broken. */
export async function checkLedgerInvariants(deps: LedgerInvariantDeps, input: { organizationId?: string } = {}): Promise<{ violations: number }> {
  const started = Date.now();
  const found = await ledgerBreaks(deps.em(), deps.projections, input.organizationId ?? null);
  const checkedAt = new Date();
  const byOrganization = new Map<string, LedgerBreak[]>();
  for (const broken of found) {
    const scope = `${broken.organizationId}/${broken.environment}`;
    byOrganization.set(scope, [...(byOrganization.get(scope) ?? []), broken]);
    deps.log.error({ ...presentBreak(broken), organization_id: broken.organizationId, environment: broken.environment }, 'ledger invariant broken');
  }
  await deps.transaction(async (em) => {
    // A run scoped to one organization proves nothing of the others: only a whole run is what /metrics reports.
    if (!input.organizationId) {
      await em.upsert(LedgerInvariantCheck, { id: 'latest', checkedAt, violations: found.length, durationMs: Date.now() - started });
    }
    for (const breaks of byOrganization.values()) {
      const { organizationId, environment } = breaks[0]!;
      const data = { object: 'ledger_invariant_check', checked_at: iso(checkedAt), breaks: breaks.map(presentBreak) };
      // The same findings (figures included) are announced once; a change in them is news.
      const digest = createHash('sha256').update(canonicalJson(data.breaks)).digest('hex').slice(0, 32);
      await emit(em, { organizationId, environment, type: 'ledger.invariant_broken', data, dedupeKey: `ledger.invariant_broken:${environment}:${digest}` });
    }
  });
  return { violations: found.length };
}

/** The last whole check in /metrics, read from PostgreSQL at each scrape (the check runs in the worker). */
export function registerLedgerInvariantMetrics(registry: Registry, em: () => EntityManager): void {
  const latest = () => em().findOne(LedgerInvariantCheck, { id: 'latest' });
  new Gauge({
    name: 'ledger_invariant_violations',
    help: 'Invariants of the double-entry ledger the last check found broken (unbalanced postings, balance rows that differ from their accounts or are negative); 0 when whole',
    registers: [registry],
    async collect() {
      this.reset();
      const check = await latest();
      if (check) this.set(check.violations);
    },
  });
  const suspense = async () => {
    const groups = new Map<string, { environment: string; asset: string; count: number; oldest: Date }>();
    for (const item of await openSuspenseItems(em())) {
      const key = `${item.environment}/${item.assetId}`;
      const group = groups.get(key) ?? { environment: item.environment, asset: item.assetId, count: 0, oldest: item.enteredAt };
      groups.set(key, { ...group, count: group.count + 1, oldest: item.enteredAt < group.oldest ? item.enteredAt : group.oldest });
    }
    return [...groups.values()];
  };
  new Gauge({
    name: 'ledger_suspense_items',
    help: "Rounds of value a reorganisation left in the ledger's suspense that the chain has proven neither mined again nor never to be (npm run cli -- ledger:suspense lists them)",
    labelNames: ['environment', 'asset'],
    registers: [registry],
    async collect() {
      this.reset();
      for (const group of await suspense()) this.set({ environment: group.environment, asset: group.asset }, group.count);
    },
  });
  new Gauge({
    name: 'ledger_suspense_oldest_item_timestamp_seconds',
    help: "When the oldest round still in the ledger's suspense entered it (absent: none): one that stays is a transfer no proof resolves, for an operator",
    labelNames: ['environment', 'asset'],
    registers: [registry],
    async collect() {
      this.reset();
      for (const group of await suspense()) this.set({ environment: group.environment, asset: group.asset }, group.oldest.getTime() / 1000);
    },
  });
  new Gauge({
    name: 'ledger_invariant_last_check_timestamp_seconds',
    help: 'When the ledger invariant check last ran over every organization',
    registers: [registry],
    async collect() {
      this.reset();
      const check = await latest();
      if (check) this.set(check.checkedAt.getTime() / 1000);
    },
  });
}
