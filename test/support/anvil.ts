import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import path from 'node:path';
import { createWalletClient, encodeFunctionData, erc20Abi, getAddress, http, parseUnits, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { MULTICALL3_ADDRESS } from '../../src/chains/providers/evm-balances';
import { eventually } from './eventually';
import FixedSupplyToken from './contracts/FixedSupplyToken.json';
import Multicall3 from './contracts/Multicall3.json';
import TestPriceFeed from './contracts/TestPriceFeed.json';
import TestSequencerUptimeFeed from './contracts/TestSequencerUptimeFeed.json';
import { freeLoopbackPort } from './ports';

/** anvil's first dev account (from its default mnemonic), funded with 10000 ETH at start. */
export const ANVIL_ACCOUNT = '0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266';
export const ANVIL_CHAIN_ID = 31337;
/** anvil's first dev account key (its default mnemonic): public test material, funded with 10000 ETH. */
export const ANVIL_KEY: Hex = '0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80';

/** A transaction receipt as anvil answers it. */
export interface AnvilReceipt {
  status: Hex;
  contractAddress: Hex | null;
  gasUsed: Hex;
  effectiveGasPrice: Hex;
  blockNumber: Hex;
  from: Hex;
  to: Hex;
}

export interface Anvil {
  url: string;
  /** ANVIL_CHAIN_ID unless started with another. */
  chainId: number;
  /** anvil's process id (benchmarks read its CPU time). */
  pid: number;
  /** A JSON-RPC call straight to anvil, bypassing the service. */
  call: (method: string, params?: unknown[]) => Promise<unknown>;
  stop: () => Promise<void>;
}

/**
 * The anvil binary shipped by the pinned `@foundry-rs/anvil` package through its platform package
 * (`@foundry-rs/anvil-<os>-<arch>`), run directly so that the process we stop is anvil itself.
 */
function anvilBinary(): string {
  const arch = { x64: 'amd64', arm64: 'arm64' }[process.arch as string];
  if (!arch) throw new Error(`anvil ships no binary for ${process.platform}/${process.arch}`);
  const manifest = require.resolve(`@foundry-rs/anvil-${process.platform}-${arch}/package.json`);
  return path.join(path.dirname(manifest), 'bin', process.platform === 'win32' ? 'anvil.exe' : 'anvil');
}

/**
 * Starts anvil on a free 127.0.0.1 port and waits until it answers eth_chainId; `chainId` 1 makes it a
 * node live keys accept (mainnet's id). `genesisTimestamp` (seconds since the epoch) starts its clock
 * there: every block after it is as far in the past, so contracts record history (block.timestamp).
 */
export async function startAnvil(options: { chainId?: number; genesisTimestamp?: number } = {}): Promise<Anvil> {
  const port = await freeLoopbackPort();
  const url = `http://127.0.0.1:${port}`;
  const chainId = options.chainId === undefined ? [] : ['--chain-id', String(options.chainId)];
  const timestamp = options.genesisTimestamp === undefined ? [] : ['--timestamp', String(options.genesisTimestamp)];
  const child: ChildProcess = spawn(anvilBinary(), ['--host', '127.0.0.1', '--port', String(port), '--quiet', ...chainId, ...timestamp], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = once(child, 'exit');

  let id = 0;
  const call = async (method: string, params: unknown[] = []) => {
    const response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: ++id, method, params }),
      signal: AbortSignal.timeout(5000),
    });
    const body = (await response.json()) as { result?: unknown; error?: unknown };
    if (body.error) throw new Error(`anvil ${method}: ${JSON.stringify(body.error)}`);
    return body.result;
  };
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    await exited;
  };

  const deadline = Date.now() + 20_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`anvil exited with ${child.exitCode}: ${stderr}`);
    try {
      await call('eth_chainId');
      return { url, chainId: options.chainId ?? ANVIL_CHAIN_ID, pid: child.pid!, call, stop };
    } catch (error) {
      if (Date.now() > deadline) {
        await stop();
        throw new Error(`anvil did not answer on ${url} within 20 s: ${(error as Error).message} ${stderr}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

/** The configuration that serves sandbox Ethereum from `anvil`, with `token` as USDC_ETH, on a task queue of the test's own. */
export const anvilSandboxConfig = (anvil: Anvil, taskQueue: string, token: string, confirmations: number): Record<string, string> => ({
  TEMPORAL_TASK_QUEUE: taskQueue,
  CHAIN_NODE_ETHEREUM_SANDBOX: anvil.url,
  CHAIN_NODE_ETHEREUM_SANDBOX_CHAIN_ID: String(ANVIL_CHAIN_ID),
  CHAIN_TOKENS_ETHEREUM_SANDBOX: `USDC_ETH=${token}`,
  CHAIN_CONFIRMATIONS_ETHEREUM: String(confirmations),
});

/** The height of anvil's tip. */
export const anvilHeight = async (anvil: Anvil): Promise<number> => Number(await anvil.call('eth_blockNumber'));

/** A viem wallet client of anvil's first dev account: what tests fund and deploy with. */
export const anvilFunder = (anvil: Anvil, privateKey: Hex = ANVIL_KEY) =>
  createWalletClient({
    account: privateKeyToAccount(privateKey),
    transport: http(anvil.url),
    chain: { id: anvil.chainId, name: 'anvil', nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 }, rpcUrls: { default: { http: [anvil.url] } } },
  });

/** The receipt of `hash`: anvil mines each transaction as it arrives, but may answer the receipt a moment later. */
export const anvilReceipt = (anvil: Anvil, hash: string): Promise<AnvilReceipt> =>
  eventually(async () => ((await anvil.call('eth_getTransactionReceipt', [hash])) as AnvilReceipt | null) ?? undefined, `the receipt of ${hash}`);

/**
 * Deploys OpenZeppelin's fixed-supply ERC-20 with the decimals of the token it stands in for
 * (test/support/contracts/FixedSupplyToken.sol): "USD Coin" (USDC, 6 decimals, as the catalogue's
 * USDC_ETH) unless told otherwise, 1,000,000 of it to the funder; answers its address.
 */
export async function deployAnvilToken(anvil: Anvil, decimals = 6): Promise<Hex> {
  const funder = anvilFunder(anvil);
  const hash = await funder.deployContract({
    abi: FixedSupplyToken.abi,
    bytecode: FixedSupplyToken.bytecode as Hex,
    args: ['USD Coin', 'USDC', decimals, parseUnits('1000000', decimals), funder.account.address],
  });
  return getAddress((await anvilReceipt(anvil, hash)).contractAddress!);
}

/** Multicall3 at its canonical address, as on mainnet: the service reads token balances through it where it has code. */
export async function deployAnvilMulticall3(anvil: Anvil): Promise<void> {
  const deployed = await anvilReceipt(anvil, await anvilFunder(anvil).sendTransaction({ data: Multicall3.bytecode as Hex }));
  await anvil.call('anvil_setCode', [MULTICALL3_ADDRESS, await anvil.call('eth_getCode', [deployed.contractAddress, 'latest'])]);
}

/** Now, in seconds since the epoch: what a feed's round is dated by. */
export const nowSeconds = () => Math.floor(Date.now() / 1000);
/** Whole dollars in a USD feed's integer units (8 decimals, as Chainlink's). */
export const feedUsd = (dollars: number) => BigInt(dollars) * 10n ** 8n;

/** The bounds of a Chainlink aggregator that has none in effect (most of its feeds today): 1 and the largest int192. */
export const UNBOUNDED_ANSWERS = { minAnswer: 1n, maxAnswer: 2n ** 191n - 1n } as const;

/**
 * Deploys a Chainlink price feed the test moves by hand (test/support/contracts/TestPriceFeed.sol),
 * answering with `decimals` (8, as Chainlink's USD feeds) within its aggregator's `bounds` (in the
 * feed's integer units); it says nothing until a round is set.
 */
export async function deployAnvilPriceFeed(anvil: Anvil, decimals = 8, bounds: { minAnswer: bigint; maxAnswer: bigint } = UNBOUNDED_ANSWERS): Promise<Hex> {
  const hash = await anvilFunder(anvil).deployContract({
    abi: TestPriceFeed.abi,
    bytecode: TestPriceFeed.bytecode as Hex,
    args: [decimals, 'TEST / USD', bounds.minAnswer, bounds.maxAnswer],
  });
  return getAddress((await anvilReceipt(anvil, hash)).contractAddress!);
}

/** Opens the feed's next round: `answer` in the feed's integer units, updated at `updatedAt` (seconds since the epoch). */
export async function setAnvilPriceRound(anvil: Anvil, feed: Hex, answer: bigint, updatedAt: number): Promise<void> {
  const hash = await anvilFunder(anvil).writeContract({ address: feed, abi: TestPriceFeed.abi, functionName: 'setRound', args: [answer, BigInt(updatedAt)] });
  assert.equal((await anvilReceipt(anvil, hash)).status, '0x1', 'the round was set');
}

/** Deploys an L2 sequencer uptime feed that behaves as Chainlink's (test/support/contracts/TestSequencerUptimeFeed.sol), up (or down) from its deployment. */
export async function deployAnvilSequencerUptimeFeed(anvil: Anvil, initiallyDown = false): Promise<Hex> {
  const hash = await anvilFunder(anvil).deployContract({ abi: TestSequencerUptimeFeed.abi, bytecode: TestSequencerUptimeFeed.bytecode as Hex, args: [initiallyDown] });
  return getAddress((await anvilReceipt(anvil, hash)).contractAddress!);
}

/** Reports the sequencer `down` (or up) as of `timestamp` (seconds since the epoch), as Chainlink's L1 validator does. */
export async function reportAnvilSequencerStatus(anvil: Anvil, feed: Hex, down: boolean, timestamp: number): Promise<void> {
  const hash = await anvilFunder(anvil).writeContract({ address: feed, abi: TestSequencerUptimeFeed.abi, functionName: 'updateStatus', args: [down, BigInt(timestamp)] });
  assert.equal((await anvilReceipt(anvil, hash)).status, '0x1', 'the status was reported');
}

/** What a transaction paid, from anvil's own receipt. */
export const receiptFee = (receipt: AnvilReceipt): bigint => BigInt(receipt.gasUsed) * BigInt(receipt.effectiveGasPrice);
export const anvilMine = (anvil: Anvil, blocks: number) => anvil.call('anvil_mine', [`0x${blocks.toString(16)}`]);
export const anvilEthBalance = async (anvil: Anvil, address: string): Promise<bigint> => BigInt((await anvil.call('eth_getBalance', [address, 'latest'])) as Hex);
export const anvilTokenBalance = async (anvil: Anvil, token: Hex, address: string): Promise<bigint> =>
  BigInt((await anvil.call('eth_call', [{ to: token, data: encodeFunctionData({ abi: erc20Abi, functionName: 'balanceOf', args: [address as Hex] }) }, 'latest'])) as Hex);
