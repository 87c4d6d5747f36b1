import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { base58 } from '@scure/base';
import type { Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { LivePriceFeeds, priceSourceFor, usdValue } from '../../src/catalogue/prices';
import { assetById } from '../../src/catalogue/service';
import type { Config } from '../../src/config';
import { PolicyAuditLog } from '../../src/policies/entities';
import { OutgoingTransaction } from '../../src/transactions/entities';
import { deployAnvilPriceFeed, deployAnvilToken, nowSeconds, setAnvilPriceRound, startAnvil, type Anvil } from '../support/anvil';
import { createTestOrganization, startTestApp, type TestApp } from '../support/app';
import { testConfig, testOrm } from '../support/environment';
import { setRequiredApprovals } from '../support/isolation-fixtures';
import { creditCustodyWallet } from '../support/ledger';
import { mintData, putTokenProgramAccount, svmAddress } from '../support/litesvm';
import { SolanaNode } from '../support/solana-node';
import { testLogger } from '../support/secret-scan';


/**
 * Live prices from Chainlink: aggregators deployed on anvil (mainnet's chain id, as a live node must
 * report) and moved through rounds by the test; the reader the API and the worker run reads them, and
 * live keys' prices say exactly what the feed says while it is fresh, and nothing otherwise. Fresh is
 * each feed's own heartbeat plus PRICE_HEARTBEAT_MARGIN_SECONDS (600 by default).
 */
describe('Live prices from Chainlink feeds (anvil)', () => {
  let anvil: Anvil;
  let ethFeed: Hex;
  let btcFeed: Hex;
  let solFeed: Hex;
  let trxFeed: Hex;
  let config: Config;
  let feeds: LivePriceFeeds;
  const livePrice = (assetId: string) => priceSourceFor(config, 'live').usdPrice(assetId)?.toFixed() ?? null;

  before(async () => {
    anvil = await startAnvil({ chainId: 1 });
    ethFeed = await deployAnvilPriceFeed(anvil, 8);
    btcFeed = await deployAnvilPriceFeed(anvil, 18);
    solFeed = await deployAnvilPriceFeed(anvil);
    trxFeed = await deployAnvilPriceFeed(anvil);
    const unsetFeed = await deployAnvilPriceFeed(anvil);
    // Heartbeats as Chainlink's mainnet feeds have them: ETH / USD hourly; the others daily.
    config = testConfig({
      CHAIN_NODE_ETHEREUM_LIVE: anvil.url,
      PRICE_FEEDS_LIVE: `ETH=${ethFeed}:3600,BTC=${btcFeed}:86400,SOL=${solFeed}:86400,TRX=${trxFeed}:86400,USDC_SOL=${unsetFeed}:86400`,
    });
    feeds = new LivePriceFeeds(config, testLogger('prices'));
  });
  after(async () => {
    feeds?.stop();
    await anvil?.stop();
  });

  it('reads a fresh round exactly, in the feed\'s own decimals', async () => {
    await setAnvilPriceRound(anvil, ethFeed, 250012345678n, nowSeconds() - 5);
    await setAnvilPriceRound(anvil, btcFeed, 65432123456789012345678901234n, nowSeconds());
    await feeds.start();
    assert.equal(livePrice('ETH'), '2500.12345678');
    assert.equal(livePrice('BTC'), '65432123456.789012345678901234', 'no float: every digit of an 18-decimal answer');
    assert.equal(livePrice('USDC_SOL'), null, 'a feed that has never answered a round has no price');
    assert.equal(livePrice('USDT_TRX'), null, 'an asset without a feed has no price');
    assert.equal(priceSourceFor(config, 'sandbox').usdPrice('ETH')?.toFixed(), '3000', 'sandbox keys keep their table');
  });

  it('prices SOL and TRX from their USD feeds (read on Ethereum, as Chainlink publishes them), so Solana and Tron amounts have a USD value', async () => {
    await setAnvilPriceRound(anvil, solFeed, 14_250_000_000n, nowSeconds() - 20 * 3600);
    await setAnvilPriceRound(anvil, trxFeed, 24_512_345n, nowSeconds() - 60);
    await feeds.refresh();
    const prices = priceSourceFor(config, 'live');
    assert.equal(usdValue(prices, assetById('SOL'), 2_500_000_000n), '356.25', '2.5 SOL at 142.5 USD, its round 20 hours old within its daily heartbeat');
    assert.equal(usdValue(prices, assetById('TRX'), 1_000_000_000n), '245.12345', '1,000 TRX at 0.24512345 USD');
  });

  it("counts a round for its heartbeat plus the margin: an hourly feed's quiet hour keeps its price until the update lands", async () => {
    // The heartbeat has passed and Chainlink's round is on its way: the price still counts.
    await setAnvilPriceRound(anvil, ethFeed, 250000000000n, nowSeconds() - 3650);
    await feeds.refresh();
    assert.equal(livePrice('ETH'), '2500');
    await setAnvilPriceRound(anvil, ethFeed, 250000000000n, nowSeconds() - 4201);
    await feeds.refresh();
    assert.equal(livePrice('ETH'), null, 'past 3,600 + 600 seconds');

    // Fresh when read, stale a few seconds later with no read of the node in between.
    await setAnvilPriceRound(anvil, ethFeed, 250000000000n, nowSeconds() - 4198);
    await feeds.refresh();
    assert.equal(livePrice('ETH'), '2500');
    await new Promise((resolve) => setTimeout(resolve, 3000));
    assert.equal(livePrice('ETH'), null);
  });

  it("judges each feed by its own heartbeat: a daily feed's round counts for a day and its margin, an hourly one's does not", async () => {
    await setAnvilPriceRound(anvil, btcFeed, 6500000000000000000000n, nowSeconds() - 20 * 3600);
    await setAnvilPriceRound(anvil, ethFeed, 250000000000n, nowSeconds() - 20 * 3600);
    await feeds.refresh();
    assert.equal(livePrice('BTC'), '6500', '20 hours old, within its own 24');
    assert.equal(livePrice('ETH'), null, '20 hours old, past its hour');
    await setAnvilPriceRound(anvil, btcFeed, 6500000000000000000000n, nowSeconds() - 86_400 - 601);
    await feeds.refresh();
    assert.equal(livePrice('BTC'), null, 'past its own heartbeat and margin');
  });

  it('has no price for a zero or a negative answer', async () => {
    await setAnvilPriceRound(anvil, ethFeed, 0n, nowSeconds());
    await feeds.refresh();
    assert.equal(livePrice('ETH'), null);
    await setAnvilPriceRound(anvil, ethFeed, -250000000000n, nowSeconds());
    await feeds.refresh();
    assert.equal(livePrice('ETH'), null);
    await setAnvilPriceRound(anvil, ethFeed, 250000000000n, nowSeconds());
    await feeds.refresh();
    assert.equal(livePrice('ETH'), '2500');
  });

  it('forgets every round when the node is not on mainnet: a test chain never prices live keys', async () => {
    await anvil.call('anvil_setChainId', [31337]);
    try {
      await feeds.refresh();
      assert.equal(livePrice('ETH'), null);
      assert.equal(livePrice('SOL'), null);
    } finally {
      await anvil.call('anvil_setChainId', [1]);
    }
    await feeds.refresh();
    assert.equal(livePrice('ETH'), '2500');
  });
});

/** A live wallet of a new organization, credited on its ledger, under one enforced policy: block above a USD amount. */
interface LiveWallet {
  id: string;
  address: string;
  send: (amount: string, to: string) => ReturnType<TestApp['request']>;
  lastDecision: () => Promise<{ decision: { result: string; price_unavailable?: boolean; reason: string }; request: Record<string, unknown> }>;
}

async function liveWalletUnderUsdBlock(app: TestApp, chain: string, asset: string, credit: bigint, blockAboveUsd: string): Promise<LiveWallet> {
  const org = await createTestOrganization(`Live ${chain} with Chainlink prices`);
  await setRequiredApprovals(org.organizationId, 0);
  const live = await org.key(['*'], 'live');
  const vault = await app.request('POST', '/v1/vaults', { key: live.secret, body: { name: 'Live treasury' } });
  const wallet = await app.request('POST', '/v1/wallets', { key: live.secret, body: { name: 'Live hot', chain, vault_id: vault.body.id } });
  assert.equal(wallet.status, 201, wallet.text);
  await creditCustodyWallet((await testOrm()).em.fork(), wallet.body.id, asset, credit);
  const policy = await app.request('POST', '/v1/policies', {
    key: live.secret,
    body: { name: `Live ${randomUUID()}`, rules: [{ name: `Block above ${blockAboveUsd} USD`, action_type: 'block', conditions: [{ field: 'amount_usd', operator: 'greater_than', value: blockAboveUsd }] }] },
  });
  assert.equal(policy.status, 201, policy.text);
  assert.equal((await app.request('POST', `/v1/policies/${policy.body.id}/activate`, { key: live.secret, body: {} })).status, 200);
  return {
    id: wallet.body.id,
    address: wallet.body.primary_address.address,
    send: (amount, to) => app.request('POST', '/v1/transactions', { key: live.secret, body: { wallet_id: wallet.body.id, to_address: to, amount, asset } }),
    lastDecision: async () => {
      const [entry] = await (await testOrm()).em.fork().find(PolicyAuditLog, { organization: org.organizationId, environment: 'live', action: 'decision' }, { orderBy: { createdAt: 'desc' }, limit: 1 });
      return entry!.metadata as Awaited<ReturnType<LiveWallet['lastDecision']>>;
    },
  };
}

/**
 * A USD policy rule on a live key, judged through the API with the feed's price: exact while fresh,
 * failing closed (price_unavailable) once stale. Every send here is refused by the policy, so none
 * reaches the chain; the wallet's ledger is written directly.
 */
describe('The movement gate judges live USD rules with Chainlink prices (anvil)', () => {
  let anvil: Anvil;
  let feed: Hex;
  let app: TestApp;
  let feeds: LivePriceFeeds;
  let wallet: LiveWallet;
  const external = privateKeyToAccount(generatePrivateKey()).address;

  before(async () => {
    anvil = await startAnvil({ chainId: 1 });
    feed = await deployAnvilPriceFeed(anvil);
    app = await startTestApp({
      config: { CHAIN_NODE_ETHEREUM_LIVE: anvil.url, CHAIN_TOKENS_ETHEREUM_LIVE: `USDC_ETH=${await deployAnvilToken(anvil)}`, PRICE_FEEDS_LIVE: `ETH=${feed}:3600` },
    });
    feeds = new LivePriceFeeds(app.deps.config, testLogger('prices'));
    wallet = await liveWalletUnderUsdBlock(app, 'ethereum', 'ETH', 100n * 10n ** 18n, '10000');
  });
  after(async () => {
    feeds?.stop();
    await app?.close();
    await anvil?.stop();
  });

  const send = (amount: string) => wallet.send(amount, external);
  const lastDecision = () => wallet.lastDecision();

  it('blocks 6 ETH at 2,000.5 USD (12,003 USD) and lets the rule pass over 4 ETH (8,002 USD): the real price decides', async () => {
    await setAnvilPriceRound(anvil, feed, 200050000000n, nowSeconds());
    await feeds.refresh();

    const blocked = await send('6');
    assert.equal(blocked.status, 403, blocked.text);
    assert.equal(blocked.body.error.code, 'policy_blocked');
    let { decision, request } = await lastDecision();
    assert.equal(request.amount_usd, '12003');
    assert.equal(typeof request.fee_usd, 'string', 'the fee is priced too');
    assert.equal(request.price_unavailable, false);
    assert.equal(decision.price_unavailable, undefined);

    // The block rule does not hold at 8,002 USD; with no other rule the policy denies by default (nothing is sent).
    const unmatched = await send('4');
    assert.equal(unmatched.status, 403, unmatched.text);
    ({ decision, request } = await lastDecision());
    assert.equal(request.amount_usd, '8002');
    assert.equal(decision.result, 'no_match');
  });

  it('fails closed once the feed is stale: a tiny send is blocked, the decision says price_unavailable', async () => {
    await setAnvilPriceRound(anvil, feed, 200050000000n, nowSeconds() - 2 * 3600);
    await feeds.refresh();

    const blocked = await send('0.001');
    assert.equal(blocked.status, 403, blocked.text);
    assert.equal(blocked.body.error.code, 'policy_blocked');
    const { decision, request } = await lastDecision();
    assert.equal(decision.price_unavailable, true);
    assert.equal(request.price_unavailable, true);
    assert.equal(request.amount_usd, undefined, 'no USD value is invented');
    assert.equal(await (await testOrm()).em.fork().count(OutgoingTransaction, { wallet: wallet.id }), 0);
  });
});

/**
 * A live Solana send valued in USD with SOL / USD read on Ethereum (as Chainlink publishes it): the
 * Solana node is LiteSVM behind Solana's JSON-RPC on mainnet-beta's genesis (test/support/solana-node.ts),
 * with the catalogue's live USDC mint on it, the wallet's address funded as its ledger is (the node
 * simulates each send); the policy refuses every send, so none reaches the chain.
 */
describe('The movement gate values live Solana sends in USD with the SOL / USD feed (anvil, LiteSVM node)', () => {
  let anvil: Anvil;
  let solana: SolanaNode;
  let feed: Hex;
  let app: TestApp;
  let feeds: LivePriceFeeds;
  let wallet: LiveWallet;
  const recipient = base58.encode(randomBytes(32));

  before(async () => {
    anvil = await startAnvil({ chainId: 1 });
    feed = await deployAnvilPriceFeed(anvil);
    solana = new SolanaNode();
    await solana.start();
    const config = testConfig();
    const usdcMint = config.CHAIN_TOKENS_SOLANA_LIVE.USDC_SOL!;
    putTokenProgramAccount(solana.svm, usdcMint, mintData(base58.encode(randomBytes(32)), 10n ** 12n, 6));
    app = await startTestApp({ config: { CHAIN_NODE_ETHEREUM_LIVE: anvil.url, CHAIN_NODE_SOLANA_LIVE: solana.url, PRICE_FEEDS_LIVE: `SOL=${feed}:86400` } });
    feeds = new LivePriceFeeds(app.deps.config, testLogger('prices'));
    wallet = await liveWalletUnderUsdBlock(app, 'solana', 'SOL', 100n * 10n ** 9n, '1000');
    // The chain holds what the ledger says: the node simulates each send from the wallet's address.
    solana.svm.airdrop(svmAddress(wallet.address), (100n * 10n ** 9n) as never);
  });
  after(async () => {
    feeds?.stop();
    await app?.close();
    await solana?.stop();
    await anvil?.stop();
  });

  it('blocks 10 SOL at 142.5 USD (1,425 USD) and lets the rule pass over 2 SOL (285 USD)', async () => {
    await setAnvilPriceRound(anvil, feed, 14_250_000_000n, nowSeconds() - 12 * 3600);
    await feeds.refresh();

    const blocked = await wallet.send('10', recipient);
    assert.equal(blocked.status, 403, blocked.text);
    assert.equal(blocked.body.error.code, 'policy_blocked');
    let { decision, request } = await wallet.lastDecision();
    assert.equal(request.amount_usd, '1425', 'a round 12 hours old counts within its daily heartbeat');
    assert.equal(typeof request.fee_usd, 'string', 'the fee in lamports is priced too');
    assert.equal(decision.price_unavailable, undefined);

    const unmatched = await wallet.send('2', recipient);
    assert.equal(unmatched.status, 403, unmatched.text);
    ({ decision, request } = await wallet.lastDecision());
    assert.equal(request.amount_usd, '285');
    assert.equal(decision.result, 'no_match');
  });
});
