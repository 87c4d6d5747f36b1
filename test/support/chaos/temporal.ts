import path from 'node:path';
import { eventually } from '../eventually';
import { freeLoopbackPort } from '../ports';
import { CLUSTER_SERVICES, TemporalCluster, type ClusterService } from '../temporal-cluster';
import { PostgresComponent, Replicas, killAndWait, logTail, running, shell, type Component } from './components';
import type { StartedProcesses } from './started-processes';

/** The Temporal of a run: its address, what the chaos kills of it, and its stop at the end. */
export interface ChaosTemporal {
  address: string;
  components: Component[];
  stop(): Promise<void>;
  log(): string;
}

/**
 * The Temporal dev server started on free ports, before anything is told its address: ports another
 * process took between their pick and the server's bind (four test processes pick ports at once) are
 * picked again. Every restart after that keeps them.
 */
export async function startedDevServer(dir: string, processes: StartedProcesses): Promise<ChaosTemporal> {
  for (let attempt = 1; ; attempt += 1) {
    const temporal = new DevServerComponent(dir, await freeLoopbackPort(), await freeLoopbackPort(), processes);
    try {
      await temporal.start();
      return { address: `127.0.0.1:${temporal.port}`, components: [temporal], stop: () => temporal.stop(), log: () => temporal.log() };
    } catch (error) {
      if (attempt >= 3 || !(error as Error).message.includes('address already in use')) throw error;
    }
  }
}

/** The Temporal dev server as `npm start` runs it (temporal_dev_start: its SQLite file in WAL mode), the same file and port on every start. */
class DevServerComponent implements Component {
  readonly name = 'temporal' as const;
  private pid = 0;
  constructor(
    private readonly dir: string,
    readonly port: number,
    private readonly uiPort: number,
    private readonly processes: StartedProcesses,
  ) {}

  async start() {
    this.pid = Number(
      await shell('temporal_dev_start "$@" >&2 && echo "$TEMPORAL_DEV_PID"', path.join(this.dir, 'temporal.db'), String(this.port), String(this.uiPort), path.join(this.dir, 'temporal.log')),
    );
    this.processes.started(this.name, this.pid);
  }

  async kill() {
    return killAndWait(this, this.processes, { pid: this.pid, group: false });
  }

  alive() {
    return running(this.pid);
  }

  async stop() {
    if (await this.alive()) process.kill(this.pid, 'SIGTERM');
    await eventually(async () => ((await this.alive()) ? undefined : true), 'temporal stopped', 30_000, 100).catch(() => killAndWait(this, this.processes, { pid: this.pid, group: false }));
    this.processes.ended(this.pid);
  }

  log() {
    return `temporal: ${logTail(path.join(this.dir, 'temporal.log'))}`;
  }
}

/**
 * A Temporal cluster (scripts/temporal-cluster.sh: frontend, two history processes, matching and worker, each a process)
 * on a PostgreSQL of its own, which the chaos does not kill: in production Temporal's store is a server of its own, apart
 * from the service's database that the chaos kills. The chaos kills one history process at a time (the other takes over
 * its shards) and the matching service (its task queues are loaded again from the store when it is back).
 */
export async function startedCluster(dir: string, processes: StartedProcesses, log: (line: string) => void): Promise<ChaosTemporal> {
  const store = new PostgresComponent(path.join(dir, 'postgres'), await freeLoopbackPort(), processes, 'temporal-postgres');
  await store.start();
  const cluster = new TemporalCluster({
    dir: path.join(dir, 'cluster'),
    pgPort: store.port,
    database: 'temporal',
    visibilityDatabase: 'temporal_visibility',
    started: (service, pid) => processes.started(`temporal-${service}`, pid),
  });
  const stop = async () => {
    await cluster.stop();
    for (const name of CLUSTER_SERVICES) {
      const pid = cluster.pid(name);
      if (pid) processes.ended(pid);
    }
    await store.stop();
  };
  try {
    const seconds = await cluster.start();
    log(`the Temporal cluster is up on ${cluster.address} in ${seconds.toFixed(1)} s`);
  } catch (error) {
    await stop();
    throw error;
  }
  const service = (name: ClusterService) => new ClusterServiceComponent(cluster, name, processes);
  return {
    address: cluster.address,
    components: [new Replicas('history', [service('history-1'), service('history-2')]), new Replicas('matching', [service('matching')])],
    stop,
    log: () => cluster.logs(),
  };
}

/** One service process of the cluster, started again with the same configuration and ports. */
class ClusterServiceComponent implements Component {
  readonly name: 'history' | 'matching';
  constructor(
    private readonly cluster: TemporalCluster,
    private readonly service: ClusterService,
    private readonly processes: StartedProcesses,
  ) {
    this.name = service === 'matching' ? 'matching' : 'history';
  }

  async start() {
    this.cluster.startService(this.service);
  }

  async kill() {
    const pid = this.cluster.pid(this.service);
    if (!(await this.cluster.kill(this.service))) return false;
    this.processes.ended(pid!);
    return true;
  }

  async alive() {
    return this.cluster.running(this.service);
  }

  async stop() {
    // The cluster's stop stops every service.
  }

  /** Its own service's log, as the supervisor reports an exit of this process. */
  log() {
    return this.cluster.logs([this.service]);
  }
}
