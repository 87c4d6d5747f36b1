import { isGrpcServiceError, ScheduleAlreadyRunning, ScheduleNotFoundError, ScheduleOverlapPolicy, type Client, type Connection, type ScheduleOptions } from '@temporalio/client';
import { SearchAttributeType, type Duration } from '@temporalio/common';
import { temporal } from '@temporalio/proto';
import { servedChains } from '../chains/nodes';
import type { Config } from '../config';
import { LEDGER_INVARIANT_CHECK_SCHEDULE_ID, ledgerInvariantCheckWorkflowType, type LedgerInvariantCheckInput } from '../monitoring/flows/ledger-invariant-check';
import { ledgerReconciliationScheduleId, ledgerReconciliationWorkflowType, type LedgerReconciliationInput } from '../monitoring/flows/ledger-reconciliation';
import { LIGHTNING_INVOICE_EXPIRY_SCHEDULE_ID, invoiceExpirySweepWorkflowType, type InvoiceExpirySweepInput } from '../lightning/flows/invoice-expiry-sweep';
import { SEARCH_ATTRIBUTE_KEYS, resourceSearchAttributes } from './search-attributes';
import { STRIPE_ISSUING_RECONCILIATION_SCHEDULE_ID, stripeIssuingReconciliationWorkflowType, type StripeIssuingReconciliationInput } from '../cards/flows/issuer-reconciliation';
import { stripeIssuingFor } from '../cards/providers/stripe-issuer';

const INDEXED_TYPES: Record<string, temporal.api.enums.v1.IndexedValueType> = {
  [SearchAttributeType.KEYWORD]: temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
  [SearchAttributeType.TEXT]: temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_TEXT,
  [SearchAttributeType.INT]: temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_INT,
  [SearchAttributeType.DATETIME]: temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_DATETIME,
};

/** gRPC status ALREADY_EXISTS: what a second registration of the same attributes answers. */
const GRPC_ALREADY_EXISTS = 6;

/**
 * Registers our custom search attributes on the namespace if they are missing. Idempotent, and
 * safe when several workers start at once: a registration another worker made first counts as done.
 */
export async function ensureSearchAttributes(connection: Connection, namespace: string): Promise<string[]> {
  const existing = await connection.operatorService.listSearchAttributes({ namespace });
  const known = new Set([...Object.keys(existing.customAttributes ?? {}), ...Object.keys(existing.systemAttributes ?? {})]);
  const missing = SEARCH_ATTRIBUTE_KEYS.filter((key) => !known.has(key.name));
  if (missing.length) {
    try {
      await connection.operatorService.addSearchAttributes({
        namespace,
        searchAttributes: Object.fromEntries(missing.map((key) => [key.name, INDEXED_TYPES[key.type]!])),
      });
    } catch (error) {
      if (!isGrpcServiceError(error) || error.code !== GRPC_ALREADY_EXISTS) throw error;
      return [];
    }
  }
  return missing.map((key) => key.name);
}

export const IDEMPOTENCY_RETENTION_SCHEDULE_ID = 'idempotency-retention';
export const WORKFLOW_START_SWEEP_SCHEDULE_ID = 'workflow-start-sweep';
export const PENDING_WORK_RECONCILER_SCHEDULE_ID = 'pending-work-reconciler';
export const GAS_STATION_CHECK_SCHEDULE_ID = 'gas-station-check';
/** Schedules of earlier versions, deleted at start-up. */
const RETIRED_SCHEDULE_IDS = ['webhook-delivery-sweep'];

/** One recurring job: every `every`, start `workflowType` with `input`, skipping a tick while the last run is still going. */
function recurringJob(
  config: Pick<Config, 'TEMPORAL_TASK_QUEUE'>,
  job: { scheduleId: string; every: Duration; workflowType: string; input: unknown; runTimeout: Duration; description: string },
): ScheduleOptions {
  return {
    scheduleId: job.scheduleId,
    spec: { intervals: [{ every: job.every }] },
    action: {
      type: 'startWorkflow',
      workflowType: job.workflowType,
      workflowId: job.scheduleId,
      taskQueue: config.TEMPORAL_TASK_QUEUE,
      args: [job.input],
      workflowExecutionTimeout: job.runTimeout,
      typedSearchAttributes: resourceSearchAttributes({ type: job.scheduleId.replace(/-/g, '_'), id: job.scheduleId }),
    },
    // A missed tick is caught up within one interval; the next tick covers anything older.
    policies: { overlap: ScheduleOverlapPolicy.SKIP, catchupWindow: job.every },
    memo: { description: job.description },
  };
}

/** The recurring jobs of the service, as Temporal Schedules so operators see and pause them in the UI. */
export function scheduleDefinitions(config: Config): ScheduleOptions[] {
  return [
    recurringJob(config, {
      scheduleId: IDEMPOTENCY_RETENTION_SCHEDULE_ID,
      every: '1 hour',
      workflowType: 'idempotencyRetentionWorkflow',
      input: { retentionHours: config.IDEMPOTENCY_RETENTION_HOURS },
      runTimeout: '1 hour',
      description: 'Purges Idempotency-Key records older than the retention window',
    }),
    recurringJob(config, {
      scheduleId: WORKFLOW_START_SWEEP_SCHEDULE_ID,
      every: '1 minute',
      workflowType: 'workflowStartSweepWorkflow',
      // Starts younger than this are left to the after-commit firing of their own transaction.
      input: { graceSeconds: 30 },
      runTimeout: '10 minutes',
      description: 'Fires recorded workflow starts whose after-commit firing did not happen',
    }),
    recurringJob(config, {
      scheduleId: PENDING_WORK_RECONCILER_SCHEDULE_ID,
      every: '10 minutes',
      workflowType: 'pendingWorkReconcilerWorkflow',
      // Only resources pending this long: younger ones are still in their normal start path.
      input: { minAgeSeconds: 600 },
      runTimeout: '30 minutes',
      description: 'Restarts the workflow of any pending card, card transaction, Lightning payment or send that has none running',
    }),
    recurringJob(config, {
      scheduleId: LIGHTNING_INVOICE_EXPIRY_SCHEDULE_ID,
      every: config.LIGHTNING_INVOICE_EXPIRY_SWEEP_SECONDS * 1000,
      workflowType: invoiceExpirySweepWorkflowType,
      input: { batchSize: 500 } satisfies InvoiceExpirySweepInput,
      runTimeout: '10 minutes',
      description: 'Expires every pending incoming Lightning invoice whose expires_at has passed (no workflow per invoice)',
    }),
    recurringJob(config, {
      scheduleId: GAS_STATION_CHECK_SCHEDULE_ID,
      every: '1 minute',
      workflowType: 'gasStationCheckWorkflow',
      input: {},
      runTimeout: '10 minutes',
      description: 'Starts the refill of every auto-refill gas station whose balance on the chain is below its threshold',
    }),
    recurringJob(config, {
      scheduleId: LEDGER_INVARIANT_CHECK_SCHEDULE_ID,
      every: config.LEDGER_INVARIANT_CHECK_INTERVAL_SECONDS * 1000,
      workflowType: ledgerInvariantCheckWorkflowType,
      input: {} satisfies LedgerInvariantCheckInput,
      runTimeout: '1 hour',
      description: 'Proves the double-entry ledger whole (every posting balanced, every balance row the sum of its accounts); raises ledger.invariant_broken where not',
    }),
    ...(stripeIssuingFor(config)
      ? [
          recurringJob(config, {
            scheduleId: STRIPE_ISSUING_RECONCILIATION_SCHEDULE_ID,
            every: config.STRIPE_ISSUING_RECONCILIATION_INTERVAL_SECONDS * 1000,
            workflowType: stripeIssuingReconciliationWorkflowType,
            input: {} satisfies StripeIssuingReconciliationInput,
            runTimeout: '1 hour',
            description: "Compares Stripe Issuing's open authorizations and Issuing balance with the live cards; raises card_issuer.drift where they differ",
          }),
        ]
      : []),
    ...servedChains(config).map(({ chain, environment }) =>
      recurringJob(config, {
        scheduleId: ledgerReconciliationScheduleId(chain, environment),
        every: config.LEDGER_RECONCILIATION_INTERVAL_SECONDS * 1000,
        workflowType: ledgerReconciliationWorkflowType,
        input: { chain, environment } satisfies LedgerReconciliationInput,
        runTimeout: '6 hours',
        description: `Compares every ${chain} custody address in ${environment} with its node at the scanned block; raises ledger.drift where they differ`,
      }),
    ),
  ];
}

/** Creates each schedule, or brings an existing one up to date with its definition; removes retired ones. */
export async function ensureSchedules(client: Client, definitions: ScheduleOptions[]): Promise<void> {
  for (const retired of RETIRED_SCHEDULE_IDS) {
    await client.schedule
      .getHandle(retired)
      .delete()
      .catch((error: unknown) => {
        if (!(error instanceof ScheduleNotFoundError)) throw error;
      });
  }
  for (const definition of definitions) {
    try {
      await client.schedule.create(definition);
    } catch (error) {
      if (!(error instanceof ScheduleAlreadyRunning)) throw error;
      await client.schedule.getHandle(definition.scheduleId).update((previous) => ({
        ...previous,
        spec: definition.spec,
        action: definition.action as never,
        policies: { ...previous.policies, ...definition.policies },
      }));
    }
  }
}
