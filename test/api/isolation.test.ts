import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { ServiceWorkers as Worker } from '../../src/worker-setup';
import { grants, SCOPES, type Scope } from '../../src/api-keys/scopes';
import { createTestOrganization, startTestApp, type TestApp, type TestOrganization, type TestResponse } from '../support/app';
import { localTemporal } from '../support/environment';
import { buildFixtures, expectStatus, type IsolationFixtures } from '../support/isolation-fixtures';
import { assertLedgerReconciles } from '../support/ledger';
import { validCustomer } from '../support/cards';
import { eventually } from '../support/eventually';
import { recordLiveInvoice } from '../support/live-invoices';
import { WebhookReceiver } from '../support/webhook-receiver';
import { needStripeMock, startStripeMockIfInstalled, type StripeMock } from '../support/stripe-mock';
import { createTestWorker } from '../support/worker';

/**
 * The isolation matrix (issue 11), generated from the route registry: for every route that names
 * a resource, organization B's key and organization A's key of the other environment get 404
 * `resource_missing` on A's resource, and a key of A without the route's scope gets 403
 * `insufficient_scope`. Every registered operation must have a row, so a new route without one
 * fails the first test.
 */

type F = IsolationFixtures;

interface ResourceRow {
  kind: 'resource';
  /** The route's path with A's ids filled in. */
  path: (f: F) => string;
  /** A valid body, so that a 404 comes from tenancy, not validation. */
  body?: (f: F) => unknown;
  /** A GET that A's own key answers 200 while the resource is there (checked before the cells). */
  probe: (f: F) => string;
}

interface CollectionRow {
  kind: 'collection';
  reason: string;
  /** A list to read with the other keys: it must not show A's ids (A's list does). */
  list?: (f: F) => string;
  /** The listed records belong to the organization (members, roles): only another organization must not see them. */
  organizationWide?: boolean;
  /** Requests of this route that name A's resources in their body: other keys get 404. */
  references?: (f: F) => unknown;
}

interface OtherRow {
  kind: 'public' | 'sandbox-only' | 'self';
  reason: string;
  /** sandbox-only: a valid body, sent to the live key (which must get 404 all the same). */
  body?: () => unknown;
}

type Row = ResourceRow | CollectionRow | OtherRow;

const card = (suffix = '') => (f: F) => `/api/cards/${f.card}${suffix}`;
const cardProbe = (f: F) => `/api/cards/${f.card}`;
const webhook = (suffix = '') => (f: F) => `/v1/webhooks/${f.webhook}${suffix}`;
const subscription = (suffix = '') => (f: F) => `/v1/subscriptions/${f.subscription}${suffix}`;
const consolidationRule = (suffix = '') => (f: F) => `/v1/consolidation/rules/${f.consolidationRule}${suffix}`;
const consolidationRun = (suffix = '') => (f: F) => `/v1/consolidation/runs/${f.consolidationRun}${suffix}`;
const policy = (suffix = '') => (f: F) => `/v1/policies/${f.policy}${suffix}`;
const payoutTrip = (suffix = '', prefix = '') => (f: F) => `${prefix}/payouts/trips/${f.payoutTrip}${suffix}`;
const rule = (f: F) => `/v1/policies/${f.policy}/rules/${f.rule}`;
const policyProbe = (f: F) => `/v1/policies/${f.policy}`;
const pendingProbe = (f: F) => `/v1/policies/${f.pendingPolicy}`;
const publicRoute = (reason: string): OtherRow => ({ kind: 'public', reason });
const legacy = publicRoute('removed /api/virtualcards route: 410 for everyone, reads nothing');
const catalogue = (reason = 'catalogue: the same static data for every key'): CollectionRow => ({ kind: 'collection', reason });
const created = (reason: string, references?: CollectionRow['references']): CollectionRow => ({ kind: 'collection', reason, ...(references ? { references } : {}) });
const listed = (list: (f: F) => string, organizationWide = false): CollectionRow => ({ kind: 'collection', reason: 'lists the caller\'s own records', list, organizationWide });
const allowRule = { name: 'Intruder rule', action_type: 'allow', conditions: [{ field: 'amount', operator: 'greater_than_or_equal', value: '0' }] };

/**
 * Every registered operation, keyed by `${METHOD} ${path}`. Rows that change or remove a resource
 * come last, so that a gap in one of them cannot hide the others (each resource row first checks
 * that A's own key still sees the resource).
 */
const MATRIX: Record<string, Row> = {
  // Operations and documentation
  'GET /healthz': publicRoute('liveness, no resource'),
  'GET /readyz': publicRoute('readiness, no resource'),
  'GET /metrics': publicRoute('Prometheus metrics, no tenant data'),
  'GET /openapi.json': publicRoute('the API document'),
  'GET /docs': publicRoute('the rendered reference'),
  'GET /docs/assets/:file': publicRoute('static files of the reference'),
  'POST /api/issuing/stripe/authorizations': publicRoute("Stripe Issuing's authorization webhook: signed by Stripe, no key; finds only the live card Stripe names, in the organization its metadata names"),
  'POST /api/issuing/stripe/events': publicRoute("Stripe Issuing's event webhook: signed by Stripe, no key; moves only the live card Stripe names, in the organization its metadata names"),

  // Keys, members, catalogue, balances
  'GET /v1/api-keys/me': { kind: 'self', reason: 'introspects the calling key itself; names no other resource' },
  'POST /v1/api-keys': created('creates a key of the caller\'s organization'),
  'GET /v1/api-keys': listed(() => '/v1/api-keys?limit=100'),
  'POST /v1/members': created('creates a member of the caller\'s organization'),
  'GET /v1/members': listed(() => '/v1/members?limit=100', true),
  'GET /v1/roles': listed(() => '/v1/roles?limit=100', true),
  'GET /v1/organization/settings': created("reads the caller's own organization's settings; names no other resource"),
  'PATCH /v1/organization/settings': created("changes the caller's own organization's settings; names no other resource"),
  'GET /v1/governance/log': listed(() => '/v1/governance/log?limit=100'),
  'GET /v1/chains': catalogue(),
  'GET /v1/chains/:chain': catalogue('catalogue: the param is a chain name, not a tenant resource'),
  'GET /v1/chains/:chain/fees': catalogue('network fees: chain data, the same for every key of an environment'),
  'POST /v1/rpc/:chain': catalogue('pass-through to the environment\'s chain node: no tenant resource'),
  'GET /assets': catalogue(),
  'GET /v1/assets': catalogue(),
  'GET /v1/balances': listed(() => '/v1/balances'),
  'POST /v1/sandbox/balances': { kind: 'sandbox-only', reason: 'credits the caller\'s own sandbox balance', body: () => ({ currency: 'USD', amount: '1' }) },

  // Custody
  'POST /v1/vaults': created('creates a vault of the caller'),
  'GET /v1/vaults': listed(() => '/v1/vaults?limit=100'),
  'GET /v1/vaults/:id': { kind: 'resource', path: (f) => `/v1/vaults/${f.vault}`, probe: (f) => `/v1/vaults/${f.vault}` },
  'POST /v1/wallets': created('creates a wallet of the caller; names a vault in its body', (f) => ({ name: 'Intruder wallet', chain: 'ethereum', vault_id: f.vault })),
  'POST /v1/transactions/estimate-fee': created("estimates a send from the wallet named in the body; stores nothing", (f) => ({ wallet_id: f.wallet, to_address: '0x000000000000000000000000000000000000dEaD', amount: '0.001', asset: 'ETH' })),
  'POST /v1/transactions': created('sends from the wallet named in the body', (f) => ({ wallet_id: f.wallet, to_address: '0x000000000000000000000000000000000000dEaD', amount: '0.001', asset: 'ETH' })),
  'GET /v1/transactions': listed(() => '/v1/transactions?limit=100'),
  'GET /v1/transactions/:id': { kind: 'resource', path: (f) => `/v1/transactions/${f.transaction}`, probe: (f) => `/v1/transactions/${f.transaction}` },
  'POST /v1/transactions/:id/speed-up': { kind: 'resource', path: (f) => `/v1/transactions/${f.transaction}/speed-up`, body: () => ({}), probe: (f) => `/v1/transactions/${f.transaction}` },
  'POST /v1/transactions/:id/cancel': { kind: 'resource', path: (f) => `/v1/transactions/${f.transaction}/cancel`, body: () => ({}), probe: (f) => `/v1/transactions/${f.transaction}` },
  'POST /v1/gas-stations': created('creates the caller\'s station; names a refill wallet in its body', (f) => ({ name: 'Intruder station', chain: 'ethereum', threshold: '1', refill_from_wallet_id: f.wallet })),
  'GET /v1/gas-stations': listed(() => '/v1/gas-stations?limit=100'),
  'GET /v1/gas-stations/:id': { kind: 'resource', path: (f) => `/v1/gas-stations/${f.gasStation}`, probe: (f) => `/v1/gas-stations/${f.gasStation}` },
  'PATCH /v1/gas-stations/:id': { kind: 'resource', path: (f) => `/v1/gas-stations/${f.gasStation}`, body: () => ({ name: 'Renamed by an intruder' }), probe: (f) => `/v1/gas-stations/${f.gasStation}` },
  'POST /v1/gas-stations/:id/refill': {
    kind: 'resource',
    path: (f) => `/v1/gas-stations/${f.gasStation}/refill`,
    body: (f) => ({ source_wallet_id: f.wallet, amount: '0.001' }),
    probe: (f) => `/v1/gas-stations/${f.gasStation}`,
  },
  'POST /v1/gas-stations/:id/take-over': { kind: 'resource', path: (f) => `/v1/gas-stations/${f.gasStation}/take-over`, probe: (f) => `/v1/gas-stations/${f.gasStation}` },
  'POST /v1/gas-stations/sponsor-broadcast': created("sponsors a client-signed transaction from the caller's own station; its body names no resource"),
  'GET /v1/gas-stations/sponsor-broadcasts/:id': {
    kind: 'resource',
    path: (f) => `/v1/gas-stations/sponsor-broadcasts/${f.sponsorBroadcast}`,
    probe: (f) => `/v1/gas-stations/sponsor-broadcasts/${f.sponsorBroadcast}`,
  },
  'POST /v1/address-book': created("adds an entry to the caller's book; its body names no resource"),
  'GET /v1/address-book': listed(() => '/v1/address-book?limit=100'),
  'GET /v1/address-book/:id': { kind: 'resource', path: (f) => `/v1/address-book/${f.addressBookEntry}`, probe: (f) => `/v1/address-book/${f.addressBookEntry}` },
  'POST /v1/consolidation/rules': created("creates a rule of the caller; names vaults in its body", (f) => ({
    vault_id: f.vault,
    chain: 'ethereum',
    destination_type: 'vault',
    destination_vault_id: f.vault,
    trigger_type: 'manual',
    gas_source: 'wallet',
  })),
  'GET /v1/consolidation/rules': listed(() => '/v1/consolidation/rules?limit=100'),
  'GET /v1/consolidation/rules/:id': { kind: 'resource', path: consolidationRule(), probe: consolidationRule() },
  'PATCH /v1/consolidation/rules/:id': { kind: 'resource', path: consolidationRule(), body: () => ({ min_consolidate_usd: '1' }), probe: consolidationRule() },
  'POST /v1/consolidation/rules/:id/take-over': { kind: 'resource', path: consolidationRule('/take-over'), probe: consolidationRule() },
  'POST /v1/consolidation/rules/:id/runs': { kind: 'resource', path: consolidationRule('/runs'), probe: consolidationRule() },
  'GET /v1/consolidation/runs': listed(() => '/v1/consolidation/runs?limit=100'),
  'GET /v1/consolidation/runs/:id': { kind: 'resource', path: consolidationRun(), probe: consolidationRun() },
  'GET /v1/consolidation/runs/:id/sweeps': { kind: 'resource', path: consolidationRun('/sweeps'), probe: consolidationRun() },
  'GET /v1/consolidation/sweeps/:id': { kind: 'resource', path: (f) => `/v1/consolidation/sweeps/${f.consolidationSweep}`, probe: (f) => `/v1/consolidation/sweeps/${f.consolidationSweep}` },
  'GET /v1/wallets': listed((f) => `/v1/wallets?vault_id=${f.vault}&limit=100`),
  'GET /v1/wallets/:id': { kind: 'resource', path: (f) => `/v1/wallets/${f.wallet}`, probe: (f) => `/v1/wallets/${f.wallet}` },
  'GET /v1/wallets/:id/balances': { kind: 'resource', path: (f) => `/v1/wallets/${f.wallet}/balances`, probe: (f) => `/v1/wallets/${f.wallet}` },
  'POST /v1/wallets/:id/addresses': {
    kind: 'resource',
    path: (f) => `/v1/wallets/${f.wallet}/addresses`,
    body: () => ({ label: 'intruder' }),
    probe: (f) => `/v1/wallets/${f.wallet}`,
  },
  'GET /v1/wallets/:id/addresses': { kind: 'resource', path: (f) => `/v1/wallets/${f.wallet}/addresses`, probe: (f) => `/v1/wallets/${f.wallet}` },
  'GET /v1/addresses/:id': { kind: 'resource', path: (f) => `/v1/addresses/${f.address}`, probe: (f) => `/v1/addresses/${f.address}` },
  'POST /v1/wallets/:id/sign': {
    kind: 'resource',
    path: (f) => `/v1/wallets/${f.wallet}/sign`,
    body: (f) => ({ payload: 'intruder', payload_encoding: 'text_utf8', address_id: f.address }),
    probe: (f) => `/v1/wallets/${f.wallet}`,
  },

  // Deposits and the devnet helpers
  'GET /v1/deposits': listed(() => '/v1/deposits?limit=100'),
  'GET /v1/deposits/:id': { kind: 'resource', path: (f) => `/v1/deposits/${f.deposit}`, probe: (f) => `/v1/deposits/${f.deposit}` },
  'POST /v1/sandbox/deposits': {
    kind: 'sandbox-only',
    reason: 'sends from the devnet faucet to any address, as a chain lets anyone pay anyone; names no record',
    body: () => ({ chain: 'bitcoin', address: 'tb1qw508d6qejxtdg4y5r3zarvary0c5xw7kxpjzsx', asset: 'BTC', amount: '0.0001' }),
  },
  'POST /v1/sandbox/chains/:chain/blocks': { kind: 'sandbox-only', reason: 'mines devnet blocks; names no record', body: () => ({ count: 1 }) },

  // Webhooks, subscriptions, events
  'GET /v1/webhooks/event-types': catalogue(),
  'POST /v1/webhooks': created('creates an endpoint of the caller'),
  'GET /v1/webhooks': listed(() => '/v1/webhooks?limit=100'),
  'GET /v1/webhooks/:id': { kind: 'resource', path: webhook(), probe: webhook() },
  'PATCH /v1/webhooks/:id': { kind: 'resource', path: webhook(), body: () => ({ name: 'Renamed by an intruder' }), probe: webhook() },
  'POST /v1/webhooks/:id/rotate-secret': { kind: 'resource', path: webhook('/rotate-secret'), probe: webhook() },
  'POST /v1/webhooks/:id/test': { kind: 'resource', path: webhook('/test'), probe: webhook() },
  'POST /v1/subscriptions': created('creates a subscription of the caller'),
  'GET /v1/subscriptions': listed(() => '/v1/subscriptions?limit=100'),
  'GET /v1/subscriptions/:id': { kind: 'resource', path: subscription(), probe: subscription() },
  'PATCH /v1/subscriptions/:id': { kind: 'resource', path: subscription(), body: () => ({ label: 'renamed by an intruder' }), probe: subscription() },
  'POST /v1/subscriptions/:id/rotate-secret': { kind: 'resource', path: subscription('/rotate-secret'), probe: subscription() },
  'GET /v1/events': listed((f) => `/v1/events?webhook_id=${f.webhook}&limit=100`),
  'GET /v1/events/:id': { kind: 'resource', path: (f) => `/v1/events/${f.event}`, probe: (f) => `/v1/events/${f.event}` },
  'POST /v1/events/:id/retry': { kind: 'resource', path: (f) => `/v1/events/${f.event}/retry`, probe: (f) => `/v1/events/${f.event}` },

  // Policies
  'GET /v1/policies/schema': catalogue(),
  'GET /v1/policies/approver-candidates': listed(() => '/v1/policies/approver-candidates', true),
  'GET /v1/policy-templates': catalogue(),
  'POST /v1/policies/validate': created('validates a draft given in the body; stores nothing'),
  'POST /v1/policies/evaluate': created('evaluates the caller\'s policies, or the one named in the body', (f) => ({ policy_id: f.policy, amount: '1' })),
  'POST /v1/policies': created('creates a draft of the caller, or a copy of the one named in the body', (f) => ({ source_policy_id: f.policy })),
  'GET /v1/policies': listed(() => '/v1/policies?limit=100'),
  'GET /v1/policies/:id': { kind: 'resource', path: policy('?expand=rules'), probe: policyProbe },
  'PATCH /v1/policies/:id': { kind: 'resource', path: policy(), body: () => ({ name: 'Renamed by an intruder' }), probe: policyProbe },
  'POST /v1/policies/:id/rules': { kind: 'resource', path: policy('/rules'), body: () => allowRule, probe: policyProbe },
  'PATCH /v1/policies/:id/rules/:ruleId': { kind: 'resource', path: rule, body: () => ({ name: 'Renamed by an intruder' }), probe: policyProbe },
  'POST /v1/policies/:id/validate': { kind: 'resource', path: policy('/validate'), probe: policyProbe },
  'POST /v1/policies/:id/simulate': { kind: 'resource', path: policy('/simulate'), body: () => ({ requests: [{ amount: '1' }] }), probe: policyProbe },
  'GET /v1/policies/:id/audit-logs': { kind: 'resource', path: policy('/audit-logs'), probe: policyProbe },
  'GET /v1/approval-requests': listed(() => '/v1/approval-requests?limit=100'),
  'GET /v1/approval-requests/:id': { kind: 'resource', path: (f) => `/v1/approval-requests/${f.approvalRequest}`, probe: (f) => `/v1/approval-requests/${f.approvalRequest}` },
  'POST /v1/approval-requests/:id/approve': {
    kind: 'resource',
    path: (f) => `/v1/approval-requests/${f.approvalRequest}/approve`,
    body: () => ({ comment: 'intruder' }),
    probe: pendingProbe,
  },

  // Cards
  'POST /api/cards': created('creates a card of the caller'),
  'GET /api/cards': listed(() => '/api/cards?limit=100'),
  'GET /api/cards/:cardId': { kind: 'resource', path: card(), probe: cardProbe },
  'GET /api/cards/:cardId/secure': { kind: 'resource', path: card('/secure'), probe: cardProbe },
  'GET /api/cards/:cardId/transactions': { kind: 'resource', path: card('/transactions'), probe: cardProbe },
  // Payouts
  'POST /payouts/quotes': created("prices a payout for the caller; names no resource"),
  'POST /payouts/initialize': created("starts a trip from the caller's quote; names the quote in its body", (f) => ({
    quoteId: f.payoutQuote,
    reference: `intruder-${f.payoutQuote}`,
    beneficiary: { type: 'bank', accountNumber: '0123456789', bankCode: '058', accountName: 'Ada Obi' },
  })),
  'GET /payouts': listed(() => '/payouts?limit=100'),
  'GET /payouts/trips/:tripId': { kind: 'resource', path: payoutTrip(), probe: payoutTrip() },
  'GET /payouts/fetch/:reference': { kind: 'resource', path: (f) => `/payouts/fetch/${f.payoutReference}`, probe: payoutTrip() },
  'POST /v1/sandbox/payouts/trips/:tripId/deposit': { kind: 'resource', path: payoutTrip('/deposit', '/v1/sandbox'), body: () => ({ amount: '1' }), probe: payoutTrip() },
  'POST /v1/sandbox/payouts/trips/:tripId/outcome': { kind: 'resource', path: payoutTrip('/outcome', '/v1/sandbox'), body: () => ({ outcome: 'failed' }), probe: payoutTrip() },
  'PUT /api/cards/:cardId/spend-limits': { kind: 'resource', path: card('/spend-limits'), body: () => ({ daily: 1 }), probe: cardProbe },
  'POST /api/cards/:cardId/balance': { kind: 'resource', path: card('/balance'), body: () => ({ type: 'withdraw', amount: 1, reference: randomUUID() }), probe: cardProbe },
  'POST /api/cards/:cardId/fund': { kind: 'resource', path: card('/fund'), body: () => ({ amount: 1, reference: randomUUID() }), probe: cardProbe },
  'POST /api/cards/:cardId/withdraw': { kind: 'resource', path: card('/withdraw'), body: () => ({ amount: 1, reference: randomUUID() }), probe: cardProbe },
  'POST /api/cards/:cardId/status': { kind: 'resource', path: card('/status'), body: () => ({ status: 'frozen' }), probe: cardProbe },
  'POST /api/cards/:cardId/freeze': { kind: 'resource', path: card('/freeze'), probe: cardProbe },
  'POST /api/cards/:cardId/unfreeze': { kind: 'resource', path: card('/unfreeze'), probe: cardProbe },
  'GET /api/customers/:customerId': { kind: 'resource', path: (f) => `/api/customers/${f.customer}`, probe: (f) => `/api/customers/${f.customer}` },
  'GET /api/customers/:customerId/cards': { kind: 'resource', path: (f) => `/api/customers/${f.customer}/cards`, probe: (f) => `/api/customers/${f.customer}` },
  'POST /v1/sandbox/cards/:cardId/authorizations': { kind: 'resource', path: (f) => `/v1/sandbox/cards/${f.card}/authorizations`, body: () => ({ amount: 1 }), probe: cardProbe },
  'POST /api/virtualcards': legacy,
  'GET /api/virtualcards': legacy,
  'GET /api/virtualcards/:cardId': legacy,
  'GET /api/virtualcards/:cardId/details': legacy,
  'POST /api/virtualcards/:cardId/topup': legacy,
  'POST /api/virtualcards/:cardId/withdraw': legacy,
  'POST /api/virtualcards/:cardId/freeze': legacy,
  'POST /api/virtualcards/:cardId/unfreeze': legacy,
  'POST /api/virtualcards/:cardId/terminate': legacy,
  'POST /api/virtualcards/:cardId/spending-limits': legacy,

  // Lightning
  'POST /api/lightning/invoices': created('creates an invoice of the caller'),
  'GET /api/lightning/invoices': listed(() => '/api/lightning/invoices?page_size=100'),
  'GET /api/lightning/invoices/:id': { kind: 'resource', path: (f) => `/api/lightning/invoices/${f.invoice}`, probe: (f) => `/api/lightning/invoices/${f.invoice}` },
  'POST /api/lightning/decode': created('decodes the string in the body; reads no record'),
  'POST /api/lightning/payments/initiate': created('previews paying the string in the body from the caller\'s balance'),
  'POST /api/lightning/payments': created('pays from the caller\'s balance'),
  'GET /api/lightning/payments/:id': { kind: 'resource', path: (f) => `/api/lightning/payments/${f.payment}`, probe: (f) => `/api/lightning/payments/${f.payment}` },
  'POST /v1/sandbox/lightning/invoices': { kind: 'sandbox-only', reason: 'issues a remote node\'s invoice; reads no record', body: () => ({ node: 'ok', amount: 1 }) },
  'POST /v1/sandbox/lightning/invoices/:id/pay': {
    kind: 'resource',
    path: (f) => `/v1/sandbox/lightning/invoices/${f.invoice}/pay`,
    probe: (f) => `/api/lightning/invoices/${f.invoice}`,
  },

  // Last: rows that end or remove a resource.
  'POST /v1/policies/:id/activate': { kind: 'resource', path: policy('/activate'), body: () => ({ comment: 'intruder' }), probe: policyProbe },
  'POST /v1/approval-requests/:id/reject': {
    kind: 'resource',
    path: (f) => `/v1/approval-requests/${f.approvalRequest}/reject`,
    body: () => ({ comment: 'intruder' }),
    probe: pendingProbe,
  },
  'DELETE /v1/policies/:id/rules/:ruleId': { kind: 'resource', path: rule, probe: policyProbe },
  'DELETE /v1/policies/:id': { kind: 'resource', path: policy(), probe: policyProbe },
  'DELETE /v1/webhooks/:id': { kind: 'resource', path: webhook(), probe: webhook() },
  'DELETE /v1/consolidation/rules/:id': { kind: 'resource', path: consolidationRule(), probe: consolidationRule() },
  'DELETE /v1/subscriptions/:id': { kind: 'resource', path: subscription(), probe: subscription() },
  'POST /v1/address-book/:id/approval-requests': {
    kind: 'resource',
    path: (f) => `/v1/address-book/${f.addressBookEntry}/approval-requests`,
    body: () => ({ comment: 'intruder' }),
    probe: (f) => `/v1/address-book/${f.addressBookEntry}`,
  },
  'DELETE /v1/address-book/:id': { kind: 'resource', path: (f) => `/v1/address-book/${f.addressBookEntry}`, probe: (f) => `/v1/address-book/${f.addressBookEntry}` },
  'DELETE /api/cards/:cardId': { kind: 'resource', path: card(), body: () => ({ reason: 'intruder' }), probe: cardProbe },
  'POST /api/cards/:cardId/terminate': { kind: 'resource', path: card('/terminate'), body: () => ({ reason: 'intruder' }), probe: cardProbe },
  'POST /v1/api-keys/:id/confirm': { kind: 'resource', path: (f) => `/v1/api-keys/${f.apiKey}/confirm`, probe: () => '/v1/api-keys/me' },
  // A key sees and touches only its environment's keys (issue 47): a live admin key cannot revoke a sandbox key.
  'DELETE /v1/api-keys/:id': { kind: 'resource', path: (f) => `/v1/api-keys/${f.apiKey}`, probe: () => '/v1/api-keys/me' },
};

interface Operation {
  scopes: Scope[] | 'authenticated' | 'public';
  sandboxOnly: boolean;
}

/** What the OpenAPI document says of each operation: its required scopes, and whether it is a sandbox helper. */
function operationsOf(document: any): Map<string, Operation> {
  const operations = new Map<string, Operation>();
  for (const [path, methods] of Object.entries<Record<string, any>>(document.paths)) {
    for (const [method, operation] of Object.entries(methods)) {
      const key = `${method.toUpperCase()} ${path.replace(/\{([A-Za-z0-9_]+)\}/g, ':$1')}`;
      const sandboxOnly = (operation.tags as string[]).includes('Sandbox');
      if (Array.isArray(operation.security) && operation.security.length === 0) {
        operations.set(key, { scopes: 'public', sandboxOnly });
        continue;
      }
      const required = /Required scope: (.+)\.$/.exec(operation.description ?? '')?.[1];
      assert.ok(required, `${key}: no "Required scope" in its description`);
      const scopes = required === 'any valid key' ? 'authenticated' : [...required.matchAll(/`([^`]+)`/g)].map((match) => match[1] as Scope);
      operations.set(key, { scopes, sandboxOnly });
    }
  }
  return operations;
}

/** A scope that grants none of `required`, preferably of another domain. */
function scopeWithout(required: Scope[]): Scope {
  const domains = new Set(required.map((scope) => scope.split(':')[0]));
  const candidates = SCOPES.filter((scope) => scope !== '*' && required.every((needed) => !grants([scope], needed)));
  const chosen = candidates.find((scope) => !domains.has(scope.split(':')[0])) ?? candidates[0];
  assert.ok(chosen, `no scope lacks ${required.join(', ')}`);
  return chosen;
}

/** Response fields that change from one read to the next by themselves. */
const VOLATILE = new Set(['request_id', 'timestamp', 'last_used_at']);

/** The response with what changes from one read to the next (request ids, response times, key usage) removed. */
function stable(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(stable);
  if (value && typeof value === 'object') {
    return Object.fromEntries(
      Object.entries(value)
        .filter(([name]) => !VOLATILE.has(name))
        .map(([name, inner]) => [name, stable(inner)]),
    );
  }
  return value;
}

const describeResponse = (response: TestResponse) => `${response.status} ${response.body?.error?.code ?? response.text.slice(0, 160)}`;

describe('Isolation matrix: organizations, environments and scopes on every route', function () {
  this.timeout(120_000);
  let app: TestApp;
  let worker: Worker;
  let running: Promise<void>;
  let receiver: WebhookReceiver;
  let orgA: TestOrganization;
  let orgB: TestOrganization;
  let liveKey: string;
  let stripeMock: StripeMock | null;
  let fixtures: F;
  let operations: Map<string, Operation>;
  /** A's own resources as A's key reads them, right after they were made. */
  let snapshot: Map<string, unknown>;
  const scopedKeys = new Map<Scope, string>();
  /** Every failing (route, key) cell, printed at the end for whoever merges the environment filters. */
  const findings: string[] = [];

  const snapshotPaths = (f: F) => [
    `/v1/vaults/${f.vault}`,
    `/v1/wallets/${f.wallet}`,
    `/v1/wallets/${f.wallet}/balances`,
    `/v1/wallets/${f.wallet}/addresses`,
    `/v1/addresses/${f.address}`,
    `/v1/gas-stations/${f.gasStation}`,
    `/v1/address-book/${f.addressBookEntry}`,
    `/v1/consolidation/rules/${f.consolidationRule}`,
    `/v1/consolidation/runs/${f.consolidationRun}`,
    `/v1/consolidation/sweeps/${f.consolidationSweep}`,
    `/v1/webhooks/${f.webhook}`,
    `/v1/subscriptions/${f.subscription}`,
    `/v1/events/${f.event}`,
    `/v1/events?webhook_id=${f.webhook}`,
    `/v1/policies/${f.policy}?expand=rules`,
    `/v1/policies/${f.policy}/audit-logs`,
    `/v1/policies/${f.pendingPolicy}?expand=rules`,
    `/v1/policies/${f.pendingPolicy}/audit-logs`,
    `/api/cards/${f.card}`,
    `/api/cards/${f.card}/transactions`,
    `/api/customers/${f.customer}`,
    `/api/customers/${f.customer}/cards`,
    `/api/lightning/invoices/${f.invoice}`,
    `/api/lightning/payments/${f.payment}`,
    '/api/lightning/invoices?page_size=100',
    '/v1/balances',
    `/payouts/trips/${f.payoutTrip}`,
    `/payouts/fetch/${f.payoutReference}`,
  ];

  async function readSnapshot(): Promise<Map<string, unknown>> {
    const read = new Map<string, unknown>();
    for (const path of snapshotPaths(fixtures)) {
      const response = await app.request('GET', path, { key: orgA.secret });
      read.set(path, { status: response.status, body: stable(response.body) });
    }
    return read;
  }

  async function keyWithout(required: Scope[]): Promise<string> {
    const scope = scopeWithout(required);
    if (!scopedKeys.has(scope)) scopedKeys.set(scope, (await orgA.key([scope])).secret);
    return scopedKeys.get(scope)!;
  }

  before(async function () {
    this.timeout(180_000);
    const taskQueue = `isolation-${randomUUID()}`;
    // Live cards are minted by Stripe Issuing: stripe-mock stands in for it.
    stripeMock = await startStripeMockIfInstalled();
    app = await startTestApp({ config: { TEMPORAL_TASK_QUEUE: taskQueue, RATE_LIMIT_PER_SECOND: '1000', RATE_LIMIT_BURST: '1000', ...stripeMock?.config } });
    ({ worker } = await createTestWorker(await localTemporal(), taskQueue, stripeMock?.config));
    running = worker.run();
    receiver = await new WebhookReceiver().start();
    orgA = await createTestOrganization('Isolation A');
    orgB = await createTestOrganization('Isolation B');
    liveKey = (await orgA.key(['*'], 'live')).secret;
    operations = operationsOf(expectStatus(await app.request('GET', '/openapi.json'), 200, 'openapi').body);
    fixtures = await buildFixtures(app, orgA, receiver.url);
    snapshot = await readSnapshot();
  });
  after(async () => {
    if (findings.length > 0) console.log(`\nIsolation cells failing (${findings.length}):\n  ${findings.join('\n  ')}\n`);
    worker?.shutdown();
    await running;
    await receiver?.close();
    await app?.close();
    await stripeMock?.stop();
  });

  it('has a row for every registered operation, and no row for a route that does not exist', () => {
    const registered = app.operations.map((operation) => `${operation.method.toUpperCase()} ${operation.path}`);
    const missing = registered.filter((key) => !(key in MATRIX));
    assert.deepEqual(missing, [], `routes missing from the isolation matrix: add a row for each`);
    const stale = Object.keys(MATRIX).filter((key) => !registered.includes(key));
    assert.deepEqual(stale, [], 'rows for routes that are not registered');
    assert.deepEqual([...operations.keys()].sort(), [...registered].sort(), 'the OpenAPI document lists exactly the registered operations');
    for (const [key, row] of Object.entries(MATRIX)) {
      const operation = operations.get(key)!;
      assert.equal(row.kind === 'public', operation.scopes === 'public', `${key}: public in the matrix iff public in the registry`);
      assert.equal(row.kind === 'self', operation.scopes === 'authenticated', `${key}: only the introspection route admits any key`);
      if (row.kind === 'sandbox-only') assert.ok(operation.sandboxOnly, `${key}: marked sandbox-only but not a sandbox helper`);
      if (operation.sandboxOnly) assert.ok(row.kind === 'sandbox-only' || row.kind === 'resource', `${key}: a sandbox helper must be checked`);
    }
    // Every resource of the fixtures is named by some row (the funding through its card's transactions, the pending policy through its approval request).
    const paths = Object.values(MATRIX).flatMap((row) => (row.kind === 'resource' ? [row.path(fixtures)] : []));
    for (const [name, id] of Object.entries(fixtures)) {
      if (['funding', 'pendingPolicy', 'usdCredit', 'satCredit', 'payoutQuote'].includes(name)) continue;
      assert.ok(paths.some((path) => path.includes(id)), `no row reaches the fixture ${name}`);
    }
  });

  for (const [key, row] of Object.entries(MATRIX)) {
    if (row.kind === 'public' || row.kind === 'self') continue;
    const [method, routePath] = key.split(' ') as [string, string];

    const checks = row.kind !== 'resource' ? row.kind : 'another organization 404, the other environment 404';
    it(`${key}: ${checks}, no scope 403`, async () => {
      const operation = operations.get(key);
      assert.ok(operation && Array.isArray(operation.scopes), `${key}: no scope in the registry`);
      const failures: string[] = [];
      const cell = async (who: string, secret: string, path: string, body: unknown, expected: number, codes: string[]) => {
        const response = await app.request(method, path, { key: secret, ...(body === undefined ? {} : { body }) });
        if (response.status !== expected || !codes.includes(response.body?.error?.code)) {
          failures.push(`${key} [${who}]: expected ${expected} ${codes.join('|')}, got ${describeResponse(response)}`);
        }
      };

      if (row.kind === 'resource') {
        const probe = await app.request('GET', row.probe(fixtures), { key: orgA.secret });
        assert.equal(probe.status, 200, `A's own key no longer sees the resource of ${key} (${row.probe(fixtures)}): an earlier cell changed it`);
        const path = row.path(fixtures);
        const body = row.body?.(fixtures);
        await cell('key without scope', await keyWithout(operation.scopes as Scope[]), path, body, 403, ['insufficient_scope']);
        await cell('organization B', orgB.secret, path, body, 404, ['resource_missing']);
        await cell('A live key', liveKey, path, row.body?.(fixtures), 404, operation.sandboxOnly ? ['resource_missing', 'unknown_route'] : ['resource_missing']);
      } else if (row.kind === 'sandbox-only') {
        const body = row.body?.();
        await cell('key without scope', await keyWithout(operation.scopes as Scope[]), routePath, body, 403, ['insufficient_scope']);
        await cell('A live key', liveKey, routePath, body, 404, ['unknown_route']);
      } else if (row.kind === 'collection') {
        const path = row.list ? row.list(fixtures) : routePath;
        const body = method === 'GET' ? undefined : {};
        await cell('key without scope', await keyWithout(operation.scopes as Scope[]), path, body, 403, ['insufficient_scope']);
        if (row.list) {
          // Positive control: A's own key lists them, so their absence below means something.
          const own = await app.request('GET', path, { key: orgA.secret });
          assert.equal(own.status, 200, `${key}: A's own list ${describeResponse(own)}`);
          const ids = Object.entries(fixtures).filter(([name]) => name !== 'usdCredit' && name !== 'satCredit');
          if (!row.organizationWide && key !== 'GET /v1/balances') assert.ok(ids.some(([, id]) => own.text.includes(id)), `${key}: A's own list shows none of A's ids`);
          for (const [who, secret] of [
            ['organization B', orgB.secret],
            ['A live key', liveKey],
          ] as const) {
            const response = await app.request('GET', path, { key: secret });
            if (response.status !== 200) {
              failures.push(`${key} [${who}]: expected 200, got ${describeResponse(response)}`);
              continue;
            }
            // Members and roles are the organization's (the fixtures name none); nothing of A's may show.
            const seen = ids.filter(([, id]) => response.text.includes(id));
            if (seen.length > 0) failures.push(`${key} [${who}]: lists A's ${seen.map(([name]) => name).join(', ')}`);
            if (key === 'GET /v1/balances') {
              const nonZero = (response.body.data as { currency: string; available: string; reserved: string }[]).filter(
                (balance) => balance.available !== '0' || balance.reserved !== '0',
              );
              if (nonZero.length > 0) failures.push(`${key} [${who}]: shows A's sandbox money ${JSON.stringify(nonZero)}`);
            }
          }
        }
        if (row.references) {
          const body = row.references(fixtures);
          await cell('organization B (id in body)', orgB.secret, routePath, body, 404, ['resource_missing']);
          await cell('A live key (id in body)', liveKey, routePath, body, 404, ['resource_missing']);
        }
      }
      findings.push(...failures);
      assert.deepEqual(failures, [], failures.join('\n'));
    });
  }

  it("leaves A's resources as they were: nothing another key called changed them", async () => {
    const now = await readSnapshot();
    const changed = [...snapshot.keys()].filter((path) => {
      try {
        assert.deepEqual(now.get(path), snapshot.get(path));
        return false;
      } catch {
        return true;
      }
    });
    const keys = await app.request('GET', '/v1/api-keys?limit=100', { key: orgA.secret });
    const spareKept = (keys.body.data as { id: string }[]).some((key) => key.id === fixtures.apiKey);
    const failures = [
      ...changed.map((path) => `GET ${path}: changed\n    before ${JSON.stringify(snapshot.get(path))}\n    after  ${JSON.stringify(now.get(path))}`),
      ...(spareKept ? [] : ["A's spare API key was revoked by another organization's key"]),
    ];
    findings.push(...failures.map((failure) => failure.split('\n')[0]!));
    await assertLedgerReconciles(orgA.organizationId);
    await assertLedgerReconciles(orgB.organizationId);
    assert.deepEqual(failures, [], failures.join('\n'));
  });
  it("sandbox helpers never reach a live record: A's sandbox key gets 404 on A's live card and live invoice", async function () {
    needStripeMock(this, stripeMock);
    const liveCall = (method: string, path: string, body?: unknown) => app.request(method, path, { key: liveKey, ...(body ? { body } : {}) });
    const card = expectStatus(
      await liveCall('POST', '/api/cards', { amount: 0, card_type: 'virtual', currency: 'USD', name: 'Live Ada', customer: validCustomer() }),
      201,
      'live card',
    ).body.data.card.id as string;
    // Active, so that its secure details exist and an authorization would be decided on its merits.
    await eventually(async () => ((await liveCall('GET', `/api/cards/${card}`)).body.data?.card?.status === 'active' ? true : undefined), 'live card to become active');
    // The API issues no live invoice without a live LND (503 lightning_node_unavailable): the record is made as the service makes it.
    const invoice = await recordLiveInvoice(app, orgA.organizationId);
    assert.ok(invoice.request.startsWith('lnbc'), 'a live invoice is a mainnet one');

    const failures: string[] = [];
    for (const [method, path, body] of [
      ['POST', `/v1/sandbox/cards/${card}/authorizations`, { amount: 1 }],
      ['POST', `/v1/sandbox/lightning/invoices/${invoice.id}/pay`, undefined],
      ['GET', `/api/cards/${card}`, undefined],
      ['GET', `/api/cards/${card}/secure`, undefined],
      ['GET', `/api/lightning/invoices/${invoice.id}`, undefined],
    ] as const) {
      for (const [who, secret] of [
        ['A sandbox key', orgA.secret],
        ['organization B', orgB.secret],
      ] as const) {
        const response = await app.request(method, path, { key: secret, ...(body ? { body } : {}) });
        if (response.status !== 404 || response.body?.error?.code !== 'resource_missing') {
          const route = `${method} ${path.replace(card, ':liveCardId').replace(invoice.id, ':liveInvoiceId')}`;
          failures.push(`${route} [${who}]: expected 404 resource_missing, got ${describeResponse(response)}`);
        }
      }
    }
    const liveInvoice = (await liveCall('GET', `/api/lightning/invoices/${invoice.id}`)).body.data;
    if (liveInvoice.status !== 'pending') failures.push(`live invoice: a sandbox helper moved it to ${liveInvoice.status}`);
    const liveTransactions = (await liveCall('GET', `/api/cards/${card}/transactions`)).body.data.transactions as unknown[];
    if (liveTransactions.length > 0) failures.push(`live card: a sandbox authorization left ${liveTransactions.length} transaction(s) on it`);
    for (const balance of (await liveCall('GET', '/v1/balances')).body.data as { currency: string; available: string; reserved: string }[]) {
      if (balance.available !== '0' || balance.reserved !== '0') failures.push(`live ${balance.currency} balance moved: available ${balance.available}, reserved ${balance.reserved}`);
    }
    findings.push(...failures);
    assert.deepEqual(failures, [], failures.join('\n'));
  });

  it("an Idempotency-Key of one environment never replays the other's response", async () => {
    const idempotencyKey = randomUUID();
    const body = { name: 'Idempotent vault' };
    const sandbox = expectStatus(await app.request('POST', '/v1/vaults', { key: orgA.secret, body, headers: { 'idempotency-key': idempotencyKey } }), 201, 'sandbox vault');
    const failures: string[] = [];
    for (const [who, secret] of [
      ['A live key', liveKey],
      ['organization B', orgB.secret],
    ] as const) {
      const response = await app.request('POST', '/v1/vaults', { key: secret, body, headers: { 'idempotency-key': idempotencyKey } });
      if (response.status !== 201 || response.headers.get('idempotent-replayed') === 'true' || response.body.id === sandbox.body.id) {
        failures.push(`POST /v1/vaults with A sandbox's Idempotency-Key [${who}]: expected a new vault, got ${describeResponse(response)} replayed=${response.headers.get('idempotent-replayed')}`);
      }
    }
    findings.push(...failures);
    assert.deepEqual(failures, [], failures.join('\n'));
  });
});
