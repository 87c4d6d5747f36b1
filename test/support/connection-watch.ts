import pg from 'pg';

/** The client connections of one server at one moment, by application_name (`custody-api:orm`…). */
export interface ConnectionSample {
  at: Date;
  total: number;
  byName: Record<string, number>;
}

/**
 * pg_stat_activity's client connections on one server, sampled every `intervalMs` over a connection of its own
 * (opened first, so that a server that fills up still answers it): the sample with the most connections, for the
 * failover drill's bound on what the service opens on the promoted standby and its report when that is exceeded.
 */
export class ConnectionWatch {
  peak: ConnectionSample | undefined;
  private timer: NodeJS.Timeout | undefined;
  private sampling: Promise<void> = Promise.resolve();

  private constructor(private readonly client: pg.Client) {}

  static async start(connectionString: string, intervalMs = 1000): Promise<ConnectionWatch> {
    const client = new pg.Client({ connectionString, application_name: 'drill:watch' });
    client.on('error', () => undefined);
    await client.connect();
    const watch = new ConnectionWatch(client);
    await watch.sample();
    watch.timer = setInterval(() => (watch.sampling = watch.sampling.then(() => watch.sample())), intervalMs);
    return watch;
  }

  private async sample(): Promise<void> {
    const { rows } = await this.client
      .query<{ name: string; count: number }>(
        `SELECT application_name AS name, count(*)::int AS count FROM pg_stat_activity
         WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() GROUP BY 1`,
      )
      .catch(() => ({ rows: [] }));
    const total = rows.reduce((sum, row) => sum + row.count, 0);
    if (!this.peak || total > this.peak.total) this.peak = { at: new Date(), total, byName: Object.fromEntries(rows.map((row) => [row.name, row.count])) };
  }

  async stop(): Promise<ConnectionSample | undefined> {
    clearInterval(this.timer);
    await this.sampling;
    await this.client.end().catch(() => undefined);
    return this.peak;
  }
}

/** `custody-api:orm 10, custody-worker:orm 8, …`, the most first. */
export const describeSample = (sample: ConnectionSample): string =>
  `${sample.total} at ${sample.at.toISOString()} (${Object.entries(sample.byName)
    .sort(([, a], [, b]) => b - a)
    .map(([name, count]) => `${name || '(no name)'} ${count}`)
    .join(', ')})`;
