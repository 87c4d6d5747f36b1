import type { EntityManager } from '@mikro-orm/postgresql';
import type { AuthContext } from '../api-keys/auth-context';
import { assetAmount, chainAsset, findChain, networkFor, type ChainId } from '../catalogue/service';
import { canonicalAddress } from '../chains/addresses';
import { fundFromFaucet } from '../chains/devnet/faucet';
import { faucetAddress } from '../chains/devnet/ledger';
import { devnetBlocksFlow, devnetBlocksWorkflowId, mineBlocksUpdate } from '../chains/flows/devnet-blocks';
import { sandboxDevnetChains } from '../chains/nodes';
import type { ChainNodes } from '../chains/nodes';
import { TransactionRejectedError } from '../chains/provider';
import type { Config } from '../config';
import { errors } from '../shared/errors';
import { toDisplay } from '../shared/money';
import type { WorkflowStarter } from '../temporal/starter';
import { chainScanFlow, chainScanWorkflowId, scanThroughUpdate } from './flows/chain-scan';
import { presentDeposit, recordTransfers, requiredConfirmations } from './service';

/** How long the block helper waits for scanning to process the blocks it mined before answering. */
const SCAN_WAIT_SECONDS = 10;

/** The sandbox helpers drive the embedded devnet only: a chain served by a configured node has its own faucet and miners. */
function devnetChain(config: Config, chainId: string): ChainId {
  const chain = findChain(chainId).id;
  if (!sandboxDevnetChains(config).includes(chain)) {
    throw errors.invalid('devnet_only', `Sandbox ${chain} is served by a configured node, not the embedded devnet: deposits and blocks happen on that node.`, { param: 'chain' });
  }
  return chain;
}

export interface SandboxDepositInput {
  chain: ChainId;
  address: string;
  asset: string;
  /** Display units. */
  amount: string;
}

/**
 * A transfer from the devnet's faucet (a simulated outside address) to `address`: a real signed
 * transaction in the devnet's mempool, mined by the next block. It is recorded at once, so the
 * receiving wallet shows it pending now (and every subscription watching the address hears of it);
 * block scanning confirms it at the chain's depth.
 */
export async function simulateDeposit(em: EntityManager, config: Config, chains: ChainNodes, auth: AuthContext, input: SandboxDepositInput) {
  const chain = devnetChain(config, input.chain);
  const asset = chainAsset(chain, input.asset);
  const network = networkFor(findChain(chain), auth.environment);
  const to = canonicalAddress(chain, auth.environment, input.address);
  if (!to) throw errors.validation(`address is not a ${chain} address on ${network}.`, 'address');
  const amount = assetAmount(input.amount, asset);

  const tipHeight = (await (await chains.provider(chain, auth.environment, em)).tip()).height;
  let sent: { txid: string; position: string };
  try {
    sent = await fundFromFaucet(em, chain, { to, assetId: asset.id, amount });
  } catch (error) {
    if (error instanceof TransactionRejectedError) throw errors.invalid('deposit_refused', `The devnet refused the faucet's transfer: ${error.message}`, { details: { reason: error.reason } });
    throw error;
  }
  const recorded = await recordTransfers(
    em,
    { chain, environment: auth.environment, requiredConfirmations: requiredConfirmations(config, chain), tipHeight },
    [{ txid: sent.txid, position: sent.position, to, from: faucetAddress(chain), assetId: asset.id, amount }],
    null,
  );
  const deposit = recorded.find((row) => row.organization.id === auth.organizationId && row.wallet);
  return {
    object: 'sandbox_deposit' as const,
    chain,
    network,
    address: to,
    asset: asset.symbol,
    asset_id: asset.id,
    amount: toDisplay(amount, asset.decimals),
    amount_raw: amount.toString(),
    from_address: faucetAddress(chain),
    tx_hash: sent.txid,
    position: sent.position,
    deposit: deposit ? presentDeposit(deposit) : null,
  };
}

/**
 * Mines `count` devnet blocks at once through the chain's block producer, then waits (briefly) for
 * scanning to process them, so that balances read right after already count them.
 */
export async function mineSandboxBlocks(config: Config, starter: WorkflowStarter, chainId: string, count: number) {
  const chain = devnetChain(config, chainId);
  await starter.ensureRunning(devnetBlocksFlow, { chain, intervalSeconds: config.DEVNET_BLOCK_INTERVAL_SECONDS });
  await starter.ensureRunning(chainScanFlow, { chain, environment: 'sandbox', intervalSeconds: config.CHAIN_SCAN_INTERVAL_SECONDS });
  const tip = await starter.executeUpdate(devnetBlocksWorkflowId(chain), mineBlocksUpdate, { count });
  const scan = await starter.executeUpdate(chainScanWorkflowId(chain, 'sandbox'), scanThroughUpdate, { height: tip.height, waitSeconds: SCAN_WAIT_SECONDS });
  return {
    object: 'sandbox_blocks' as const,
    chain,
    network: networkFor(findChain(chain), 'sandbox'),
    mined: count,
    height: tip.height,
    hash: tip.hash,
    scanned: scan.reached,
  };
}
