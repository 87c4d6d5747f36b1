import { randomUUID } from 'node:crypto';
import { SolanaRpcProvider } from '../../src/chains/providers/solana-rpc';
import { startScannedService, type ScannedService } from './scanned-service';
import { DEVNET_GENESIS, type SolanaNode } from './solana-node';

/** A slot passes this often on the node a Solana service test runs against, transactions or not. */
export const SLOT_EVERY_MS = 400;

/**
 * Starts `node` as a devnet-genesis cluster sealing a slot every SLOT_EVERY_MS, and the sandbox service
 * scanning it (`mint` as USDC_SOL, 2 confirmations, a scan every half second, a task queue of its own,
 * and `overrides`): the service, its configuration and a provider on the node for the test's own transfers.
 * Accounts the test needs from the start are put on the node before.
 */
export async function startSolanaService(node: SolanaNode, name: string, mint: string, overrides: Record<string, string> = {}) {
  node.genesis = DEVNET_GENESIS;
  await node.start();
  node.produceBlocks(SLOT_EVERY_MS);
  const provider = new SolanaRpcProvider(node.url, { timeoutMs: 5_000, maxResponseBytes: 1_000_000 }, { USDC_SOL: mint });
  const config: Record<string, string> = {
    TEMPORAL_TASK_QUEUE: `${name.toLowerCase().replaceAll(' ', '-')}-${randomUUID()}`,
    CHAIN_NODE_SOLANA_SANDBOX: node.url,
    CHAIN_TOKENS_SOLANA_SANDBOX: `USDC_SOL=${mint}`,
    CHAIN_CONFIRMATIONS_SOLANA: '2',
    CHAIN_SCAN_INTERVAL_SECONDS: '0.5',
    ...overrides,
  };
  const service: ScannedService = await startScannedService('solana', name, config, async () => node.confirmedSlot);
  return { service, config, provider };
}
