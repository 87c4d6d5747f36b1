import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as btc from '@scure/btc-signer';
import { LndNode } from '../../src/lightning/lnd';
import { bakeMacaroon, lndFileCredentials } from '../../src/lightning/lnd-macaroon';
import { COINBASE_MATURITY, REGTEST_NETWORK, coinbaseOutput, findBtcd, payFromMiner, startBtcd, type Btcd } from './btcd';
import { eventually } from './eventually';
import { freeLoopbackPort } from './ports';
import { missingTool } from './missing-tool';

const PROJECT_ROOT = path.resolve(__dirname, '../../..');

/** One LND on the tests' btcd: its REST client (the provider's own), where its credentials are, and its lifecycle. */
export interface Lnd {
  name: string;
  /** The running process's (a benchmark pins it to a CPU of its own). */
  pid: number;
  node: LndNode;
  restUrl: string;
  /** The admin macaroon LND wrote. */
  macaroonPath: string;
  /** A macaroon of only the service's permissions (LND_PERMISSIONS), baked under root key 1: what live accepts. */
  serviceMacaroonPath: string;
  tlsCertPath: string;
  pubkey: string;
  /** host:port of its peer-to-peer listener. */
  p2p: string;
  /** How many calls of an RPC (its full name, `lnrpc.Lightning/ListInvoices`) the node has served, as its own RPCS log says. */
  rpcCalls: (method: string) => number;
  /** Ends the process at once (SIGKILL: a crash, nothing flushed), keeping its data directory. */
  kill: () => Promise<void>;
  /** Starts it again on the same data, ports and credentials; resolves once it serves REST and is synced. */
  restart: () => Promise<void>;
  stop: () => Promise<void>;
}

/** Two LND nodes, `ours` (the provider's) and `theirs`, with one channel from ours, part of it pushed to theirs. */
export interface LightningNetwork {
  btcd: Btcd;
  ours: Lnd;
  theirs: Lnd;
  /**
   * With a private channel only: a third node with a public channel to theirs, which makes theirs a public
   * node (LND hints only at channels to one) and is a payer that can reach ours only through a hint.
   */
  payer?: Lnd;
  /** Mines `count` blocks and waits until both nodes have seen them. */
  mine: (count: number) => Promise<void>;
  stop: () => Promise<void>;
}

/** The lnd binary scripts/ensure-tools.sh builds (LND_PATH wins), or why there is none. */
function findLnd(): { path: string } | { missing: string } {
  try {
    return { path: execFileSync('bash', ['-c', 'source scripts/lib.sh && lnd_path'], { cwd: PROJECT_ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim() };
  } catch {
    return { missing: 'no lnd at $LND_PATH or .tools/lnd/bin/lnd (scripts/ensure-tools.sh builds it when Go is present)' };
  }
}

async function startLnd(binary: string, btcd: Btcd, name: string): Promise<Lnd> {
  const home = mkdtempSync(path.join(os.tmpdir(), `lnd-${name}-`));
  const [restPort, rpcPort, p2pPort] = [await freeLoopbackPort(), await freeLoopbackPort(), await freeLoopbackPort()];
  const args = [
    `--lnddir=${home}`,
    '--noseedbackup',
    '--bitcoin.active',
    '--bitcoin.regtest',
    '--bitcoin.node=btcd',
    `--btcd.rpchost=${btcd.rpc.host}`,
    `--btcd.rpcuser=${btcd.rpc.user}`,
    `--btcd.rpcpass=${btcd.rpc.password}`,
    `--btcd.rpccert=${btcd.rpc.certPath}`,
    `--restlisten=127.0.0.1:${restPort}`,
    `--rpclisten=127.0.0.1:${rpcPort}`,
    `--listen=127.0.0.1:${p2pPort}`,
    '--nobootstrap',
    `--alias=${name}`,
    // Each RPC served is logged ("[/lnrpc.Lightning/ListInvoices] requested"): the tests count calls from it.
    '--debuglevel=warn,RPCS=debug',
    // Channels usable after one block, gossip without the usual delays: a test's minutes become seconds.
    '--bitcoin.defaultchanconfs=1',
    '--trickledelay=50',
  ];
  let child: ChildProcess;
  let output = '';
  const calls = new Map<string, number>();
  let unfinishedLine = '';
  const countCalls = (chunk: Buffer) => {
    const lines = (unfinishedLine + chunk.toString()).split('\n');
    unfinishedLine = lines.pop()!;
    for (const line of lines) {
      const method = /\[\/([\w.]+\/\w+)\] requested/.exec(line)?.[1];
      if (method) calls.set(method, (calls.get(method) ?? 0) + 1);
    }
  };
  const launch = () => {
    child = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    const keep = (chunk: Buffer) => (output = (output + chunk.toString()).slice(-4000));
    child.stdout?.on('data', countCalls);
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
  };
  const restUrl = `https://127.0.0.1:${restPort}`;
  const tlsCertPath = path.join(home, 'tls.cert');
  const macaroonPath = path.join(home, 'data/chain/bitcoin/regtest/admin.macaroon');
  const serviceMacaroonPath = path.join(home, 'service.macaroon');
  let node: LndNode | undefined;
  let pubkey = '';
  const ready = async () => {
    await eventually(
      async () => {
        if (child.exitCode !== null) throw new Error(`lnd ${name} exited with ${child.exitCode}: ${output}`);
        try {
          node ??= new LndNode({ restUrl, credentials: lndFileCredentials(macaroonPath, tlsCertPath), network: 'regtest' });
          const info = await node.call<{ identity_pubkey: string; synced_to_chain: boolean }>('GET', '/v1/getinfo');
          pubkey = info.identity_pubkey;
          return info.synced_to_chain ? true : undefined;
        } catch {
          return undefined;
        }
      },
      `lnd ${name} to serve REST and sync to the chain`,
      90_000,
      250,
    );
  };
  const kill = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = once(child, 'exit');
    child.kill('SIGKILL');
    await exited;
  };
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = once(child, 'exit');
      child.kill('SIGTERM');
      await exited;
    }
    rmSync(home, { recursive: true, force: true });
  };
  launch();
  try {
    await ready();
    writeFileSync(serviceMacaroonPath, await bakeMacaroon(node!, 1n), { mode: 0o600 });
  } catch (error) {
    await stop();
    throw error;
  }
  return {
    name,
    get pid() {
      return child.pid!;
    },
    get node() {
      return node!;
    },
    restUrl,
    macaroonPath,
    serviceMacaroonPath,
    tlsCertPath,
    pubkey,
    p2p: `127.0.0.1:${p2pPort}`,
    rpcCalls: (method) => calls.get(method) ?? 0,
    kill,
    restart: async () => {
      // Its certificate and macaroon stay; a new client forgets the old connections.
      node = undefined;
      launch();
      await ready();
    },
    stop,
  };
}

/** A regtest address as the tests' miner payments take it (btc-signer's testnet form of the same script). */
const asTestnetAddress = (address: string) => btc.Address(btc.TEST_NETWORK).encode(btc.Address(REGTEST_NETWORK).decode(address));

/**
 * btcd (HTTPS RPC, which LND needs) with two LND nodes: ours funded from a mature coinbase, peers of
 * each other, one channel of `capacitySat` from ours with `pushSat` on their side (so they can pay us),
 * confirmed and active on both; `private`: unannounced, so ours has no public channel, and a `payer` node
 * with a public channel to theirs (announced: six blocks). Without lnd or btcd the file fails in CI and is
 * skipped elsewhere, with the reason (missingTool).
 */
export async function startLightningNetworkOrSkip(
  context: Mocha.Context,
  channel: { capacitySat: bigint; pushSat: bigint; private?: boolean } = { capacitySat: 1_000_000n, pushSat: 300_000n },
): Promise<LightningNetwork> {
  const lnd = findLnd();
  const btcdFound = findBtcd();
  const missing = 'missing' in lnd ? lnd.missing : 'missing' in btcdFound ? btcdFound.missing : null;
  if (missing) missingTool(context, `LND not available: ${missing}`);
  const btcd = await startBtcd((btcdFound as { path: string }).path, [], true);
  const started: Lnd[] = [];
  const stop = async () => {
    for (const node of started) await node.stop();
    await btcd.stop();
  };
  try {
    // A mature coinbase to fund ours from, and a tip recent enough for LND to call itself synced.
    await btcd.generate(COINBASE_MATURITY + 1);
    const ours = await startLnd((lnd as { path: string }).path, btcd, 'ours');
    started.push(ours);
    const theirs = await startLnd((lnd as { path: string }).path, btcd, 'theirs');
    started.push(theirs);
    const mine = async (count: number) => {
      await btcd.generate(count);
      const height = Number(await btcd.call('getblockcount'));
      for (const node of [ours, theirs]) {
        await eventually(
          async () => {
            const info = await node.node.call<{ block_height: number; synced_to_chain: boolean }>('GET', '/v1/getinfo');
            return info.block_height >= height && info.synced_to_chain ? true : undefined;
          },
          `lnd ${node.name} to reach block ${height}`,
          30_000,
          100,
        );
      }
    };

    const { address } = await ours.node.call<{ address: string }>('GET', '/v1/newaddress?type=WITNESS_PUBKEY_HASH');
    const funding = payFromMiner(await coinbaseOutput(btcd, 1), asTestnetAddress(address), 2n * channel.capacitySat);
    await btcd.call('sendrawtransaction', [funding.hex]);
    await mine(1);
    await eventually(
      async () => BigInt((await ours.node.call<{ confirmed_balance: string }>('GET', '/v1/balance/blockchain')).confirmed_balance) >= 2n * channel.capacitySat || undefined,
      'lnd ours to see its funding confirmed',
    );

    await ours.node.call('POST', '/v1/peers', { addr: { pubkey: theirs.pubkey, host: theirs.p2p }, perm: false });
    await ours.node.call('POST', '/v1/channels', {
      node_pubkey: Buffer.from(theirs.pubkey, 'hex').toString('base64'),
      local_funding_amount: channel.capacitySat.toString(),
      push_sat: channel.pushSat.toString(),
      private: channel.private ?? false,
    });
    await mine(6);
    for (const node of [ours, theirs]) {
      await eventually(
        async () => ((await node.node.call<{ channels?: unknown[] }>('GET', '/v1/channels?active_only=true')).channels?.length ? true : undefined),
        `the channel to be active on lnd ${node.name}`,
        60_000,
        200,
      );
    }
    // Active is not yet usable: a node routes over the channel once its link can carry a payment, each side on its own
    // time (theirs once paid us before its link was up: "insufficient_balance").
    for (const [from, to] of [
      [ours, theirs],
      [theirs, ours],
    ] as const) {
      await eventually(
        async () => ((await from.node.call<{ routes?: unknown[] }>('GET', `/v1/graph/routes/${to.pubkey}/1000`).catch(() => ({ routes: [] }))).routes?.length ? true : undefined),
        `a route from ${from.name} to ${to.name}`,
        60_000,
        250,
      );
    }
    const payer = channel.private ? await startPublicPayer((lnd as { path: string }).path, btcd, theirs, channel.capacitySat, mine) : undefined;
    if (payer) started.push(payer);
    return { btcd, ours, theirs, payer, mine, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** A node funded from the second coinbase with a public channel of `capacitySat` to `theirs`, announced. */
async function startPublicPayer(binary: string, btcd: Btcd, theirs: Lnd, capacitySat: bigint, mine: (count: number) => Promise<void>): Promise<Lnd> {
  const payer = await startLnd(binary, btcd, 'payer');
  try {
    const { address } = await payer.node.call<{ address: string }>('GET', '/v1/newaddress?type=WITNESS_PUBKEY_HASH');
    await btcd.call('sendrawtransaction', [payFromMiner(await coinbaseOutput(btcd, 2), asTestnetAddress(address), 2n * capacitySat).hex]);
    await btcd.generate(1);
    await eventually(
      async () => BigInt((await payer.node.call<{ confirmed_balance: string }>('GET', '/v1/balance/blockchain')).confirmed_balance) >= 2n * capacitySat || undefined,
      'the payer to see its funding confirmed',
    );
    await payer.node.call('POST', '/v1/peers', { addr: { pubkey: theirs.pubkey, host: theirs.p2p }, perm: false });
    await payer.node.call('POST', '/v1/channels', { node_pubkey: Buffer.from(theirs.pubkey, 'hex').toString('base64'), local_funding_amount: capacitySat.toString() });
    // Six confirmations: the channel and both nodes are announced.
    await mine(6);
    await eventually(
      async () => ((await payer.node.call<{ channels?: unknown[] }>('GET', '/v1/channels?active_only=true')).channels?.length ? true : undefined),
      'the payer channel to be active',
      60_000,
      200,
    );
    return payer;
  } catch (error) {
    await payer.stop();
    throw error;
  }
}

/**
 * A node reachable only through a private channel of `capacitySat` it opens to theirs (funded from the third
 * coinbase, half pushed to theirs so theirs can forward to it): no path to it in the graph, only the hint its
 * invoices carry. Resolves once it issues invoices with that hint. The caller stops it.
 */
export async function startHiddenPayee(network: LightningNetwork, capacitySat = 200_000n): Promise<Lnd> {
  const lnd = findLnd();
  if ('missing' in lnd) throw new Error(lnd.missing);
  const hidden = await startLnd(lnd.path, network.btcd, 'hidden');
  try {
    const { address } = await hidden.node.call<{ address: string }>('GET', '/v1/newaddress?type=WITNESS_PUBKEY_HASH');
    await network.btcd.call('sendrawtransaction', [payFromMiner(await coinbaseOutput(network.btcd, 3), asTestnetAddress(address), 2n * capacitySat).hex]);
    await network.mine(1);
    await eventually(
      async () => BigInt((await hidden.node.call<{ confirmed_balance: string }>('GET', '/v1/balance/blockchain')).confirmed_balance) >= 2n * capacitySat || undefined,
      'the hidden payee to see its funding confirmed',
    );
    await hidden.node.call('POST', '/v1/peers', { addr: { pubkey: network.theirs.pubkey, host: network.theirs.p2p }, perm: false });
    await hidden.node.call('POST', '/v1/channels', {
      node_pubkey: Buffer.from(network.theirs.pubkey, 'hex').toString('base64'),
      local_funding_amount: capacitySat.toString(),
      push_sat: (capacitySat / 2n).toString(),
      private: true,
    });
    await network.mine(1);
    // It hints at the channel once it knows theirs' policy for it.
    await eventually(
      async () => {
        const added = await hidden.node.call<{ payment_request: string }>('POST', '/v1/invoices', { value: '1', private: true });
        const decoded = await hidden.node.call<{ route_hints?: unknown[] }>('GET', `/v1/payreq/${added.payment_request}`);
        return decoded.route_hints?.length ? true : undefined;
      },
      'the hidden payee to hint at its private channel',
      60_000,
      250,
    );
    return hidden;
  } catch (error) {
    await hidden.stop();
    throw error;
  }
}

/**
 * One LND on a btcd of its own (regtest, one block mined so LND calls itself synced), no channels: what
 * bench/lightning-invoices.ts measures AddInvoice on. Without lnd or btcd, why there is none.
 */
export async function startLoneLnd(): Promise<{ btcd: Btcd; lnd: Lnd; stop: () => Promise<void> } | { missing: string }> {
  const lnd = findLnd();
  const btcdFound = findBtcd();
  if ('missing' in lnd) return lnd;
  if ('missing' in btcdFound) return btcdFound;
  const btcd = await startBtcd(btcdFound.path, [], true);
  try {
    await btcd.generate(1);
    const node = await startLnd(lnd.path, btcd, 'bench');
    return {
      btcd,
      lnd: node,
      stop: async () => {
        await node.stop();
        await btcd.stop();
      },
    };
  } catch (error) {
    await btcd.stop();
    throw error;
  }
}

/** The configuration that makes `lnd` the sandbox environment's Lightning node (regtest invoices). */
export const lndSandboxConfig = (lnd: Lnd): Record<string, string> => ({
  LIGHTNING_LND_SANDBOX_REST_URL: lnd.restUrl,
  LIGHTNING_LND_SANDBOX_MACAROON_PATH: lnd.macaroonPath,
  LIGHTNING_LND_SANDBOX_TLS_CERT_PATH: lnd.tlsCertPath,
  LIGHTNING_LND_SANDBOX_NETWORK: 'regtest',
});

/** The app's live environment on `lnd` (regtest), with its baked macaroon: what a staging deployment sets (LIGHTNING_LND_LIVE_NETWORK). */
export const lndLiveConfig = (lnd: Lnd): Record<string, string> => ({
  LIGHTNING_LND_LIVE_REST_URL: lnd.restUrl,
  LIGHTNING_LND_LIVE_MACAROON_PATH: lnd.serviceMacaroonPath,
  LIGHTNING_LND_LIVE_TLS_CERT_PATH: lnd.tlsCertPath,
  LIGHTNING_LND_LIVE_NETWORK: 'regtest',
});
