import { createApiKey } from '../src/api-keys/service';
import { loadConfig } from '../src/config';
import { createOrm, migrate } from '../src/db/orm';
import { createApp } from '../src/http/app';
import { createLogger } from '../src/logger';
import { routeModules } from '../src/modules';
import { createOrganization } from '../src/organizations/service';
import { createAppDeps } from '../src/runtime';
import { listen, measureHttp, report, runBenchmark, urlOf, type HttpMeasurement, type Ratio } from './support';

/**
 * Lightning invoice creation and decoding beside LNbits (FakeWallet funding source, SQLite), which
 * scripts/lnbits.sh starts on this machine and hands over as LNBITS_URL and LNBITS_INVOICE_KEY. Both
 * sign a real BOLT11 invoice per request and store it; every one of our requests has a new reference.
 * Before measuring, an invoice made by each side is decoded by the other (amount and payment hash must
 * agree; test/peers/lnbits.test.ts checks the same in npm test). Both decode the same invoice, one of ours.
 * Creation and decoding are each measured at 10 and at 50 connections. Without LNbits, ours is measured
 * alone and the run says so.
 */
const AMOUNT_SAT = 1000;
const CONNECTIONS = [10, 50];

interface Peer {
  url: string;
  invoiceKey: string;
}

async function main() {
  const config = loadConfig({ ...process.env, LOG_LEVEL: 'silent', RATE_LIMIT_BURST: '1000000000', RATE_LIMIT_PER_SECOND: '1000000000' });
  const orm = await createOrm(config.DATABASE_URL, config.DATABASE_POOL_MAX);
  await migrate(orm);
  const em = orm.em.fork();
  const { secret } = createApiKey(em, { organization: createOrganization(em, 'Benchmark'), name: 'Benchmark', scopes: ['*'], environment: 'sandbox' });
  await em.flush();
  const deps = createAppDeps(config, orm, createLogger('silent'));
  const service = await listen(createApp(deps, routeModules).app);

  const ours = { url: urlOf(service), headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' } };
  const peer: Peer | null = process.env.LNBITS_URL && process.env.LNBITS_INVOICE_KEY ? { url: process.env.LNBITS_URL, invoiceKey: process.env.LNBITS_INVOICE_KEY } : null;
  const peerHeaders = peer && { 'x-api-key': peer.invoiceKey, 'content-type': 'application/json' };
  if (!peer) console.log('LNbits is not running (see the log above): measuring ours alone, no ratios.');

  const ourCreate = (connections: number) =>
    measureHttp(`ours: POST /api/lightning/invoices (${connections} conn)`, `${ours.url}/api/lightning/invoices`, {
      method: 'POST',
      headers: ours.headers,
      uniqueBody: JSON.stringify({ amount: AMOUNT_SAT, description: 'Benchmark', reference: '[<unique>]' }),
      connections,
    });
  const peerCreate = (connections: number) =>
    measureHttp(`LNbits: POST /api/v1/payments (${connections} conn)`, `${peer!.url}/api/v1/payments`, {
      method: 'POST',
      headers: peerHeaders!,
      body: JSON.stringify({ out: false, amount: AMOUNT_SAT, memo: 'Benchmark' }),
      connections,
    });

  const ourInvoice = await postJson<{ request: string; payment_hash: string }>(`${ours.url}/api/lightning/invoices`, ours.headers, {
    amount: AMOUNT_SAT,
    description: 'Benchmark',
    reference: 'bench-cross-check',
  });
  const peerInvoice = peer && (await postJson<{ bolt11: string; payment_hash: string }>(`${peer.url}/api/v1/payments`, peerHeaders!, { out: false, amount: AMOUNT_SAT, memo: 'Benchmark' }));
  const crossCheck = peer && peerInvoice ? await decodeEachOther(ours, peer, ourInvoice, peerInvoice) : 'skipped: LNbits not running';
  console.log(`cross-decode check: ${crossCheck}`);

  const rows: HttpMeasurement[] = [];
  const ratios: Ratio[] = [];
  for (const connections of CONNECTIONS) {
    const ourRow = await ourCreate(connections);
    rows.push(ourRow);
    if (!peer) continue;
    const peerRow = await peerCreate(connections);
    rows.push(peerRow);
    ratios.push({ name: `invoice creation, ours / LNbits (${connections} conn)`, value: ourRow.requests_per_second / peerRow.requests_per_second, goal: 2 });
  }
  for (const connections of CONNECTIONS) {
    const ourDecode = await measureHttp(`ours: POST /api/lightning/decode (${connections} conn)`, `${ours.url}/api/lightning/decode`, {
      method: 'POST',
      headers: ours.headers,
      body: JSON.stringify({ request: ourInvoice.request }),
      connections,
    });
    rows.push(ourDecode);
    if (!peer) continue;
    const peerDecode = await measureHttp(`LNbits: POST /api/v1/payments/decode (${connections} conn)`, `${peer.url}/api/v1/payments/decode`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ data: ourInvoice.request }),
      connections,
    });
    rows.push(peerDecode);
    ratios.push({ name: `invoice decoding, ours / LNbits (${connections} conn)`, value: ourDecode.requests_per_second / peerDecode.requests_per_second });
  }
  await report('lightning-invoices', rows, ratios, { cross_check: crossCheck, lnbits: peer ? 'FakeWallet, SQLite' : 'not running' });

  service.close();
  await deps.keyCache.stop();
  await deps.temporal.connection.close();
  await orm.close();
}

/**
 * Our invoice decoded by LNbits and LNbits' decoded by us: both must read the amount and payment hash
 * their issuer reported, or the two sides would not be measuring the same work.
 */
async function decodeEachOther(
  ours: { url: string; headers: Record<string, string> },
  peer: Peer,
  ourInvoice: { request: string; payment_hash: string },
  peerInvoice: { bolt11: string; payment_hash: string },
): Promise<string> {
  const byPeer = await postJson<{ payment_hash: string; amount_msat: number }>(`${peer.url}/api/v1/payments/decode`, { 'content-type': 'application/json' }, { data: ourInvoice.request });
  const byUs = await postJson<{ payment_hash: string; amount_msat: number }>(`${ours.url}/api/lightning/decode`, ours.headers, { request: peerInvoice.bolt11 });
  const expect = (side: string, decoded: { payment_hash: string; amount_msat: number }, paymentHash: string) => {
    if (decoded.payment_hash !== paymentHash || Number(decoded.amount_msat) !== AMOUNT_SAT * 1000) {
      throw new Error(`${side} decoded ${JSON.stringify(decoded)}; expected payment_hash ${paymentHash} and amount_msat ${AMOUNT_SAT * 1000}`);
    }
  };
  expect('LNbits', byPeer, ourInvoice.payment_hash);
  expect('ours', byUs, peerInvoice.payment_hash);
  return 'ok: each side decodes the other\'s invoice to the same amount and payment hash';
}

async function postJson<T>(url: string, headers: Record<string, string>, body: unknown): Promise<T> {
  const response = await fetch(url, { method: 'POST', headers, body: JSON.stringify(body) });
  if (!response.ok) throw new Error(`POST ${url}: ${response.status} ${await response.text()}`);
  return (await response.json()) as T;
}

runBenchmark(main);
