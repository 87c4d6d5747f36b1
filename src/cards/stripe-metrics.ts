import type { EntityManager } from '@mikro-orm/postgresql';
import { Counter, Gauge, type Registry } from 'prom-client';

/** Stripe Issuing's counters in /metrics (the API's registry): made once per registry, at start, so they read 0 before the first. */
export interface StripeIssuingMetrics {
  /** Authorization requests declined because the pool, the card's lock or the database did not answer within the decision's budget. */
  decisionTimeouts: Counter;
}

const made = new WeakMap<Registry, StripeIssuingMetrics>();

export function stripeIssuingMetrics(registry: Registry): StripeIssuingMetrics {
  let metrics = made.get(registry);
  if (!metrics) {
    metrics = {
      decisionTimeouts: new Counter({
        name: 'stripe_issuing_authorization_timeouts_total',
        help: "Stripe Issuing authorization requests declined because a database connection, the card's lock or the database did not let them be decided within STRIPE_ISSUING_DECISION_TIMEOUT_MS",
        registers: [registry],
      }),
    };
    made.set(registry, metrics);
  }
  return metrics;
}

/**
 * The Stripe Issuing reconciliation's open drifts in /metrics, by subject (authorization,
 * issuing_balance), read from PostgreSQL at each scrape: the worker reconciles, the API serves them.
 */
export function registerCardIssuerDriftMetrics(registry: Registry, em: () => EntityManager): void {
  new Gauge({
    name: 'stripe_issuing_drifts',
    help: "Open differences between Stripe Issuing and the live cards (an authorization's held amount against the card's charge; the Issuing balance short of what cards may spend)",
    labelNames: ['subject'],
    registers: [registry],
    async collect() {
      this.reset();
      const rows = await em().execute<{ subject: string; count: string }[]>(`select subject, count(*)::text as count from card_issuer_drifts where status = 'open' group by subject`);
      for (const row of rows) this.set({ subject: row.subject }, Number(row.count));
    },
  });
}

/**
 * The calls Stripe refused for the platform's key, by the permission it lacks (`authentication`: a key Stripe does not
 * take), read from PostgreSQL at each scrape (the worker makes the calls, the API serves /metrics): any increase is
 * an operator's to act on (docs/cards.md).
 */
export function registerStripeKeyRefusalMetrics(registry: Registry, em: () => EntityManager): void {
  new Counter({
    name: 'stripe_issuing_key_refusals_total',
    help: 'Stripe Issuing calls Stripe refused for STRIPE_ISSUING_SECRET_KEY, by the permission the restricted key lacks (authentication: a key Stripe does not take)',
    labelNames: ['permission'],
    registers: [registry],
    async collect() {
      this.reset();
      const rows = await em().execute<{ permission: string; refusals: number }[]>(`select permission, refusals from stripe_issuing_key_refusals`);
      for (const row of rows) this.inc({ permission: row.permission }, row.refusals);
    },
  });
}
