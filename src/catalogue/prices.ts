import { formatUnits } from 'viem';
import type { Environment } from '../api-keys/entities';
import { ETHEREUM_MAINNET_CHAIN_ID, EvmRpcProvider, type PriceRound } from '../chains/providers/evm-rpc';
import type { Config } from '../config';
import type { Logger } from '../logger';
import type { AssetInfo } from './service';
import { errors } from '../shared/errors';
import { Money, toDisplay, type MoneyValue } from '../shared/money';

/** Where USD prices come from: an exact decimal price of one unit of an asset, or null when unknown. */
export interface PriceSource {
  usdPrice(assetId: string): MoneyValue | null;
}

/** A fixed table of prices (the sandbox's PRICE_TABLE_SANDBOX). */
export class TablePriceSource implements PriceSource {
  constructor(private readonly prices: Record<string, string>) {}

  usdPrice(assetId: string): MoneyValue | null {
    const price = this.prices[assetId];
    return price === undefined ? null : new Money(price);
  }
}

/** Live keys with no feeds configured: every USD figure is null rather than invented. */
const NO_PRICES: PriceSource = { usdPrice: () => null };

/**
 * The latest round read of each live Chainlink feed, by node and feed address. Prices are read where
 * a database transaction may be open (the movement gate, under row locks), which must never wait on
 * a node: so the node is read by LivePriceFeeds in the background, and a price is a memory read whose
 * age is judged at the moment it is used.
 */
const latestRounds = new Map<string, PriceRound>();
const roundKey = (nodeUrl: string, feed: string) => `${nodeUrl} ${feed.toLowerCase()}`;

/** The USD price a round says, exact, or null when it says none that may be used: zero, negative, or updated longer than `maxAgeSeconds` ago. */
function freshPrice(round: PriceRound, maxAgeSeconds: number, nowSeconds: bigint): MoneyValue | null {
  if (round.answer <= 0n || nowSeconds - round.updatedAt > BigInt(maxAgeSeconds)) return null;
  return new Money(formatUnits(round.answer, round.decimals));
}

/** Live prices: the Chainlink feed configured for each asset (PRICE_FEEDS_LIVE), as last read on the live Ethereum node. */
class ChainlinkPriceSource implements PriceSource {
  constructor(
    private readonly nodeUrl: string,
    private readonly feeds: Readonly<Record<string, `0x${string}`>>,
    private readonly maxAgeSeconds: number,
    private readonly maxAges: Readonly<Record<string, number>>,
  ) {}

  usdPrice(assetId: string): MoneyValue | null {
    const feed = this.feeds[assetId];
    const round = feed === undefined ? undefined : latestRounds.get(roundKey(this.nodeUrl, feed));
    return round === undefined ? null : freshPrice(round, this.maxAges[assetId] ?? this.maxAgeSeconds, BigInt(Math.floor(Date.now() / 1000)));
  }
}

/** The settings that say whether live has a price source at all. */
export type PriceSourceSettings = Pick<Config, 'CHAIN_NODE_ETHEREUM_LIVE' | 'PRICE_FEEDS_LIVE'>;

/**
 * 503 price_source_unavailable unless the environment has a price source: the sandbox its table,
 * live Chainlink feeds (PRICE_FEEDS_LIVE) on a live Ethereum node. Asked by requests that set up
 * something valued in USD, which without prices would never act (a stale or missing price at the
 * moment of use is `price_unavailable` instead, and fails closed where money moves).
 */
export function assertPriceSource(config: PriceSourceSettings, environment: Environment, what: string): void {
  if (environment === 'sandbox' || (config.CHAIN_NODE_ETHEREUM_LIVE !== undefined && config.PRICE_FEEDS_LIVE !== undefined)) return;
  throw errors.unavailable(
    'price_source_unavailable',
    `${what} needs USD prices, and live has no price source: set CHAIN_NODE_ETHEREUM_LIVE and PRICE_FEEDS_LIVE (Chainlink feeds; docs/transactions.md).`,
    60,
  );
}

export const priceSourceFor = (config: Config, environment: Environment): PriceSource => {
  if (environment === 'sandbox') return new TablePriceSource(config.PRICE_TABLE_SANDBOX);
  const { CHAIN_NODE_ETHEREUM_LIVE: nodeUrl, PRICE_FEEDS_LIVE: feeds } = config;
  return nodeUrl !== undefined && feeds !== undefined ? new ChainlinkPriceSource(nodeUrl, feeds, config.PRICE_MAX_AGE_SECONDS, config.PRICE_MAX_AGES_LIVE ?? {}) : NO_PRICES;
};

/**
 * Reads every live feed (PRICE_FEEDS_LIVE) on the live Ethereum node at start and every
 * PRICE_POLL_SECONDS; the API and the worker each run one. A feed that cannot be read keeps its last
 * round, which stops counting once it is older than its age limit (PRICE_MAX_AGES_LIVE, else PRICE_MAX_AGE_SECONDS); a node on another network
 * than mainnet has its rounds forgotten, so that no price of a test chain is ever used for live keys.
 */
export class LivePriceFeeds {
  private readonly node: EvmRpcProvider | null;
  private timer: NodeJS.Timeout | undefined;
  private reading: Promise<void> | undefined;

  constructor(
    private readonly config: Config,
    private readonly log: Logger,
  ) {
    const { CHAIN_NODE_ETHEREUM_LIVE: nodeUrl, PRICE_FEEDS_LIVE: feeds } = config;
    const limits = { timeoutMs: config.CHAIN_NODE_TIMEOUT_MS, maxResponseBytes: config.CHAIN_NODE_MAX_RESPONSE_BYTES };
    this.node = nodeUrl !== undefined && feeds !== undefined ? new EvmRpcProvider('ethereum', nodeUrl, limits) : null;
  }

  /** Starts polling; resolves once the first read is done (it never rejects: a failure is logged). */
  start(): Promise<void> {
    if (!this.node || this.timer) return Promise.resolve();
    this.timer = setInterval(() => void this.refresh(), this.config.PRICE_POLL_SECONDS * 1000);
    this.timer.unref();
    return this.refresh();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Reads every feed now; a read already under way is waited for rather than doubled. */
  refresh(): Promise<void> {
    this.reading ??= this.readAll().finally(() => (this.reading = undefined));
    return this.reading;
  }

  private async readAll(): Promise<void> {
    const { node } = this;
    const nodeUrl = this.config.CHAIN_NODE_ETHEREUM_LIVE;
    const feeds = this.config.PRICE_FEEDS_LIVE;
    if (!node || nodeUrl === undefined || feeds === undefined) return;
    try {
      const { chainId } = await node.identifyNetwork();
      if (chainId !== ETHEREUM_MAINNET_CHAIN_ID) {
        for (const feed of Object.values(feeds)) latestRounds.delete(roundKey(nodeUrl, feed));
        this.log.error({ chain_id: chainId }, 'live price feeds: the live Ethereum node is not on mainnet (chain id 1); live keys have no prices');
        return;
      }
    } catch {
      this.log.warn('live price feeds: the live Ethereum node did not answer; the last rounds count until they are too old');
      return;
    }
    await Promise.all(
      Object.entries(feeds).map(async ([assetId, feed]) => {
        try {
          latestRounds.set(roundKey(nodeUrl, feed), await node.latestPriceRound(feed));
        } catch {
          this.log.warn({ asset: assetId, feed }, 'live price feed could not be read; its last round counts until it is too old');
        }
      }),
    );
  }
}

/** The USD value of `baseUnits` of `asset`, exact (not rounded), or null when the source has no price for it. */
export function usdValue(prices: PriceSource, asset: AssetInfo, baseUnits: bigint): string | null {
  const price = prices.usdPrice(asset.id);
  return price === null ? null : new Money(toDisplay(baseUnits, asset.decimals)).times(price).toFixed();
}
