import { readFileSync } from 'node:fs';
import { createApiKey } from '../src/api-keys/service';
import { loadConfig } from '../src/config';
import { createOrm, migrate } from '../src/db/orm';
import { createApp } from '../src/http/app';
import { routeModules } from '../src/modules';
import { createOrganization } from '../src/organizations/service';
import { createAppDeps } from '../src/runtime';
import { startLoneLnd } from '../test/support/lnd';
import { alternate, listen, measureHttp, medianOf, report, runBenchmark, serviceLogger, urlOf, type HttpMeasurement, type Ratio } from './support';

/**
 * Lightning invoice creation and decoding beside two peers on this machine: LNbits (FakeWallet funding
 * source, SQLite), which scripts/lnbits.sh starts and hands over as LNBITS_URL and LNBITS_INVOICE_KEY,
 * and a real LND on btcd regtest (test/support/lnd.ts, the binaries scripts/ensure-tools.sh builds),
 * driven over its REST AddInvoice (`POST /v1/invoices`). All three sign a real BOLT11 invoice per
 * request and store it; every one of our requests has a new reference. Before measuring, an invoice
 * made by each peer is decoded by us and ours by LNbits (amount and payment hash must agree;
 * test/peers/lnbits.test.ts checks the same in npm test). Creation is measured at 10 and at 50
 * connections, ours alternating with each peer for BENCH_ROUNDS rounds; decoding beside LNbits. A peer
 * that is not available here is left out and the run says so.
 */
const AMOUNT_SAT = 1000;
const CONNECTIONS = [10, 50];

interface Peer {
  url: string;
  invoiceKey: string;
}

async function main() {
  const config = loadConfig({ ...process.env, RATE_LIMIT_BURST: '1000000000', RATE_LIMIT_PER_SECOND: '1000000000' });
  const orm = await createOrm(config.DATABASE_URL, config.DATABASE_POOL_MAX);
  await migrate(orm);
  const em = orm.em.fork();
  const { secret } = createApiKey(em, { organization: createOrganization(em, 'Benchmark'), name: 'Benchmark', scopes: ['*'], environment: 'sandbox' });
  await em.flush();
  const deps = createAppDeps(config, orm, serviceLogger(config.LOG_LEVEL));
  const service = await listen(createApp(deps, routeModules).app);
  const lone = await startLoneLnd();
  const started = 'missing' in lone ? null : lone;
  try {
    // LND's REST gateway takes the admin macaroon, hex, in this header (autocannon accepts its self-signed certificate).
    const lnd = started && {
      url: started.lnd.restUrl,
      headers: { 'grpc-metadata-macaroon': readFileSync(started.lnd.macaroonPath).toString('hex'), 'content-type': 'application/json' },
      // For the cross-check: the provider's own client, which trusts LND's self-signed certificate.
      addInvoice: () => started.lnd.node.call<{ payment_request: string; r_hash: string }>('POST', '/v1/invoices', { value: String(AMOUNT_SAT), memo: 'Benchmark' }),
    };
    if (!lnd) console.log(`LND is not available here (${(lone as { missing: string }).missing}): no LND rows or ratios.`);
    await measure({ url: urlOf(service), headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' } }, lnd);
  } finally {
    await started?.stop();
    service.close();
    await deps.keyCache.stop();
    await deps.temporal.connection.close();
    await orm.close();
  }
}

interface Endpoint {
  url: string;
  headers: Record<string, string>;
}

async function measure(ours: Endpoint, lnd: (Endpoint & { addInvoice: () => Promise<{ payment_request: string; r_hash: string }> }) | null) {
  const lnbits: Peer | null = process.env.LNBITS_URL && process.env.LNBITS_INVOICE_KEY ? { url: process.env.LNBITS_URL, invoiceKey: process.env.LNBITS_INVOICE_KEY } : null;
  const lnbitsHeaders = lnbits && { 'x-api-key': lnbits.invoiceKey, 'content-type': 'application/json' };
  if (!lnbits) console.log('LNbits is not running (see the log above): no LNbits rows or ratios.');

  const ourInvoice = await postJson<{ request: string; payment_hash: string }>(`${ours.url}/api/lightning/invoices`, ours.headers, {
    amount: AMOUNT_SAT,
    description: 'Benchmark',
    reference: 'bench-cross-check',
  });
  const checks: string[] = [];
  if (lnbits) {
    const lnbitsInvoice = await postJson<{ bolt11: string; payment_hash: string }>(`${lnbits.url}/api/v1/payments`, lnbitsHeaders!, { out: false, amount: AMOUNT_SAT, memo: 'Benchmark' });
    checks.push(await decodeEachOther(ours, lnbits, ourInvoice, lnbitsInvoice));
  }
  if (lnd) {
    const lndInvoice = await lnd.addInvoice();
    const byUs = await postJson<{ payment_hash: string; amount_msat: number }>(`${ours.url}/api/lightning/decode`, ours.headers, { request: lndInvoice.payment_request });
    const paymentHash = Buffer.from(lndInvoice.r_hash, 'base64').toString('hex');
    if (byUs.payment_hash !== paymentHash || Number(byUs.amount_msat) !== AMOUNT_SAT * 1000) throw new Error(`ours decoded LND's invoice as ${JSON.stringify(byUs)}; expected ${paymentHash}, ${AMOUNT_SAT * 1000} msat`);
    checks.push("ok: we decode LND's invoice to its amount and payment hash");
  }
  const crossCheck = checks.join('; ') || 'skipped: no peer running';
  console.log(`cross-decode check: ${crossCheck}`);

  const ourCreate = (connections: number) => `ours: POST /api/lightning/invoices (${connections} conn)`;
  const lnbitsCreate = (connections: number) => `LNbits: POST /api/v1/payments (${connections} conn)`;
  const lndCreate = (connections: number) => `LND: POST /v1/invoices, AddInvoice (${connections} conn)`;
  const ourDecode = (connections: number) => `ours: POST /api/lightning/decode (${connections} conn)`;
  const lnbitsDecode = (connections: number) => `LNbits: POST /api/v1/payments/decode (${connections} conn)`;
  const targets = CONNECTIONS.flatMap((connections) => [
    {
      target: ourCreate(connections),
      measure: () =>
        measureHttp(ourCreate(connections), `${ours.url}/api/lightning/invoices`, {
          method: 'POST',
          headers: ours.headers,
          uniqueBody: JSON.stringify({ amount: AMOUNT_SAT, description: 'Benchmark', reference: '[<unique>]' }),
          connections,
        }),
    },
    ...(lnbits
      ? [
          {
            target: lnbitsCreate(connections),
            measure: () =>
              measureHttp(lnbitsCreate(connections), `${lnbits.url}/api/v1/payments`, {
                method: 'POST',
                headers: lnbitsHeaders!,
                body: JSON.stringify({ out: false, amount: AMOUNT_SAT, memo: 'Benchmark' }),
                connections,
              }),
          },
        ]
      : []),
    ...(lnd
      ? [
          {
            target: lndCreate(connections),
            measure: () => measureHttp(lndCreate(connections), `${lnd.url}/v1/invoices`, { method: 'POST', headers: lnd.headers, body: JSON.stringify({ value: String(AMOUNT_SAT), memo: 'Benchmark' }), connections }),
          },
        ]
      : []),
    {
      target: ourDecode(connections),
      measure: () => measureHttp(ourDecode(connections), `${ours.url}/api/lightning/decode`, { method: 'POST', headers: ours.headers, body: JSON.stringify({ request: ourInvoice.request }), connections }),
    },
    ...(lnbits
      ? [
          {
            target: lnbitsDecode(connections),
            measure: () =>
              measureHttp(lnbitsDecode(connections), `${lnbits.url}/api/v1/payments/decode`, {
                method: 'POST',
                headers: { 'content-type': 'application/json' },
                body: JSON.stringify({ data: ourInvoice.request }),
                connections,
              }),
          },
        ]
      : []),
  ]);
  // A peer that answers nothing within a measurement (LNbits at 50 connections on a busy machine) is
  // recorded as such and that round left out of its median; ours failing still fails the benchmark.
  const rows = await alternate(
    targets.map(({ target, measure }) => ({
      target,
      measure: (): Promise<HttpMeasurement | { target: string; failed: string }> =>
        target.startsWith('ours:') ? measure() : measure().catch((error: unknown) => ({ target, failed: (error as Error).message })),
    })),
  );
  const answered = rows.filter((row): row is HttpMeasurement & { round: number } => !('failed' in row));
  const rate = (target: string) => medianOf(answered, target, 'requests_per_second');
  const measured = (target: string) => answered.some((row) => row.target === target);
  const ratios: Ratio[] = CONNECTIONS.flatMap((connections) => [
    ...(lnd && measured(lndCreate(connections)) ? [{ name: `invoice creation, ours / LND AddInvoice (${connections} conn, medians)`, value: rate(ourCreate(connections)) / rate(lndCreate(connections)), goal: 0.5 }] : []),
    ...(lnbits && measured(lnbitsCreate(connections))
      ? [{ name: `invoice creation, ours / LNbits (${connections} conn, medians)`, value: rate(ourCreate(connections)) / rate(lnbitsCreate(connections)), goal: 2 }]
      : []),
    ...(lnbits && measured(lnbitsDecode(connections))
      ? [
          { name: `invoice decoding, ours / LNbits (${connections} conn, medians)`, value: rate(ourDecode(connections)) / rate(lnbitsDecode(connections)) },
        ]
      : []),
  ]);
  await report('lightning-invoices', rows, ratios, {
    cross_check: crossCheck,
    lnbits: lnbits ? 'FakeWallet, SQLite' : 'not running',
    lnd: lnd ? 'lnd on btcd regtest, REST AddInvoice, no channels' : 'not available',
  });
}

/**
 * Our invoice decoded by LNbits and LNbits' decoded by us: both must read the amount and payment hash
 * their issuer reported, or the two sides would not be measuring the same work.
 */
async function decodeEachOther(
  ours: Endpoint,
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
