import assert from 'node:assert/strict';
import type { ServiceWorkers as Worker } from '../../src/worker-setup';
import { createTestOrganization, operatorMember, startTestApp, type TestApp, type TestResponse } from '../support/app';
import { approvalDecisionEvents, APPROVAL_DECISION_EVENTS } from '../support/approval-decisions';
import { localTemporal } from '../support/environment';
import { setRequiredApprovals } from '../support/isolation-fixtures';
import { createTestWorker } from '../support/worker';

const allowAll = { name: 'Allow', action_type: 'allow', conditions: [{ field: 'amount', operator: 'greater_than_or_equal', value: '0' }] };

/**
 * approval_request.approved / .rejected / .expired through the real API, workflows and PostgreSQL:
 * a burst of concurrent votes on one request decides it once, and announces that decision once, in
 * the request's organization and environment. Each kind's decisions and expiry are the workflow
 * tests' (test/workflows/*-approval.test.ts, policy-activation, governance-change).
 */
describe('Approval decision events', () => {
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

  it('announces one decision per request, however many votes race, in its organization and environment only', async () => {
    const org = await createTestOrganization('Decision events');
    await setRequiredApprovals(org.organizationId, 1);
    const requester = await operatorMember(org.organizationId, { name: 'Requester', orgRole: 'admin' });
    const approvers = [];
    for (const name of ['Ada', 'Bob', 'Carl', 'Dan']) approvers.push(await operatorMember(org.organizationId, { name, orgRole: 'approver', scopes: ['policies:read', 'policies:approve'] }));
    const live = await org.key(['*'], 'live');
    const outsider = await createTestOrganization('Outsider');
    // Endpoints subscribe to the decisions by name; only the request's environment's endpoint receives them.
    const subscribe = async (key: string, url: string) => {
      const endpoint = await app.request('POST', '/v1/webhooks', { key, body: { name: 'Decisions', url, event_types: APPROVAL_DECISION_EVENTS } });
      assert.equal(endpoint.status, 201, endpoint.text);
      return endpoint.body.id as string;
    };
    const sandboxEndpoint = await subscribe(org.secret, 'http://127.0.0.1:9/decisions');
    await subscribe(live.secret, 'https://93.184.215.14/decisions');

    const requestActivation = async (name: string) => {
      const policy = await app.request('POST', '/v1/policies', { key: requester.secret, body: { name, rules: [allowAll] } });
      assert.equal(policy.status, 201, policy.text);
      const pending = await app.request('POST', `/v1/policies/${policy.body.id}/activate`, { key: requester.secret, body: {} });
      assert.equal(pending.status, 202, pending.text);
      return pending.body.approval_request_id as string;
    };

    // Every approver at once, approving (any one of them decides), then approving and rejecting mixed.
    for (const [round, decisions] of [['approvals', ['approve', 'approve', 'approve', 'approve']], ['mixed', ['approve', 'reject', 'approve', 'reject']]] as const) {
      const requestId = await requestActivation(`Race ${round}`);
      const votes: TestResponse[] = await Promise.all(
        approvers.map((approver, index) => app.request('POST', `/v1/approval-requests/${requestId}/${decisions[index]}`, { key: approver.secret, body: {} })),
      );
      for (const vote of votes) {
        assert.ok(vote.status === 200 || (vote.status === 409 && vote.body.error.code === 'approval_request_closed'), `${round}: ${vote.status} ${vote.text}`);
      }
      const read = await app.request('GET', `/v1/approval-requests/${requestId}`, { key: approvers[0]!.secret });
      const decided = read.body as { status: string; votes: unknown[] } & Record<string, unknown>;
      assert.ok(['approved', 'rejected'].includes(decided.status), `${round}: ${decided.status}`);
      if (round === 'approvals') assert.equal(decided.status, 'approved');

      // Every decision event about the request, in any organization and environment.
      const events = await approvalDecisionEvents({ data: { id: requestId } });
      assert.deepEqual(
        events.map(({ type, organization, environment, status }) => ({ type, organization, environment, status })),
        [{ type: `approval_request.${decided.status}`, organization: org.organizationId, environment: 'sandbox', status: decided.status }],
        `${round}: one event, the decision's`,
      );

      // The event, read by the id a receiver sees: data is the request as the API presents it.
      const event = await app.request('GET', `/v1/events/${events[0]!.id}`, { key: org.secret });
      assert.equal(event.status, 200, event.text);
      // A vote that passed the workflow's check before the decision may be recorded just after it: the event has the votes of its moment.
      const { votes: eventVotes, approvals: _eventApprovals, ...eventRequest } = event.body.data;
      const { votes: storedVotes, approvals: _storedApprovals, ...storedRequest } = decided;
      assert.deepEqual(eventRequest, storedRequest);
      assert.ok(eventVotes.length >= 1 && eventVotes.length <= storedVotes.length, `${round}: the votes recorded when it was decided`);
      assert.deepEqual(event.body.deliveries.map((delivery: { webhook_id: string }) => delivery.webhook_id), [sandboxEndpoint]);
      for (const key of [live.secret, outsider.secret]) {
        assert.equal((await app.request('GET', `/v1/events/${events[0]!.id}`, { key })).status, 404, 'another environment or organization does not see it');
      }
    }
  });
});
