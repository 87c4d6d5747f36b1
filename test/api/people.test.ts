import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { createApiKey } from '../../src/api-keys/service';
import { Member, Organization } from '../../src/organizations/entities';
import { createMember } from '../../src/organizations/service';
import { createTestOrganization, operatorMember, type TestApp, type TestOrganization } from '../support/app';
import { testOrm } from '../support/environment';
import { setRequiredApprovals } from '../support/isolation-fixtures';
import { creditCustodyWallet } from '../support/ledger';
import { startAppWithWorker } from '../support/worker';

const blockAbove = (value: string) => ({ name: `Block above ${value}`, action_type: 'block', conditions: [{ field: 'amount', operator: 'greater_than', value }] });
const allowRest = { name: 'Allow the rest', action_type: 'allow', conditions: [{ field: 'amount', operator: 'greater_than_or_equal', value: '0' }] };

type Key = { secret: string; memberId: string };

/**
 * One person, one vote (issue 47, item 2; docs/policies.md, "Keys and people"): every key acts for a
 * member or is a service key of the operator's; a vote counts once per person, traced both ways
 * through who minted and who added whom; with keys minted every way, through the real API,
 * Temporal workflows and PostgreSQL.
 */
describe('Keys and people: one person, one vote', () => {
  let app: TestApp;
  let stop: (() => Promise<void>) | undefined;

  before(async () => {
    ({ app, stop } = await startAppWithWorker());
  });
  after(() => stop?.());

  const call = (method: string, path: string, key: string, body?: unknown) => app.request(method, path, { key, body });
  const refusedWith = (response: Awaited<ReturnType<typeof call>>, status: number, code: string, because: string) =>
    assert.deepEqual([response.status, response.body.error?.code], [status, code], `${because}: ${response.text}`);

  /** A key minted through the API by `minter`; for another member, confirmed by `confirmer` (a key of that member). */
  async function mint(minter: Key, options: { for?: Key; confirmer?: Key; scopes?: string[] } = {}): Promise<Key & { id: string }> {
    const minted = await call('POST', '/v1/api-keys', minter.secret, { name: 'minted', scopes: options.scopes ?? ['*'], ...(options.for ? { user_id: options.for.memberId } : {}) });
    assert.equal(minted.status, 201, minted.text);
    assert.equal(minted.body.user_id, (options.for ?? minter).memberId, 'acts for the minter, or the member named');
    if (options.confirmer) assert.equal((await call('POST', `/v1/api-keys/${minted.body.id}/confirm`, options.confirmer.secret)).status, 200);
    return { secret: minted.body.secret, memberId: minted.body.user_id, id: minted.body.id };
  }

  async function requestActivation(requester: Key): Promise<string> {
    const policy = await call('POST', '/v1/policies', requester.secret, { name: `Limits ${randomUUID()}`, rules: [blockAbove('10'), allowRest] });
    assert.equal(policy.status, 201, policy.text);
    const pending = await call('POST', `/v1/policies/${policy.body.id}/activate`, requester.secret, {});
    assert.equal(pending.status, 202, pending.text);
    return pending.body.approval_request_id as string;
  }
  const vote = (requestId: string, voter: Key) => call('POST', `/v1/approval-requests/${requestId}/approve`, voter.secret, {});
  const counts = async (requestId: string, voter: Key, approvals: number, status = 'pending') => {
    const response = await vote(requestId, voter);
    assert.deepEqual([response.status, response.body.approvals, response.body.status], [200, approvals, status], response.text);
  };

  it('mints keys for the minter\'s member, or for a member who confirms them; a key acting for no member mints none', async () => {
    const o = await createTestOrganization('Minting');
    const owner = await operatorMember(o.organizationId, { name: 'Olga' });
    const ada = await operatorMember(o.organizationId, { name: 'Ada', orgRole: 'approver', scopes: ['policies:approve', 'policies:read', 'api_keys:admin'] });
    const viewer = await operatorMember(o.organizationId, { name: 'Vic', orgRole: 'viewer', scopes: ['api_keys:admin', 'policies:read'] });

    const own = await mint(owner);
    assert.equal((await call('GET', '/v1/api-keys/me', own.secret)).body.status, 'active', "a key for the minter's own member works at once");

    // A service key (the operator's, acting for nobody) mints nothing, bound or unbound.
    const service = await o.key(['*']);
    refusedWith(await call('POST', '/v1/api-keys', service.secret, { name: 'x', scopes: ['cards:read'] }), 403, 'member_required', 'no key for nobody');
    refusedWith(await call('POST', '/v1/api-keys', service.secret, { name: 'x', scopes: ['cards:read'], user_id: ada.memberId }), 403, 'member_required', 'nor for a member');
    refusedWith(await call('POST', '/v1/api-keys', viewer.secret, { name: 'x', scopes: ['policies:read'], user_id: ada.memberId }), 403, 'member_binding_forbidden', 'naming another member is an owner\'s');

    // Named for Ada by the owner: it works only once a key of Ada's own confirms it.
    const named = await call('POST', '/v1/api-keys', owner.secret, { name: 'For Ada', scopes: ['policies:approve', 'api_keys:admin'], user_id: ada.memberId });
    assert.deepEqual([named.status, named.body.status, named.body.user_id], [201, 'pending_confirmation', ada.memberId], named.text);
    refusedWith(await call('GET', '/v1/api-keys/me', named.body.secret), 403, 'api_key_pending_confirmation', 'a pending key authenticates nothing');
    refusedWith(await call('POST', `/v1/api-keys/${named.body.id}/confirm`, owner.secret), 403, 'confirmation_forbidden', 'the minter cannot confirm it');
    const confirmed = await call('POST', `/v1/api-keys/${named.body.id}/confirm`, ada.secret);
    assert.deepEqual([confirmed.status, confirmed.body.status], [200, 'active'], confirmed.text);
    assert.equal((await call('GET', '/v1/api-keys/me', named.body.secret)).body.user_id, ada.memberId);
    refusedWith(await call('POST', `/v1/api-keys/${named.body.id}/confirm`, ada.secret), 409, 'api_key_not_pending', 'confirmed once');

    // The owner holds that key's secret: it cannot confirm the next key the owner mints for Ada.
    const next = await call('POST', '/v1/api-keys', owner.secret, { name: 'For Ada again', scopes: ['policies:approve'], user_id: ada.memberId });
    refusedWith(await call('POST', `/v1/api-keys/${next.body.id}/confirm`, named.body.secret), 403, 'confirmation_not_independent', "a key from the minter is not Ada's consent");
    assert.equal((await call('POST', `/v1/api-keys/${next.body.id}/confirm`, ada.secret)).status, 200);

    // The root key of a fresh organization (the CLI's) acts for its owner: it mints keys acting for the owner.
    const stored = await (await testOrm()).em.fork().getConnection().execute<{ member_id: string | null; pending_confirmation: boolean }[]>(
      'select member_id, pending_confirmation from api_keys where id = ?',
      [own.id],
    );
    assert.deepEqual(stored, [{ member_id: owner.memberId, pending_confirmation: false }]);
  });

  it('N-of-M (2 of 3): a vote counts once per person, traced both ways through who minted and who added whom; service keys never vote', async () => {
    const o = await createTestOrganization('Two of three');
    await setRequiredApprovals(o.organizationId, 2);
    const owner = await operatorMember(o.organizationId, { name: 'Olga' });
    const secondOwner = await operatorMember(o.organizationId, { name: 'Otto' });
    const requester = await operatorMember(o.organizationId, { name: 'Rita', orgRole: 'admin' });
    const [ada, bob, cy] = await Promise.all(
      ['Ada', 'Bob', 'Cy'].map((name) => operatorMember(o.organizationId, { name, orgRole: 'approver', scopes: ['policies:approve', 'policies:read', 'api_keys:admin'] })),
    );

    // 1. The case: the owner's key mints a key (acting for the owner now), which asks; the owner's vote is the requester's.
    const ownersMinted = await mint(owner);
    const own = await requestActivation(ownersMinted);
    refusedWith(await vote(own, owner), 403, 'requester_cannot_vote', 'one person cannot meet a quorum of one');

    // 2. A requester minted by the voter's lineage: the owner minted Rita's key (Rita confirmed it), so the owner cannot vote on what that key asks.
    const ritaByOwner = await mint(owner, { for: requester, confirmer: requester, scopes: ['policies:write', 'policies:read'] });
    const request = await requestActivation(ritaByOwner);
    refusedWith(await vote(request, owner), 403, 'vote_not_independent', "the requester's key comes from the owner");
    const bobByOwner = await mint(owner, { for: bob, confirmer: bob, scopes: ['policies:approve'] });
    refusedWith(await vote(request, bobByOwner), 403, 'vote_not_independent', 'a key the owner minted shares the owner with the requester');
    // A member counts once, through any number of their keys.
    await counts(request, ada, 1);
    await counts(request, await mint(ada, { scopes: ['policies:approve'] }), 1);
    // Service keys never vote.
    refusedWith(await vote(request, { secret: (await o.key(['*'])).secret, memberId: '' }), 403, 'member_required', 'a service key acts for no one');
    await counts(request, bob, 2, 'approved');

    // 3. A voter minted by the requester's lineage, and a voter sharing a minter with a vote already counted.
    const second = await requestActivation(owner);
    refusedWith(await vote(second, bobByOwner), 403, 'vote_not_independent', 'the requester minted this key');
    await counts(second, secondOwner, 1);
    const cyByOtto = await mint(secondOwner, { for: cy, confirmer: cy, scopes: ['policies:approve'] });
    refusedWith(await vote(second, cyByOtto), 403, 'vote_not_independent', 'Otto, already counted, minted this key: Otto would count twice');
    await counts(second, cy, 2, 'approved');
    // The same person through two doors at once (Otto's own key, and one Otto minted for Ada): checked and counted one at a time, one counts.
    const fourth = await requestActivation(owner);
    const adaByOtto = await mint(secondOwner, { for: ada, confirmer: ada, scopes: ['policies:approve'] });
    const together = await Promise.all([vote(fourth, secondOwner), vote(fourth, adaByOtto)]);
    assert.deepEqual(together.map((response) => [response.status, response.body.error?.code ?? response.body.approvals]).sort(), [[200, 1], [403, 'vote_not_independent']], together.map((response) => response.text).join('\n'));
    const fourthNow = await call('GET', `/v1/approval-requests/${fourth}`, owner.secret);
    assert.deepEqual([fourthNow.body.status, fourthNow.body.approvals, fourthNow.body.votes.length], ['pending', 1, 1], fourthNow.text);

    // 4. Members the requester adds, with keys the requester mints for them, never reach a quorum: their keys wait for a confirmation they cannot give.
    const third = await requestActivation(owner);
    // Adding an approver is itself a change request (202, docs/policies.md "Governance"); approved, the member is created as the requester added them.
    const crony = { name: 'Crony', email: `crony-${randomUUID()}@example.com`, org_role: 'approver' } as const;
    const asked = await call('POST', '/v1/members', owner.secret, crony);
    assert.deepEqual([asked.status, asked.body.status], [202, 'pending_authorization'], asked.text);
    const em = (await testOrm()).em.fork();
    const approvedAddition = await createMember(em, em.getReference(Organization, o.organizationId), crony, { apiKeyId: owner.keyId, memberId: owner.memberId });
    await em.flush();
    const added = { body: { id: approvedAddition.id } };
    const cronyKey = await call('POST', '/v1/api-keys', owner.secret, { name: 'Crony', scopes: ['policies:approve'], user_id: added.body.id });
    refusedWith(await vote(third, { secret: cronyKey.body.secret, memberId: added.body.id }), 403, 'api_key_pending_confirmation', 'a key for a member the owner added waits');
    // Even a key the operator makes for that member does not count on the owner's requests: the owner added them.
    await em.getConnection().execute('update members set created_at = created_at - interval \'1 hour\' where id = ?', [added.body.id]);
    const cronyByOperator = createApiKey(em, { organization: em.getReference(Organization, o.organizationId), name: 'Crony (operator)', scopes: ['policies:approve'], environment: 'sandbox', member: em.getReference(Member, added.body.id) });
    await em.flush();
    const byTheOperator = await vote(third, { secret: cronyByOperator.secret, memberId: added.body.id });
    refusedWith(byTheOperator, 403, 'vote_not_independent', 'the requester added this member');
    assert.ok(byTheOperator.body.error.details.shared_origins.includes(`member:${owner.memberId}`), byTheOperator.text);
    const candidates = await call('GET', '/v1/policies/approver-candidates', owner.secret);
    assert.equal(candidates.status, 200, candidates.text);
    const votesFor = Object.fromEntries(candidates.body.data.map((m: { id: string; votes_on_your_activations: boolean }) => [m.id, m.votes_on_your_activations]));
    assert.deepEqual([votesFor[added.body.id], votesFor[ada.memberId], votesFor[owner.memberId]], [false, true, false]);
  });

  describe('held sends follow the same rules', () => {
    let org: TestOrganization;
    let wallet: string;
    const external = privateKeyToAccount(generatePrivateKey()).address;

    it('a send held for 2 of its rule\'s approvers: the owner who minted the sender\'s key cannot approve it, a member counts once, two independent approvers let it through once', async () => {
      org = await createTestOrganization('Held, 2 of 3');
      await setRequiredApprovals(org.organizationId, 0);
      const owner = await operatorMember(org.organizationId, { name: 'Olga' });
      const sam = await operatorMember(org.organizationId, { name: 'Sam', orgRole: 'admin' });
      const [ada, bob] = await Promise.all(['Ada', 'Bob'].map((name) => operatorMember(org.organizationId, { name, orgRole: 'approver', scopes: ['policies:approve', 'policies:read', 'api_keys:admin'] })));
      const vault = await call('POST', '/v1/vaults', org.secret, { name: 'Treasury' });
      const created = await call('POST', '/v1/wallets', org.secret, { name: 'Treasury ETH', chain: 'ethereum', vault_id: vault.body.id, wallet_type: 'hot' });
      wallet = created.body.id;
      await creditCustodyWallet((await testOrm()).em.fork(), wallet, 'ETH', 10n ** 17n);
      const approvers = [owner, ada, bob].map((person) => ({ id: person.memberId, type: 'user' }));
      const policy = await call('POST', '/v1/policies', org.secret, {
        name: 'Two approvals above 0.001 ETH',
        rules: [
          { name: 'Approve above 0.001', action_type: 'require_approval', action_config: { approvers, required_approvals: 2, expiry_hours: 2 }, conditions: [{ field: 'amount', operator: 'greater_than', value: '0.001' }] },
          allowRest,
        ],
      });
      assert.equal((await call('POST', `/v1/policies/${policy.body.id}/activate`, org.secret, {})).status, 200);

      const samByOwner = await mint(owner, { for: sam, confirmer: sam, scopes: ['transactions:write', 'custody:read'] });
      const body = { wallet_id: wallet, to_address: external, amount: '0.002', asset: 'ETH' };
      const send = () => app.request('POST', '/v1/transactions', { key: samByOwner.secret, body, headers: { 'Idempotency-Key': 'held-2-of-3' } });
      const held = await send();
      assert.deepEqual([held.status, held.body.error?.code], [400, 'policy_approval_required'], held.text);
      const requestId = held.body.error.details.approval_request_id as string;

      refusedWith(await vote(requestId, owner), 403, 'vote_not_independent', "the owner minted the sender's key");
      await counts(requestId, ada, 1);
      await counts(requestId, await mint(ada, { scopes: ['policies:approve'] }), 1);
      await counts(requestId, bob, 2, 'approved');
      const passed = await send();
      assert.equal(passed.status, 201, passed.text);
    });
  });
});
