import { performance } from 'node:perf_hooks';
import type { EntityManager } from '@mikro-orm/postgresql';
import { createApiKey } from '../../src/api-keys/service';
import { Address } from '../../src/custody/entities';
import { postCustodyEntry } from '../../src/custody/journal';
import { createOrganization } from '../../src/organizations/service';
import { uuid } from '../../src/shared/ids';
import { validCustomer } from './customer';

/**
 * The bursts of issue 53 (item 5), shared by test/load/bursts.test.ts (zero 5xx with a pool of 2) and
 * bench/bursts.ts (their throughput and p99): sandbox organizations with two Ethereum wallets each, a few of
 * them under a velocity rule that blocks most sends and a few funded too thinly for most, a funded card and a
 * Lightning invoice each; then concurrent sends, reads and card authorizations, each answer classified.
 */

/** What a burst needs of the app: a request as the test app (test/support/app.ts) makes one. */
export type Requester = (method: string, path: string, options: { key: string; body?: unknown }) => Promise<{ status: number; body: any; text: string }>;

/** A Requester over HTTP to the service at `url`, for a run outside the suite (bench/bursts.ts). */
export const httpRequester =
  (url: string): Requester =>
  async (method, path, { key, body }) => {
    const response = await fetch(`${url}${path}`, {
      method,
      headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await response.text();
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text);
    } catch {
      // not JSON: keep the text
    }
    return { status: response.status, body: parsed, text };
  };

/** Why an organization's sends are refused, if they are: its velocity rule, or its thin wallets. */
export type SendProfile = 'allowed' | 'velocity' | 'thin';

export interface BurstOrganization {
  organizationId: string;
  secret: string;
  profile: SendProfile;
  wallets: { id: string; address: string; credited: bigint }[];
  /** Empty without cards and invoices (burstOrganizations' `withCards`). */
  cardId: string;
  invoiceId: string;
}

/** Each wallet's credit: enough for every send of an allowed organization; under a thin one, for one send and its fee (at most two). */
const FULL_CREDIT = 10n ** 18n;
const THIN_CREDIT = 25n * 10n ** 13n;
export const SEND_AMOUNT = '0.0001';
/** How many sends in an hour the velocity rule admits before it blocks. */
export const VELOCITY_ADMITS = 2;
export const CARD_FUNDING_CENTS = 1_000;
export const AUTHORIZATION_CENTS = 150;

const profileOf = (index: number): SendProfile => (index % 5 === 0 || index % 5 === 1 ? 'velocity' : index % 5 === 2 ? 'thin' : 'allowed');

/**
 * Makes `organizations` sandbox organizations through the service code the CLI uses (root key; policy activation
 * needing no approval), then through the API their wallets (credited in the ledger, as a deposit would), policies
 * and, `withCards`, company balance, card (waited for until provisioned and funded: a worker must serve the app's
 * task queue) and invoice.
 */
export async function burstOrganizations(
  request: Requester,
  em: () => EntityManager,
  options: { organizations: number; walletsPerOrganization: number; withCards: boolean },
): Promise<BurstOrganization[]> {
  const made = await Promise.all(Array.from({ length: options.organizations }, (_, index) => burstOrganization(request, em, profileOf(index), options, index)));
  if (options.withCards) await Promise.all(made.map(async (org) => waitForCard(request, org)));
  return made;
}

async function burstOrganization(
  request: Requester,
  em: () => EntityManager,
  profile: SendProfile,
  options: { walletsPerOrganization: number; withCards: boolean },
  index: number,
): Promise<BurstOrganization> {
  const setup = em();
  const organization = createOrganization(setup, `Burst ${index} (${profile})`);
  organization.policyActivationRequiredApprovals = 0;
  const { secret } = createApiKey(setup, { organization, name: 'Burst', scopes: ['*'], environment: 'sandbox' });
  await setup.flush();
  const call = async (method: string, path: string, body: unknown, expected: number) => {
    const response = await request(method, path, { key: secret, body });
    if (response.status !== expected) throw new Error(`${method} ${path}: ${response.status} ${response.text}`);
    return response.body;
  };

  const vault = await call('POST', '/v1/vaults', { name: 'Burst' }, 201);
  const credit = profile === 'thin' ? THIN_CREDIT : FULL_CREDIT;
  const wallets: BurstOrganization['wallets'] = [];
  for (let number = 0; number < options.walletsPerOrganization; number += 1) {
    const wallet = await call('POST', '/v1/wallets', { name: `Burst ${number}`, chain: 'ethereum', vault_id: vault.id }, 201);
    await creditWallet(em(), wallet.id, credit);
    wallets.push({ id: wallet.id, address: wallet.primary_address.address, credited: credit });
  }
  if (profile === 'velocity') {
    const policy = await call(
      'POST',
      '/v1/policies',
      {
        name: `${VELOCITY_ADMITS} sends an hour`,
        category: 'velocity',
        rules: [
          { name: 'Block past the limit', action_type: 'block', conditions: [{ field: 'velocity_count_1h', operator: 'greater_than_or_equal', value: String(VELOCITY_ADMITS) }] },
          { name: 'Allow the rest', action_type: 'allow', conditions: [{ field: 'amount', operator: 'greater_than_or_equal', value: '0' }] },
        ],
      },
      201,
    );
    await call('POST', `/v1/policies/${policy.id}/activate`, {}, 200);
  }
  if (!options.withCards) return { organizationId: organization.id, secret, profile, wallets, cardId: '', invoiceId: '' };
  await call('POST', '/v1/sandbox/balances', { currency: 'usd', amount: '50000' }, 200);
  const card = await call('POST', '/api/cards', { amount: CARD_FUNDING_CENTS, card_type: 'virtual', currency: 'USD', name: 'Grace Hopper', customer: validCustomer() }, 201);
  const invoice = await call('POST', '/api/lightning/invoices', { amount: 1500, description: 'burst', reference: uuid() }, 201);
  return { organizationId: organization.id, secret, profile, wallets, cardId: card.data.card.id, invoiceId: invoice.id };
}

/** A wallet's opening balance in ETH on its primary address, as a deposit the scanner credited would leave it. */
export async function creditWallet(em: EntityManager, walletId: string, amount: bigint): Promise<void> {
  const primary = await em.findOneOrFail(Address, { wallet: walletId, isPrimary: true });
  await em.transactional((tx) =>
    postCustodyEntry(tx, { walletId, addressId: primary.id, assetId: 'ETH', kind: 'opening_balance', reference: { type: 'test_credit', id: uuid() }, balance: amount, locked: 0n }),
  );
}

async function waitForCard(request: Requester, org: BurstOrganization): Promise<void> {
  for (const deadline = Date.now() + 120_000; ; ) {
    const card = (await request('GET', `/api/cards/${org.cardId}`, { key: org.secret })).body.data?.card;
    if (card?.status === 'active' && card.balance_amount === String(CARD_FUNDING_CENTS)) return;
    if (Date.now() > deadline) throw new Error(`card ${org.cardId} not active and funded within 120 s: ${JSON.stringify(card)}`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

/** One request of a burst: what it calls, and as which organization. */
export interface BurstRequest {
  org: BurstOrganization;
  method: string;
  path: string;
  body?: unknown;
}

/** `count` sends spread evenly over every wallet, to nobody's address. */
export function sendBurst(orgs: BurstOrganization[], count: number, toAddress: string): BurstRequest[] {
  const wallets = orgs.flatMap((org) => org.wallets.map((wallet) => ({ org, wallet })));
  return Array.from({ length: count }, (_, index) => {
    const { org, wallet } = wallets[index % wallets.length]!;
    return { org, method: 'POST', path: '/v1/transactions', body: { wallet_id: wallet.id, to_address: toAddress, amount: SEND_AMOUNT, asset: 'ETH' } };
  });
}

/** `count` reads in turn of a key, a wallet's balances, a send, a card and an invoice, over every organization. */
export function readBurst(orgs: BurstOrganization[], count: number, transactionIds: Map<string, string[]>): BurstRequest[] {
  return Array.from({ length: count }, (_, index) => {
    const org = orgs[index % orgs.length]!;
    const sent = transactionIds.get(org.organizationId) ?? [];
    const paths = [
      '/v1/api-keys/me',
      `/v1/wallets/${org.wallets[index % org.wallets.length]!.id}/balances`,
      sent.length > 0 ? `/v1/transactions/${sent[index % sent.length]}` : '/v1/transactions',
      `/api/cards/${org.cardId}`,
      `/api/lightning/invoices/${org.invoiceId}`,
    ];
    return { org, method: 'GET', path: paths[Math.floor(index / orgs.length) % paths.length]! };
  });
}

/** `count` sandbox merchant authorizations spread over every organization's card. */
export function authorizationBurst(orgs: BurstOrganization[], count: number): BurstRequest[] {
  return Array.from({ length: count }, (_, index) => {
    const org = orgs[index % orgs.length]!;
    return { org, method: 'POST', path: `/v1/sandbox/cards/${org.cardId}/authorizations`, body: { amount: AUTHORIZATION_CENTS, merchant_name: 'Burst Coffee' } };
  });
}

export interface BurstAnswer {
  request: BurstRequest;
  status: number;
  body: any;
  text: string;
  ms: number;
}

/** Every request at once; the answers in the requests' order, each with its latency, and the burst's wall time. */
export async function fire(request: Requester, requests: BurstRequest[]): Promise<{ answers: BurstAnswer[]; seconds: number }> {
  const started = performance.now();
  const answers = await Promise.all(
    requests.map(async (burst) => {
      const at = performance.now();
      const response = await request(burst.method, burst.path, { key: burst.org.secret, ...(burst.body === undefined ? {} : { body: burst.body }) });
      return { request: burst, ...response, ms: performance.now() - at };
    }),
  );
  return { answers, seconds: (performance.now() - started) / 1000 };
}

/** The error code of a refusal, in the contract's envelope (`error.code`). */
export const refusalCode = (answer: BurstAnswer): string | undefined => (typeof answer.body?.error?.code === 'string' ? answer.body.error.code : undefined);

/** What an answer was: done (2xx), refused with its reason (4xx naming the contract's code), or neither (a 5xx, or a 4xx without a code). */
export function outcomeOf(answer: BurstAnswer): 'done' | `refused ${string}` | `failed ${number}` {
  if (answer.status >= 200 && answer.status < 300) return 'done';
  const code = refusalCode(answer);
  if (answer.status >= 400 && answer.status < 500 && code) return `refused ${code}`;
  return `failed ${answer.status}`;
}

/** Requests per second and the 99th percentile latency of a burst. */
export function burstFigures({ answers, seconds }: { answers: BurstAnswer[]; seconds: number }): { requests: number; requests_per_second: number; latency_p99_ms: number } {
  const sorted = answers.map((answer) => answer.ms).sort((a, b) => a - b);
  const p99 = sorted[Math.min(sorted.length - 1, Math.ceil(sorted.length * 0.99) - 1)] ?? 0;
  return { requests: answers.length, requests_per_second: answers.length / seconds, latency_p99_ms: p99 };
}
