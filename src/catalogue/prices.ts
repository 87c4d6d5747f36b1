import { Counter, Gauge, type Registry } from 'prom-client';
import { formatUnits } from 'viem';
import type { Environment } from '../api-keys/entities';
import { ETHEREUM_MAINNET_CHAIN_ID, EvmRpcProvider, type FeedRound, type PriceRound } from '../chains/providers/evm-rpc';
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

/** The chain id of each network live feeds may be read on: Ethereum, or an L2 with a sequencer uptime feed. */
const PRICE_NETWORK_CHAIN_IDS: Readonly<Record<Config['PRICE_NETWORK_LIVE'], number>> = { ethereum: ETHEREUM_MAINNET_CHAIN_ID, arbitrum: 42161, optimism: 10, base: 8453 };

/** The settings that say where live prices are read. */
type PriceNodeSettings = Pick<Config, 'CHAIN_NODE_ETHEREUM_LIVE' | 'PRICE_NODE_LIVE' | 'PRICE_NETWORK_LIVE'>;

/** The node the live feeds are read on: PRICE_NODE_LIVE, else the live Ethereum node when the feeds are on Ethereum. */
const priceNodeUrl = (config: PriceNodeSettings): string | undefined =>
  config.PRICE_NODE_LIVE ?? (config.PRICE_NETWORK_LIVE === 'ethereum' ? config.CHAIN_NODE_ETHEREUM_LIVE : undefined);

/** Why a live feed's answer is refused as a price when it is read: it is not positive, or at or outside a bound. */
type AnswerRefusal = 'not_positive' | 'min_answer' | 'max_answer' | 'configured_min' | 'configured_max';

/** Why an asset has no live price at the moment it is asked for. */
export type PriceUnavailableReason = 'no_feed' | 'not_read' | 'refused' | 'stale' | 'sequencer_unknown' | 'sequencer_down' | 'sequencer_grace';

/** A feed's latest round as held: its answer as a price, why that is refused (null: it is not), and when the round was updated. */
interface HeldRound {
  price: MoneyValue;
  refusal: AnswerRefusal | null;
  updatedAt: bigint;
}

/**
 * The latest round read of each live Chainlink feed (and of the L2 sequencer uptime feed), by node and
 * feed address. Prices are read where a database transaction may be open (the movement gate, under row
 * locks), which must never wait on a node: so the node is read by LivePriceFeeds in the background, and a
 * price is a memory read whose age (and the sequencer's uptime) is judged at the moment it is used.
 */
const latestRounds = new Map<string, HeldRound>();
const sequencerRounds = new Map<string, FeedRound>();
const roundKey = (nodeUrl: string, feed: string) => `${nodeUrl} ${feed.toLowerCase()}`;

/** Why `round`'s answer is no price, or null when it is one: not positive, at or outside its aggregator's bounds or the configured ones. */
function answerRefusal(round: PriceRound, price: MoneyValue, bounds: { min: string; max: string } | undefined): AnswerRefusal | null {
  if (round.answer <= 0n) return 'not_positive';
  // Chainlink's aggregators never report outside [minAnswer, maxAnswer]: an answer at a bound may be the bound, not the market.
  if (round.answer <= round.minAnswer) return 'min_answer';
  if (round.answer >= round.maxAnswer) return 'max_answer';
  if (bounds !== undefined && price.lessThanOrEqualTo(bounds.min)) return 'configured_min';
  if (bounds !== undefined && price.greaterThanOrEqualTo(bounds.max)) return 'configured_max';
  return null;
}

/** The live price of `assetId` now, or why there is none (judged at the moment of use: age and the sequencer's uptime). */
function livePrice(config: Config, nodeUrl: string, assetId: string, now: bigint): { price: MoneyValue } | { unavailable: PriceUnavailableReason } {
  const feed = config.PRICE_FEEDS_LIVE?.[assetId];
  if (feed === undefined) return { unavailable: 'no_feed' };
  const sequencerFeed = config.PRICE_SEQUENCER_UPTIME_FEED_LIVE;
  if (sequencerFeed !== undefined) {
    const sequencer = sequencerRounds.get(roundKey(nodeUrl, sequencerFeed));
    // Chainlink's uptime feed: answer 0 up, 1 down; startedAt is when the status last changed (0: no round yet).
    if (sequencer === undefined || sequencer.startedAt === 0n) return { unavailable: 'sequencer_unknown' };
    if (sequencer.answer !== 0n) return { unavailable: 'sequencer_down' };
    if (now - sequencer.startedAt <= BigInt(config.PRICE_SEQUENCER_GRACE_SECONDS)) return { unavailable: 'sequencer_grace' };
  }
  const round = latestRounds.get(roundKey(nodeUrl, feed.address));
  if (round === undefined) return { unavailable: 'not_read' };
  if (round.refusal !== null) return { unavailable: 'refused' };
  if (now - round.updatedAt > BigInt(feed.heartbeatSeconds + config.PRICE_HEARTBEAT_MARGIN_SECONDS)) return { unavailable: 'stale' };
  return { price: round.price };
}

const nowSeconds = () => BigInt(Math.floor(Date.now() / 1000));

/** Live prices: the Chainlink feed configured for each asset (PRICE_FEEDS_LIVE), as last read on the price node. */
class ChainlinkPriceSource implements PriceSource {
  constructor(
    private readonly config: Config,
    private readonly nodeUrl: string,
  ) {}

  usdPrice(assetId: string): MoneyValue | null {
    const verdict = livePrice(this.config, this.nodeUrl, assetId, nowSeconds());
    return 'price' in verdict ? verdict.price : null;
  }
}

/** Each asset of PRICE_FEEDS_LIVE as this process last read it: its price and the round's time, and why it is no price now (null: it is one). */
export function livePriceStatus(config: Config): { asset: string; price: string | null; updatedAt: bigint | null; reason: PriceUnavailableReason | null }[] {
  const nodeUrl = priceNodeUrl(config);
  if (nodeUrl === undefined) return [];
  const now = nowSeconds();
  return Object.entries(config.PRICE_FEEDS_LIVE ?? {}).map(([asset, feed]) => {
    const verdict = livePrice(config, nodeUrl, asset, now);
    const round = latestRounds.get(roundKey(nodeUrl, feed.address));
    return { asset, price: round ? round.price.toFixed() : null, updatedAt: round?.updatedAt ?? null, reason: 'unavailable' in verdict ? verdict.unavailable : null };
  });
}

/** Each asset of PRICE_FEEDS_LIVE that has no live price now, with why (in this process, as last read): what /metrics says. */
export function unavailableLivePrices(config: Config): { asset: string; reason: PriceUnavailableReason }[] {
  return livePriceStatus(config).flatMap(({ asset, reason }) => (reason === null ? [] : [{ asset, reason }]));
}

/** What a read of the live feeds found of the price node: it answered on PRICE_NETWORK_LIVE, on another network (chain id), or not at all. */
export type PriceNodeReading = { kind: 'read' } | { kind: 'wrong_network'; chainId: number; expectedChainId: number } | { kind: 'unreachable' } | { kind: 'not_configured' };

/** The settings that say whether live has a price source at all. */
export type PriceSourceSettings = PriceNodeSettings & Pick<Config, 'PRICE_FEEDS_LIVE'>;

/**
 * 503 price_source_unavailable unless the environment has a price source: the sandbox its table,
 * live Chainlink feeds (PRICE_FEEDS_LIVE) on a price node. Asked by requests that set up
 * something valued in USD, which without prices would never act (a stale or missing price at the
 * moment of use is `price_unavailable` instead, and fails closed where money moves).
 */
export function assertPriceSource(config: PriceSourceSettings, environment: Environment, what: string): void {
  if (environment === 'sandbox' || (priceNodeUrl(config) !== undefined && config.PRICE_FEEDS_LIVE !== undefined)) return;
  throw errors.unavailable(
    'price_source_unavailable',
    `${what} needs USD prices, and live has no price source: set CHAIN_NODE_ETHEREUM_LIVE and PRICE_FEEDS_LIVE (Chainlink feeds; docs/transactions.md).`,
    60,
  );
}

export const priceSourceFor = (config: Config, environment: Environment): PriceSource => {
  if (environment === 'sandbox') return new TablePriceSource(config.PRICE_TABLE_SANDBOX);
  const nodeUrl = priceNodeUrl(config);
  return nodeUrl !== undefined && config.PRICE_FEEDS_LIVE !== undefined ? new ChainlinkPriceSource(config, nodeUrl) : NO_PRICES;
};

/**
 * Reads every live feed (PRICE_FEEDS_LIVE), and the sequencer uptime feed on an L2, on the price node at
 * start and every PRICE_POLL_SECONDS; the API and the worker each run one. A feed that cannot be read
 * keeps its last round, which stops counting once it is older than its heartbeat plus the margin; an
 * answer at or outside its bounds is held as no price (logged, and counted in /metrics where given a
 * registry); a node on another network than PRICE_NETWORK_LIVE's has its rounds forgotten, so that no
 * price of a test chain is ever used for live keys.
 */
export class LivePriceFeeds {
  private readonly node: EvmRpcProvider | null;
  private readonly nodeUrl: string | undefined;
  private readonly refusals: Counter<'asset' | 'reason'> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private reading: Promise<PriceNodeReading> | undefined;

  constructor(
    private readonly config: Config,
    private readonly log: Logger,
    metrics?: Registry,
  ) {
    const nodeUrl = priceNodeUrl(config);
    this.nodeUrl = nodeUrl;
    this.node = null;
    if (nodeUrl === undefined || config.PRICE_FEEDS_LIVE === undefined) return;
    this.node = new EvmRpcProvider('ethereum', nodeUrl, { timeoutMs: config.CHAIN_NODE_TIMEOUT_MS, maxResponseBytes: config.CHAIN_NODE_MAX_RESPONSE_BYTES });
    if (metrics) this.refusals = registerPriceMetrics(metrics, config);
  }

  /** Starts polling; resolves once the first read is done (it never rejects: a failure is logged). */
  start(): Promise<void> {
    if (!this.node || this.timer) return Promise.resolve();
    this.timer = setInterval(() => void this.refresh(), this.config.PRICE_POLL_SECONDS * 1000);
    this.timer.unref();
    return this.refresh().then(() => undefined);
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Reads every feed now; a read already under way is waited for rather than doubled. */
  refresh(): Promise<PriceNodeReading> {
    this.reading ??= this.readAll().finally(() => (this.reading = undefined));
    return this.reading;
  }

  private async readAll(): Promise<PriceNodeReading> {
    const { node, nodeUrl } = this;
    const { PRICE_FEEDS_LIVE: feeds, PRICE_NETWORK_LIVE: network, PRICE_SEQUENCER_UPTIME_FEED_LIVE: sequencerFeed } = this.config;
    if (!node || nodeUrl === undefined || feeds === undefined) return { kind: 'not_configured' };
    try {
      const { chainId } = await node.identifyNetwork();
      if (chainId !== PRICE_NETWORK_CHAIN_IDS[network]) {
        for (const feed of [...Object.values(feeds).map(({ address }) => address), ...(sequencerFeed ? [sequencerFeed] : [])]) {
          latestRounds.delete(roundKey(nodeUrl, feed));
          sequencerRounds.delete(roundKey(nodeUrl, feed));
        }
        this.log.error({ chain_id: chainId, network }, `live price feeds: the price node is not on ${network} (chain id ${PRICE_NETWORK_CHAIN_IDS[network]}); live keys have no prices`);
        return { kind: 'wrong_network', chainId: chainId ?? 0, expectedChainId: PRICE_NETWORK_CHAIN_IDS[network] };
      }
    } catch {
      this.log.warn('live price feeds: the price node did not answer; the last rounds count until they are too old');
      return { kind: 'unreachable' };
    }
    await Promise.all([
      ...(sequencerFeed === undefined ? [] : [this.readSequencer(node, nodeUrl, sequencerFeed)]),
      ...Object.entries(feeds).map(([assetId, feed]) => this.readFeed(node, nodeUrl, assetId, feed.address)),
    ]);
    return { kind: 'read' };
  }

  private async readSequencer(node: EvmRpcProvider, nodeUrl: string, feed: `0x${string}`): Promise<void> {
    try {
      sequencerRounds.set(roundKey(nodeUrl, feed), await node.latestFeedRound(feed));
    } catch {
      this.log.warn({ feed }, 'the sequencer uptime feed could not be read; its last status counts');
    }
  }

  private async readFeed(node: EvmRpcProvider, nodeUrl: string, assetId: string, feed: `0x${string}`): Promise<void> {
    let round: PriceRound;
    try {
      round = await node.latestPriceRound(feed);
    } catch {
      this.log.warn({ asset: assetId, feed }, 'live price feed could not be read; its last round counts until it is too old');
      return;
    }
    const price = new Money(formatUnits(round.answer, round.decimals));
    const refusal = answerRefusal(round, price, this.config.PRICE_BOUNDS_LIVE?.[assetId]);
    const key = roundKey(nodeUrl, feed);
    if (refusal !== null) {
      this.refusals?.inc({ asset: assetId, reason: refusal });
      // Logged when the feed starts refusing (or for another reason), not at every read.
      if (latestRounds.get(key)?.refusal !== refusal) {
        this.log.error(
          { asset: assetId, feed, answer: price.toFixed(), reason: refusal, min_answer: formatUnits(round.minAnswer, round.decimals), max_answer: formatUnits(round.maxAnswer, round.decimals) },
          'live price answer refused: not positive, or at or outside its bounds; the asset has no price',
        );
      }
    }
    latestRounds.set(key, { price, refusal, updatedAt: round.updatedAt });
  }
}

/**
 * The live prices in /metrics: answers refused as prices (a counter, by asset and reason) and, at each
 * scrape, each configured asset that has no price now and why (a gauge at 1; no series: priced).
 */
function registerPriceMetrics(registry: Registry, config: Config): Counter<'asset' | 'reason'> {
  new Gauge({
    name: 'live_price_unavailable',
    help: 'Live assets with a feed but no usable price now, by reason (not_read, refused, stale, sequencer_unknown, sequencer_down, sequencer_grace)',
    labelNames: ['asset', 'reason'],
    registers: [registry],
    collect() {
      this.reset();
      for (const { asset, reason } of unavailableLivePrices(config)) this.set({ asset, reason }, 1);
    },
  });
  return new Counter({
    name: 'live_price_answers_refused_total',
    help: 'Live feed answers read and refused as prices: not positive, or at or outside the aggregator\'s minAnswer/maxAnswer or PRICE_BOUNDS_LIVE',
    labelNames: ['asset', 'reason'],
    registers: [registry],
  });
}

/** The USD value of `baseUnits` of `asset`, exact (not rounded), or null when the source has no price for it. */
export function usdValue(prices: PriceSource, asset: AssetInfo, baseUnits: bigint): string | null {
  const price = prices.usdPrice(asset.id);
  return price === null ? null : new Money(toDisplay(baseUnits, asset.decimals)).times(price).toFixed();
}
