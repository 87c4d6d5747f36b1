import assert from 'node:assert/strict';
import { access, chmod, constants, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { sql } from '../../src/db/lean';
import { createOrm, type Orm } from '../../src/db/orm';
import { isDatabaseUnavailable } from '../../src/db/transient-errors';
import { running, shell } from '../support/chaos/components';
import { sigkill } from '../support/chaos/started-processes';
import { eventually } from '../support/eventually';
import { missingTool } from '../support/missing-tool';
import { freeLoopbackPort } from '../support/ports';
import { PrimaryWithStandby } from '../support/standby';

/** The port of the server a statement ran on: through knex's pool, and through the ORM's statement pool (lean.ts). */
async function serverPorts(orm: Orm): Promise<number[]> {
  const [viaKnex] = await orm.em.fork().getConnection().execute<{ port: number }[]>('select inet_server_port() as port');
  const [viaStatements] = await sql<{ port: number }>(orm.em.fork(), 'select inet_server_port() as port', []);
  return [viaKnex!.port, viaStatements!.port];
}

/**
 * DATABASE_URL with several hosts and target_session_attrs=read-write (src/db/writable-host.ts), against a real
 * primary and its hot standby (scripts/postgres.sh): connections go to the writable one whatever the order, a dead host
 * is passed over, and after a failover new connections go to the promoted standby.
 */
describe('A DATABASE_URL of several hosts: connections go to the writable one', function () {
  this.timeout(180_000);
  let dir: string;
  let servers: PrimaryWithStandby;
  let deadPort: number;
  const opened: Orm[] = [];
  const orm = async (url: string) => {
    const made = await createOrm(url, 2);
    opened.push(made);
    return made;
  };

  before(async function () {
    const bin = await shell('pg_bin_dir').catch(() => '');
    if (!bin || !(await access(path.join(bin, 'pg_basebackup'), constants.X_OK).then(() => true, () => false))) {
      missingTool(this, "PostgreSQL's server binaries with pg_basebackup (Debian's postgresql package)");
    }
    dir = await mkdtemp(path.join(os.tmpdir(), 'custody-standby-'));
    // The clusters' owner (the postgres user, when we run as root) must reach its folder inside.
    await chmod(dir, 0o711);
    servers = await PrimaryWithStandby.create(dir);
    await servers.start();
    deadPort = await freeLoopbackPort();
  });

  after(async () => {
    for (const each of opened) await each.close().catch(() => undefined);
    await servers?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('passes over a dead host and the read-only standby to the primary, for the ORM and its statement pool', async () => {
    const { primary, standby } = servers.ports;
    const url = `postgresql://postgres@127.0.0.1:${deadPort},127.0.0.1:${standby},127.0.0.1:${primary}/postgres?target_session_attrs=read-write`;
    assert.deepEqual(await serverPorts(await orm(url)), [primary, primary]);
    // Without read-write, the first host that answers: the standby.
    assert.deepEqual(await serverPorts(await orm(`postgresql://postgres@127.0.0.1:${deadPort},127.0.0.1:${standby},127.0.0.1:${primary}/postgres`)), [standby, standby]);
  });

  it('fails as "database unavailable" (503, start-up waits) when no host takes writes, naming the hosts and never the password', async () => {
    const { standby } = servers.ports;
    const error = await createOrm(`postgresql://postgres:hunter2-pw@127.0.0.1:${deadPort},127.0.0.1:${standby}/postgres?target_session_attrs=read-write`, 1).then(
      (made) => {
        opened.push(made);
        return undefined;
      },
      (failure: unknown) => failure,
    );
    assert.ok(error instanceof Error, 'no ORM without a writable host');
    assert.equal(isDatabaseUnavailable(error), true, error.message);
    assert.match(error.message, new RegExp(`127\\.0\\.0\\.1:${standby} is read-only`));
    assert.doesNotMatch(`${error.message} ${error.stack} ${String(error.cause)}`, /hunter2/);
  });

  it('after a failover (the primary SIGKILLed, the standby promoted) makes its new connections to the promoted standby, nothing committed lost', async () => {
    const { primary, standby } = servers.ports;
    const service = await orm(servers.failoverUrl());
    const run = (statement: string) => service.em.fork().getConnection().execute(statement);
    await run('create table drill (n int primary key)');
    await run('insert into drill values (1)');
    assert.deepEqual(await serverPorts(service), [primary, primary]);

    assert.ok(sigkill({ pid: servers.primaryPid, group: true }));
    await eventually(async () => ((await running(servers.primaryPid)) ? undefined : true), 'the primary gone', 30_000, 100);
    // Between the kill and the promotion no host takes writes: a statement fails as unavailable (a 503 for a request).
    await assert.rejects(run('insert into drill values (2)'), (error: unknown) => isDatabaseUnavailable(error));
    await servers.promote();

    // The pooled connections to the dead primary leave their pools on their errors; new ones go to the standby.
    await eventually(async () => ((await serverPorts(service).catch(() => [])).join() === `${standby},${standby}` ? true : undefined), 'both pools on the promoted standby', 60_000, 200);
    await run('insert into drill values (2)');
    assert.deepEqual((await service.em.fork().getConnection().execute<{ n: number }[]>('select n from drill order by n')).map((row) => row.n), [1, 2]);
  });
});
