import type { Client, WorkflowExecutionInfo } from '@temporalio/client';
import { chainScanFlow } from '../../../src/monitoring/flows/chain-scan';
import { devnetBlocksFlow } from '../../../src/chains/flows/devnet-blocks';

/**
 * The workflows that stay open once the load has settled, by design, each named with why: none of them is work of
 * the load, and none ends when the service is idle. Everything else Temporal has running after the settle window is
 * work the run started that did not end (checks.ts: a violation, named by its id and type).
 */
const OPEN_BY_DESIGN: { what: string; why: string; matches: (info: WorkflowExecutionInfo) => boolean }[] = [
  {
    what: `the chain scans (${chainScanFlow.workflowType})`,
    why: 'the chain scan of each served chain (sandbox Ethereum on anvil here) follows the tip for as long as the service runs',
    matches: (info) => info.type === chainScanFlow.workflowType,
  },
  {
    what: `the devnet block producers (${devnetBlocksFlow.workflowType})`,
    why: "each devnet's block producer (the Tron devnet of the payout trips here) mines for as long as the service runs",
    matches: (info) => info.type === devnetBlocksFlow.workflowType,
  },
  {
    what: "recurring jobs' runs (TemporalScheduledById)",
    why: 'a run of one of the service\'s Temporal Schedules (the workflow-start sweep, the gas station check, …): started by its schedule, not by the load, it ends on its own within its run timeout',
    matches: (info) => !!info.raw.searchAttributes?.indexedFields?.['TemporalScheduledById'],
  },
];

export interface OpenWorkflows {
  /** Open and not by design: `<workflow id> (<type>)`. */
  unexpected: string[];
  /** Open by design, counted per entry of OPEN_BY_DESIGN: `<what> (<count>): <why>`. */
  byDesign: string[];
}

/** What the cluster's visibility lists as running in the namespace (ExecutionStatus="Running"), sorted by OPEN_BY_DESIGN. */
export async function openWorkflows(temporal: Client): Promise<OpenWorkflows> {
  const unexpected: string[] = [];
  const counted = new Map<(typeof OPEN_BY_DESIGN)[number], number>();
  for await (const info of temporal.workflow.list({ query: 'ExecutionStatus="Running"' })) {
    const design = OPEN_BY_DESIGN.find((each) => each.matches(info));
    if (design) counted.set(design, (counted.get(design) ?? 0) + 1);
    else unexpected.push(`${info.workflowId} (${info.type})`);
  }
  return { unexpected, byDesign: [...counted].map(([design, count]) => `${design.what} (${count}): ${design.why}`) };
}
