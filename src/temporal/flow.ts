/**
 * A durable flow's definition, shared by the code that starts it and the workflow that carries it
 * out. Each flow module (`src/<domain>/flows/<flow>.ts`) defines one with `defineFlow`, beside its
 * signals, updates, queries and failure types; the workflow function is typed from it
 * (`WorkflowOf<typeof flow>`), so a start cannot pass the wrong input. Workflow-safe: no Node APIs.
 */

/**
 * History events after which a long-lived workflow (a chain scan, a devnet block producer, a refill
 * following its send, the reconciler) continues as new. Replay grows with history length; on the
 * 2-core build machine under load 500 events replay in 0.2-0.4 s, 3,400 in 1.3-1.5 s
 * (docs/durable-work.md).
 */
export const HISTORY_EVENTS_PER_RUN = 500;

/** What a start does when a closed workflow already has the id (Temporal's WorkflowIdReusePolicy). */
export type IdReusePolicy = 'ALLOW_DUPLICATE' | 'ALLOW_DUPLICATE_FAILED_ONLY' | 'REJECT_DUPLICATE';
/** What a start does when a workflow with the id is running (Temporal's WorkflowIdConflictPolicy). */
export type IdConflictPolicy = 'FAIL' | 'USE_EXISTING';

/**
 * Which of the service's task queues carries a flow. `main` (the default) is TEMPORAL_TASK_QUEUE;
 * `webhooks` is `<TEMPORAL_TASK_QUEUE>-webhooks`, served by a worker of its own with bounded slots,
 * so deliveries retrying against dead endpoints never take the slots money flows need.
 */
export type QueueRole = 'main' | 'webhooks';

/** The task queue of `role`, derived from the service's main queue (TEMPORAL_TASK_QUEUE). */
export function taskQueueOf(mainQueue: string, role: QueueRole): string {
  return role === 'main' ? mainQueue : `${mainQueue}-${role}`;
}

export interface Flow<Input, Result> {
  /** The exported workflow function's name in workflows/index.ts. */
  readonly workflowType: string;
  /** The business id (`card-provisioning-<cardId>`): one workflow per resource and purpose. */
  readonly workflowId: (input: Input) => string;
  /** The resource the workflow carries, for the ResourceType / ResourceId search attributes. */
  readonly resource: (input: Input) => { type: string; id: string };
  readonly idReusePolicy: IdReusePolicy;
  readonly idConflictPolicy: IdConflictPolicy;
  /** The task queue the flow runs on; absent: `main`. */
  readonly queue?: QueueRole;
  /** Phantom: carries the types; never set. */
  readonly types?: { input: Input; result: Result };
}

/** Queue of each flow defined off the main queue, by workflow type: a recorded start names only its type. */
const queueRoles = new Map<string, QueueRole>();

export function defineFlow<Input, Result>(definition: Omit<Flow<Input, Result>, 'types'>): Flow<Input, Result> {
  if (definition.queue && definition.queue !== 'main') queueRoles.set(definition.workflowType, definition.queue);
  return definition;
}

/**
 * The queue role of a workflow type, as its flow defined it. Flow modules are loaded wherever their
 * starts are recorded or fired (the API through its domains' services, the worker through its activities).
 */
export const queueRoleOf = (workflowType: string): QueueRole => queueRoles.get(workflowType) ?? 'main';

export type FlowInput<F> = F extends Flow<infer Input, unknown> ? Input : never;
export type FlowResult<F> = F extends Flow<unknown, infer Result> ? Result : never;
/** The signature a flow's workflow function must have. */
export type WorkflowOf<F> = F extends Flow<infer Input, infer Result> ? (input: Input) => Promise<Result> : never;
