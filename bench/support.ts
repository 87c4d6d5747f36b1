import { mkdir, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import path from 'node:path';
import { fork } from 'node:child_process';
import type autocannon from 'autocannon';
import type Koa from 'koa';

/**
 * What every benchmark shares: its duration and concurrency settings, an HTTP measurement with
 * autocannon, and the result file that `npm run bench` summarizes. A benchmark always measures its
 * baseline in the same run, on the same machine, and reports the ratio: absolute numbers move with
 * the machine, the ratio is what to compare between runs.
 */
export const BENCH_SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
export const BENCH_CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);

export interface HttpMeasurement {
  target: string;
  connections: number;
  requests_per_second: number;
  latency_p50_ms: number;
  latency_p99_ms: number;
  /** With `serverCpu`: this process's CPU time (user + system) per request of the measured run, in µs. */
  server_cpu_us_per_request?: number;
}

/**
 * Requests per second and latency of one target after a 2 s warm-up; any non-2xx answer fails the benchmark.
 * With uniqueBody, every request sends a body of its own: the template with each `[<unique>]` replaced by a
 * fresh UUID (unique references for creates). autocannon's idReplacement is not used for that: it sends a
 * Content-Length that assumes ids of a fixed length.
 * With serverCpu (a server in this process), the row also has this process's CPU per request: on a shared
 * machine it moves far less than throughput does, and throughput on an idle one follows it.
 */
export async function measureHttp(
  target: string,
  url: string,
  options: { headers?: Record<string, string>; connections?: number; seconds?: number; method?: 'GET' | 'POST'; body?: string; uniqueBody?: string; serverCpu?: boolean } = {},
): Promise<HttpMeasurement> {
  const connections = options.connections ?? BENCH_CONNECTIONS;
  const request = { url, connections, headers: options.headers ?? {}, method: options.method ?? 'GET', body: options.body, uniqueBody: options.uniqueBody };
  await load({ ...request, duration: 2 });
  const cpuBefore = process.cpuUsage();
  const result = await load({ ...request, duration: options.seconds ?? BENCH_SECONDS });
  const cpu = process.cpuUsage(cpuBefore);
  if (result.non2xx || result.errors || result.timeouts || !result['2xx']) {
    throw new Error(`${target}: ${result['2xx']} 2xx answers, ${result.non2xx} non-2xx, ${result.errors} errors, ${result.timeouts} timeouts`);
  }
  const measurement = { target, connections, requests_per_second: result.requests.average, latency_p50_ms: result.latency.p50, latency_p99_ms: result.latency.p99 };
  if (!options.serverCpu) return measurement;
  return { ...measurement, server_cpu_us_per_request: Math.round((cpu.user + cpu.system) / result.requests.total) };
}

/** autocannon's options, and a body template the child fills per request (functions do not cross to a child). */
export type LoadOptions = autocannon.Options & { uniqueBody?: string };

/** One autocannon run in a child process (bench/load.ts), without the benchmark's node flags (a profile covers the server alone). */
function load(options: LoadOptions): Promise<autocannon.Result> {
  return new Promise((resolve, reject) => {
    const child = fork(path.join(__dirname, 'load.js'), { execArgv: [] });
    let result: autocannon.Result | undefined;
    child.once('message', (message) => {
      result = message as autocannon.Result;
    });
    child.once('error', reject);
    child.once('exit', (code) => (result ? resolve(result) : reject(new Error(`the load generator exited with ${code}`))));
    child.send(options);
  });
}

/** A virtual card's create body (POST /api/cards), the same for every benchmark that needs a card. */
export const BENCH_CARD_BODY = {
  amount: 0,
  card_type: 'virtual',
  currency: 'USD',
  name: 'Benchmark card',
  customer: {
    customer_type: 'individual', first_name: 'Ada', last_name: 'Lovelace', email: 'ada@example.com', phone_number: '5550100', dial_code: '+1',
    date_of_birth: '1990-12-10', id_type: 'passport', id_number: 'P1234567', line1: '1 Main St', city: 'Springfield', state: 'IL', postal_code: '62701', country: 'USA',
  },
};

export const listen = (app: Koa): Promise<Server> =>
  new Promise((resolve) => {
    const server = app.listen(0, '127.0.0.1', () => resolve(server));
  });

export const urlOf = (server: Server): string => `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

/** One ratio of a benchmark against its baseline, with the goal the project set for it (higher is better). */
export interface Ratio {
  name: string;
  value: number;
  goal?: number;
}

/** Prints a benchmark's table and ratios and writes bench/results/<name>.json for the run's summary. */
export async function report(name: string, rows: object[], ratios: Ratio[], extra: Record<string, unknown> = {}): Promise<void> {
  console.log(`\n## ${name}`);
  console.table(rows);
  for (const ratio of ratios) {
    const goal = ratio.goal === undefined ? '' : ` (goal ${ratio.goal}: ${ratio.value >= ratio.goal ? 'met' : 'not met'})`;
    console.log(`${ratio.name}: ${ratio.value.toFixed(3)}${goal}`);
  }
  const out = path.resolve(__dirname, '../../bench/results');
  await mkdir(out, { recursive: true });
  await writeFile(path.join(out, `${name}.json`), JSON.stringify({ name, date: new Date().toISOString(), rows, ratios, ...extra }, null, 2));
}

/** Runs a benchmark's main and exits non-zero on failure. */
export function runBenchmark(main: () => Promise<void>): void {
  main().then(
    () => process.exit(0),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
}
