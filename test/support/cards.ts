import { randomUUID } from 'node:crypto';
import type { Client } from '@temporalio/client';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { applyBalanceEntry } from '../../src/balances/service';
import type { IssuerProvider } from '../../src/cards/issuer';
import { createCard } from '../../src/cards/service';
import { keyProviderFor } from '../../src/keys/provider';
import { WorkflowStart } from '../../src/temporal/entities';
import type { ReconcileResult } from '../../src/temporal/reconciler';
import { createTestOrganization, type TestOrganization } from './app';
import { validCustomer } from './customer';
import { testConfig, testOrm } from './environment';
import { createTestWorker, NO_SEARCH_ATTRIBUTES } from './worker';

// Kept where the card tests have always found it.
export { validCustomer };

/** Runs the start sweep once, scoped to one organization, with no grace: fires every unstarted start it recorded. */
export async function sweepStarts(client: Client, taskQueue: string, organizationId: string): Promise<number> {
  const { started } = await client.workflow.execute('workflowStartSweepWorkflow', {
    taskQueue,
    workflowId: `test-start-sweep-${randomUUID()}`,
    args: [{ graceSeconds: 0, organizationId }],
  });
  return started as number;
}

/** Runs the pending-work reconciler once, scoped to one organization, for anything pending at all. */
export async function reconcilePending(client: Client, taskQueue: string, organizationId: string): Promise<ReconcileResult> {
  return client.workflow.execute('pendingWorkReconcilerWorkflow', {
    taskQueue,
    workflowId: `test-reconciler-${randomUUID()}`,
    args: [{ minAgeSeconds: 0, organizationId }],
  }) as Promise<ReconcileResult>;
}

/** The recorded starts of an organization's workflows, by workflow id. */
export async function workflowStarts(organizationId: string): Promise<Map<string, WorkflowStart>> {
  const starts = await (await testOrm()).em.fork().find(WorkflowStart, { organizationId });
  return new Map(starts.map((start) => [start.workflowId, start]));
}


/** The service's worker (every activity, every workflow) on a fresh task queue, optionally with another issuer. */
export async function cardWorker(env: TestWorkflowEnvironment, options: { taskQueue?: string; issuer?: IssuerProvider; maxCachedWorkflows?: number } = {}) {
  return createTestWorker(env, options.taskQueue ?? `cards-${randomUUID()}`, NO_SEARCH_ATTRIBUTES, options.maxCachedWorkflows, { cardIssuer: options.issuer });
}

/**
 * A funded organization (100 000 cents more; a new one unless given) and a pending card as POST /api/cards leaves it, committed
 * in a plain transaction: its provisioning start is recorded and never fired, as if the process had
 * died right after the commit. No webhook_url: a delivery left without a worker would stop the
 * time-skipping server from skipping time.
 */
export async function pendingCard(amount: number, feeBps = 100, org?: TestOrganization) {
  org ??= await createTestOrganization();
  const em = (await testOrm()).em.fork();
  const { card, initialFunding } = await em.transactional(async (tx) => {
    await applyBalanceEntry(tx, { organizationId: org.organizationId, environment: 'sandbox', currency: 'usd', kind: 'credit', amount: 100_000n, reference: { type: 'sandbox_credit', id: randomUUID() } });
    const body = { amount, card_type: 'virtual' as const, currency: 'USD' as const, name: 'Ada Lovelace', customer: validCustomer() as never };
    const creator = { organizationId: org.organizationId, environment: 'sandbox' as const, apiKeyId: org.apiKeyId, memberId: null, apiVersion: '2026-05-15' };
    return createCard(tx, creator, body, { config: testConfig({ CARD_FUNDING_FEE_BPS: String(feeBps) }), allowInsecureLoopback: true, keys: keyProviderFor(testConfig()), liveIssuer: false });
  });
  return { org, card, initialFunding };
}
