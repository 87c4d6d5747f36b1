import { z } from 'zod';
import { Money } from '../shared/money';
import { nodeUrl } from '../shared/setting-values';
import { ASSETS } from './service';

/** Live prices' variables (docs/transactions.md, "Live prices (Chainlink)"); part of ConfigSchema (src/config.ts). */
export const LivePriceSettings = z.object({
  /**
   * USD prices of live keys (docs/transactions.md): a Chainlink feed (USD quote) per catalogue asset with
   * the feed's heartbeat in seconds (`ASSET_ID=0x<proxy>:<heartbeat>,...`, as data.chain.link lists it),
   * read on the price node. An asset without one, whose round is older than its heartbeat plus
   * PRICE_HEARTBEAT_MARGIN_SECONDS, or whose answer is at or outside its bounds, has no price: USD rules fail closed.
   */
  PRICE_FEEDS_LIVE: z
    .string()
    .regex(
      /^([A-Z0-9_]+=0x[0-9a-fA-F]{40}:[1-9]\d{0,5})(,[A-Z0-9_]+=0x[0-9a-fA-F]{40}:[1-9]\d{0,5})*$/,
      'must be ASSET_ID=0x<40 hex>:<heartbeat seconds>[,...] (each feed with its heartbeat)',
    )
    .transform((value) =>
      Object.fromEntries(
        value.split(',').map((entry) => {
          const [id, feed] = entry.split('=') as [string, string];
          const [address, heartbeat] = feed.split(':') as [`0x${string}`, string];
          return [id, { address, heartbeatSeconds: Number(heartbeat) }];
        }),
      ),
    )
    .refine((feeds) => Object.keys(feeds).every((id) => ASSETS.some((asset) => asset.id === id)), 'must name catalogue asset ids')
    .refine((feeds) => Object.values(feeds).every((feed) => feed.heartbeatSeconds <= 7 * 24 * 3600), 'a heartbeat is at most 604800 seconds (7 days)')
    .optional(),
  /**
   * How long past its heartbeat a feed's round still counts: Chainlink starts a round when the heartbeat
   * is reached and it lands on chain some time later, and each process reads every PRICE_POLL_SECONDS.
   */
  PRICE_HEARTBEAT_MARGIN_SECONDS: z.coerce.number().int().min(1).max(24 * 3600).default(600),
  /**
   * Sanity bounds of a live price in USD (`ASSET_ID=<min>..<max>,...`), over the aggregator's own
   * minAnswer/maxAnswer: an answer at or outside either is no price.
   */
  PRICE_BOUNDS_LIVE: z
    .string()
    .regex(/^([A-Z0-9_]+=\d{1,15}(\.\d{1,18})?\.\.\d{1,15}(\.\d{1,18})?)(,[A-Z0-9_]+=\d{1,15}(\.\d{1,18})?\.\.\d{1,15}(\.\d{1,18})?)*$/, 'must be ASSET_ID=<min>..<max>[,ASSET_ID=<min>..<max>...]')
    .transform((value) =>
      Object.fromEntries(
        value.split(',').map((entry) => {
          const [id, range] = entry.split('=') as [string, string];
          const [min, max] = range.split('..') as [string, string];
          return [id, { min, max }];
        }),
      ),
    )
    .refine((bounds) => Object.keys(bounds).every((id) => ASSETS.some((asset) => asset.id === id)), 'must name catalogue asset ids')
    .refine((bounds) => Object.values(bounds).every(({ min, max }) => new Money(min).lessThan(max)), 'each min must be below its max')
    .optional(),
  /** How often each process reads the live feeds; a round's age is still judged when the price is used. */
  PRICE_POLL_SECONDS: z.coerce.number().int().min(1).max(3600).default(30),
  /**
   * Where the live feeds are read: PRICE_NETWORK_LIVE's node (unset: CHAIN_NODE_ETHEREUM_LIVE, Ethereum's).
   * On an L2 (arbitrum, optimism, base) its sequencer uptime feed is required: while the sequencer is down,
   * or up for no more than PRICE_SEQUENCER_GRACE_SECONDS, live keys have no prices.
   */
  PRICE_NETWORK_LIVE: z.enum(['ethereum', 'arbitrum', 'optimism', 'base']).default('ethereum'),
  PRICE_NODE_LIVE: nodeUrl.optional(),
  PRICE_SEQUENCER_UPTIME_FEED_LIVE: z.string().regex(/^0x[0-9a-fA-F]{40}$/, 'must be 0x<40 hex>').transform((value) => value as `0x${string}`).optional(),
  PRICE_SEQUENCER_GRACE_SECONDS: z.coerce.number().int().min(0).max(24 * 3600).default(3600),
});

/** What live prices' variables must agree on, with each other and with the live Ethereum node. */
export function checkLivePriceSettings(config: z.infer<typeof LivePriceSettings> & { CHAIN_NODE_ETHEREUM_LIVE?: string | undefined }, context: z.RefinementCtx): void {
    const issue = (path: string, message: string) => context.addIssue({ code: 'custom', path: [path], message });
    const onEthereum = config.PRICE_NETWORK_LIVE === 'ethereum';
    if (config.PRICE_FEEDS_LIVE !== undefined && config.PRICE_NODE_LIVE === undefined && (!onEthereum || config.CHAIN_NODE_ETHEREUM_LIVE === undefined)) {
      issue('PRICE_FEEDS_LIVE', onEthereum ? 'PRICE_FEEDS_LIVE is read on the live Ethereum node: set CHAIN_NODE_ETHEREUM_LIVE (or PRICE_NODE_LIVE)' : `PRICE_FEEDS_LIVE is read on ${config.PRICE_NETWORK_LIVE}: set PRICE_NODE_LIVE`);
    }
    if (!onEthereum && config.PRICE_SEQUENCER_UPTIME_FEED_LIVE === undefined) {
      issue('PRICE_SEQUENCER_UPTIME_FEED_LIVE', `prices read on ${config.PRICE_NETWORK_LIVE} (an L2) need its sequencer uptime feed`);
    }
    if (onEthereum && config.PRICE_SEQUENCER_UPTIME_FEED_LIVE !== undefined) {
      issue('PRICE_SEQUENCER_UPTIME_FEED_LIVE', 'Ethereum has no sequencer: set PRICE_NETWORK_LIVE to the L2 the feeds are read on');
    }
    if (config.PRICE_HEARTBEAT_MARGIN_SECONDS <= config.PRICE_POLL_SECONDS) {
      issue('PRICE_HEARTBEAT_MARGIN_SECONDS', 'must be above PRICE_POLL_SECONDS, or a feed is stale between its update and our next read');
    }
    for (const id of Object.keys(config.PRICE_BOUNDS_LIVE ?? {}).filter((id) => config.PRICE_FEEDS_LIVE?.[id] === undefined)) {
      issue('PRICE_BOUNDS_LIVE', `${id} has bounds but no feed in PRICE_FEEDS_LIVE`);
    }
}
