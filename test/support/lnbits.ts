import { execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { missingTool } from './missing-tool';

const PROJECT_ROOT = path.resolve(__dirname, '../../..');

/** What LNbits' POST /api/v1/payments/decode answers for a BOLT11 invoice (its `bolt11` library's fields). */
export interface LnbitsDecoded {
  currency: string;
  amount_msat: number;
  date: number;
  expiry: number;
  payment_hash: string;
  description: string;
  payee: string;
}

export interface Lnbits {
  url: string;
  /** An incoming invoice of its wallet (FakeWallet signs it): POST /api/v1/payments with the invoice key. */
  createInvoice: (amountSat: number, memo: string) => Promise<{ bolt11: string; payment_hash: string }>;
  decode: (invoice: string) => Promise<LnbitsDecoded>;
  stop: () => Promise<void>;
}

/**
 * LNbits as scripts/lnbits-serve.sh runs it (the benchmark's peer: FakeWallet, SQLite in a temporary
 * folder, 127.0.0.1), from the install scripts/ensure-tools.sh makes in .tools/lnbits. Without python3 it
 * cannot be installed: the file then fails in CI and is skipped elsewhere, with that reason (missingTool); with python3 a failure to start fails.
 */
export async function startLnbitsOrSkip(context: Mocha.Context): Promise<Lnbits> {
  try {
    execFileSync('python3', ['--version'], { stdio: 'ignore' });
  } catch {
    missingTool(context, 'python3 is not installed, so LNbits is not (scripts/ensure-tools.sh installs it from PyPI when python3 is present)');
  }
  const child = spawn('bash', [path.join(PROJECT_ROOT, 'scripts/lnbits-serve.sh')], { stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  child.stderr.on('data', (chunk: Buffer) => (log = (log + chunk.toString()).slice(-4000)));
  const exited = once(child, 'exit');
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    await exited;
  };
  const firstLine = await Promise.race([
    once(createInterface({ input: child.stdout }), 'line').then(([line]) => line as string),
    exited.then(() => undefined),
  ]);
  if (firstLine === undefined) throw new Error(`LNbits did not start:\n${log}`);
  const { url, invoice_key: invoiceKey } = JSON.parse(firstLine) as { url: string; invoice_key: string };

  const post = async <T>(route: string, body: unknown, headers: Record<string, string> = {}): Promise<T> => {
    const response = await fetch(`${url}${route}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(30_000),
    });
    const text = await response.text();
    if (!response.ok) throw new Error(`LNbits POST ${route}: ${response.status} ${text}`);
    return JSON.parse(text) as T;
  };
  return {
    url,
    createInvoice: (amountSat, memo) => post('/api/v1/payments', { out: false, amount: amountSat, memo }, { 'x-api-key': invoiceKey }),
    decode: (invoice) => post('/api/v1/payments/decode', { data: invoice }),
    stop,
  };
}
