import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { existsSync, mkdtempSync, readFileSync, rmdirSync, rmSync } from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { freeLoopbackPort } from './ports';
import { secp256k1 } from '@noble/curves/secp256k1';
import { sha256 } from '@noble/hashes/sha256';
import { hex } from '@scure/base';
import * as btc from '@scure/btc-signer';
import { eventually } from './eventually';
import { missingTool } from './missing-tool';

const PROJECT_ROOT = path.resolve(__dirname, '../../..');

/** How a regtest node writes addresses: testnet's version bytes, its own bech32 prefix. */
export const REGTEST_NETWORK: typeof btc.NETWORK = { ...btc.TEST_NETWORK, bech32: 'bcrt' };

/**
 * The key btcd mines to: a public test key (sha256 of a fixed phrase) that only ever holds regtest coins.
 * Its p2wpkh address is passed as --miningaddr, so every coinbase is spendable by the tests.
 */
export const MINER_PRIVATE_KEY = sha256(new TextEncoder().encode('custody-platform btcd regtest miner'));
export const MINER_PAYMENT = btc.p2wpkh(secp256k1.getPublicKey(MINER_PRIVATE_KEY, true), REGTEST_NETWORK);
/** Regtest coinbase outputs are spendable once this many blocks are on top of theirs. */
export const COINBASE_MATURITY = 100;
/** The fee of the tests' miner payments, satoshis. */
export const MINER_FEE = 10_000n;

/** Output 0 of the coinbase of block `height`: its txid and exact amount, read from the raw transaction. */
export async function coinbaseOutput(btcd: Btcd, height: number): Promise<{ txid: string; index: number; amount: bigint }> {
  const hash = (await btcd.call('getblockhash', [height])) as string;
  const block = (await btcd.call('getblock', [hash, 2])) as { rawtx: { txid: string; hex: string }[] };
  const coinbase = block.rawtx[0]!;
  return { txid: coinbase.txid, index: 0, amount: btc.Transaction.fromRaw(hex.decode(coinbase.hex)).getOutput(0).amount! };
}

/** A signed p2wpkh payment of `amount` from a miner output to `to` (sandbox form), change back to the miner. */
export function payFromMiner(spent: { txid: string; index: number; amount: bigint }, to: string, amount: bigint, options: { replaceable?: boolean; fee?: bigint } = {}): btc.Transaction {
  const transaction = new btc.Transaction();
  // BIP-125: a sequence below 0xfffffffe lets a spend of the same output paying more replace it in the mempool.
  transaction.addInput({ txid: spent.txid, index: spent.index, witnessUtxo: { script: MINER_PAYMENT.script, amount: spent.amount }, ...(options.replaceable ? { sequence: 0xfffffffd } : {}) });
  transaction.addOutputAddress(to, amount, btc.TEST_NETWORK);
  transaction.addOutput({ script: MINER_PAYMENT.script, amount: spent.amount - amount - (options.fee ?? MINER_FEE) });
  transaction.sign(MINER_PRIVATE_KEY);
  transaction.finalize();
  return transaction;
}

/** The configuration that serves sandbox Bitcoin from `btcd` (regtest), on a task queue of the test's own. */
export const btcdSandboxConfig = (btcd: Btcd, taskQueue: string, confirmations: number): Record<string, string> => ({
  TEMPORAL_TASK_QUEUE: taskQueue,
  CHAIN_NODE_BITCOIN_SANDBOX: btcd.url,
  CHAIN_NODE_BITCOIN_SANDBOX_NETWORK: 'regtest',
  CHAIN_CONFIRMATIONS_BITCOIN: String(confirmations),
});

/** The height of btcd's tip. */
export const btcdHeight = async (btcd: Btcd): Promise<number> => Number(await btcd.call('getblockcount'));

export interface Btcd {
  /** The RPC URL with `rpcuser:rpcpass` as userinfo, as CHAIN_NODE_BITCOIN_SANDBOX takes it. */
  url: string;
  /** Where btcd's RPC listens, and (started with `tls`) the certificate file it serves there. */
  rpc: { host: string; user: string; password: string; certPath: string | null };
  /** A JSON-RPC call straight to btcd, bypassing the provider. */
  call: (method: string, params?: unknown[]) => Promise<unknown>;
  /** Mines `count` blocks to the miner key; their hashes. */
  generate: (count: number) => Promise<string[]>;
  stop: () => Promise<void>;
}

/** Which optional indexes btcd keeps: the address index (searchrawtransactions) by default. */
export interface BtcdIndexes {
  addressIndex?: boolean;
}

/** The btcd binary scripts/ensure-tools.sh installs (BTCD_PATH wins), or why there is none. */
export function findBtcd(): { path: string } | { missing: string } {
  try {
    const found = execFileSync('bash', ['-c', 'source scripts/lib.sh && btcd_path'], { cwd: PROJECT_ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    return { path: found };
  } catch {
    return { missing: 'no btcd at $BTCD_PATH or .tools/btcd/bin/btcd (scripts/ensure-tools.sh installs it when Go is present)' };
  }
}

/**
 * Starts btcd in regtest on a free 127.0.0.1 port, RPC over plain HTTP with random credentials, a fresh
 * data directory under the system's temporary one, no peers, the transaction and address indexes on;
 * waits until its RPC answers. With `tls` its RPC is HTTPS with the certificate btcd makes itself (LND
 * talks to btcd only so). With `addressIndex: false` it has no address index, as a node the platform
 * must not rely on one for (Bitcoin Core has none at all).
 */
export async function startBtcd(binary: string, extraArgs: string[] = [], tls = false, { addressIndex = true }: BtcdIndexes = {}): Promise<Btcd> {
  const port = await freeLoopbackPort();
  const home = mkdtempSync(path.join(os.tmpdir(), 'btcd-'));
  const user = randomBytes(8).toString('hex');
  const password = randomBytes(16).toString('hex');
  const args = [
    '--regtest',
    ...(tls ? [`--rpccert=${path.join(home, 'rpc.cert')}`, `--rpckey=${path.join(home, 'rpc.key')}`] : ['--notls']),
    `--rpcuser=${user}`,
    `--rpcpass=${password}`,
    `--rpclisten=127.0.0.1:${port}`,
    '--nolisten',
    '--nodnsseed',
    `--datadir=${path.join(home, 'data')}`,
    `--logdir=${path.join(home, 'logs')}`,
    `--configfile=${path.join(home, 'btcd.conf')}`,
    `--miningaddr=${MINER_PAYMENT.address}`,
    '--txindex',
    ...(addressIndex ? ['--addrindex'] : []),
    '--debuglevel=warn',
    ...extraArgs,
  ];
  // btcd always creates its default home (~/.btcd, from the passwd entry), empty when every path is given: removed again at stop.
  const defaultHome = path.join(os.userInfo().homedir, '.btcd');
  const defaultHomeExisted = existsSync(defaultHome);
  const child: ChildProcess = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const keep = (chunk: Buffer) => (output = (output + chunk.toString()).slice(-4000));
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const exited = once(child, 'exit');

  const url = `${tls ? 'https' : 'http'}://${user}:${password}@127.0.0.1:${port}/`;
  const authorization = `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
  const certPath = tls ? path.join(home, 'rpc.cert') : null;
  let id = 0;
  const post = async (payload: string): Promise<string> => {
    if (!certPath) {
      const response = await fetch(`http://127.0.0.1:${port}/`, { method: 'POST', headers: { 'content-type': 'application/json', authorization }, body: payload, signal: AbortSignal.timeout(10_000) });
      return response.text();
    }
    // fetch takes no CA of its own: https with btcd's certificate as the one trusted.
    return new Promise((resolve, reject) => {
      const request = https.request(`https://127.0.0.1:${port}/`, { method: 'POST', ca: readFileSync(certPath), headers: { 'content-type': 'application/json', authorization }, timeout: 10_000 }, (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
        response.on('error', reject);
      });
      request.on('timeout', () => request.destroy(new Error('btcd took longer than 10 s')));
      request.on('error', reject);
      request.end(payload);
    });
  };
  const call = async (method: string, params: unknown[] = []) => {
    const body = JSON.parse(await post(JSON.stringify({ jsonrpc: '1.0', id: ++id, method, params }))) as { result?: unknown; error?: unknown };
    if (body.error) throw new Error(`btcd ${method}: ${JSON.stringify(body.error)}`);
    return body.result;
  };
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      await exited;
    }
    rmSync(home, { recursive: true, force: true });
    if (!defaultHomeExisted) {
      try {
        rmdirSync(defaultHome);
      } catch {
        // Not empty, or already gone: another btcd's, left alone.
      }
    }
  };
  const generate = async (count: number) => (await call('generate', [count])) as string[];

  try {
    await eventually(
      async () => {
        if (child.exitCode !== null) throw new Error(`btcd exited with ${child.exitCode}: ${output}`);
        return call('getblockchaininfo').then(
          () => true,
          () => undefined,
        );
      },
      'btcd to answer RPC',
      30_000,
      100,
    );
  } catch (error) {
    await stop();
    throw error;
  }
  return { url, rpc: { host: `127.0.0.1:${port}`, user, password, certPath }, call, generate, stop };
}

/** Starts btcd for a test file; when btcd is not installed, fails in CI and skips elsewhere, with the reason (missingTool). */
export async function startBtcdOrSkip(context: Mocha.Context, extraArgs: string[] = [], indexes: BtcdIndexes = {}): Promise<Btcd> {
  const found = findBtcd();
  if ('missing' in found) missingTool(context, `btcd not installed: ${found.missing}`);
  return startBtcd(found.path, extraArgs, false, indexes);
}
