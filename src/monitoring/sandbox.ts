import type { EntityManager } from '@mikro-orm/postgresql';
import type { AuthContext } from '../api-keys/auth-context';
import { assetAmount, chainAsset, findChain, networkFor, type AssetInfo, type ChainId } from '../catalogue/service';
import { canonicalAddress } from '../chains/addresses';
import { fundFromFaucet } from '../chains/devnet/faucet';
import { faucetAddress } from '../chains/devnet/ledger';
import { devnetBlocksFlow, devnetBlocksWorkflowId, mineBlocksUpdate } from '../chains/flows/devnet-blocks';
import { sandboxDevnetChains } from '../chains/nodes';
import type { ChainNodes } from '../chains/nodes';
import { TransactionRejectedError } from '../chains/provider';
import type { Config } from '../config';
import { Organization } from '../organizations/entities';
import { DomainError, errors } from '../shared/errors';
import { toBaseUnits, toDisplay } from '../shared/money';
import type { WorkflowStarter } from '../temporal/starter';
import { chainScanFlow, chainScanWorkflowId, scanThroughUpdate } from './flows/chain-scan';
import { SandboxDeposit } from './entities';
import { presentDeposit, recordTransfers, requiredConfirmations } from './service';
import { withArticle } from '../shared/articles';

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
  /** The id its sandbox_deposits row takes (src/payouts/sandbox-deposit.ts: one transfer per Idempotency-Key); a random one by default. */
  depositId?: string;
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
  if (!to) throw errors.validation(`address is not ${withArticle(chain)} address on ${network}.`, 'address');
  const amount = assetAmount(input.amount, asset);
  await withinDepositLimits(em, config, auth.organizationId, asset, amount);

  const tipHeight = (await (await chains.provider(chain, auth.environment, em)).tip()).height;
  let sent: { txid: string; position: string };
  try {
    sent = await fundFromFaucet(em, chain, { to, assetId: asset.id, amount });
  } catch (error) {
    if (error instanceof TransactionRejectedError) throw errors.invalid('deposit_refused', `The devnet refused the faucet's transfer: ${error.message}`, { details: { reason: error.reason } });
    throw error;
  }
  em.create(SandboxDeposit, { ...(input.depositId ? { id: input.depositId } : {}), organization: em.getReference(Organization, auth.organizationId), assetId: asset.id, amount: amount.toString(), txid: sent.txid, createdAt: new Date() });
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

const DAY_MS = 24 * 60 * 60 * 1000;

/**
 * The caps of the deposit helper (SANDBOX_DEPOSIT_MAX_PER_REQUEST, SANDBOX_DEPOSIT_MAX_PER_DAY): 400
 * `amount_too_large` above the per-request maximum, 429 `sandbox_deposit_limit` when the
 * organization's deposits of the asset in the last 24 hours would pass the daily one, with what
 * remains and when `amount` fits again. Holds a lock per organization and asset until the caller's
 * transaction ends, so concurrent deposits cannot both take the last of the allowance.
 */
async function withinDepositLimits(em: EntityManager, config: Config, organizationId: string, asset: AssetInfo, amount: bigint): Promise<void> {
  const perDay = toBaseUnits(config.SANDBOX_DEPOSIT_MAX_PER_DAY[asset.id]!, asset.decimals);
  const configured = toBaseUnits(config.SANDBOX_DEPOSIT_MAX_PER_REQUEST[asset.id]!, asset.decimals);
  const perRequest = configured < perDay ? configured : perDay;
  const display = (value: bigint) => toDisplay(value, asset.decimals);
  if (amount > perRequest) {
    throw errors.invalid('amount_too_large', `A sandbox deposit sends at most ${display(perRequest)} ${asset.symbol}.`, {
      param: 'amount',
      details: { asset_id: asset.id, max_per_request: display(perRequest) },
    });
  }
  await em.execute('select pg_advisory_xact_lock(hashtext(?))', [`sandbox-deposits:${organizationId}:${asset.id}`]);
  const since = new Date(Date.now() - DAY_MS);
  const [row] = await em.execute<{ used: string }[]>(
    'select coalesce(sum(amount), 0)::text as used from sandbox_deposits where organization_id = ? and asset_id = ? and created_at > ?',
    [organizationId, asset.id, since],
  );
  const used = BigInt(row!.used);
  if (used + amount <= perDay) return;
  // The requested amount fits again once enough of the window's oldest deposits have aged out of it.
  const [freed] = await em.execute<{ created_at: Date }[]>(
    `select created_at from (
       select created_at, sum(amount) over (order by created_at, id) as aged
       from sandbox_deposits where organization_id = ? and asset_id = ? and created_at > ?
     ) window_deposits where aged >= ? order by created_at limit 1`,
    [organizationId, asset.id, since, (used + amount - perDay).toString()],
  );
  const availableAt = new Date(new Date(freed!.created_at).getTime() + DAY_MS);
  const remaining = perDay > used ? perDay - used : 0n;
  throw new DomainError({
    kind: 'rate_limited',
    code: 'sandbox_deposit_limit',
    message: `Sandbox deposits of ${asset.symbol} are capped at ${display(perDay)} per organization in any 24 hours; ${display(remaining)} remains.`,
    param: 'amount',
    details: {
      asset_id: asset.id,
      max_per_day: display(perDay),
      used: display(used),
      remaining: display(remaining),
      available_at: availableAt.toISOString(),
      retry_after_seconds: Math.max(1, Math.ceil((availableAt.getTime() - Date.now()) / 1000)),
    },
  });
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
