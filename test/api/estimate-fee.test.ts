import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { priceSourceFor } from '../../src/catalogue/prices';
import { erc20TransferData } from '../../src/chains/transfers/ethereum';
import { ConfigError, loadConfig } from '../../src/config';
import { Money } from '../../src/shared/money';
import { virtualSize } from '../../src/transactions/coin-selection';
import { WalletOutput } from '../../src/transactions/entities';
import { createTestOrganization, startTestApp, type TestApp, type TestOrganization } from '../support/app';
import { testOrm } from '../support/environment';

const CHAINS = ['bitcoin', 'ethereum', 'tron', 'solana'] as const;
type Chain = (typeof CHAINS)[number];
const NATIVE: Record<Chain, { id: string; decimals: number; price: string }> = {
  bitcoin: { id: 'BTC', decimals: 8, price: '65000' },
  ethereum: { id: 'ETH', decimals: 18, price: '3000' },
  tron: { id: 'TRX', decimals: 6, price: '0.12' },
  solana: { id: 'SOL', decimals: 9, price: '150' },
};
const BREAKDOWN_KEYS: Record<Chain, string[]> = {
  bitcoin: ['fee_rate', 'vsize'],
  ethereum: ['gas_limit', 'base_fee', 'priority_fee', 'max_fee_per_gas'],
  tron: ['bandwidth'],
  solana: ['signatures', 'base_fee', 'priority_fee'],
};
const LEVELS = ['low', 'medium', 'high'] as const;
const FUNDING_FIELDS = [
  'atomic_collection', 'available', 'execution_control', 'execution_path', 'fee_asset_amount', 'fee_asset_amount_raw', 'fee_asset_id',
  'funding_model', 'indicative', 'network_fee_amount', 'network_fee_amount_raw', 'network_fee_asset_id', 'network_fee_usd', 'quote_expires_at',
  'recipient_amount', 'recipient_amount_raw', 'status', 'status_label', 'total_debit_amount', 'total_debit_amount_raw', 'unavailable_reason',
].sort();

const raw = (display: string, decimals: number) => BigInt(new Money(display).times(new Money(10).pow(decimals)).toFixed(0));
const display = (units: bigint, decimals: number) => new Money(units.toString()).dividedBy(new Money(10).pow(decimals)).toFixed();
const breakdownValue = (level: any, key: string) => (level.breakdown as { key: string; value: string }[]).find((entry) => entry.key === key)?.value;

describe('POST /v1/transactions/estimate-fee (embedded devnet)', () => {
  let app: TestApp;
  let org: TestOrganization;
  const wallets = {} as Record<Chain, { id: string; address: string }>;
  const recipients = {} as Record<Chain, string>;

  const estimate = (body: Record<string, unknown>, key = org.secret) => app.request('POST', '/v1/transactions/estimate-fee', { key, body });

  before(async () => {
    app = await startTestApp();
    org = await createTestOrganization('Fee estimates');
    const vault = (await app.request('POST', '/v1/vaults', { key: org.secret, body: { name: 'Estimates' } })).body;
    for (const chain of CHAINS) {
      for (const role of ['sender', 'recipient'] as const) {
        const wallet = await app.request('POST', '/v1/wallets', { key: org.secret, body: { name: `${chain} ${role}`, chain, vault_id: vault.id } });
        assert.equal(wallet.status, 201, wallet.text);
        if (role === 'sender') wallets[chain] = { id: wallet.body.id, address: wallet.body.primary_address.address };
        else recipients[chain] = wallet.body.primary_address.address;
      }
    }
  });
  after(async () => {
    await app?.close();
  });

  for (const chain of CHAINS) {
    it(`${chain}: three levels priced from the same market as GET /v1/chains/${chain}/fees, net arithmetic exact`, async () => {
      const native = NATIVE[chain];
      const amount = '1.5';
      const answer = await estimate({ wallet_id: wallets[chain].id, to_address: recipients[chain], amount, asset: native.id });
      assert.equal(answer.status, 200, answer.text);
      const fees = await app.request('GET', `/v1/chains/${chain}/fees`, { key: org.secret });
      assert.equal(fees.status, 200, fees.text);
      const amountRaw = raw(amount, native.decimals);
      // Each funding option prices the fee as that payer would fund it: the sponsored fee (Bitcoin is not sponsored).
      const sponsored = chain === 'bitcoin' ? null : (await estimate({ wallet_id: wallets[chain].id, to_address: recipients[chain], amount, asset: native.id, sponsor: true })).body.fee_levels;
      for (const name of LEVELS) {
        const level = answer.body.fee_levels[name];
        const fee = BigInt(level.amount_raw);
        assert.equal(level.amount, fees.body.fees[name].network_fee, `${name}: the fee of a plain transfer`);
        assert.equal(level.amount, display(fee, native.decimals));
        assert.equal(level.asset_id, native.id);
        assert.equal(level.estimated_time_seconds, fees.body.fees[name].confirmation_time_secs);
        assert.deepEqual(level.breakdown.map((entry: { key: string }) => entry.key), BREAKDOWN_KEYS[chain]);
        assert.equal(level.recipient_amount, amount);
        assert.equal(level.recipient_amount_raw, amountRaw.toString());
        assert.equal(level.total_debit_amount_raw, (amountRaw + fee).toString());
        assert.equal(level.total_debit_amount, display(amountRaw + fee, native.decimals));
        assert.equal(level.usd_value, new Money(level.amount).times(native.price).toFixed());
        assert.equal(level.funding_options.length, 2);
        assert.deepEqual(level.funding_options.map((option: { funding_model: string }) => option.funding_model), ['provider_sponsorship', 'customer_gas_station']);
        for (const option of level.funding_options) {
          assert.deepEqual(Object.keys(option).sort(), FUNDING_FIELDS);
          assert.equal(option.available, false);
          assert.equal(option.indicative, true);
          assert.equal(option.fee_asset_id, native.id);
          assert.equal(option.network_fee_amount_raw, (sponsored?.[name] ?? level).amount_raw);
          assert.equal(option.network_fee_usd, (sponsored?.[name] ?? level).usd_value);
          assert.ok(Date.parse(option.quote_expires_at) > Date.now());
        }
        assert.deepEqual(
          level.funding_options.map((option: { unavailable_reason: string }) => option.unavailable_reason),
          chain === 'bitcoin' ? ['unsupported_chain', 'unsupported_chain'] : ['sponsorship_not_configured', 'no_gas_station'],
        );
        if (sponsored) assert.equal(sponsored[name].total_debit_amount_raw, amountRaw.toString(), 'sponsored, the fee is not debited from the wallet');
      }
      assert.ok(LEVELS.includes(answer.body.recommended));
    });
  }

  it('Bitcoin without spendable outputs: the rate times 141 vB; Ethereum: (base fee + priority fee) times 21000 gas', async () => {
    const btc = (await estimate({ wallet_id: wallets.bitcoin.id, to_address: recipients.bitcoin, amount: '0.01', asset: 'BTC' })).body.fee_levels.medium;
    assert.equal(breakdownValue(btc, 'vsize'), '141');
    assert.match(btc.breakdown.find((entry: { key: string }) => entry.key === 'vsize').label, /the wallet has no spendable outputs/);
    assert.equal(BigInt(btc.amount_raw), BigInt(breakdownValue(btc, 'fee_rate')!) * 141n);
    const eth = (await estimate({ wallet_id: wallets.ethereum.id, to_address: recipients.ethereum, amount: '0.01', asset: 'ETH' })).body.fee_levels.high;
    assert.equal(breakdownValue(eth, 'gas_limit'), '21000');
    const gasPrice = raw(breakdownValue(eth, 'base_fee')!, 9) + raw(breakdownValue(eth, 'priority_fee')!, 9);
    assert.equal(BigInt(eth.amount_raw), gasPrice * 21_000n);
    assert.equal(raw(breakdownValue(eth, 'max_fee_per_gas')!, 9), 2n * raw(breakdownValue(eth, 'base_fee')!, 9) + raw(breakdownValue(eth, 'priority_fee')!, 9));
  });

  it('gross mode: the recipient gets the amount less the fee, the wallet gives the amount', async () => {
    const answer = await estimate({ wallet_id: wallets.solana.id, to_address: recipients.solana, amount: '0.25', asset: 'SOL', treat_as_gross_amount: true });
    assert.equal(answer.status, 200, answer.text);
    for (const name of LEVELS) {
      const level = answer.body.fee_levels[name];
      assert.equal(level.total_debit_amount, '0.25');
      assert.equal(level.total_debit_amount_raw, '250000000');
      assert.equal(BigInt(level.recipient_amount_raw), 250_000_000n - BigInt(level.amount_raw));
      assert.equal(level.recipient_amount, display(250_000_000n - BigInt(level.amount_raw), 9));
    }
  });

  it('Bitcoin with spendable outputs: priced from the inputs coin selection would spend, net and gross', async () => {
    const vault = (await app.request('POST', '/v1/vaults', { key: org.secret, body: { name: 'Coins' } })).body;
    const created = await app.request('POST', '/v1/wallets', { key: org.secret, body: { name: 'coins', chain: 'bitcoin', vault_id: vault.id } });
    const taproot = await app.request('POST', `/v1/wallets/${created.body.id}/addresses`, { key: org.secret, body: { address_format: 'p2tr' } });
    assert.equal(taproot.status, 201, taproot.text);
    const em = (await testOrm()).em.fork();
    const coins = [
      [created.body.primary_address.id, 600_000n],
      [taproot.body.id, 600_000n],
    ] as const;
    for (const [addressId, amount] of coins) {
      em.create(WalletOutput, {
        organization: org.organizationId,
        environment: 'sandbox',
        wallet: created.body.id,
        address: addressId,
        txid: randomBytes(32).toString('hex'),
        vout: 0,
        amount: amount.toString(),
        origin: 'deposit',
        status: 'available',
        createdAt: new Date(),
        updatedAt: new Date(),
      });
    }
    await em.flush();
    const inputs = [{ format: 'p2wpkh' as const }, { format: 'p2tr' as const }];
    const quote = async (amount: string, gross = false) => {
      const answer = await estimate({ wallet_id: created.body.id, to_address: recipients.bitcoin, amount, asset: 'BTC', treat_as_gross_amount: gross });
      assert.equal(answer.status, 200, answer.text);
      return answer.body.fee_levels;
    };

    // Net: both outputs, the recipient's output and change.
    for (const level of Object.values(await quote('0.01')) as any[]) {
      const rate = BigInt(breakdownValue(level, 'fee_rate')!);
      assert.equal(breakdownValue(level, 'vsize'), String(virtualSize(inputs, ['p2wpkh', 'p2wpkh'])));
      assert.equal(breakdownValue(level, 'inputs'), '2');
      assert.equal(BigInt(level.amount_raw), rate * BigInt(virtualSize(inputs, ['p2wpkh', 'p2wpkh'])));
      assert.equal(level.total_debit_amount_raw, (1_000_000n + BigInt(level.amount_raw)).toString());
    }
    // Gross, everything the wallet holds: no change output.
    for (const level of Object.values(await quote('0.012', true)) as any[]) {
      const rate = BigInt(breakdownValue(level, 'fee_rate')!);
      assert.equal(breakdownValue(level, 'vsize'), String(virtualSize(inputs, ['p2wpkh'])));
      assert.equal(BigInt(level.amount_raw), rate * BigInt(virtualSize(inputs, ['p2wpkh'])));
      assert.equal(level.recipient_amount_raw, (1_200_000n - BigInt(level.amount_raw)).toString());
      assert.equal(level.total_debit_amount_raw, '1200000');
    }
    // More than the outputs hold: the typical payment, and the label says why.
    const uncovered = (await quote('1')).medium;
    assert.equal(breakdownValue(uncovered, 'vsize'), '141');
    assert.match(uncovered.breakdown.find((entry: { key: string }) => entry.key === 'vsize').label, /do not cover the amount/);
  });

  it('gross mode refuses an amount that does not exceed the fee: 400 amount_below_fee', async () => {
    const answer = await estimate({ wallet_id: wallets.tron.id, to_address: recipients.tron, amount: '0.1', asset: 'TRX', treat_as_gross_amount: true });
    assert.equal(answer.status, 400, answer.text);
    assert.equal(answer.body.error.code, 'amount_below_fee');
    assert.equal(answer.body.error.param, 'amount');
  });

  it("an ERC-20 by bare symbol: the node's gas estimate of the transfer plus 20%, paid in ETH, the debit in the token is the amount alone; gross refused", async () => {
    const answer = await estimate({ wallet_id: wallets.ethereum.id, to_address: recipients.ethereum, amount: '250.5', asset: 'USDC' });
    assert.equal(answer.status, 200, answer.text);
    const plain = (await estimate({ wallet_id: wallets.ethereum.id, to_address: recipients.ethereum, amount: '1', asset: 'ETH' })).body;
    const devnet = await app.deps.chains.provider('ethereum', 'sandbox');
    const estimated = await devnet.estimateGas!({ from: wallets.ethereum.address, to: devnet.tokenAddress('USDC_ETH')!, data: erc20TransferData(recipients.ethereum, 250_500_000n) });
    const gasLimit = (estimated * 120n) / 100n;
    assert.ok(gasLimit > 21_000n && gasLimit < 200_000n, `${gasLimit}: an ERC-20 transfer's gas with the margin, under the cap`);
    for (const name of LEVELS) {
      const level = answer.body.fee_levels[name];
      assert.equal(level.asset_id, 'ETH');
      assert.equal(breakdownValue(level, 'gas_limit'), gasLimit.toString());
      assert.equal(BigInt(level.amount_raw) * 21_000n, BigInt(plain.fee_levels[name].amount_raw) * gasLimit);
      assert.equal(level.recipient_amount, '250.5');
      assert.equal(level.recipient_amount_raw, '250500000');
      assert.equal(level.total_debit_amount_raw, '250500000');
      assert.equal(level.usd_value, new Money(level.amount).times(3000).toFixed());
    }
    const gross = await estimate({ wallet_id: wallets.ethereum.id, to_address: recipients.ethereum, amount: '250.5', asset: 'USDC_ETH', treat_as_gross_amount: true });
    assert.equal(gross.status, 400);
    assert.equal(gross.body.error.code, 'gross_amount_native_only');
    assert.equal(gross.body.error.param, 'treat_as_gross_amount');
  });

  it('TRC-20 and SPL: Tron adds energy and a fee limit, Solana prices one signature', async () => {
    const trc20 = await estimate({ wallet_id: wallets.tron.id, to_address: recipients.tron, amount: '10', asset: 'USDT_TRX' });
    assert.equal(trc20.status, 200, trc20.text);
    const trx = (await estimate({ wallet_id: wallets.tron.id, to_address: recipients.tron, amount: '10', asset: 'TRX' })).body;
    const level = trc20.body.fee_levels.medium;
    assert.deepEqual(level.breakdown.map((entry: { key: string }) => entry.key), ['bandwidth', 'energy', 'energy_fee', 'fee_limit']);
    assert.equal(level.asset_id, 'TRX');
    assert.equal(BigInt(level.amount_raw), BigInt(trx.fee_levels.medium.amount_raw) + raw(breakdownValue(level, 'energy_fee')!, 6));
    assert.equal(level.total_debit_amount, '10');
    const spl = await estimate({ wallet_id: wallets.solana.id, to_address: recipients.solana, amount: '3', asset: 'USDC_SOL' });
    assert.equal(spl.status, 200, spl.text);
    assert.equal(breakdownValue(spl.body.fee_levels.low, 'signatures'), '1');
    assert.equal(spl.body.fee_levels.low.asset_id, 'SOL');
  });

  it('recommends medium, or high when high costs no more (a flat market)', async () => {
    const tron = (await estimate({ wallet_id: wallets.tron.id, to_address: recipients.tron, amount: '1', asset: 'TRX' })).body;
    const expected = BigInt(tron.fee_levels.high.amount_raw) <= BigInt(tron.fee_levels.medium.amount_raw) ? 'high' : 'medium';
    assert.equal(tron.recommended, expected);
    const solana = (await estimate({ wallet_id: wallets.solana.id, to_address: recipients.solana, amount: '1', asset: 'SOL' })).body;
    assert.equal(solana.recommended, BigInt(solana.fee_levels.high.amount_raw) <= BigInt(solana.fee_levels.medium.amount_raw) ? 'high' : 'medium');
  });

  describe('validation', () => {
    const valid = () => ({ wallet_id: wallets.ethereum.id, to_address: recipients.ethereum, amount: '1', asset: 'ETH' });
    const refused = async (body: Record<string, unknown>, status: number, code: string, param: string, key?: string) => {
      const answer = await estimate(body, key);
      assert.equal(answer.status, status, answer.text);
      assert.equal(answer.body.error.code, code);
      assert.equal(answer.body.error.param, param);
    };

    it('404 for an unknown wallet, another organization\'s or the other environment\'s', async () => {
      await refused({ ...valid(), wallet_id: randomUUID() }, 404, 'resource_missing', 'wallet_id');
      const other = await createTestOrganization('Other');
      await refused(valid(), 404, 'resource_missing', 'wallet_id', other.secret);
      const live = await org.key(['*'], 'live');
      await refused(valid(), 404, 'resource_missing', 'wallet_id', live.secret);
    });

    it('400 with param for a bad asset, address or amount', async () => {
      await refused({ ...valid(), asset: 'BTC' }, 400, 'validation_failed', 'asset');
      await refused({ ...valid(), asset: 'USDT_TRX' }, 400, 'validation_failed', 'asset');
      await refused({ ...valid(), to_address: recipients.bitcoin }, 400, 'validation_failed', 'to_address');
      await refused({ ...valid(), to_address: '0x1234' }, 400, 'validation_failed', 'to_address');
      await refused({ wallet_id: wallets.bitcoin.id, to_address: 'bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq', amount: '1', asset: 'BTC' }, 400, 'validation_failed', 'to_address');
      await refused({ ...valid(), amount: '0' }, 400, 'validation_failed', 'amount');
      await refused({ ...valid(), amount: '-1' }, 400, 'validation_failed', 'amount');
      await refused({ ...valid(), amount: '1e3' }, 400, 'validation_failed', 'amount');
      await refused({ ...valid(), asset: 'USDC', amount: '1.0000001' }, 400, 'validation_failed', 'amount');
      await refused({ ...valid(), wallet_id: 'not-a-uuid' }, 400, 'validation_failed', 'wallet_id');
    });

    it('accepts more decimals up to the asset\'s, and ignores the deprecated network', async () => {
      const answer = await estimate({ ...valid(), asset: 'USDC', amount: '1.000001', network: 'mainnet' });
      assert.equal(answer.status, 200, answer.text);
      assert.equal(answer.body.fee_levels.low.recipient_amount_raw, '1000001');
    });
  });
});

describe('Price sources', () => {
  const config = (table?: string) => loadConfig({ DATABASE_URL: 'postgresql://localhost/x', ...(table === undefined ? {} : { PRICE_TABLE_SANDBOX: table }) });

  it('sandbox: the PRICE_TABLE_SANDBOX table, exact decimals; an asset not in it has no price', () => {
    const prices = priceSourceFor(config('ETH=2500.25,USDC_ETH=0.9999'), 'sandbox');
    assert.equal(prices.usdPrice('ETH')?.toFixed(), '2500.25');
    assert.equal(prices.usdPrice('USDC_ETH')?.toFixed(), '0.9999');
    assert.equal(prices.usdPrice('BTC'), null);
    assert.equal(priceSourceFor(config(), 'sandbox').usdPrice('BTC')?.toFixed(), '65000');
  });

  it('live: with no Chainlink feeds configured, every price null (feeds on a node: test/chains/anvil-prices.test.ts)', () => {
    assert.equal(priceSourceFor(config(), 'live').usdPrice('ETH'), null);
  });

  it('refuses live feeds without a live Ethereum node, without their heartbeat, for an asset outside the catalogue, or not an address', () => {
    const feed = '0x5f4eC3Df9cbd43714FE2740f5E3616155c5b8419';
    const live = (env: Record<string, string>) => loadConfig({ DATABASE_URL: 'postgresql://localhost/x', ...env });
    const node = { CHAIN_NODE_ETHEREUM_LIVE: 'http://127.0.0.1:8545' };
    assert.deepEqual(live({ ...node, PRICE_FEEDS_LIVE: `ETH=${feed}:3600` }).PRICE_FEEDS_LIVE?.ETH, { address: feed, heartbeatSeconds: 3600 });
    assert.throws(() => live({ ...node, PRICE_FEEDS_LIVE: `ETH=${feed}` }), /heartbeat/, 'each feed says its heartbeat');
    assert.throws(() => live({ PRICE_FEEDS_LIVE: `ETH=${feed}:3600` }), /CHAIN_NODE_ETHEREUM_LIVE/);
    assert.throws(() => live({ ...node, PRICE_FEEDS_LIVE: `DOGE=${feed}:3600` }), ConfigError);
    assert.throws(() => live({ ...node, PRICE_FEEDS_LIVE: 'ETH=0x5f4e:3600' }), ConfigError);
    assert.throws(() => live({ ...node, PRICE_FEEDS_LIVE: `ETH=${feed}:604801` }), /at most 604800/);
    assert.throws(() => live({ PRICE_HEARTBEAT_MARGIN_SECONDS: '30' }), /PRICE_POLL_SECONDS/, 'a margin within one poll would make every quiet hour stale');
  });

  it('refuses price bounds whose min is not below their max, or for an asset without a feed', () => {
    const live = (bounds: string) =>
      loadConfig({ DATABASE_URL: 'postgresql://localhost/x', CHAIN_NODE_ETHEREUM_LIVE: 'http://127.0.0.1:8545', PRICE_FEEDS_LIVE: 'ETH=0x5f4eC3Df9cbd43714FE2740f5E3616155c5b8419:3600', PRICE_BOUNDS_LIVE: bounds });
    assert.deepEqual(live('ETH=100..100000.5').PRICE_BOUNDS_LIVE, { ETH: { min: '100', max: '100000.5' } });
    assert.throws(() => live('ETH=100000..100'), /min must be below its max/);
    assert.throws(() => live('ETH=100..100'), /min must be below its max/);
    assert.throws(() => live('BTC=1000..1000000'), /BTC has bounds but no feed/);
    assert.throws(() => live('ETH=100'), ConfigError);
  });

  it('refuses a malformed table at start', () => {
    assert.throws(() => config('ETH=1e3'), ConfigError);
    assert.throws(() => config('ETH'), ConfigError);
  });
});

describe('ERC-20 gas above ERC20_GAS_CAP (embedded devnet)', () => {
  let app: TestApp;
  let org: TestOrganization;
  let wallet: { id: string; address: string };
  const recipient = '0x000000000000000000000000000000000000dEaD';

  before(async () => {
    // The lowest cap there is: no ERC-20 transfer's estimate fits under it, an ether transfer's (21000) does.
    app = await startTestApp({ config: { ERC20_GAS_CAP: '21000' } });
    org = await createTestOrganization('Gas cap');
    const vault = (await app.request('POST', '/v1/vaults', { key: org.secret, body: { name: 'Capped' } })).body;
    const created = await app.request('POST', '/v1/wallets', { key: org.secret, body: { name: 'Capped', chain: 'ethereum', vault_id: vault.id } });
    assert.equal(created.status, 201, created.text);
    wallet = { id: created.body.id, address: created.body.primary_address.address };
  });
  after(async () => {
    await app?.close();
  });

  it('refuses the fee estimate and the send with 400 gas_above_cap naming the asset, the estimate and the cap; nothing is locked or recorded', async () => {
    const devnet = await app.deps.chains.provider('ethereum', 'sandbox');
    const estimated = await devnet.estimateGas!({ from: wallet.address, to: devnet.tokenAddress('USDC_ETH')!, data: erc20TransferData(recipient, 5_000_000n) });
    const body = { wallet_id: wallet.id, to_address: recipient, amount: '5', asset: 'USDC' };
    for (const path of ['/v1/transactions/estimate-fee', '/v1/transactions']) {
      const refused = await app.request('POST', path, { key: org.secret, body });
      assert.equal(refused.status, 400, `${path}: ${refused.text}`);
      assert.equal(refused.body.error.code, 'gas_above_cap');
      assert.equal(refused.body.error.param, 'asset');
      assert.deepEqual(refused.body.error.details, { asset_id: 'USDC_ETH', estimated_gas: estimated.toString(), gas_cap: '21000' });
      assert.match(refused.body.error.message, new RegExp(`USDC_ETH transfer at ${estimated} gas, above the cap of 21000`));
    }
    assert.equal((await app.request('GET', `/v1/transactions?wallet_id=${wallet.id}`, { key: org.secret })).body.data.length, 0, 'no send recorded');
    const ether = await app.request('POST', '/v1/transactions/estimate-fee', { key: org.secret, body: { ...body, amount: '0.1', asset: 'ETH' } });
    assert.equal(ether.status, 200, `an ether transfer is not an ERC-20's: ${ether.text}`);
  });
});
