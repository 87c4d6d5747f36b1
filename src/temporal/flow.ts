/**
 * A durable flow's definition, shared by the code that starts it and the workflow that carries it
 * out. Each flow module (`src/<domain>/flows/<flow>.ts`) defines one with `defineFlow`, beside its
 * signals, updates, queries and failure types; the workflow function is typed from it
 * (`WorkflowOf<typeof flow>`), so a start cannot pass the wrong input. Workflow-safe: no Node APIs.
 */

/** What a start does when a closed workflow already has the id (Temporal's WorkflowIdReusePolicy). */
export type IdReusePolicy = 'ALLOW_DUPLICATE' | 'ALLOW_DUPLICATE_FAILED_ONLY' | 'REJECT_DUPLICATE';
/** What a start does when a workflow with the id is running (Temporal's WorkflowIdConflictPolicy). */
export type IdConflictPolicy = 'FAIL' | 'USE_EXISTING';

export interface Flow<Input, Result> {
  /** The exported workflow function's name in workflows/index.ts. */
  readonly workflowType: string;
  /** The business id (`card-provisioning-<cardId>`): one workflow per resource and purpose. */
  readonly workflowId: (input: Input) => string;
  /** The resource the workflow carries, for the ResourceType / ResourceId search attributes. */
  readonly resource: (input: Input) => { type: string; id: string };
  readonly idReusePolicy: IdReusePolicy;
  readonly idConflictPolicy: IdConflictPolicy;
  /** Phantom: carries the types; never set. */
  readonly types?: { input: Input; result: Result };
}

export function defineFlow<Input, Result>(definition: Omit<Flow<Input, Result>, 'types'>): Flow<Input, Result> {
  return definition;
}

export type FlowInput<F> = F extends Flow<infer Input, unknown> ? Input : never;
export type FlowResult<F> = F extends Flow<unknown, infer Result> ? Result : never;
/** The signature a flow's workflow function must have. */
export type WorkflowOf<F> = F extends Flow<infer Input, infer Result> ? (input: Input) => Promise<Result> : never;
