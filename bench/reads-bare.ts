import Koa from 'koa';
import Router from '@koa/router';
import type { AddressInfo } from 'node:net';
import { Pool } from 'pg';

/**
 * The bare reads of bench/reads.ts, in a process of their own (forked with the service's V8 options): for each of
 * our reads, a Koa + pg route that sends the very statements our read sent (recorded from one of our requests:
 * text and values, each prepared as ours was, a named statement where ours was named) on a pooled connection, in
 * turn, and answers the body our read answered (serialized again per request). Also the floor of any request:
 * a route answering a small body, no database. The parent sends `BareSetup` and gets `{ port }` back.
 */

/** One statement as our read sent it: `name` when it was a named prepared statement. */
export interface RecordedStatement {
  name?: string;
  text: string;
  values: unknown[];
}

export interface BareRead {
  path: string;
  statements: RecordedStatement[];
  body: unknown;
}

export interface BareSetup {
  databaseUrl: string;
  poolMax: number;
  reads: BareRead[];
}

process.once('message', (setup: BareSetup) => {
  const pool = new Pool({ connectionString: setup.databaseUrl, max: setup.poolMax });
  const app = new Koa();
  const router = new Router();
  setup.reads.forEach((read, index) => {
    // Names of their own (ours are per process), kept where ours had one so that PostgreSQL parses and plans as often.
    const statements = read.statements.map((statement, number) => (statement.name ? { ...statement, name: `bare_${index}_${number}` } : statement));
    router.get(read.path, async (ctx) => {
      for (const statement of statements) await pool.query(statement);
      ctx.body = read.body;
    });
  });
  router.get('/floor', (ctx) => {
    ctx.body = { ok: true };
  });
  app.use(router.routes());
  const server = app.listen(0, '127.0.0.1', () => process.send!({ port: (server.address() as AddressInfo).port }));
  process.once('disconnect', () => {
    server.close();
    void pool.end().then(() => process.exit(0));
  });
});
