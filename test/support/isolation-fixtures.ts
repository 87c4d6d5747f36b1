import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { ConsolidationRun, ConsolidationSweep } from '../../src/consolidation/entities';
import { Organization } from '../../src/organizations/entities';
import { createMember } from '../../src/organizations/service';
import { operatorMember, type TestApp, type TestOrganization, type TestResponse } from './app';
import { validCustomer } from './cards';
import { clientKey, signClientTransfer } from './client-transfers';
import { testOrm } from './environment';
import { creditCustodyWallet } from './ledger';
import { eventually } from './eventually';

/**
 * One organization's resources, each made through the API with one key (so in that key's
 * environment): what the isolation matrix points other keys at.
 */
export interface IsolationFixtures {
  vault: string;
  wallet: string;
  address: string;
  /** A pending deposit to the wallet (the sandbox deposit helper). */
  deposit: string;
  /** A send from the wallet (credited on the ledger directly: its fate on the devnet does not matter here). */
  transaction: string;
  /** The ethereum gas station, auto-refill off (its balance stays 0). */
  gasStation: string;
  sponsorBroadcast: string;
  /** An ethereum address-book entry. */
  addressBookEntry: string;
  webhook: string;
  subscription: string;
  /** A delivery event (`POST /v1/webhooks/:id/test`), delivered. */
  event: string;
  /** A draft policy with two rules. */
  policy: string;
  rule: string;
  /** A policy waiting for one approval, and its approval request. */
  pendingPolicy: string;
  approvalRequest: string;
  card: string;
  customer: string;
  /** The card's funding transaction, settled. */
  funding: string;
  /** An incoming Lightning invoice (pending) and an outgoing payment (paid). */
  invoice: string;
  payment: string;
  /** A spare API key of the organization. */
  apiKey: string;
  /** A manual consolidation rule of the vault (into another vault), its run (completed, nothing to move) and a sweep of that run (written with the ORM). */
  consolidationRule: string;
  consolidationRun: string;
  consolidationSweep: string;
  /** A payout trip (awaiting its deposit) with its reference, and a quote no trip has used. */
  payoutTrip: string;
  payoutReference: string;
  payoutQuote: string;
  /** Amounts credited to the company balances. */
  usdCredit: string;
  satCredit: string;
}

/** Fails with the response when the status is not the expected one: a fixture mistake, not an isolation finding. */
export function expectStatus(response: TestResponse, status: number, what: string): TestResponse {
  assert.equal(response.status, status, `fixture ${what}: ${response.status} ${response.text}`);
  return response;
}

/** How many approvals the organization's policy activations need (set directly: there is no API for it). */
export async function setRequiredApprovals(organizationId: string, count: number): Promise<void> {
  const em = (await testOrm()).em.fork();
  await em.nativeUpdate(Organization, { id: organizationId }, { policyActivationRequiredApprovals: count });
}

const allowRest = { name: 'Allow the rest', action_type: 'allow', conditions: [{ field: 'amount', operator: 'greater_than_or_equal', value: '0' }] };
const blockAbove = (value: string) => ({ name: `Block above ${value}`, action_type: 'block', conditions: [{ field: 'amount', operator: 'greater_than', value }] });

/**
 * Every kind of resource, made in `org` with `secret` (a sandbox key with scope `*`). Waits until
 * the asynchronous ones are settled (card active, funding completed, payment paid, delivery
 * delivered), so that nothing changes on its own afterwards.
 */
export async function buildFixtures(app: TestApp, org: TestOrganization, webhookUrl: string): Promise<IsolationFixtures> {
  const key = org.secret;
  const call = (method: string, path: string, body?: unknown) => app.request(method, path, { key, body });

  const vault = expectStatus(await call('POST', '/v1/vaults', { name: 'Isolation vault' }), 201, 'vault').body.id as string;
  const wallet = expectStatus(await call('POST', '/v1/wallets', { name: 'Isolation wallet', chain: 'ethereum', vault_id: vault }), 201, 'wallet').body;
  const address = expectStatus(await call('POST', `/v1/wallets/${wallet.id}/addresses`, { label: 'second' }), 201, 'address').body;
  const deposit = expectStatus(await call('POST', '/v1/sandbox/deposits', { chain: 'ethereum', address: wallet.primary_address.address, asset: 'ETH', amount: '0.01' }), 201, 'deposit').body
    .deposit.id as string;
  await creditCustodyWallet((await testOrm()).em.fork(), wallet.id, 'ETH', 10n ** 16n);
  const transaction = expectStatus(
    await call('POST', '/v1/transactions', { wallet_id: wallet.id, to_address: '0x000000000000000000000000000000000000dEaD', amount: '0.001', asset: 'ETH' }),
    201,
    'transaction',
  ).body.id as string;

  const station = expectStatus(await call('POST', '/v1/gas-stations', { name: 'Isolation station', chain: 'ethereum', threshold: '0.5' }), 201, 'gas station').body;
  const gasStation = station.id as string;
  // The station's ledger holds the fee (its fuel send then fails on the chain, which holds nothing: the sponsorship stays, failed).
  await creditCustodyWallet((await testOrm()).em.fork(), station.wallet_id, 'ETH', 10n ** 16n);
  const client = clientKey('ethereum');
  const signed = await signClientTransfer(await app.deps.chains.provider('ethereum', 'sandbox'), 'ethereum', client, '0x000000000000000000000000000000000000dEaD', 'ETH', 10n ** 12n);
  const sponsorBroadcast = expectStatus(
    await call('POST', '/v1/gas-stations/sponsor-broadcast', {
      from_address: client.address,
      to_address: '0x000000000000000000000000000000000000dEaD',
      asset: 'ETH',
      amount: '0.000001',
      network: 'sepolia',
      signed_tx: signed.raw,
    }),
    202,
    'sponsor broadcast',
  ).body.id as string;

  const addressBookEntry = expectStatus(
    await call('POST', '/v1/address-book', { chain: 'ethereum', address: '0x000000000000000000000000000000000000dEaD', label: 'Isolation destination' }),
    201,
    'address book entry',
  ).body.id as string;

  const webhook = expectStatus(await call('POST', '/v1/webhooks', { name: 'Isolation endpoint', url: webhookUrl, event_types: ['webhook.test'] }), 201, 'webhook').body.id as string;
  const subscription = expectStatus(
    await call('POST', '/v1/subscriptions', { address: address.address, chain: 'ethereum', webhook_url: webhookUrl, label: 'watched' }),
    201,
    'subscription',
  ).body.id as string;
  const event = expectStatus(await call('POST', `/v1/webhooks/${webhook}/test`), 201, 'test event').body.id as string;

  const policy = expectStatus(await call('POST', '/v1/policies', { name: 'Isolation draft', rules: [blockAbove('100'), allowRest] }), 201, 'policy').body;
  // One approval needed, one approver who could give it: activation by the root key waits for them.
  await setRequiredApprovals(org.organizationId, 1);
  // Added by the operator (as `npm run cli -- member:create` does): a member the requester added would not count as independent.
  const memberEm = (await testOrm()).em.fork();
  await createMember(memberEm, memberEm.getReference(Organization, org.organizationId), {
    name: 'Isolation approver',
    email: `approver-${randomUUID()}@example.com`,
    org_role: 'approver',
  });
  await memberEm.flush();
  const pendingPolicy = expectStatus(await call('POST', '/v1/policies', { name: 'Isolation pending', rules: [blockAbove('5'), allowRest] }), 201, 'pending policy').body.id as string;
  const activation = expectStatus(await call('POST', `/v1/policies/${pendingPolicy}/activate`, { comment: 'isolation' }), 202, 'activation');

  const usdCredit = '123456';
  expectStatus(await call('POST', '/v1/sandbox/balances', { currency: 'USD', amount: usdCredit }), 200, 'USD credit');
  const created = expectStatus(
    await call('POST', '/api/cards', { amount: 0, card_type: 'virtual', currency: 'USD', name: 'Ada Lovelace', customer: validCustomer() }),
    201,
    'card',
  ).body.data;
  const card = created.card.id as string;
  await eventually(async () => ((await call('GET', `/api/cards/${card}`)).body.data.card.status === 'active' ? true : undefined), 'card to become active');
  const funding = expectStatus(await call('POST', `/api/cards/${card}/balance`, { type: 'fund', amount: 1000, reference: randomUUID() }), 200, 'funding').body.data
    .transaction.id as string;
  await eventually(async () => {
    const listed = (await call('GET', `/api/cards/${card}/transactions`)).body.data.transactions as { id: string; status: string }[];
    return listed.find((transaction) => transaction.id === funding && transaction.status !== 'pending');
  }, 'card funding to settle');

  const satCredit = '20000';
  expectStatus(await call('POST', '/v1/sandbox/balances', { currency: 'BTC', amount: satCredit }), 200, 'sat credit');
  const invoice = expectStatus(await call('POST', '/api/lightning/invoices', { amount: 1500, description: 'isolation', reference: randomUUID() }), 201, 'invoice').body
    .id as string;
  const remote = expectStatus(await call('POST', '/v1/sandbox/lightning/invoices', { node: 'ok', amount: 1000 }), 201, 'remote invoice').body.request as string;
  const payment = expectStatus(await call('POST', '/api/lightning/payments', { request: remote, reference: randomUUID() }), 201, 'payment').body.data.id as string;
  await eventually(async () => ((await call('GET', `/api/lightning/payments/${payment}`)).body.data.status === 'paid' ? true : undefined), 'payment to be paid');

  await eventually(async () => ((await call('GET', `/v1/events/${event}`)).body.delivery_status === 'delivered' ? true : undefined), 'test event to be delivered');
  // Minted by a key acting for the owner: keys minted through the API act for a member.
  const owner = await operatorMember(org.organizationId);
  const apiKey = expectStatus(await app.request('POST', '/v1/api-keys', { key: owner.secret, body: { name: 'Isolation spare', scopes: ['cards:read'] } }), 201, 'api key').body.id as string;

  const treasury = expectStatus(await call('POST', '/v1/vaults', { name: 'Isolation treasury' }), 201, 'treasury vault').body.id as string;
  expectStatus(await call('POST', '/v1/wallets', { name: 'Isolation treasury', chain: 'ethereum', vault_id: treasury }), 201, 'treasury wallet');
  const consolidationRule = expectStatus(
    await call('POST', '/v1/consolidation/rules', {
      vault_id: vault,
      chain: 'ethereum',
      destination_type: 'vault',
      destination_vault_id: treasury,
      trigger_type: 'manual',
      gas_source: 'wallet',
      // Nothing to move: the run completes at once, and the fixtures stay as they are read.
      assets: [{ is_native: true, min_amount_to_move: '1000' }],
    }),
    201,
    'consolidation rule',
  ).body.id as string;
  const consolidationRun = expectStatus(await call('POST', `/v1/consolidation/rules/${consolidationRule}/runs`), 202, 'consolidation run').body.id as string;
  await eventually(
    async () => ((await call('GET', `/v1/consolidation/runs/${consolidationRun}`)).body.status === 'completed' ? true : undefined),
    'the consolidation run to complete',
  );
  const sweepEm = (await testOrm()).em.fork();
  const run = await sweepEm.findOneOrFail(ConsolidationRun, { id: consolidationRun }, { populate: ['rule'] });
  const sweep = sweepEm.create(ConsolidationSweep, {
    organization: run.organization,
    environment: run.environment,
    rule: run.rule,
    run,
    chain: 'ethereum',
    network: run.network,
    wallet: wallet.id,
    sourceAddress: address.id,
    destinationAddress: '0x000000000000000000000000000000000000dEaD',
    assetId: 'ETH',
    amount: '1000',
    gasSource: 'wallet',
    status: 'planned',
  });
  await sweepEm.flush();

  const payoutQuote = async () =>
    expectStatus(await call('POST', '/payouts/quotes', { fromAsset: 'USDT', chain: 'tron', amount: '100', toCurrency: 'NGN', country: 'NG', paymentMethod: 'bank' }), 201, 'payout quote').body
      .quoteId as string;
  const payoutReference = `isolation-${randomUUID()}`;
  const payoutTrip = expectStatus(
    await call('POST', '/payouts/initialize', {
      quoteId: await payoutQuote(),
      reference: payoutReference,
      beneficiary: { type: 'bank', accountNumber: '0123456789', bankCode: '058', accountName: 'Ada Obi' },
    }),
    201,
    'payout trip',
  ).body.tripId as string;

  return {
    vault,
    wallet: wallet.id,
    address: address.id,
    deposit,
    transaction,
    gasStation,
    sponsorBroadcast,
    addressBookEntry,
    webhook,
    subscription,
    event,
    policy: policy.id,
    rule: policy.rules[0].id,
    pendingPolicy,
    approvalRequest: activation.body.approval_request_id,
    card,
    customer: created.customer.id,
    funding,
    invoice,
    payment,
    apiKey,
    consolidationRule,
    consolidationRun,
    consolidationSweep: sweep.id,
    payoutTrip,
    payoutReference,
    payoutQuote: await payoutQuote(),
    usdCredit,
    satCredit,
  };
}
