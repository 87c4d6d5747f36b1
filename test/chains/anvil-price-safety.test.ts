import assert from 'node:assert/strict';
import { Registry } from 'prom-client';
import type { Hex } from 'viem';
import { LivePriceFeeds, priceSourceFor } from '../../src/catalogue/prices';
import { ConfigError, loadConfig, type Config } from '../../src/config';
import { createLogger } from '../../src/logger';
import {
  deployAnvilPriceFeed,
  deployAnvilSequencerUptimeFeed,
  feedUsd,
  nowSeconds,
  reportAnvilSequencerStatus,
  setAnvilPriceRound,
  startAnvil,
  type Anvil,
} from '../support/anvil';
import { testConfig } from '../support/environment';
import { testLogger } from '../support/secret-scan';


/** A logger whose lines the test reads back. */
function capturingLogger() {
  const lines: Record<string, unknown>[] = [];
  return { log: createLogger('info', 'prices', { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) }), lines };
}

/** The value of `metric`'s series with `labels`, or undefined when it has none. */
async function metricValue(registry: Registry, metric: string, labels: Record<string, string>): Promise<number | undefined> {
  const { values } = await registry.getSingleMetric(metric)!.get();
  return values.find((value) => Object.entries(labels).every(([name, label]) => value.labels[name] === label))?.value;
}

/**
 * An answer at or outside its bounds is no price: the aggregator's own minAnswer/maxAnswer (Chainlink's
 * aggregators stop at them, so an answer there may be the bound rather than the market) and the sanity
 * bounds configured in PRICE_BOUNDS_LIVE. Refused, logged once, counted in /metrics, and never replaced
 * by the last good price.
 */
describe('Live price bounds (anvil)', () => {
  let anvil: Anvil;
  let ethFeed: Hex;
  let btcFeed: Hex;
  let config: Config;
  let feeds: LivePriceFeeds;
  const registry = new Registry();
  const logs = capturingLogger();
  const livePrice = (assetId: string) => priceSourceFor(config, 'live').usdPrice(assetId)?.toFixed() ?? null;
  const setEth = async (dollars: number) => {
    await setAnvilPriceRound(anvil, ethFeed, feedUsd(dollars), nowSeconds());
    await feeds.refresh();
  };

  before(async () => {
    anvil = await startAnvil({ chainId: 1 });
    // ETH / USD's aggregator bounded at 100 and 100,000 USD; BTC's unbounded, with configured sanity bounds instead.
    ethFeed = await deployAnvilPriceFeed(anvil, 8, { minAnswer: feedUsd(100), maxAnswer: feedUsd(100_000) });
    btcFeed = await deployAnvilPriceFeed(anvil, 8);
    config = testConfig({ CHAIN_NODE_ETHEREUM_LIVE: anvil.url, PRICE_FEEDS_LIVE: `ETH=${ethFeed}:3600,BTC=${btcFeed}:3600`, PRICE_BOUNDS_LIVE: 'BTC=1000..1000000.5' });
    feeds = new LivePriceFeeds(config, logs.log, registry);
  });
  after(async () => {
    feeds?.stop();
    await anvil?.stop();
  });

  it("refuses an answer at or outside the aggregator's minAnswer and maxAnswer; one inside is the price", async () => {
    await setEth(2500);
    assert.equal(livePrice('ETH'), '2500');

    const cases: [number, string | null, string][] = [
      [100, null, 'at minAnswer: the last good price is not used either'],
      [99, null, 'below minAnswer'],
      [101, '101', 'inside'],
      [100_000, null, 'at maxAnswer'],
      [250_000, null, 'above maxAnswer'],
      [99_999, '99999', 'inside'],
    ];
    for (const [dollars, price, why] of cases) {
      await setEth(dollars);
      assert.equal(livePrice('ETH'), price, `${dollars} USD: ${why}`);
    }

    assert.equal(await metricValue(registry, 'live_price_answers_refused_total', { asset: 'ETH', reason: 'min_answer' }), 2);
    assert.equal(await metricValue(registry, 'live_price_answers_refused_total', { asset: 'ETH', reason: 'max_answer' }), 2);
    const refusals = logs.lines.filter((line) => line.asset === 'ETH' && typeof line.reason === 'string');
    assert.deepEqual(
      refusals.map((line) => [line.reason, line.answer, line.min_answer, line.max_answer]),
      [
        ['min_answer', '100', '100', '100000'],
        ['max_answer', '100000', '100', '100000'],
      ],
      'logged when the feed starts refusing, not at each read of the same refusal',
    );
  });

  it('refuses an answer at or outside the configured bounds (PRICE_BOUNDS_LIVE) of a feed whose aggregator has none in effect', async () => {
    const cases: [bigint, string | null, string][] = [
      [feedUsd(1000), null, 'at the configured min'],
      [feedUsd(999), null, 'below it'],
      [100_000_050_000_000n, null, 'at the configured max, 1,000,000.5'],
      [100_000_049_999_999n, '1000000.49999999', 'just inside'],
      [feedUsd(65_000), '65000', 'inside'],
    ];
    for (const [answer, price, why] of cases) {
      await setAnvilPriceRound(anvil, btcFeed, answer, nowSeconds());
      await feeds.refresh();
      assert.equal(livePrice('BTC'), price, why);
    }
    assert.equal(await metricValue(registry, 'live_price_answers_refused_total', { asset: 'BTC', reason: 'configured_min' }), 2);
    assert.equal(await metricValue(registry, 'live_price_answers_refused_total', { asset: 'BTC', reason: 'configured_max' }), 1);
  });

  it('says in /metrics which live assets have no price now, and why', async () => {
    await setEth(100);
    await setAnvilPriceRound(anvil, btcFeed, feedUsd(65_000), nowSeconds() - 3600 - 601);
    await feeds.refresh();
    assert.equal(await metricValue(registry, 'live_price_unavailable', { asset: 'ETH', reason: 'refused' }), 1);
    assert.equal(await metricValue(registry, 'live_price_unavailable', { asset: 'BTC', reason: 'stale' }), 1);
    await setEth(2500);
    assert.equal(await metricValue(registry, 'live_price_unavailable', { asset: 'ETH' }), undefined, 'priced: no series');
  });
});

/**
 * Feeds read on an L2 (anvil as Arbitrum One, chain id 42161) count only while its sequencer is up and
 * has been for more than the grace period, as Chainlink's sequencer uptime feed says: answer 0 up, 1
 * down, startedAt when the status last changed.
 */
describe('Live prices on an L2 behind its sequencer uptime feed (anvil)', () => {
  let anvil: Anvil;
  let ethFeed: Hex;
  let uptimeFeed: Hex;
  let config: Config;
  let feeds: LivePriceFeeds;
  const registry = new Registry();
  const livePrice = () => priceSourceFor(config, 'live').usdPrice('ETH')?.toFixed() ?? null;
  const report = async (down: boolean, at: number) => {
    await reportAnvilSequencerStatus(anvil, uptimeFeed, down, at);
    await feeds.refresh();
  };

  before(async () => {
    // The uptime feed is deployed three hours ago (anvil's clock starts there), reporting the sequencer up since.
    anvil = await startAnvil({ chainId: 42161, genesisTimestamp: nowSeconds() - 3 * 3600 });
    ethFeed = await deployAnvilPriceFeed(anvil);
    uptimeFeed = await deployAnvilSequencerUptimeFeed(anvil);
    config = testConfig({
      PRICE_NETWORK_LIVE: 'arbitrum',
      PRICE_NODE_LIVE: anvil.url,
      PRICE_SEQUENCER_UPTIME_FEED_LIVE: uptimeFeed,
      PRICE_SEQUENCER_GRACE_SECONDS: '3600',
      PRICE_FEEDS_LIVE: `ETH=${ethFeed}:86400`,
    });
    feeds = new LivePriceFeeds(config, testLogger('prices'), registry);
    await setAnvilPriceRound(anvil, ethFeed, feedUsd(2500), nowSeconds());
  });
  after(async () => {
    feeds?.stop();
    await anvil?.stop();
  });

  it('prices while the sequencer has been up longer than the grace period', async () => {
    await feeds.start();
    assert.equal(livePrice(), '2500');
  });

  it('has no price while the sequencer is down, whatever the price feed says', async () => {
    await report(true, nowSeconds() - 3700);
    await setAnvilPriceRound(anvil, ethFeed, feedUsd(2600), nowSeconds());
    await feeds.refresh();
    assert.equal(livePrice(), null);
    assert.equal(await metricValue(registry, 'live_price_unavailable', { asset: 'ETH', reason: 'sequencer_down' }), 1);
  });

  it('has no price until the sequencer has been back up for the grace period, judged when the price is used', async () => {
    await report(false, nowSeconds() - 3598);
    assert.equal(livePrice(), null);
    assert.equal(await metricValue(registry, 'live_price_unavailable', { asset: 'ETH', reason: 'sequencer_grace' }), 1);
    await new Promise((resolve) => setTimeout(resolve, 3000));
    assert.equal(livePrice(), '2600', 'no read of the node in between');
  });

  it('forgets the rounds when the node is not on the configured L2', async () => {
    await anvil.call('anvil_setChainId', [1]);
    try {
      await feeds.refresh();
      assert.equal(livePrice(), null);
      assert.equal(await metricValue(registry, 'live_price_unavailable', { asset: 'ETH', reason: 'sequencer_unknown' }), 1);
    } finally {
      await anvil.call('anvil_setChainId', [42161]);
    }
    await feeds.refresh();
    assert.equal(livePrice(), '2600');
  });

  it('refuses at start a configuration that reads feeds on an L2 without its uptime feed, or an uptime feed on Ethereum', () => {
    const load = (env: Record<string, string>) => loadConfig({ DATABASE_URL: 'postgresql://localhost/x', ...env });
    const feed = `ETH=${ethFeed}:3600`;
    assert.throws(() => load({ PRICE_NETWORK_LIVE: 'arbitrum', PRICE_NODE_LIVE: anvil.url, PRICE_FEEDS_LIVE: feed }), /PRICE_SEQUENCER_UPTIME_FEED_LIVE/);
    assert.throws(() => load({ PRICE_NETWORK_LIVE: 'arbitrum', CHAIN_NODE_ETHEREUM_LIVE: anvil.url, PRICE_SEQUENCER_UPTIME_FEED_LIVE: uptimeFeed, PRICE_FEEDS_LIVE: feed }), /PRICE_NODE_LIVE/);
    assert.throws(() => load({ CHAIN_NODE_ETHEREUM_LIVE: anvil.url, PRICE_SEQUENCER_UPTIME_FEED_LIVE: uptimeFeed, PRICE_FEEDS_LIVE: feed }), /Ethereum has no sequencer/);
    assert.throws(() => load({ PRICE_NETWORK_LIVE: 'polygon' }), ConfigError);
  });
});
