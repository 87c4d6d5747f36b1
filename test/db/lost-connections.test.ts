import assert from 'node:assert/strict';
import { once } from 'node:events';
import net from 'node:net';
import pg from 'pg';
import { parseDatabaseUrl } from '../../src/db/database-url';
import { sql } from '../../src/db/lean';
import { createOrm, type Orm } from '../../src/db/orm';
import { isDatabaseUnavailable } from '../../src/db/transient-errors';
import { testOrm } from '../support/environment';
import { eventually, within } from '../support/eventually';

/**
 * A TCP relay to PostgreSQL that can, for the next connection, end that connection's backend once its start-up is
 * done and hand the client the start-up's last message (ReadyForQuery) and the backend's FATAL in one write: what a
 * client meets when its postmaster dies (or an administrator ends its backend) as it connects, the two messages read
 * in one chunk. Everything else passes as it is.
 */
class Relay {
  private readonly sockets = new Set<net.Socket>();
  private readonly upstreams = new Set<net.Socket>();
  private endNextAfterStartUp: ((backendPid: number) => Promise<void>) | undefined;

  private constructor(
    private readonly server: net.Server,
    private readonly target: { host: string; port: number },
  ) {
    server.on('connection', (client) => this.relay(client));
  }

  static async start(target: { host: string; port: number }): Promise<Relay> {
    const server = net.createServer();
    const relay = new Relay(server, target);
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    return relay;
  }

  get port(): number {
    return (this.server.address() as net.AddressInfo).port;
  }

  /** The local ports of the relay's connections to PostgreSQL: their backends' `client_port`. */
  upstreamPorts(): number[] {
    return [...this.upstreams].map((socket) => socket.localPort!);
  }

  /** The next connection's backend is ended by `end` (given its pid) once it is ready, before the client hears so. */
  endNextBackendAfterStartUp(end: (backendPid: number) => Promise<void>): void {
    this.endNextAfterStartUp = end;
  }

  private relay(client: net.Socket): void {
    const upstream = net.connect(this.target.port, this.target.host);
    this.upstreams.add(upstream);
    for (const [socket, other] of [
      [client, upstream],
      [upstream, client],
    ] as const) {
      this.sockets.add(socket);
      socket.on('error', () => undefined);
      socket.on('close', () => {
        this.sockets.delete(socket);
        this.upstreams.delete(socket);
        other.end();
      });
    }
    client.pipe(upstream);
    const end = this.endNextAfterStartUp;
    this.endNextAfterStartUp = undefined;
    if (!end) {
      upstream.pipe(client);
      return;
    }
    // Held from the first byte: the start-up's messages (R, S…, K with the backend's pid, then Z), the FATAL after.
    let held = Buffer.alloc(0);
    let backendPid = 0;
    let ready = false;
    upstream.on('data', (chunk: Buffer) => {
      held = Buffer.concat([held, chunk]);
      if (ready) {
        client.end(held);
        return;
      }
      // Each message: its type's byte, then its length (itself included) as a 32-bit integer.
      for (let at = 0, length = 0; at + 5 <= held.length && at + (length = 1 + held.readInt32BE(at + 1)) <= held.length; at += length) {
        const type = String.fromCharCode(held[at]!);
        if (type === 'K') backendPid = held.readInt32BE(at + 5);
        if (type === 'Z') {
          ready = true;
          void end(backendPid);
          return;
        }
      }
    });
  }

  async stop(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    this.server.close();
    await once(this.server, 'close');
  }
}

/**
 * A backend that ends under the service's pools (its postmaster SIGKILLed in a failover, or pg_terminate_backend)
 * sends its connection a FATAL (57P01) and closes it, whatever the connection is doing. No connection of the ORM's
 * knex pool or of its statement pool (src/db/lean.ts) may then be without an 'error' listener: an 'error' nothing
 * listens to throws, and takes the API or the worker down (the failover drill's worker, on Node 26). The statements
 * it cut short fail as "database unavailable" (a 503, an activity's retry), and the next ones run on new connections.
 */
describe('A backend ending under the pools: no process crash, the pools recover', function () {
  let admin: pg.Client;
  let relay: Relay;
  let orm: Orm;
  const viaKnex = (statement: string) => orm.em.fork().getConnection().execute<{ one?: number }[]>(statement);
  const viaStatementPool = (statement: string) => sql<{ one?: number }>(orm.em.fork(), statement, []);
  const terminate = async (pids: number[]) => {
    await admin.query('select pg_terminate_backend(pid) from unnest($1::int[]) as pid', [pids]);
  };
  /**
   * Both pools answer again. A pool drops a dead connection once its FATAL or its end has arrived; a statement that
   * takes it before then fails as unavailable (a 503, an activity's retry), and so may one taken just after another
   * failed on it, before the socket's end came (knex hands it back at the statement's error).
   */
  const bothPoolsAnswer = async () => {
    const answers = await eventually(
      () => Promise.all([viaKnex('select 1 as one'), viaStatementPool('select 1 as one')]).catch((error: unknown) => {
        assert.equal(isDatabaseUnavailable(error), true, String(error));
        return undefined;
      }),
      'both pools answering',
    );
    assert.deepEqual(answers, [[{ one: 1 }], [{ one: 1 }]]);
  };
  /** The backends of the relay's connections, as pg_stat_activity shows them. */
  const relayed = async () =>
    (await admin.query<{ pid: number; state: string | null }>('select pid, state from pg_stat_activity where client_port = any($1::int[])', [relay.upstreamPorts()])).rows;

  before(async () => {
    await testOrm();
    const url = process.env.DATABASE_URL!;
    const [host] = parseDatabaseUrl(url).hosts;
    admin = new pg.Client({ connectionString: url });
    await admin.connect();
    relay = await Relay.start(host!);
    orm = await createOrm(url.replace(`${host!.host}:${host!.port}`, `127.0.0.1:${relay.port}`), 4);
  });

  after(async () => {
    await orm?.close();
    await relay?.stop();
    await admin?.end();
  });

  /**
   * Ends relayed backends until the relay holds no connection at all, twice in a row: a connection still starting up
   * (one a pool opened for an earlier attempt of bothPoolsAnswer) is not yet in pg_stat_activity, and would otherwise
   * live on and serve the next statement instead of a new connection.
   */
  const noRelayedConnection = async () => {
    let emptyBefore = false;
    await eventually(async () => {
      await terminate((await relayed()).map((backend) => backend.pid));
      const empty = relay.upstreamPorts().length === 0;
      const settled = empty && emptyBefore;
      emptyBefore = empty;
      return settled ? true : undefined;
    }, 'no connection through the relay');
  };

  /**
   * Makes sure no connection is idle in either pool, then has the next connection's backend ended as its start-up
   * completes; `ended` resolves with that backend's pid once it is ended (its FATAL may reach the client first).
   */
  const endNextNewConnection = async () => {
    await noRelayedConnection();
    await bothPoolsAnswer();
    await noRelayedConnection();
    // In an object: an async function's promise would wait for this one, which only the next statement settles.
    return {
      ended: new Promise<number>((resolve) =>
        relay.endNextBackendAfterStartUp(async (pid) => {
          await terminate([pid]);
          resolve(pid);
        }),
      ),
    };
  };

  it('a new connection of the statement pool whose backend ends as its start-up completes: the statement fails as unavailable, the next ones run', async () => {
    const { ended } = await endNextNewConnection();
    await assert.rejects(viaStatementPool('select 1 as one'), (error: unknown) => isDatabaseUnavailable(error));
    await within(ended, "the statement's connection ended as its start-up completed", 10_000);
    await bothPoolsAnswer();
  });

  it("a new connection of knex's pool whose backend ends as its start-up completes: the statement runs on another (knex checks it as it hands it out) or fails as unavailable", async () => {
    const { ended } = await endNextNewConnection();
    // Which of the two depends on whether the FATAL has been read when knex checks the connection (one chunk or two).
    await viaKnex('select 1 as one').then(
      (rows) => assert.deepEqual(rows, [{ one: 1 }]),
      (error: unknown) => assert.equal(isDatabaseUnavailable(error), true, String(error)),
    );
    await within(ended, "the statement's first connection ended as its start-up completed", 10_000);
    await bothPoolsAnswer();
  });

  it('idle connections of both pools whose backends end: the next statements run on new ones', async () => {
    // From pools with no dead connection left by an earlier test.
    await bothPoolsAnswer();
    await Promise.all([viaKnex('select pg_sleep(0.2)'), viaKnex('select pg_sleep(0.2)'), viaStatementPool('select pg_sleep(0.2)'), viaStatementPool('select pg_sleep(0.2)')]);
    const idle = await relayed();
    assert.ok(idle.length >= 4 && idle.every((backend) => backend.state === 'idle'), JSON.stringify(idle));
    await terminate(idle.map((backend) => backend.pid));
    await bothPoolsAnswer();
  });

  it('busy connections of both pools whose backends end: their statements fail as unavailable, the next ones run', async () => {
    const busy = [viaKnex('select pg_sleep(60)'), viaStatementPool('select pg_sleep(60)')].map((statement) => statement.then(() => undefined, (error: unknown) => error));
    const sleeping = await eventually(async () => {
      const active = (await relayed()).filter((backend) => backend.state === 'active');
      return active.length === 2 ? active : undefined;
    }, 'both statements running');
    await terminate(sleeping.map((backend) => backend.pid));
    for (const error of await Promise.all(busy)) assert.equal(isDatabaseUnavailable(error), true, String(error));
    await bothPoolsAnswer();
  });
});
