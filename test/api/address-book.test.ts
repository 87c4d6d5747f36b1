import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { CHAIN_IDS } from '../../src/catalogue/service';
import { devnetBlocksWorkflowId } from '../../src/chains/flows/devnet-blocks';
import { ConsolidationRule } from '../../src/consolidation/entities';
import { Vault } from '../../src/custody/entities';
import { Event } from '../../src/events/entities';
import { chainScanWorkflowId } from '../../src/monitoring/flows/chain-scan';
import { createApiKey } from '../../src/api-keys/service';
import { Organization, type OrgRole } from '../../src/organizations/entities';
import { createMember } from '../../src/organizations/service';
import type { ServiceWorkers as Worker } from '../../src/worker-setup';
import { createTestOrganization, startTestApp, type TestApp, type TestOrganization } from '../support/app';
import { localTemporal, testOrm } from '../support/environment';
import { creditCustodyWallet } from '../support/ledger';
import { setRequiredApprovals } from '../support/isolation-fixtures';
import { terminateWorkflows } from '../support/scanning';
import { bodyOf, typedApi, type Schema, type TypedApi } from '../support/typed-api';
import { createTestWorker } from '../support/worker';

/** Sepolia addresses as a user might type them (lower case); the API answers them EIP-55. */
const KRAKEN = '0x52908400098527886e0f7030069857d2e4169ee7';
const KRAKEN_EIP55 = '0x52908400098527886E0F7030069857D2E4169EE7';
const COLD = '0x8617e340b3d01fa5f11f306f4090fd50e238070d';
const COLD_EIP55 = '0x8617E340B3D01FA5F11F306F4090FD50E238070D';
const STRANGER = '0x27b1fdb04752bbc536007a920d24acb045561c26';
const TESTNET_BECH32 = 'tb1qw508d6qejxtdg4y5r3zarvary0c5xw7kxpjzsx';
const MAINNET_BECH32 = 'bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4';
const HOUR = 3_600_000;

/**
 * The address book through the real API and PostgreSQL; whitelist policies deciding real sends on the Ethereum devnet.
 * Valid requests go through the client typed from /openapi.json (test/support/typed-api.ts); deliberately bad ones
 * through the untyped `call`, since the types would refuse them.
 */
describe('Address book: named destinations, and whitelist policies that name them', () => {
  let app: TestApp;
  let org: TestOrganization;
  let other: TestOrganization;
  let api: TypedApi;
  /** Sends are recorded with their workflows on a queue no worker polls: only the policy decision matters here. */
  const taskQueue = `address-book-${randomUUID()}`;
  const startedWorkflows: string[] = [];

  before(async () => {
    app = await startTestApp({ config: { TEMPORAL_TASK_QUEUE: taskQueue } });
    org = await createTestOrganization('Address book');
    other = await createTestOrganization('Address book, other');
    api = typedApi(app, org.secret);
  });
  after(async () => {
    await terminateWorkflows((await localTemporal()).client, [
      ...startedWorkflows,
      ...CHAIN_IDS.flatMap((chain) => [devnetBlocksWorkflowId(chain), chainScanWorkflowId(chain, 'sandbox')]),
    ]);
    await app?.close();
  });

  const call = (method: string, path: string, body?: unknown, key = org.secret) => app.request(method, path, { key, body });
  async function create(body: Schema<'CreateAddressBookEntryRequest'>, key = org.secret) {
    return bodyOf(await api.call('post', '/v1/address-book', { body, key }), 201);
  }
  const read = async (id: string, key = org.secret) => api.call('get', '/v1/address-book/{id}', { path: { id }, key });
  const list = async (query: { limit?: number; cursor?: string; chain?: Schema<'AddressBookEntry'>['chain'] } = {}, key = org.secret) =>
    bodyOf(await api.call('get', '/v1/address-book', { query, key }), 200);
  function assertRefused(response: { status: number; body: any; text: string }, status: number, code: string, param?: string) {
    assert.equal(response.status, status, response.text);
    assert.equal(response.body.error.code, code, response.text);
    if (param !== undefined) assert.equal(response.body.error.param, param, response.text);
  }

  /** A consolidation rule of `owner` sweeping to `entryId`, written directly (the rules API is built elsewhere). */
  async function insertRule(owner: TestOrganization, entryId: string, state: { deletedAt?: Date; activeRunId?: string } = {}) {
    const vault = await call('POST', '/v1/vaults', { name: 'Swept vault' }, owner.secret);
    assert.equal(vault.status, 201, vault.text);
    const em = (await testOrm()).em.fork();
    const rule = em.create(ConsolidationRule, {
      organization: em.getReference(Organization, owner.organizationId),
      environment: 'sandbox',
      vault: em.getReference(Vault, vault.body.id),
      chain: 'ethereum',
      network: 'sepolia',
      destinationType: 'address_book',
      destinationAddressBook: entryId,
      gasSource: 'wallet',
      assets: [],
      triggerType: 'manual',
      deletedAt: state.deletedAt ?? null,
      activeRunId: state.activeRunId ?? null,
    });
    await em.flush();
    return rule.id;
  }
  const ruleDestination = async (ruleId: string) =>
    (await (await testOrm()).em.fork().findOneOrFail(ConsolidationRule, { id: ruleId })).destinationAddressBook?.id ?? null;

  describe('the resource', () => {
    let kraken: Schema<'AddressBookEntry'>;

    it('adds an entry with its address in canonical form and the environment\'s network', async () => {
      kraken = await create({ chain: 'ethereum', address: KRAKEN, label: '  Kraken deposit ' });
      assert.equal(kraken.object, 'address_book_entry');
      assert.equal(kraken.chain, 'ethereum');
      assert.equal(kraken.network, 'sepolia');
      assert.equal(kraken.address, KRAKEN_EIP55);
      assert.equal(kraken.label, 'Kraken deposit');
      assert.ok(kraken.created_at && kraken.updated_at);
      assert.equal(kraken.usable_at, kraken.created_at, 'sandbox: no cooling period by default');
      assert.deepEqual(bodyOf(await read(kraken.id), 200), kraken);

      const bitcoin = await create({ chain: 'bitcoin', address: TESTNET_BECH32.toUpperCase(), label: 'Cold BTC' });
      assert.deepEqual([bitcoin.address, bitcoin.network], [TESTNET_BECH32, 'testnet']);
    });

    it('refuses an address that is not one of the chain on the environment\'s network, a bad chain, a bad label', async () => {
      assertRefused(await call('POST', '/v1/address-book', { chain: 'ethereum', address: '0x1234', label: 'Short' }), 400, 'validation_failed', 'address');
      assertRefused(await call('POST', '/v1/address-book', { chain: 'ethereum', address: TESTNET_BECH32, label: 'Wrong chain' }), 400, 'validation_failed', 'address');
      // A mainnet address for a sandbox key: the sandbox's network is the testnet.
      assertRefused(await call('POST', '/v1/address-book', { chain: 'bitcoin', address: MAINNET_BECH32, label: 'Mainnet' }), 400, 'validation_failed', 'address');
      assertRefused(await call('POST', '/v1/address-book', { chain: 'dogecoin', address: KRAKEN, label: 'Doge' }), 400, 'validation_failed', 'chain');
      assertRefused(await call('POST', '/v1/address-book', { chain: 'ethereum', address: COLD, label: '   ' }), 400, 'validation_failed', 'label');
      assertRefused(await call('POST', '/v1/address-book', { chain: 'ethereum', address: COLD, label: 'x'.repeat(256) }), 400, 'validation_failed', 'label');
      assertRefused(await call('POST', '/v1/address-book', { chain: 'ethereum', address: COLD, label: 'Extra', network: 'mainnet' }), 400, 'validation_failed');
    });

    it('one entry per chain and address in an environment: the same address in another case is 409 naming the first', async () => {
      const again = await call('POST', '/v1/address-book', { chain: 'ethereum', address: KRAKEN_EIP55, label: 'Kraken again' });
      assertRefused(again, 409, 'address_book_entry_exists');
      assert.equal(again.body.error.details.address_book_entry_id, kraken.id);
      // Concurrent creations of one new address: one entry, the others 409.
      const racing = await Promise.all(Array.from({ length: 4 }, (_, index) => call('POST', '/v1/address-book', { chain: 'ethereum', address: COLD, label: `Cold ${index}` })));
      assert.deepEqual(racing.map((response) => response.status).sort(), [201, 409, 409, 409], racing.map((response) => response.text).join('\n'));
      // Another organization, and the other environment of this one, keep books of their own.
      assert.equal((await create({ chain: 'ethereum', address: KRAKEN, label: 'Theirs' }, other.secret)).address, KRAKEN_EIP55);
      const live = await create({ chain: 'ethereum', address: KRAKEN, label: 'Live Kraken' }, (await org.key(['custody:write'], 'live')).secret);
      assert.equal(live.network, 'mainnet');
      assert.equal(Date.parse(live.usable_at) - Date.parse(live.created_at), 24 * HOUR, 'live: a new payee waits 24 h by default');
    });

    it('lists newest first in cursor pages, filtered by ?chain=, only the caller\'s environment', async () => {
      const all = await list({ limit: 100 });
      const labels = all.data.map((entry) => entry.label);
      assert.equal(labels.length, 3);
      assert.ok(labels[0].startsWith('Cold '), labels.join());
      assert.deepEqual(labels.slice(1), ['Cold BTC', 'Kraken deposit']);
      assert.equal(all.has_more, false);

      const first = await list({ limit: 2 });
      assert.deepEqual([first.data.length, first.has_more], [2, true]);
      assert.ok(first.next_cursor);
      const second = await list({ limit: 2, cursor: first.next_cursor });
      assert.deepEqual(
        [...first.data, ...second.data].map((entry) => entry.id),
        all.data.map((entry) => entry.id),
      );
      assert.equal(second.has_more, false);

      assert.deepEqual((await list({ chain: 'bitcoin' })).data.map((entry) => entry.label), ['Cold BTC']);
      assert.deepEqual((await list({ chain: 'solana' })).data, []);
      assertRefused(await call('GET', '/v1/address-book?chain=dogecoin'), 400, 'validation_failed', 'chain');

      assert.deepEqual((await list({ limit: 100 }, other.secret)).data.map((entry) => entry.label), ['Theirs']);
    });

    it('another organization\'s or environment\'s entry is 404 resource_missing, for reading and deleting', async () => {
      const live = (await org.key(['*'], 'live')).secret;
      for (const key of [other.secret, live]) {
        assertRefused(await read(kraken.id, key), 404, 'resource_missing');
        assertRefused(await api.call('delete', '/v1/address-book/{id}', { path: { id: kraken.id }, key }), 404, 'resource_missing');
      }
      assertRefused(await read('not-an-id'), 404, 'resource_missing');
      assertRefused(await read(randomUUID()), 404, 'resource_missing');
      assert.equal((await read(kraken.id)).status, 200);
    });

    it('reads need custody:read, writes custody:write', async () => {
      const reader = (await org.key(['custody:read'])).secret;
      assert.equal((await api.call('get', '/v1/address-book', { key: reader })).status, 200);
      assert.equal((await read(kraken.id, reader)).status, 200);
      assertRefused(await api.call('post', '/v1/address-book', { body: { chain: 'ethereum', address: STRANGER, label: 'No' }, key: reader }), 403, 'insufficient_scope');
      assertRefused(await api.call('delete', '/v1/address-book/{id}', { path: { id: kraken.id }, key: reader }), 403, 'insufficient_scope');
    });

    it('refuses to delete an entry a consolidation rule sweeps to (409 with the rule ids, nothing changes); deletes it once the rule is deleted', async () => {
      const live = await insertRule(org, kraken.id);
      const running = await insertRule(org, kraken.id, { deletedAt: new Date(), activeRunId: randomUUID() });
      const finished = await insertRule(org, kraken.id, { deletedAt: new Date() });
      const remove = async (id: string) => api.call('delete', '/v1/address-book/{id}', { path: { id } });
      const refused = bodyOf(await remove(kraken.id), 409);
      assert.equal(refused.error.code, 'address_book_entry_in_use');
      assert.deepEqual([...(refused.error.details.rule_ids as string[])].sort(), [live, running].sort());
      assert.equal((await read(kraken.id)).status, 200);
      assert.equal(await ruleDestination(finished), kraken.id);

      const em = (await testOrm()).em.fork();
      await em.nativeUpdate(ConsolidationRule, { id: live }, { deletedAt: new Date() });
      await em.nativeUpdate(ConsolidationRule, { id: running }, { activeRunId: null });
      const deleted: Schema<'DeletedAddressBookEntry'> = bodyOf(await remove(kraken.id), 200);
      assert.deepEqual(deleted, { ...kraken, deleted: true });
      assertRefused(await read(kraken.id), 404, 'resource_missing');
      assertRefused(await remove(kraken.id), 404, 'resource_missing');
      // The deleted rules keep their runs but no longer point at the entry.
      for (const rule of [live, running, finished]) assert.equal(await ruleDestination(rule), null);
      // The address may be added again.
      assert.equal((await create({ chain: 'ethereum', address: KRAKEN, label: 'Kraken, new account' })).address, KRAKEN_EIP55);
    });
  });

  describe('whitelist policies', () => {
    let guarded: TestOrganization;
    let wallet: string;
    let cold: Schema<'AddressBookEntry'>;
    let kraken: Schema<'AddressBookEntry'>;

    const send = (to: string) => call('POST', '/v1/transactions', { wallet_id: wallet, to_address: to, amount: '0.001', asset: 'ETH' }, guarded.secret);
    async function createPolicy(body: Record<string, unknown>, key = guarded.secret) {
      const created = await call('POST', '/v1/policies', body, key);
      assert.equal(created.status, 201, created.text);
      return created.body;
    }
    const allowRest = { name: 'Allow the rest', action_type: 'allow', conditions: [{ field: 'amount', operator: 'greater_than_or_equal', value: '0' }] };

    before(async () => {
      guarded = await createTestOrganization('Address book, whitelist');
      await setRequiredApprovals(guarded.organizationId, 0);
      const vault = await call('POST', '/v1/vaults', { name: 'Treasury' }, guarded.secret);
      const created = await call('POST', '/v1/wallets', { name: 'Treasury ETH', chain: 'ethereum', vault_id: vault.body.id, wallet_type: 'hot' }, guarded.secret);
      assert.equal(created.status, 201, created.text);
      wallet = created.body.id;
      // Credited on the ledger directly: the decision is what is tested, not the chain.
      await creditCustodyWallet((await testOrm()).em.fork(), wallet, 'ETH', 10n ** 17n);
      cold = await create({ chain: 'ethereum', address: COLD, label: 'Cold storage' }, guarded.secret);
      kraken = await create({ chain: 'ethereum', address: KRAKEN, label: 'Kraken' }, guarded.secret);
    });

    it('publishes in_address_book and not_in_address_book on to_address', async () => {
      const schema = await call('GET', '/v1/policies/schema');
      const toAddress = schema.body.condition_fields.find((field: any) => field.name === 'to_address');
      assert.ok(toAddress.valid_operators.includes('in_address_book') && toAddress.valid_operators.includes('not_in_address_book'));
      const amount = schema.body.condition_fields.find((field: any) => field.name === 'amount');
      assert.ok(!amount.valid_operators.includes('in_address_book'));
      assert.ok(schema.body.operators.some((operator: any) => operator.name === 'in_address_book'));
    });

    it('refuses entry ids that are not of the caller\'s environment, at policy and rule create and rule update (404 on the values)', async () => {
      const theirs = (await list({}, other.secret)).data[0].id;
      const naming = (ids: string[]) => ({ name: 'Listed only', action_type: 'allow', conditions: [{ field: 'to_address', operator: 'in_address_book', values: ids }] });
      for (const id of [theirs, randomUUID(), 'entry-1']) {
        const refused = await call('POST', '/v1/policies', { name: 'Foreign entry', rules: [allowRest, naming([cold.id, id])] }, guarded.secret);
        assertRefused(refused, 404, 'resource_missing', 'rules.1.conditions.0.values');
        assert.ok(refused.body.error.message.includes(id), refused.text);
      }
      const draft = await createPolicy({ name: 'Draft', rules: [naming([cold.id]), allowRest] });
      assertRefused(await call('POST', `/v1/policies/${draft.id}/rules`, naming([theirs]), guarded.secret), 404, 'resource_missing', 'conditions.0.values');
      const update = { conditions: [{ field: 'amount', operator: 'greater_than', value: '1' }, { field: 'to_address', operator: 'not_in_address_book', values: [theirs] }] };
      assertRefused(await call('PATCH', `/v1/policies/${draft.id}/rules/${draft.rules[0].id}`, update, guarded.secret), 404, 'resource_missing', 'conditions.1.values');
      // Valid and diagnosed clean: ids of this environment, or none at all (the whole book).
      const validated = await call('POST', `/v1/policies/${draft.id}/validate`, {}, guarded.secret);
      assert.equal(validated.body.valid, true, validated.text);
      const wholeBook = await call('POST', '/v1/policies/validate', { rules: [{ ...naming([]), name: 'Any entry' }, allowRest] }, guarded.secret);
      assert.equal(wholeBook.body.valid, true, wholeBook.text);
      const onAmount = await call('POST', '/v1/policies/validate', { rules: [{ ...naming([]), conditions: [{ field: 'amount', operator: 'in_address_book' }] }] }, guarded.secret);
      assert.equal(onAmount.body.diagnostics[0].code, 'invalid_operator_for_field');
    });

    it('a dry run naming entries matches their addresses on their chain only, in any case', async () => {
      const policy = await createPolicy({
        name: 'Only the cold wallet',
        rules: [{ name: 'Cold only', action_type: 'allow', conditions: [{ field: 'to_address', operator: 'in_address_book', values: [cold.id] }] }],
      });
      const evaluate = (request: Record<string, unknown>) => call('POST', '/v1/policies/evaluate', { policy_id: policy.id, ...request }, guarded.secret);
      const listed = await evaluate({ chain: 'ethereum', to_address: COLD });
      assert.deepEqual([listed.body.result, listed.body.allowed], ['matched_rule', true], listed.text);
      const otherEntry = await evaluate({ chain: 'ethereum', to_address: KRAKEN_EIP55 });
      assert.deepEqual([otherEntry.body.result, otherEntry.body.allowed], ['no_match', false], otherEntry.text);
      assert.equal((await evaluate({ chain: 'tron', to_address: COLD_EIP55 })).body.result, 'no_match');
      assert.equal((await evaluate({ to_address: COLD_EIP55 })).body.result, 'no_match');
    });

    it('an enforced policy blocking destinations outside the address book refuses a send to another address, allows one to a listed address, and stops allowing it once the entry is deleted', async () => {
      const policy = await createPolicy({
        name: 'Whitelist',
        category: 'whitelist',
        rules: [
          {
            name: 'Only the address book',
            action_type: 'block',
            action_config: { reason: 'Destination is not in the address book' },
            conditions: [{ field: 'to_address', operator: 'not_in_address_book' }],
          },
          allowRest,
        ],
      });
      const activated = await call('POST', `/v1/policies/${policy.id}/activate`, {}, guarded.secret);
      assert.equal(activated.status, 200, activated.text);

      const refused = await send(STRANGER);
      assertRefused(refused, 403, 'policy_blocked');
      assert.equal(refused.body.error.message, 'Destination is not in the address book');
      assert.equal(refused.body.error.details.rule_id, policy.rules[0].id);

      for (const to of [COLD, KRAKEN_EIP55]) {
        const allowed = await send(to);
        assert.equal(allowed.status, 201, allowed.text);
        startedWorkflows.push(allowed.body.workflow_id);
        assert.equal(allowed.body.policy_decision.rule_id, policy.rules[1].id);
      }

      bodyOf(await api.call('delete', '/v1/address-book/{id}', { path: { id: kraken.id }, key: guarded.secret }), 200);
      assertRefused(await send(KRAKEN), 403, 'policy_blocked');
      // Another organization's entry of the same address whitelists nothing here.
      assert.ok((await list({}, other.secret)).data.some((entry) => entry.address === KRAKEN_EIP55));
      const again = await send(COLD_EIP55);
      assert.equal(again.status, 201, again.text);
      startedWorkflows.push(again.body.workflow_id);
    });

    it("a new entry counts only after the organization's cooling period, or at once by an approval request when none is required", async () => {
      // As `npm run cli -- org:configure --org <id> --address-book-cooling-hours 48 --environment sandbox` sets it.
      await (await testOrm()).em.fork().nativeUpdate(Organization, { id: guarded.organizationId }, { addressBookCoolingHoursSandbox: 48 });
      const waiting = await create({ chain: 'ethereum', address: STRANGER, label: 'New payee' }, guarded.secret);
      assert.equal(Date.parse(waiting.usable_at) - Date.parse(waiting.created_at), 48 * HOUR);
      // Still waiting: the not_in_address_book block of the enforced whitelist matches it, as a dry run and a send both show.
      const dryRun = await call('POST', '/v1/policies/evaluate', { chain: 'ethereum', to_address: STRANGER, amount: '0.001' }, guarded.secret);
      assert.deepEqual([dryRun.body.allowed, dryRun.body.reason], [false, 'Destination is not in the address book'], dryRun.text);
      assertRefused(await send(STRANGER), 403, 'policy_blocked');
      const custodyReader = (await guarded.key(['custody:read'])).secret;
      const approvalPath = `/v1/address-book/${waiting.id}/approval-requests`;
      assertRefused(await call('POST', approvalPath, {}, custodyReader), 403, 'insufficient_scope');
      assertRefused(await call('POST', approvalPath, { expiry_hours: 0 }, guarded.secret), 400, 'validation_failed', 'expiry_hours');

      // The organization requires no approvals: asking makes the entry usable at once.
      const before = Date.now();
      const approved = await call('POST', approvalPath, { comment: 'Known exchange' }, guarded.secret);
      assert.equal(approved.status, 200, approved.text);
      assert.equal(approved.body.id, waiting.id);
      assert.ok(Date.parse(approved.body.usable_at) >= before - 1000 && Date.parse(approved.body.usable_at) <= Date.now(), approved.text);
      const allowed = await send(STRANGER);
      assert.equal(allowed.status, 201, allowed.text);
      startedWorkflows.push(allowed.body.workflow_id);
      // Asking again for a usable entry answers it unchanged.
      const again = await call('POST', approvalPath, {}, guarded.secret);
      assert.deepEqual([again.status, again.body.usable_at], [200, approved.body.usable_at]);
    });
  });

  describe('new payees wait in live: cooling period and early approval under the activation quorum', () => {
    let liveApp: TestApp;
    let worker: Worker | undefined;
    let running: Promise<void> | undefined;

    before(async () => {
      const created = await createTestWorker(await localTemporal());
      worker = created.worker;
      running = worker.run();
      liveApp = await startTestApp({ config: { TEMPORAL_TASK_QUEUE: created.taskQueue } });
    });
    after(async () => {
      await liveApp?.close();
      worker?.shutdown();
      await running;
    });

    /** A member added by the operator (as `npm run cli -- member:create` does) and a live key acting for them. */
    async function memberKey(o: TestOrganization, name: string, orgRole: OrgRole, scopes: string[]): Promise<{ secret: string; memberId: string }> {
      const em = (await testOrm()).em.fork();
      const organization = em.getReference(Organization, o.organizationId);
      const member = await createMember(em, organization, { name, email: `${name.toLowerCase()}-${randomUUID()}@example.com`, org_role: orgRole });
      const { secret } = createApiKey(em, { organization, name: `${name} key`, scopes, environment: 'live', member });
      await em.flush();
      return { secret, memberId: member.id };
    }

    it('a live whitelist (in_address_book allow, catch-all block) refuses a new entry for 24 h, and allows it once approved by another member', async () => {
      const o = await createTestOrganization('New payees, live');
      const liveCall = (method: string, path: string, body: unknown, key: string) => liveApp.request(method, path, { key, body });
      const root = (await o.key(['*'], 'live')).secret;
      await setRequiredApprovals(o.organizationId, 0);
      const policy = await liveCall(
        'POST',
        '/v1/policies',
        {
          name: 'Address book only',
          category: 'whitelist',
          rules: [
            { name: 'Listed destinations', action_type: 'allow', conditions: [{ field: 'to_address', operator: 'in_address_book' }] },
            { name: 'Everything else', action_type: 'block', conditions: [{ field: 'amount', operator: 'greater_than_or_equal', value: '0' }] },
          ],
        },
        root,
      );
      assert.equal(policy.status, 201, policy.text);
      assert.equal((await liveCall('POST', `/v1/policies/${policy.body.id}/activate`, {}, root)).status, 200);
      await setRequiredApprovals(o.organizationId, 1);
      const requester = await memberKey(o, 'Requester', 'admin', ['custody:write', 'policies:approve']);
      const approver = await memberKey(o, 'Ada', 'approver', ['policies:approve']);

      const created = await liveCall('POST', '/v1/address-book', { chain: 'ethereum', address: COLD, label: 'Cold storage' }, requester.secret);
      assert.equal(created.status, 201, created.text);
      const entry = created.body;
      assert.equal(Date.parse(entry.usable_at) - Date.parse(entry.created_at), 24 * HOUR);
      const decide = async () => (await liveCall('POST', '/v1/policies/evaluate', { chain: 'ethereum', to_address: COLD, amount: '1' }, root)).body;
      const waiting = await decide();
      assert.deepEqual([waiting.allowed, waiting.rule_id], [false, policy.body.rules[1].id], 'the catch-all block decides: the entry does not count yet');

      const approvalPath = `/v1/address-book/${entry.id}/approval-requests`;
      const pending = await liveCall('POST', approvalPath, { comment: 'Our cold wallet' }, requester.secret);
      assert.equal(pending.status, 202, pending.text);
      assert.equal(pending.body.status, 'pending_authorization');
      assert.equal(pending.body.address_book_entry_id, entry.id);
      assert.equal(pending.body.required_approvals, 1);
      assert.equal(pending.body.usable_at, entry.usable_at);
      const requestId = pending.body.approval_request_id;
      assert.equal(pending.body.workflow_id, `address-book-entry-approval-${requestId}`);
      const announced = await liveApp.deps.orm.em.fork().findOneOrFail(Event, { organization: o.organizationId, type: 'approval_request.created', environment: 'live' });
      assert.deepEqual([announced.data.id, announced.data.address_book_entry_id, announced.data.policy_id, announced.data.workflow_id], [requestId, entry.id, null, pending.body.workflow_id]);
      const twice = await liveCall('POST', approvalPath, {}, requester.secret);
      assert.deepEqual([twice.status, twice.body.error.code, twice.body.error.details.approval_request_id], [409, 'approval_pending', requestId]);
      // The organization's sandbox key cannot reach the live request.
      assertRefused(await liveCall('POST', `/v1/approval-requests/${requestId}/approve`, {}, o.secret), 404, 'resource_missing');

      assertRefused(await liveCall('POST', `/v1/approval-requests/${requestId}/approve`, {}, requester.secret), 403, 'requester_cannot_vote');
      assert.equal((await decide()).allowed, false, 'a refused vote changes nothing');

      const voted = await liveCall('POST', `/v1/approval-requests/${requestId}/approve`, { comment: 'Checked' }, approver.secret);
      assert.equal(voted.status, 200, voted.text);
      assert.deepEqual(
        [voted.body.status, voted.body.approvals, voted.body.policy_id, voted.body.address_book_entry_id, voted.body.workflow_id],
        ['approved', 1, null, entry.id, pending.body.workflow_id],
      );
      const usable = (await liveCall('GET', `/v1/address-book/${entry.id}`, undefined, root)).body;
      assert.ok(Date.parse(usable.usable_at) < Date.parse(entry.usable_at) && Date.parse(usable.usable_at) <= Date.now(), JSON.stringify(usable));
      const allowed = await decide();
      assert.deepEqual([allowed.allowed, allowed.rule_id], [true, policy.body.rules[0].id]);
      assertRefused(await liveCall('POST', `/v1/approval-requests/${requestId}/reject`, {}, approver.secret), 409, 'approval_request_closed');

      // The organization's configured live period applies to the entries made after it.
      await (await testOrm()).em.fork().nativeUpdate(Organization, { id: o.organizationId }, { addressBookCoolingHoursLive: 2 });
      const later = await liveCall('POST', '/v1/address-book', { chain: 'ethereum', address: KRAKEN, label: 'Kraken' }, requester.secret);
      assert.equal(Date.parse(later.body.usable_at) - Date.parse(later.body.created_at), 2 * HOUR);
      assert.equal((await liveCall('GET', `/v1/address-book/${entry.id}`, undefined, root)).body.usable_at, usable.usable_at);
    });
  });
});
