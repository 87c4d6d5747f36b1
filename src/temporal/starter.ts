import type { EntityManager } from '@mikro-orm/postgresql';
import { WorkflowExecutionAlreadyStartedError, WorkflowNotFoundError, WorkflowUpdateFailedError, WorkflowUpdateRPCTimeoutOrCancelledError, type Client } from '@temporalio/client';
import { ApplicationFailure, WorkflowIdConflictPolicy, WorkflowIdReusePolicy } from '@temporalio/common';
import type { QueryDefinition, SignalDefinition, UpdateDefinition } from '@temporalio/common';
import type { Config } from '../config';
import type { Logger } from '../logger';
import { WorkflowStart } from './entities';
import { queueRoleOf, taskQueueOf, type Flow } from './flow';
import { resourceSearchAttributes } from './search-attributes';
import { perDatabase } from '../db/per-database';
import { errors } from '../shared/errors';
import { domainRefusalOf } from './activity-errors';

/** How long one start may take before it is left to the sweep (Temporal down must not hang a request). */
const START_DEADLINE_MS = 5_000;
/** How many recorded starts of one transaction are fired at once. */
const FIRE_CONCURRENCY = 8;

/**
 * Records "start workflow `flow` for `input`" in the caller's transaction. Nothing reaches Temporal
 * here: the starter fires the start once that transaction commits, so a rolled-back change never
 * starts a workflow and a committed one always does (the start sweep catches what the process did
 * not fire). Record a start once per workflow id (the id is unique): the domain's own state
 * (a pending row just created) is what makes it once.
 */
export function recordStart<Input, Result>(em: EntityManager, flow: Flow<Input, Result>, input: Input, organizationId: string | null): WorkflowStart {
  if (!em.getTransactionContext()) throw new Error('recordStart must run inside the transaction of the change that needs the workflow');
  const resource = flow.resource(input);
  return em.create(WorkflowStart, {
    workflowId: flow.workflowId(input),
    workflowType: flow.workflowType,
    input,
    organizationId,
    resourceType: resource.type,
    resourceId: resource.id,
    idReusePolicy: flow.idReusePolicy,
    idConflictPolicy: flow.idConflictPolicy,
  });
}

export interface SweepOptions {
  /** Starts younger than this are left to the after-commit firing of their own transaction. */
  graceSeconds: number;
  /** Scopes a sweep to one organization (tests). */
  organizationId?: string;
  limit?: number;
}

export interface FireOptions {
  /**
   * Webhook delivery starts are fired without being awaited: an activity that moves money returns
   * (and its flow completes) however many endpoints its events reach, and however slowly Temporal
   * takes their starts. Their rows are committed, so a start this process does not make is the
   * start sweep's. Other starts are awaited as always.
   */
  detachDeliveries?: boolean;
}

/** Starts made and not yet marked on their rows, per database (its ORM's configuration). */
interface StartMarks {
  queued: { id: string; done: () => void; failed: (error: unknown) => void }[];
  writing: boolean;
}
const startMarks = new WeakMap<object, StartMarks>();

/**
 * Marks a start made on its row. The marks of one process go to the database one statement at a
 * time: the first is written at once, and those made while it is written go together in the next
 * (a group commit), so under load a start costs a fraction of a statement and alone it waits for
 * nobody. The statement runs on a pooled connection of its own, never in a caller's transaction.
 */
function markStarted(em: EntityManager, id: string): Promise<void> {
  const marks = perDatabase(startMarks, em, (): StartMarks => ({ queued: [], writing: false }));
  return new Promise<void>((done, failed) => {
    marks.queued.push({ id, done, failed });
    if (!marks.writing) void writeStartMarks(em, marks);
  });
}

async function writeStartMarks(em: EntityManager, marks: StartMarks): Promise<void> {
  marks.writing = true;
  while (marks.queued.length > 0) {
    const batch = marks.queued.splice(0);
    try {
      await em.getConnection().execute(
        'update workflow_starts set started_at = now(), attempts = 0, last_error = null where id = any(?::text[]) and started_at is null',
        [`{${batch.map((mark) => mark.id).join(',')}}`],
        'run',
      );
      for (const mark of batch) mark.done();
    } catch (error) {
      for (const mark of batch) mark.failed(error);
    }
  }
  marks.writing = false;
}

type StarterConfig = Pick<Config, 'TEMPORAL_TASK_QUEUE' | 'TEMPORAL_SEARCH_ATTRIBUTES' | 'WORKFLOW_UPDATE_TIMEOUT_SECONDS'>;

/**
 * The one path from a recorded start to a running workflow, and the one holder of the Temporal
 * client for messages to running workflows. The API uses one per process; an activity builds one
 * on its own context's client (activities/with-starts.ts).
 */
export class WorkflowStarter {
  constructor(
    private readonly client: Client,
    private readonly config: StarterConfig,
    private readonly log: Logger,
  ) {}

  /** Runs `work` in a transaction; once it has committed, fires every start it recorded. */
  async transaction<T>(em: EntityManager, work: (tx: EntityManager) => Promise<T>, options: FireOptions = {}): Promise<T> {
    let transactionEm: EntityManager | undefined;
    const result = await em.transactional((tx) => {
      transactionEm = tx;
      return work(tx);
    });
    if (transactionEm) await this.fireRecorded(em, transactionEm, options);
    return result;
  }

  /**
   * Fires the unstarted starts a committed transaction recorded (they are in its unit of work),
   * FIRE_CONCURRENCY at a time: a transaction that records hundreds (a circuit releasing its held
   * deliveries) is not one round trip after another, nor hundreds at once against Temporal.
   */
  async fireRecorded(em: EntityManager, committed: EntityManager, options: FireOptions = {}): Promise<void> {
    const recorded = committed
      .getUnitOfWork()
      .getIdentityMap()
      .values()
      .filter((entity): entity is WorkflowStart => entity instanceof WorkflowStart && !entity.startedAt);
    if (!options.detachDeliveries) return this.fireAll(em, recorded);
    const isDelivery = (start: WorkflowStart) => queueRoleOf(start.workflowType) === 'webhooks';
    const deliveries = recorded.filter(isDelivery);
    if (deliveries.length > 0) {
      // Not awaited: nothing may fail the caller from here, and what does not start is on its row for the sweep.
      void this.fireAll(em, deliveries).catch((error: unknown) =>
        this.log.warn({ err: error instanceof Error ? error.message : String(error) }, 'webhook delivery starts failed; the start sweep will retry'),
      );
    }
    await this.fireAll(
      em,
      recorded.filter((start) => !isDelivery(start)),
    );
  }

  /** Fires `starts`, FIRE_CONCURRENCY at a time. */
  private async fireAll(em: EntityManager, starts: WorkflowStart[]): Promise<void> {
    if (starts.length === 0) return;
    // One iterator shared by the workers: each start is taken by exactly one.
    const queue = starts.values();
    const fireNext = async (): Promise<void> => {
      for (const start of queue) await this.fire(em, start);
    };
    await Promise.all(Array.from({ length: Math.min(FIRE_CONCURRENCY, starts.length) }, fireNext));
  }

  /**
   * Starts one recorded workflow and marks it started. A workflow already running (or, for kinds
   * that reject duplicates, already run) counts as started. Failures are recorded on the row and
   * logged; the sweep tries again. Returns whether the start reached Temporal.
   */
  async fire(em: EntityManager, start: WorkflowStart): Promise<boolean> {
    try {
      await this.client.withDeadline(Date.now() + START_DEADLINE_MS, () =>
        this.client.workflow.start(start.workflowType, {
          taskQueue: taskQueueOf(this.config.TEMPORAL_TASK_QUEUE, queueRoleOf(start.workflowType)),
          workflowId: start.workflowId,
          args: [start.input],
          workflowIdReusePolicy: WorkflowIdReusePolicy[start.idReusePolicy],
          ...(start.idConflictPolicy === 'USE_EXISTING' ? { workflowIdConflictPolicy: WorkflowIdConflictPolicy.USE_EXISTING } : {}),
          ...(this.config.TEMPORAL_SEARCH_ATTRIBUTES
            ? {
                typedSearchAttributes: resourceSearchAttributes({
                  organizationId: start.organizationId ?? undefined,
                  type: start.resourceType,
                  id: start.resourceId,
                }),
              }
            : {}),
          ...(start.restarts > 0 ? { memo: { restarted_by: 'reconciler', restarts: start.restarts } } : {}),
        }),
      );
    } catch (error) {
      if (!(error instanceof WorkflowExecutionAlreadyStartedError)) {
        const message = failureMessage(error);
        this.log.warn({ workflow_id: start.workflowId, err: message }, 'workflow start failed; the start sweep will retry');
        // A fork of its own: `em` may be the process's (a start after a request), which holds no context for a write.
        await em.fork().nativeUpdate(WorkflowStart, { id: start.id, startedAt: null }, { attempts: start.attempts + 1, lastError: message });
        return false;
      }
    }
    await markStarted(em, start.id);
    start.startedAt = new Date();
    return true;
  }

  /** Fires starts still unstarted `graceSeconds` after they were recorded, oldest first; returns how many reached Temporal. */
  async sweep(em: EntityManager, options: SweepOptions): Promise<number> {
    const due = await em.find(
      WorkflowStart,
      {
        startedAt: null,
        createdAt: { $lt: new Date(Date.now() - options.graceSeconds * 1000) },
        ...(options.organizationId ? { organizationId: options.organizationId } : {}),
      },
      { orderBy: { createdAt: 'asc' }, limit: options.limit ?? 500 },
    );
    let fired = 0;
    for (const start of due) if (await this.fire(em, start)) fired += 1;
    return fired;
  }

  /** Fires a recorded start now, if it has not been (a message is about to be sent to it). */
  async ensureStarted(em: EntityManager, workflowId: string): Promise<void> {
    const start = await em.findOne(WorkflowStart, { workflowId, startedAt: null });
    if (start) await this.fire(em, start);
  }

  /**
   * Starts a service-wide workflow that runs for as long as the service does (a chain's block
   * producer or scanner), unless one with its id already runs. It belongs to no organization and
   * to no transaction, so it has no outbox row: the worker calls this at every start.
   */
  async ensureRunning<Input, Result>(flow: Flow<Input, Result>, input: NoInfer<Input>): Promise<void> {
    await this.client.workflow.start(flow.workflowType, {
      taskQueue: taskQueueOf(this.config.TEMPORAL_TASK_QUEUE, flow.queue ?? 'main'),
      workflowId: flow.workflowId(input),
      args: [input],
      workflowIdReusePolicy: WorkflowIdReusePolicy[flow.idReusePolicy],
      workflowIdConflictPolicy: WorkflowIdConflictPolicy.USE_EXISTING,
      ...(this.config.TEMPORAL_SEARCH_ATTRIBUTES ? { typedSearchAttributes: resourceSearchAttributes(flow.resource(input)) } : {}),
    });
  }

  /** Whether a workflow with this id is running now. */
  async isRunning(workflowId: string): Promise<boolean> {
    try {
      const description = await this.client.workflow.getHandle(workflowId).describe();
      return description.status.name === 'RUNNING';
    } catch (error) {
      if (error instanceof WorkflowNotFoundError) return false;
      throw error;
    }
  }

  /**
   * The reconciler found the resource of `workflowId` still pending with no workflow running:
   * start it again (its activities are idempotent), counting the restart on the row and in the log.
   */
  async restart(em: EntityManager, workflowId: string, reason: string): Promise<boolean> {
    const start = await em.findOne(WorkflowStart, { workflowId });
    if (!start) return false;
    start.restarts += 1;
    start.startedAt = null;
    start.lastError = reason;
    await em.nativeUpdate(WorkflowStart, { id: start.id }, { restarts: start.restarts, startedAt: null, lastError: reason });
    this.log.warn({ workflow_id: workflowId, restarts: start.restarts, reason }, 'reconciler restarted a workflow');
    return this.fire(em, start);
  }

  /** Sends a signal to a running workflow; false when none runs with that id. */
  async signal<Args extends unknown[]>(workflowId: string, signal: SignalDefinition<Args>, ...args: Args): Promise<boolean> {
    try {
      await this.client.workflow.getHandle(workflowId).signal(signal, ...args);
      return true;
    } catch (error) {
      if (error instanceof WorkflowNotFoundError) return false;
      throw error;
    }
  }

  /**
   * Sends an update and waits for its result (the workflow's answer), at most WORKFLOW_UPDATE_TIMEOUT_SECONDS: with no
   * worker to run it (down, restarting) a request answers 503 `worker_unavailable` instead of being held open. The
   * workflow's own refusal (its handler's failure) is thrown as Temporal gives it, for the caller to word. Every other
   * failure says the update did not run to its end, and a retry may: the workflow gone or continued as new before
   * answering (NotFound, or the server's AcceptedUpdateCompletedWorkflow), its task failed while a worker stopped
   * (WorkflowNotReady), the server aborting it, Temporal unreachable. Those are 503 `worker_unavailable` as well.
   */
  async executeUpdate<Ret, Args extends [unknown, ...unknown[]]>(workflowId: string, update: UpdateDefinition<Ret, Args>, ...args: Args): Promise<Ret> {
    const seconds = this.config.WORKFLOW_UPDATE_TIMEOUT_SECONDS;
    const deadline = Date.now() + seconds * 1000;
    try {
      return await this.client.withDeadline(deadline, () => this.client.workflow.getHandle(workflowId).executeUpdate(update, { args }));
    } catch (error) {
      if (error instanceof WorkflowUpdateFailedError && !serverUpdateFailure(error)) throw error;
      // The RPC's own deadline (gRPC's timer may fire a moment before the wall clock reaches it) or an earlier answer.
      const timedOut = Date.now() >= deadline || error instanceof WorkflowUpdateRPCTimeoutOrCancelledError;
      if (!timedOut) this.log.warn({ workflow_id: workflowId, err: failureMessage(error) }, 'a workflow update did not run to its end');
      throw errors.unavailable(
        'worker_unavailable',
        timedOut
          ? `The workflow ${workflowId} did not answer within ${seconds} s (its worker may be down or restarting). Retry later.`
          : `The workflow ${workflowId} did not finish the request (it moved on, or its worker stopped meanwhile). Retry later.`,
        5,
      );
    }
  }

  query<Ret, Args extends unknown[]>(workflowId: string, query: QueryDefinition<Ret, Args>, ...args: Args): Promise<Ret> {
    return this.client.workflow.getHandle(workflowId).query(query, ...args);
  }

  /**
   * Records a start of `flow` in a transaction of its own, fires it and waits for its result, at most
   * WORKFLOW_UPDATE_TIMEOUT_SECONDS (never inside a caller's transaction): for a request answered by a
   * short workflow on the worker (a signature). A refusal its activity made is thrown as that DomainError;
   * no answer in time (no worker, Temporal down), or any other failure, is a 503 `worker_unavailable`.
   */
  async run<Input, Result>(em: EntityManager, flow: Flow<Input, Result>, input: Input, organizationId: string | null): Promise<Result> {
    const workflowId = flow.workflowId(input);
    const seconds = this.config.WORKFLOW_UPDATE_TIMEOUT_SECONDS;
    await this.transaction(em, async (tx) => {
      recordStart(tx, flow, input, organizationId);
    });
    try {
      return await this.result<Result>(workflowId, new Date(Date.now() + seconds * 1000));
    } catch (error) {
      const refusal = domainRefusalOf(error);
      if (refusal) throw refusal;
      this.log.warn({ workflow_id: workflowId, err: failureMessage(error) }, 'a workflow the request waits on did not answer');
      throw errors.unavailable('worker_unavailable', `The workflow ${workflowId} did not answer within ${seconds} s (the worker may be down or restarting). Retry later.`, 5);
    }
  }

  /** Waits for a workflow's result (never inside a transaction or while holding a row lock); past `deadline`, rejects. */
  result<T>(workflowId: string, deadline?: Date): Promise<T> {
    const wait = () => this.client.workflow.getHandle(workflowId).result() as Promise<T>;
    return deadline ? this.client.withDeadline(deadline, wait) : wait();
  }
}

/** Failure types the Temporal server gives an update it ended itself (not the workflow's handler): the update never ran, or its workflow closed first. */
const SERVER_UPDATE_FAILURES = new Set(['UnprocessedUpdate', 'AcceptedUpdateCompletedWorkflow']);

const serverUpdateFailure = (error: WorkflowUpdateFailedError): boolean => error.cause instanceof ApplicationFailure && SERVER_UPDATE_FAILURES.has(error.cause.type ?? '');

/** A failure as the log keeps it: its message, bounded (never its stack or payload). */
const failureMessage = (error: unknown): string => (error instanceof Error ? error.message.slice(0, 500) : 'unknown error');
