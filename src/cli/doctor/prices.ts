import { LivePriceFeeds, livePriceStatus, type PriceNodeReading, type PriceUnavailableReason } from '../../catalogue/prices';
import { failing, misconfigured, ok, warn, type Check, type CheckOutcome, type DoctorContext } from './check';

/** What each reason an asset has no price means, and what to do, as the doctor says it. */
const NO_PRICE: Record<Exclude<PriceUnavailableReason, `sequencer_${string}`>, { detail: string; fix: string }> = {
  no_feed: { detail: 'no feed is configured', fix: 'add the asset to PRICE_FEEDS_LIVE' },
  not_read: { detail: 'the feed could not be read', fix: 'check the feed address in PRICE_FEEDS_LIVE (a Chainlink proxy on PRICE_NETWORK_LIVE)' },
  refused: { detail: 'the answer is at or outside its bounds (the aggregator\'s minAnswer/maxAnswer or PRICE_BOUNDS_LIVE)', fix: 'check PRICE_BOUNDS_LIVE and the feed on data.chain.link' },
  stale: { detail: 'stale: the round is older than its heartbeat plus PRICE_HEARTBEAT_MARGIN_SECONDS', fix: 'check the feed on data.chain.link, and the heartbeat in PRICE_FEEDS_LIVE' },
};

const SEQUENCER: Record<Extract<PriceUnavailableReason, `sequencer_${string}`>, CheckOutcome> = {
  sequencer_unknown: failing('the sequencer uptime feed has no round (or could not be read): live keys have no prices', 'check PRICE_SEQUENCER_UPTIME_FEED_LIVE'),
  sequencer_down: failing('the L2 sequencer is down: live keys have no prices', 'wait for the sequencer; prices come back PRICE_SEQUENCER_GRACE_SECONDS after it is up'),
  sequencer_grace: warn('the L2 sequencer is up for less than PRICE_SEQUENCER_GRACE_SECONDS: live keys have no prices yet', 'wait out the grace period'),
};

const isSequencer = (reason: PriceUnavailableReason | null): reason is keyof typeof SEQUENCER => reason !== null && reason.startsWith('sequencer_');

/**
 * Live prices (PRICE_FEEDS_LIVE), read once now as the API and the worker read them (LivePriceFeeds): the price
 * node on PRICE_NETWORK_LIVE, the L2 sequencer up where there is one, and each feed fresh and within its bounds.
 */
export function priceChecks({ config, log, timeoutMs }: DoctorContext): Check[] {
  if (config.PRICE_FEEDS_LIVE === undefined) return [];
  let reading: Promise<PriceNodeReading> | undefined;
  const read = () => (reading ??= new LivePriceFeeds({ ...config, CHAIN_NODE_TIMEOUT_MS: Math.min(config.CHAIN_NODE_TIMEOUT_MS, timeoutMs) }, log).refresh());
  const statusOf = async (asset: string) => {
    await read();
    return livePriceStatus(config).find((status) => status.asset === asset)!;
  };
  const checks: Check[] = [
    {
      name: `price node (${config.PRICE_NETWORK_LIVE})`,
      environment: 'live',
      run: async () => {
        const found = await read();
        if (found.kind === 'wrong_network') {
          return misconfigured(`serves chain id ${found.chainId}, not ${config.PRICE_NETWORK_LIVE} (${found.expectedChainId}): live keys have no prices`, 'point PRICE_NODE_LIVE (or CHAIN_NODE_ETHEREUM_LIVE) at a node of PRICE_NETWORK_LIVE');
        }
        if (found.kind === 'unreachable') return failing('unreachable: live keys have no prices once the last rounds are too old', 'start the node or fix PRICE_NODE_LIVE (or CHAIN_NODE_ETHEREUM_LIVE)');
        return ok(`reachable, on ${config.PRICE_NETWORK_LIVE}`);
      },
    },
  ];
  if (config.PRICE_SEQUENCER_UPTIME_FEED_LIVE !== undefined) {
    checks.push({
      name: 'price sequencer uptime feed',
      environment: 'live',
      run: async () => {
        await read();
        const reason = livePriceStatus(config).map((status) => status.reason).find(isSequencer);
        return reason ? SEQUENCER[reason] : ok(`the ${config.PRICE_NETWORK_LIVE} sequencer is up, past its grace period`);
      },
    });
  }
  for (const [asset, feed] of Object.entries(config.PRICE_FEEDS_LIVE)) {
    checks.push({
      name: `price ${asset}`,
      environment: 'live',
      run: async () => {
        const status = await statusOf(asset);
        const age = status.updatedAt === null ? null : Math.floor(Date.now() / 1000) - Number(status.updatedAt);
        const round = status.price === null ? 'no round read' : `${status.price} USD, updated ${age} s ago`;
        const limit = `heartbeat ${feed.heartbeatSeconds} s + margin ${config.PRICE_HEARTBEAT_MARGIN_SECONDS} s`;
        if (status.reason === null) return ok(`${round} (${limit})`);
        // The sequencer's line says why; the round's own age is not judged while the sequencer rules it out.
        if (isSequencer(status.reason)) return warn(`${round}: no price while the sequencer check fails`, 'see the sequencer uptime feed\'s line');
        const { detail, fix } = NO_PRICE[status.reason];
        return failing(`${detail}: ${round} (${limit}); USD rules on ${asset} fail closed`, fix);
      },
    });
  }
  return checks;
}
