import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { createApiKey } from '../../src/api-keys/service';
import { Organization, type OrgRole } from '../../src/organizations/entities';
import { createMember } from '../../src/organizations/service';
import { ApprovalRequest, PolicyAuditLog } from '../../src/policies/entities';
import { OutgoingTransaction } from '../../src/transactions/entities';
import type { ServiceWorkers as Worker } from '../../src/worker-setup';
import { createTestOrganization, startTestApp, type TestApp, type TestOrganization } from '../support/app';
import { cli } from '../support/cli';
import { localTemporal, testOrm } from '../support/environment';
import { setRequiredApprovals } from '../support/isolation-fixtures';
import { creditCustodyWallet } from '../support/ledger';
import { createTestWorker } from '../support/worker';

const blockAbove = (value: string) => ({ name: `Block above ${value}`, action_type: 'block', conditions: [{ field: 'amount', operator: 'greater_than', value }] });
const allowRest = { name: 'Allow the rest', action_type: 'allow', conditions: [{ field: 'amount', operator: 'greater_than_or_equal', value: '0' }] };

/**
 * Approvals a new organization can use (issue 35): the documented way to its first approvers, what
 * approvers find waiting for them, and sends held for approval, approved and then let through once,
 * through the real API, Temporal workflows and PostgreSQL.
 */
describe('Approvals from the first hour', () => {
  let app: TestApp;
  let worker: Worker;
  let running: Promise<void>;

  before(async () => {
    const created = await createTestWorker(await localTemporal());
    worker = created.worker;
    running = worker.run();
    app = await startTestApp({ config: { TEMPORAL_TASK_QUEUE: created.taskQueue } });
  });
  after(async () => {
    await app?.close();
    worker?.shutdown();
    await running;
  });

  const call = (method: string, path: string, key: string, body?: unknown, headers?: Record<string, string>) => app.request(method, path, { key, body, headers });
  const json = async (args: string[]) => JSON.parse((await cli(args)).stdout);

  it('a fresh organization activates an approval-requiring policy the way the 409 and the docs say; the approver lists and reads what waits', async () => {
    const org = await json(['org:create', '--name', `First hour ${randomUUID()}`]);
    const root: string = org.api_key.secret;
    const me = await call('GET', '/v1/api-keys/me', root);
    assert.equal(me.body.user_id, org.owner_member_id, 'the root key acts for the organization\'s owner, a member');
    const members = await call('GET', '/v1/members', root);
    assert.deepEqual(members.body.data.map((m: { org_role: string }) => m.org_role), ['owner']);

    const policy = await call('POST', '/v1/policies', root, { name: 'Limits', rules: [blockAbove('10'), allowRest] });
    assert.equal(policy.status, 201, policy.text);
    const activate = () => call('POST', `/v1/policies/${policy.body.id}/activate`, root, { comment: 'day one' });

    // Alone, the owner can neither add an approver through the API (itself a change request nobody could approve) nor activate; the 409 says what to do.
    const crony = await call('POST', '/v1/members', root, { name: 'Crony', email: `crony-${randomUUID()}@example.com`, org_role: 'approver' });
    assert.deepEqual([crony.status, crony.body.error?.code], [409, 'not_enough_approvers'], crony.text);
    const refused = await activate();
    assert.deepEqual([refused.status, refused.body.error.code], [409, 'not_enough_approvers'], refused.text);
    const { message, details } = refused.body.error;
    assert.match(message, new RegExp(`npm run cli -- member:create --org ${org.organization_id}`));
    assert.match(message, new RegExp(`npm run cli -- org:configure --org ${org.organization_id} --policy-activation-approvals N`));
    assert.deepEqual([details.required_approvals, details.eligible_approvers], [1, 0]);
    assert.equal(details.configure, `npm run cli -- org:configure --org ${org.organization_id} --policy-activation-approvals N`);
    assert.match(details.add_approver[0], /member:create .*--org-role approver/);
    assert.match(details.add_approver[1], /key:create .*--scopes policies:read,policies:approve --user-id MEMBER_ID/);

    // The documented path: the operator adds the approver and their key.
    const ada = await json(['member:create', '--org', org.organization_id, '--name', 'Ada', '--email', `ada-${randomUUID()}@example.com`, '--org-role', 'approver']);
    const adaKey = (await json(['key:create', '--org', org.organization_id, '--name', "Ada's key", '--scopes', 'policies:read,policies:approve', '--user-id', ada.id])).secret;
    const pending = await activate();
    assert.equal(pending.status, 202, pending.text);
    const requestId: string = pending.body.approval_request_id;

    const waiting = await call('GET', '/v1/approval-requests?status=pending', adaKey);
    assert.equal(waiting.status, 200, waiting.text);
    assert.deepEqual(waiting.body.data.map((r: { id: string }) => r.id), [requestId]);
    const [listed] = waiting.body.data;
    assert.deepEqual(
      [listed.kind, listed.policy_id, listed.transaction, listed.requested_by, listed.comment, listed.required_approvals, listed.workflow_id],
      ['policy_activation', policy.body.id, null, org.owner_member_id, 'day one', 1, `policy-activation-${requestId}`],
    );
    assert.deepEqual((await call('GET', '/v1/approval-requests?kind=transaction', adaKey)).body.data, []);
    assert.deepEqual((await call('GET', `/v1/approval-requests/${requestId}`, adaKey)).body, listed);

    const approved = await call('POST', `/v1/approval-requests/${requestId}/approve`, adaKey, {});
    assert.deepEqual([approved.status, approved.body.status, approved.body.approvals], [200, 'approved', 1], approved.text);
    assert.equal((await call('GET', `/v1/policies/${policy.body.id}`, root)).body.status, 'enforced');
    assert.deepEqual((await call('GET', '/v1/approval-requests?status=pending', adaKey)).body.data, []);
    assert.deepEqual((await call('GET', '/v1/approval-requests?status=approved&kind=policy_activation', adaKey)).body.data.map((r: { id: string }) => r.id), [requestId]);

    // Bad filters and ids are 400 and 404, never 500; the vote routes' scope guards the reads.
    assert.equal((await call('GET', '/v1/approval-requests?status=maybe', adaKey)).status, 400);
    assert.equal((await call('GET', '/v1/approval-requests?kind=everything', adaKey)).status, 400);
    assert.equal((await call('GET', '/v1/approval-requests?limit=101', adaKey)).status, 400);
    assert.equal((await call('GET', '/v1/approval-requests/apr_nothing', adaKey)).status, 404);
    const reader = (await json(['key:create', '--org', org.organization_id, '--name', 'Reader', '--scopes', 'policies:read'])).secret;
    const scoped = await call('GET', '/v1/approval-requests', reader);
    assert.deepEqual([scoped.status, scoped.body.error.details.required_scope], [403, 'policies:approve']);
  });

  describe('a send a require_approval rule holds', () => {
    let org: TestOrganization;
    let wallet: string;
    /** Operator-made members (as member:create and key:create --user-id make them): Sam sends, Ada and Bob approve, Carl is an approver the rule does not name. */
    const people: Record<'sam' | 'ada' | 'bob' | 'carl', { id: string; secret: string }> = {} as never;
    let ruleId: string;
    const external = privateKeyToAccount(generatePrivateKey()).address;
    const body = (changes: Record<string, unknown> = {}) => ({ wallet_id: wallet, to_address: external, amount: '0.002', asset: 'ETH', note: 'invoice 7', ...changes });
    const send = (sendBody: Record<string, unknown>, idempotencyKey?: string) =>
      call('POST', '/v1/transactions', people.sam.secret, sendBody, idempotencyKey ? { 'Idempotency-Key': idempotencyKey } : undefined);
    const held = async (sendBody: Record<string, unknown>, idempotencyKey?: string): Promise<string> => {
      const response = await send(sendBody, idempotencyKey);
      assert.deepEqual([response.status, response.body.error?.code], [400, 'policy_approval_required'], response.text);
      assert.equal(response.headers.get('idempotent-replayed'), null, 'a hold is not stored as the key\'s outcome');
      assert.deepEqual([response.body.error.details.rule_id, response.body.error.details.expiry_hours], [ruleId, 2]);
      return response.body.error.details.approval_request_id as string;
    };
    const vote = (id: string, who: keyof typeof people, decision: 'approve' | 'reject' = 'approve') => call('POST', `/v1/approval-requests/${id}/${decision}`, people[who].secret, {});
    const read = async (id: string) => (await call('GET', `/v1/approval-requests/${id}`, people.ada.secret)).body;

    before(async () => {
      org = await createTestOrganization('Held sends');
      await setRequiredApprovals(org.organizationId, 0);
      const em = (await testOrm()).em.fork();
      const organization = em.getReference(Organization, org.organizationId);
      const roles: Record<keyof typeof people, OrgRole> = { sam: 'admin', ada: 'approver', bob: 'approver', carl: 'approver' };
      for (const [name, orgRole] of Object.entries(roles) as [keyof typeof people, OrgRole][]) {
        const member = await createMember(em, organization, { name, email: `${name}-${randomUUID()}@example.com`, org_role: orgRole });
        const { secret } = createApiKey(em, { organization, name: `${name}'s key`, scopes: ['*'], environment: 'sandbox', member });
        people[name] = { id: member.id, secret };
      }
      await em.flush();
      const vault = await call('POST', '/v1/vaults', org.secret, { name: 'Treasury' });
      const created = await call('POST', '/v1/wallets', org.secret, { name: 'Treasury ETH', chain: 'ethereum', vault_id: vault.body.id, wallet_type: 'hot' });
      assert.equal(created.status, 201, created.text);
      wallet = created.body.id;
      // Credited on the ledger directly: the gate's decision is what is tested, not the chain.
      await creditCustodyWallet((await testOrm()).em.fork(), wallet, 'ETH', 10n ** 17n);
      const approvers = [people.sam, people.ada, people.bob].map((person) => ({ id: person.id, type: 'user' }));
      const policy = await call('POST', '/v1/policies', org.secret, {
        name: 'Approve above 0.001 ETH',
        rules: [
          { name: 'Approve above 0.001', action_type: 'require_approval', action_config: { approvers, required_approvals: 1, expiry_hours: 2 }, conditions: [{ field: 'amount', operator: 'greater_than', value: '0.001' }] },
          allowRest,
        ],
      });
      assert.equal(policy.status, 201, policy.text);
      ruleId = policy.body.rules[0].id;
      assert.equal((await call('POST', `/v1/policies/${policy.body.id}/activate`, org.secret, {})).status, 200);
    });

    it('opens one approval request bound to the send; the rule\'s approvers vote; the identical send then passes once and a changed one is held again', async () => {
      const first = await held(body(), 'pay-invoice-7');
      assert.match(first, /^apr_/);
      assert.equal(await held(body(), 'pay-invoice-7'), first, 'asked again before approval: the same request, not a new one');
      assert.equal(await held({ note: 'invoice 7', asset: 'ETH', amount: '0.002', to_address: external, wallet_id: wallet }, 'pay-invoice-7'), first, 'field order does not matter');

      const request = await read(first);
      assert.deepEqual(
        [request.kind, request.status, request.policy_id, request.address_book_entry_id, request.requested_by, request.required_approvals, request.workflow_id],
        ['transaction', 'pending', null, null, people.sam.id, 1, `transaction-approval-${first}`],
      );
      assert.deepEqual(request.transaction.request, body());
      assert.deepEqual([request.transaction.held_by_rule_id, request.transaction.used_at, request.transaction.transaction_id], [ruleId, null, null]);
      assert.deepEqual([...request.transaction.approver_ids].sort(), [people.sam.id, people.ada.id, people.bob.id].sort());

      // The same rules as every approval request: not the requester, only the approvers the rule names.
      const own = await vote(first, 'sam');
      assert.deepEqual([own.status, own.body.error.code], [403, 'requester_cannot_vote'], own.text);
      const unnamed = await vote(first, 'carl');
      assert.deepEqual([unnamed.status, unnamed.body.error.code], [403, 'not_an_approver'], unnamed.text);
      const approved = await vote(first, 'ada');
      assert.deepEqual([approved.status, approved.body.status, approved.body.approvals], [200, 'approved', 1], approved.text);

      // Changed in any field (here the amount, with another key): held again, with a request of its own.
      const changed = await held(body({ amount: '0.003' }), 'pay-invoice-7-more');
      assert.notEqual(changed, first);
      assert.notEqual(await held(body({ note: 'invoice 8' }), 'pay-invoice-7'), first, 'the note is part of the send');

      const passed = await send(body(), 'pay-invoice-7');
      assert.equal(passed.status, 201, passed.text);
      const used = await read(first);
      assert.equal(used.status, 'approved');
      assert.equal(used.transaction.transaction_id, passed.body.id);
      assert.ok(used.transaction.used_at);
      const replayed = await send(body(), 'pay-invoice-7');
      assert.deepEqual([replayed.status, replayed.body.id, replayed.headers.get('idempotent-replayed')], [201, passed.body.id, 'true'], 'the same key replays the send it admitted');

      const em = (await testOrm()).em.fork();
      const [decision] = await em.find(PolicyAuditLog, { organization: org.organizationId, action: 'decision' }, { orderBy: { createdAt: 'desc', id: 'desc' }, limit: 1 });
      assert.deepEqual(
        [(decision!.metadata.decision as { result: string }).result, decision!.metadata.approval_request_id, decision!.actorId],
        ['approved', first, people.sam.id],
      );
      assert.equal(await em.count(OutgoingTransaction, { wallet }), 1, 'one send went');
    });

    it('lets an approval admit exactly one send, before expires_at only; a rejected one leaves the send held', async () => {
      // No Idempotency-Key: the body alone is the send; once used, the same body is held again.
      const once = await held(body({ amount: '0.004' }));
      assert.equal((await vote(once, 'bob')).body.status, 'approved');
      const passed = await send(body({ amount: '0.004' }));
      assert.equal(passed.status, 201, passed.text);
      const again = await held(body({ amount: '0.004' }));
      assert.notEqual(again, once, 'an approval admits one send');

      // An approval past its expires_at admits nothing.
      assert.equal((await vote(again, 'ada')).body.status, 'approved');
      const em = (await testOrm()).em.fork();
      await em.nativeUpdate(ApprovalRequest, { id: again }, { expiresAt: new Date(Date.now() - 1000) });
      const late = await held(body({ amount: '0.004' }));
      assert.ok(![once, again].includes(late));

      const rejected = await vote(late, 'bob', 'reject');
      assert.deepEqual([rejected.status, rejected.body.status], [200, 'rejected'], rejected.text);
      const after = await held(body({ amount: '0.004' }));
      assert.ok(![once, again, late].includes(after), 'a rejected request admits nothing; the send waits on a new one');

      // What waits, page by page.
      const transactions = await call('GET', '/v1/approval-requests?kind=transaction&limit=2', people.ada.secret);
      assert.equal(transactions.body.data.length, 2);
      assert.equal(transactions.body.has_more, true);
      const next = await call('GET', `/v1/approval-requests?kind=transaction&limit=2&cursor=${transactions.body.next_cursor}`, people.ada.secret);
      const ids = [...transactions.body.data, ...next.body.data].map((r: { id: string }) => r.id);
      assert.equal(new Set(ids).size, ids.length, 'pages do not repeat');
      assert.equal(ids[0], after, 'newest first');
      const pendingIds = (await call('GET', '/v1/approval-requests?kind=transaction&status=pending&limit=100', people.ada.secret)).body.data.map((r: { id: string }) => r.id);
      assert.ok(pendingIds.includes(after) && !pendingIds.includes(once) && !pendingIds.includes(late));
    });
  });
});
