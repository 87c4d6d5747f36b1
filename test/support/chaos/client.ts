import { Client } from '@temporalio/client';
import { temporal as temporalProto } from '@temporalio/proto';
import { cardBalanceFlow } from '../../../src/cards/flows/balance';
import { cardProvisioningFlow } from '../../../src/cards/flows/provisioning';
import { transactionWorkflowId } from '../../../src/transactions/flows/transaction';
import { paymentWorkflowId } from '../../../src/lightning/flows/payment';
import { payoutTripFlow } from '../../../src/payouts/flows/trip';
import { consolidationRunFlow } from '../../../src/consolidation/flows/run';
import { OrganizationName, sleep } from './model';

interface Answer {
  status: number;
  body: Record<string, any>;
}

/** An operation the load sent, and what the service answered to it in the end. */
export interface Operation {
  kind: 'credit' | 'card' | 'funding' | 'invoice' | 'payment' | 'webhook_test' | 'send' | 'payout_quote' | 'payout' | 'payout_deposit' | 'sweep_run';
  as: OrganizationName;
  method: string;
  route: string;
  body: unknown;
  idempotencyKey: string;
  /** Send attempts: more than one when a component was down. */
  attempts: number;
  answer?: Answer;
  /** The id of what it created (card, card transaction, invoice, payment, event, payout quote, trip, deposit transfer, consolidation run). */
  id?: string;
  /** A payment: the invoice it pays (its organization, id and sats); a funding: its card. */
  pays?: { organization: OrganizationName; invoiceId: string; sats: bigint };
  cardId?: string;
}

export const idOf = (kind: Operation['kind'], body: Record<string, any>): string | undefined =>
  ({
    card: body.data?.card?.id,
    funding: body.data?.transaction?.id,
    payment: body.data?.id,
    invoice: body.id,
    send: body.id,
    webhook_test: body.event_id,
    credit: 'credit',
    payout_quote: body.quoteId,
    payout: body.tripId,
    payout_deposit: body.txHash,
    sweep_run: body.id,
  })[kind];

/** The workflow an accepted operation started, if any: a kill timed on it lands while its activities run. */
export const workflowOfOperation = (operation: Operation): string | undefined => {
  if (!operation.id) return undefined;
  switch (operation.kind) {
    case 'card':
      return cardProvisioningFlow.workflowId({ cardId: operation.id });
    case 'funding':
      return cardBalanceFlow.workflowId({ transactionId: operation.id });
    case 'payment':
      return paymentWorkflowId(operation.id);
    case 'send':
      return transactionWorkflowId(operation.id);
    case 'payout':
      return payoutTripFlow.workflowId({ tripId: operation.id });
    case 'sweep_run':
      return consolidationRunFlow.workflowId({ runId: operation.id });
    default:
      return undefined;
  }
};

/**
 * A client as a real one behaves while the service is failing over: every POST carries an
 * Idempotency-Key and is sent again with the same key after a connection error, a 5xx, a 429 or
 * idempotency_key_in_use (a request the killed API was running), until `deadline`.
 */
export class ChaosClient {
  retries = 0;
  private sent = 0;
  /** `urls`: the API processes, taken in turn (a balancer's round robin); a retry goes to the next. */
  constructor(
    private readonly urls: string[],
    private readonly secrets: Record<OrganizationName, string>,
  ) {}

  async send(operation: Pick<Operation, 'as' | 'method' | 'route' | 'body' | 'idempotencyKey' | 'attempts'>, deadline: number): Promise<Answer | undefined> {
    for (let pause = 100; Date.now() < deadline; pause = Math.min(pause * 2, 2000)) {
      operation.attempts += 1;
      const answer = await this.once(operation.as, operation.method, operation.route, operation.body, operation.idempotencyKey);
      if (answer && !retryable(answer)) return answer;
      this.retries += 1;
      await sleep(pause);
    }
    return undefined;
  }

  /** A GET, retried the same way; undefined when the deadline passed. */
  async read(as: OrganizationName, route: string, deadline: number): Promise<Answer | undefined> {
    return this.send({ as, method: 'GET', route, body: undefined, idempotencyKey: '', attempts: 0 }, deadline);
  }

  private async once(as: OrganizationName, method: string, route: string, body: unknown, idempotencyKey: string): Promise<Answer | undefined> {
    try {
      const url = this.urls[this.sent++ % this.urls.length]!;
      const response = await fetch(`${url}${route}`, {
        method,
        headers: {
          authorization: `Bearer ${this.secrets[as]}`,
          ...(idempotencyKey ? { 'idempotency-key': idempotencyKey } : {}),
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        signal: AbortSignal.timeout(30_000),
      });
      const text = await response.text();
      return { status: response.status, body: text ? (JSON.parse(text) as Record<string, any>) : {} };
    } catch {
      return undefined;
    }
  }
}

const retryable = (answer: Answer) => answer.status >= 500 || answer.status === 429 || (answer.status === 409 && answer.body.error?.code === 'idempotency_key_in_use');


/** Whether a workflow is inside an activity: one pending, or its workflow task started (a local activity runs within it). */
export async function insideActivity(temporal: Client, workflowId: string): Promise<boolean> {
  const described = await temporal.workflow
    .getHandle(workflowId)
    .describe()
    .catch(() => undefined);
  if (!described || described.status.name !== 'RUNNING') return false;
  return (described.raw.pendingActivities?.length ?? 0) > 0 || described.raw.pendingWorkflowTask?.state === temporalProto.api.enums.v1.PendingWorkflowTaskState.PENDING_WORKFLOW_TASK_STATE_STARTED;
}

/** Final state of a workflow the service started, or why it has none. */
export async function workflowState(temporal: Client, workflowId: string): Promise<string> {
  try {
    return (await temporal.workflow.getHandle(workflowId).describe()).status.name;
  } catch (error) {
    return `not found (${(error as Error).message.slice(0, 80)})`;
  }
}
