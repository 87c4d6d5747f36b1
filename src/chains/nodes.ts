import { TransactionContext } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Environment } from '../api-keys/entities';
import { ASSETS, findChain, networkFor, type ChainId } from '../catalogue/service';
import type { Config } from '../config';
import type { Orm } from '../db/orm';
import type { Logger } from '../logger';
import { DevnetProvider } from './devnet/provider';
import { DEVNET_CHAINS } from './devnet/rules';
import { NodeUnavailableError, type ChainProvider, type NetworkIdentity } from './provider';
import { BitcoinRpcProvider } from './providers/bitcoin-rpc';
import { ETHEREUM_MAINNET_CHAIN_ID, EvmRpcProvider } from './providers/evm-rpc';
import type { NodeCallLimits } from './providers/node-http';
import { SOLANA_MAINNET, SolanaRpcProvider } from './providers/solana-rpc';

/** The network names CHAIN_NODE_BITCOIN_SANDBOX_NETWORK takes → what BitcoinRpcProvider.identifyNetwork reports. */
const BITCOIN_SANDBOX_NETWORKS = { regtest: 'regtest', simnet: 'simnet', testnet: 'test', testnet4: 'testnet4', signet: 'signet' } as const;

export type ChainUnavailableReason = 'not_configured' | 'network_mismatch' | 'token_mismatch' | 'unreachable' | 'checking';

/** The chain cannot be served for this environment; the message is safe to show (no node URL). */
export class ChainUnavailableError extends Error {
  override name = 'ChainUnavailableError';
  constructor(
    readonly reason: ChainUnavailableReason,
    message: string,
  ) {
    super(message);
  }
}

interface ConfiguredNode {
  provider: ChainProvider;
  environment: Environment;
  /** Why the node's network is wrong for its environment, or null when it is right. */
  checkNetwork: (identity: NetworkIdentity) => string | null;
  /** EVM: why a configured token contract is not the catalogue's asset (its decimals), or null when all are. */
  checkTokens?: () => Promise<string | null>;
  /** Set once the node answered with the right network and tokens; a mismatch is remembered, an outage is not. */
  state: { kind: 'unchecked' } | { kind: 'verified'; identity: NetworkIdentity } | { kind: 'mismatch'; reason: 'network_mismatch' | 'token_mismatch' };
  /** The network check under way, so that concurrent first uses ask the node once. */
  checking?: Promise<void>;
}

/**
 * The configured chain nodes, one per chain and environment, each checked once against the network
 * its environment expects, and an EVM node's token contracts against the catalogue's decimals,
 * before it serves anything. A wrong network or token is logged and leaves that chain unavailable
 * (JSON-RPC -32603, REST 503) rather than stopping the API. Sandbox keys on a
 * chain with no node use the embedded devnet (docs/devnet.md); live keys never do.
 */
export class ChainNodes {
  private readonly nodes = new Map<string, ConfiguredNode>();
  private readonly devnets = new Map<ChainId, DevnetProvider>();

  constructor(
    config: Config,
    private readonly log: Logger,
    private readonly orm: Orm,
  ) {
    for (const node of configuredNodes(config)) this.nodes.set(nodeKey(node.provider.chain, node.environment), { ...node, state: { kind: 'unchecked' } });
  }

  /**
   * The environment's provider for the chain, once its network has been checked. `em`: the caller's
   * EntityManager, when it holds a database transaction (a request): the devnet, which lives in the
   * same database, then works on that connection, instead of waiting for a second pooled one while
   * holding the first (enough concurrent requests would starve the pool).
   */
  async provider(chain: ChainId, environment: Environment, em?: EntityManager): Promise<ChainProvider> {
    const node = this.nodes.get(nodeKey(chain, environment));
    if (!node && environment === 'sandbox' && DEVNET_CHAINS.includes(chain)) return em ? new DevnetProvider(chain, this.orm, em) : this.devnet(chain);
    if (!node) throw new ChainUnavailableError('not_configured', notConfiguredMessage(chain, environment));
    if (node.state.kind === 'unchecked' && TransactionContext.getEntityManager()) {
      // Checked outside the caller's database transaction, which must not wait on the node: the caller tries again.
      this.check(node).catch(() => undefined);
      throw new ChainUnavailableError('checking', `the ${chain} node for ${environment} keys is being checked: try again shortly`);
    }
    await this.check(node);
    return node.provider;
  }

  /**
   * The network the environment's node serves, as its check found it: no node call once checked, so
   * a request's transaction may ask (the chain id a signed payload must name). The devnet answers
   * from the process.
   */
  async networkIdentity(chain: ChainId, environment: Environment, em?: EntityManager): Promise<NetworkIdentity> {
    const provider = await this.provider(chain, environment, em);
    const node = this.nodes.get(nodeKey(chain, environment));
    if (!node) return provider.identifyNetwork();
    if (node.state.kind !== 'verified') throw new Error(`the ${chain} node for ${environment} keys is not verified`);
    return node.state.identity;
  }

  /** At start: checks every configured node and logs the outcome; a failure is remembered or retried, never thrown. */
  async checkAll(): Promise<void> {
    await Promise.all([...this.nodes.values()].map((node) => this.check(node).catch(() => undefined)));
  }

  /** The node's network check, once at a time: a call while one is under way waits for it. */
  private check(node: ConfiguredNode): Promise<void> {
    if (node.state.kind !== 'unchecked') return this.verify(node);
    node.checking ??= this.verify(node).finally(() => (node.checking = undefined));
    return node.checking;
  }

  /** Sandbox keys with no node for the chain use the embedded devnet, which needs no network check. */
  private devnet(chain: ChainId): DevnetProvider {
    let provider = this.devnets.get(chain);
    if (!provider) this.devnets.set(chain, (provider = new DevnetProvider(chain, this.orm)));
    return provider;
  }

  private async verify(node: ConfiguredNode): Promise<void> {
    const { chain, kind } = node.provider;
    const unavailable = (reason: 'network_mismatch' | 'token_mismatch') =>
      new ChainUnavailableError(
        reason,
        reason === 'network_mismatch'
          ? `the ${chain} node for ${node.environment} keys is on the wrong network`
          : `a ${chain} token contract for ${node.environment} keys does not match the catalogue`,
      );
    if (node.state.kind === 'verified') return;
    if (node.state.kind === 'mismatch') throw unavailable(node.state.reason);
    const inspection = await inspectNode(node);
    if (inspection.kind === 'unreachable') {
      this.log.warn({ chain, environment: node.environment, provider: kind, reason: inspection.problem }, 'chain node unreachable; checked again on next use');
      throw new ChainUnavailableError('unreachable', `the ${chain} node could not be reached`);
    }
    if (inspection.kind === 'network_mismatch') {
      node.state = { kind: 'mismatch', reason: 'network_mismatch' };
      this.log.error({ chain, environment: node.environment, provider: kind, ...networkFields(inspection.identity), problem: inspection.problem }, 'chain node is on the wrong network; the chain is unavailable');
      throw unavailable('network_mismatch');
    }
    if (inspection.kind === 'token_mismatch') {
      node.state = { kind: 'mismatch', reason: 'token_mismatch' };
      this.log.error({ chain, environment: node.environment, provider: kind, problem: inspection.problem }, `${chain} ${node.environment} node: ${inspection.problem}; the chain is unavailable`);
      throw unavailable('token_mismatch');
    }
    node.state = { kind: 'verified', identity: inspection.identity };
    this.log.info({ chain, environment: node.environment, provider: kind, ...networkFields(inspection.identity) }, 'chain node verified');
  }
}

/** What a node says of itself now: the network it serves and whether that (then its token contracts) is right for its environment. */
export type NodeInspection =
  | { kind: 'verified'; identity: NetworkIdentity }
  | { kind: 'network_mismatch' | 'token_mismatch'; identity: NetworkIdentity; problem: string }
  | { kind: 'unreachable'; problem: string };

/** The node's network check, then (on the right network only: elsewhere the contracts mean nothing) its tokens'. Messages name no URL. */
async function inspectNode(node: Omit<ConfiguredNode, 'state'>): Promise<NodeInspection> {
  let identity: NetworkIdentity;
  try {
    identity = await node.provider.identifyNetwork();
    const networkProblem = node.checkNetwork(identity);
    if (networkProblem) return { kind: 'network_mismatch', identity, problem: networkProblem };
    const tokenProblem = node.checkTokens ? await node.checkTokens() : null;
    return tokenProblem ? { kind: 'token_mismatch', identity, problem: tokenProblem } : { kind: 'verified', identity };
  } catch (error) {
    if (!(error instanceof NodeUnavailableError)) throw error;
    return { kind: 'unreachable', problem: error.message };
  }
}

/**
 * Each configured node with a fresh inspection of it (`npm run cli -- doctor`): the same checks a first use runs,
 * with no state kept, each call `timeoutMs` at most.
 */
export function configuredNodeInspections(config: Config, timeoutMs: number): { chain: ChainId; environment: Environment; inspect: () => Promise<NodeInspection> }[] {
  return configuredNodes({ ...config, CHAIN_NODE_TIMEOUT_MS: Math.min(config.CHAIN_NODE_TIMEOUT_MS, timeoutMs) }).map((node) => ({
    chain: node.provider.chain,
    environment: node.environment,
    inspect: () => inspectNode(node),
  }));
}

/**
 * The nodes the configuration names, one per chain and environment, each with the check its network
 * must pass. A live node must be mainnet; sandbox keys must never move real coins.
 */
function configuredNodes(config: Config): Omit<ConfiguredNode, 'state'>[] {
  const nodes: Omit<ConfiguredNode, 'state'>[] = [];
  const limits: NodeCallLimits = { timeoutMs: config.CHAIN_NODE_TIMEOUT_MS, maxResponseBytes: config.CHAIN_NODE_MAX_RESPONSE_BYTES };
  const sandboxChainId = config.CHAIN_NODE_ETHEREUM_SANDBOX_CHAIN_ID;
  if (config.CHAIN_NODE_ETHEREUM_SANDBOX) {
    const provider = new EvmRpcProvider('ethereum', config.CHAIN_NODE_ETHEREUM_SANDBOX, limits, config.CHAIN_TOKENS_ETHEREUM_SANDBOX);
    nodes.push({
      environment: 'sandbox',
      provider,
      checkTokens: () => checkTokenDecimals(provider),
      checkNetwork: ({ chainId }) => {
        if (sandboxChainId !== undefined) return chainId === sandboxChainId ? null : `expected chain id ${sandboxChainId}, the node serves ${chainId}`;
        // Sandbox keys must never move real ether: a mainnet node is refused even when no id is configured.
        return chainId === ETHEREUM_MAINNET_CHAIN_ID ? 'a sandbox node must not be Ethereum mainnet (chain id 1)' : null;
      },
    });
  }
  if (config.CHAIN_NODE_ETHEREUM_LIVE) {
    const provider = new EvmRpcProvider('ethereum', config.CHAIN_NODE_ETHEREUM_LIVE, limits, config.CHAIN_TOKENS_ETHEREUM_LIVE);
    nodes.push({
      environment: 'live',
      provider,
      checkTokens: () => checkTokenDecimals(provider),
      checkNetwork: ({ chainId }) => (chainId === ETHEREUM_MAINNET_CHAIN_ID ? null : `expected Ethereum mainnet (chain id 1), the node serves ${chainId}`),
    });
  }
  if (config.CHAIN_NODE_BITCOIN_SANDBOX) {
    const expected = config.CHAIN_NODE_BITCOIN_SANDBOX_NETWORK && BITCOIN_SANDBOX_NETWORKS[config.CHAIN_NODE_BITCOIN_SANDBOX_NETWORK];
    nodes.push({
      environment: 'sandbox',
      provider: new BitcoinRpcProvider(config.CHAIN_NODE_BITCOIN_SANDBOX, limits, 'sandbox'),
      checkNetwork: ({ network }) => {
        if (expected) return network === expected ? null : `expected Bitcoin ${expected}, the node serves ${network}`;
        // Sandbox keys must never move real bitcoin: a mainnet node is refused even when no network is configured.
        return network === 'main' ? 'a sandbox node must not be Bitcoin mainnet' : null;
      },
    });
  }
  if (config.CHAIN_NODE_BITCOIN_LIVE) {
    nodes.push({
      environment: 'live',
      provider: new BitcoinRpcProvider(config.CHAIN_NODE_BITCOIN_LIVE, limits, 'live'),
      checkNetwork: ({ network }) => (network === 'main' ? null : `expected Bitcoin mainnet, the node serves ${network}`),
    });
  }
  if (config.CHAIN_NODE_SOLANA_SANDBOX) {
    const provider = new SolanaRpcProvider(config.CHAIN_NODE_SOLANA_SANDBOX, limits, config.CHAIN_TOKENS_SOLANA_SANDBOX, config.SOLANA_SCAN_PARALLEL_BLOCKS);
    nodes.push({
      environment: 'sandbox',
      provider,
      checkTokens: () => checkTokenDecimals(provider),
      // Sandbox keys must never move real SOL: any cluster but mainnet-beta (devnet, testnet, a local validator).
      checkNetwork: ({ network }) => (network === SOLANA_MAINNET ? 'a sandbox node must not be Solana mainnet-beta' : null),
    });
  }
  if (config.CHAIN_NODE_SOLANA_LIVE) {
    const provider = new SolanaRpcProvider(config.CHAIN_NODE_SOLANA_LIVE, limits, config.CHAIN_TOKENS_SOLANA_LIVE, config.SOLANA_SCAN_PARALLEL_BLOCKS);
    nodes.push({
      environment: 'live',
      provider,
      checkTokens: () => checkTokenDecimals(provider),
      checkNetwork: ({ network }) => (network === SOLANA_MAINNET ? null : `expected Solana mainnet-beta, the node serves ${network}`),
    });
  }
  return nodes;
}

/**
 * Why the node's token contracts (Solana: mints) cannot be served as the catalogue's assets, or null: every amount
 * is counted in the catalogue's decimals, so a contract with others would move a different sum.
 */
async function checkTokenDecimals(provider: EvmRpcProvider | SolanaRpcProvider): Promise<string | null> {
  for (const token of await provider.tokenDecimals()) {
    const asset = ASSETS.find((candidate) => candidate.id === token.assetId && candidate.chain === provider.chain && candidate.type !== 'native');
    if (!asset) return `${token.assetId} (contract ${token.contract}) is not a ${provider.chain} token of the catalogue`;
    if (token.decimals === null) return `the ${token.assetId} contract ${token.contract} answers no decimals(); the catalogue has ${asset.decimals}`;
    if (token.decimals !== asset.decimals) return `the ${token.assetId} contract ${token.contract} reports ${token.decimals} decimals; the catalogue has ${asset.decimals}`;
  }
  return null;
}

/** The chains whose sandbox provider is the devnet: those it runs that have no sandbox node configured. */
export function sandboxDevnetChains(config: Config): ChainId[] {
  const sandboxNodes = new Set(configuredNodes(config).filter((node) => node.environment === 'sandbox').map((node) => node.provider.chain));
  return DEVNET_CHAINS.filter((chain) => !sandboxNodes.has(chain));
}

/** Every chain and environment the service serves: the configured nodes, and the sandbox's devnet chains. */
export function servedChains(config: Config): { chain: ChainId; environment: Environment }[] {
  return [
    ...configuredNodes(config).map((node) => ({ chain: node.provider.chain, environment: node.environment })),
    ...sandboxDevnetChains(config).map((chain) => ({ chain, environment: 'sandbox' as const })),
  ];
}

/**
 * Why the chain has no node for the environment. Tron has no node adapter (no Tron node can run here to
 * test one against), so live Tron is refused whatever the configuration; sandbox Tron is the devnet's.
 */
function notConfiguredMessage(chain: ChainId, environment: Environment): string {
  if (chain === 'tron' && environment === 'live') return 'no Tron node can be configured yet: live Tron is not served (sandbox keys use the devnet)';
  return `no node is configured for ${chain} ${networkFor(findChain(chain), environment)}`;
}

const nodeKey = (chain: ChainId, environment: Environment) => `${chain}:${environment}`;

const networkFields = (identity: NetworkIdentity) => ({ chain_id: identity.chainId, network: identity.network });
