import { freshnessOf, type Freshness } from './measured-code';
import { freshnessLine, type BenchResult } from './table';

/** docs/scaling.md's generated section, between these markers. */
export const SCALING_START = '<!-- scaling-tables: written by `npm run bench:table` from the newest bench/results/*-scaling.json; edit that, not this -->';
export const SCALING_END = '<!-- scaling-tables end -->';

/** What bench/scaling.ts records per flow (its `capacity`). */
interface FlowCapacity {
  flow: string;
  shape: { activities: number; localActivities: number };
  measured_per_second: number;
  latency_p99_ms: number;
  machine_idle_share: number;
  bare_per_second: number;
  bare_temporal_history_ms: number;
  cpu_ms_per_flow: Record<'api' | 'worker' | 'temporal_history' | 'temporal_other' | 'postgresql_service' | 'postgresql_temporal' | 'total_without_load_generator', number>;
  machine_per_second_predicted: number;
}

export type ScalingResult = BenchResult & { capacity: FlowCapacity[]; shards: number; in_flight: number };

/** The loads the sizing table is worked out for, in flows per second of one kind. */
export const SIZING_LOADS = [100, 1_000];
/** The share of a core a part is planned to use: headroom for bursts, a deploy's restarts and a failed-over peer. */
export const PLANNED_UTILIZATION = 0.6;

const fixed = (value: number, digits = 1) => value.toFixed(digits);
const perCore = (ms: number) => (ms > 0 ? fixed(1000 / ms, 0) : '—');
/** Cores (or single-loop Node processes) a part needs for `load` flows/s at the planned utilization. */
const needed = (ms: number, load: number) => Math.max(1, Math.ceil((ms * load) / (1000 * PLANNED_UTILIZATION)));

/** docs/scaling.md's tables from the newest scaling result, saying whether it still measures the current code and Node (`freshness`). */
export function scalingTables(result: ScalingResult, freshness: Freshness = freshnessOf(result)): string {
  const measured = [
    '| flow | its shape (activities, local) | measured flows/s | p99 ms | machine idle | bare workflows of its shape/s | predicted flows/s for these cores (its CPU per flow, load generator included) |',
    '|---|---|---|---|---|---|---|',
    ...result.capacity.map(
      (each) =>
        `| ${each.flow} | ${each.shape.activities}, ${each.shape.localActivities} | ${fixed(each.measured_per_second)} | ${each.latency_p99_ms} | ${fixed(each.machine_idle_share * 100, 0)} % | ` +
        `${fixed(each.bare_per_second)} | ${fixed(each.machine_per_second_predicted)} |`,
    ),
  ];
  const cpu = [
    '| flow | API | worker | Temporal history | other Temporal services | PostgreSQL (service) | PostgreSQL (Temporal) | total |',
    '|---|---|---|---|---|---|---|---|',
    ...result.capacity.map(({ flow, cpu_ms_per_flow: ms }) =>
      `| ${flow} | ${fixed(ms.api, 2)} | ${fixed(ms.worker, 2)} | ${fixed(ms.temporal_history, 2)} | ${fixed(ms.temporal_other, 2)} | ${fixed(ms.postgresql_service, 2)} | ${fixed(ms.postgresql_temporal, 2)} | ${fixed(ms.total_without_load_generator, 2)} |`,
    ),
  ];
  const unit = [
    '| flow | one API process | one worker process | one core of Temporal history | one core of PostgreSQL (service) | one core of PostgreSQL (Temporal) |',
    '|---|---|---|---|---|---|',
    ...result.capacity.map(({ flow, cpu_ms_per_flow: ms }) => `| ${flow} | ${perCore(ms.api)} | ${perCore(ms.worker)} | ${perCore(ms.temporal_history)} | ${perCore(ms.postgresql_service)} | ${perCore(ms.postgresql_temporal)} |`),
  ];
  const sizing = [
    '| flow | flows/s | API processes | worker processes | history shards (at most) | Temporal history cores | other Temporal cores | PostgreSQL cores (service) | PostgreSQL cores (Temporal) |',
    '|---|---|---|---|---|---|---|---|---|',
    ...result.capacity.flatMap(({ flow, cpu_ms_per_flow: ms, bare_per_second: shard }) =>
      SIZING_LOADS.map(
        (load) =>
          `| ${flow} | ${load.toLocaleString('en-US')} | ${needed(ms.api, load)} | ${needed(ms.worker, load)} | ${Math.max(1, Math.ceil(load / (shard * PLANNED_UTILIZATION)))} | ` +
          `${needed(ms.temporal_history, load)} | ${needed(ms.temporal_other, load)} | ` +
          `${needed(ms.postgresql_service, load)} | ${needed(ms.postgresql_temporal, load)} |`,
      ),
    ),
  ];
  const source =
    `From [\`${result.file}\`](../bench/results/${result.file}): ${result.date.slice(0, 16).replace('T', ' ')} UTC, commit ${result.commit ?? 'unknown'} (${freshnessLine(freshness)}), ` +
    `node ${result.machine.node}, ${result.machine.cores} cores (load average ${result.machine.load_average.map((value) => value.toFixed(1)).join(' ')} at the end, machine shared: ${result.settings.machine_shared}); ` +
    `${result.shards} history shard, ${result.in_flight} flows in flight, ${result.settings.rounds} rounds of ${result.seconds ?? result.settings.seconds} s; PostgreSQL ` +
    (typeof result.settings.database === 'string' ? result.settings.database : Object.entries(result.settings.database).map(([name, value]) => `${name} ${value}`).join(', ')) +
    '.';
  return [
    SCALING_START,
    '',
    source,
    '',
    '**The run**: one API process, one worker process, a Temporal cluster with one history shard, both PostgreSQL servers and the load generator on one machine.',
    '',
    ...measured,
    '',
    '**CPU ms per flow**, by part (medians of the rounds, each part\'s idle use subtracted):',
    '',
    ...cpu,
    '',
    '**Flows/s one of each sustains** at a whole core (1000 ms / its ms per flow; a Node process runs one event loop, so one API or worker process is at most one core):',
    '',
    ...unit,
    '',
    `**What a load needs**, each part planned at ${PLANNED_UTILIZATION * 100} % of a core (at least one of each):`,
    '',
    ...sizing,
    '',
    SCALING_END,
  ].join('\n');
}

/** docs/scaling.md with its generated section replaced. */
export function withScalingTables(doc: string, tables: string): string {
  const start = doc.indexOf(SCALING_START);
  const end = doc.indexOf(SCALING_END);
  if (start < 0 || end < start) throw new Error(`docs/scaling.md has no section between "${SCALING_START}" and "${SCALING_END}"`);
  return doc.slice(0, start) + tables + doc.slice(end + SCALING_END.length);
}
