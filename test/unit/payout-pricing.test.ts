import assert from 'node:assert/strict';
import { findCorridor, parseFiat, sourceAsset, toFiatDisplay } from '../../src/payouts/corridors';
import { price, type PricingTerms } from '../../src/payouts/quotes';
import { DomainError } from '../../src/shared/errors';

/** USDT (6 decimals) at a mid of 1550 NGN, 150 bps spread, 100 bps service fee, 1 USDT network fee. */
const USDT_NGN: PricingTerms = { midRate: '1550', spreadBps: 150, serviceFeeBps: 100, networkFee: 1_000_000n, assetDecimals: 6, currencyMinorUnits: 2 };

describe('Payout pricing: exact integer arithmetic, minor units and rounding directions', () => {
  it('prices an amount of the asset: rate rounded down, service fee rounded up, fiat rounded down to the minor unit', () => {
    const priced = price({ in: 'asset', baseUnits: 100_000_000n }, USDT_NGN)!;
    // 1550 × 0.985 = 1526.75
    assert.equal(priced.rate, '1526.75');
    assert.deepEqual(priced.fees, [
      { type: 'service_fee', amount: 1_000_000n },
      { type: 'network_fee', amount: 1_000_000n },
    ]);
    // (100 − 1 − 1) USDT × 1526.75 = 149,621.50 NGN
    assert.equal(priced.fromAmount, 100_000_000n);
    assert.equal(priced.toAmount, 14_962_150n);

    const odd = price({ in: 'asset', baseUnits: 12_345_679n }, USDT_NGN)!;
    // service fee 123,456.79 → 123,457 base units (up); net 11,222,222 → 11.222222 × 1526.75 = 17,133.5274... → 17,133.52 (down)
    assert.equal(odd.fees[0]!.amount, 123_457n);
    assert.equal(odd.toAmount, 1_713_352n);
  });

  it('rounds the quoted rate down to six decimal places', () => {
    assert.equal(price({ in: 'asset', baseUnits: 10n ** 8n }, { ...USDT_NGN, midRate: '129.5', spreadBps: 33 })!.rate, '129.07265');
    assert.equal(price({ in: 'asset', baseUnits: 10n ** 8n }, { ...USDT_NGN, midRate: '1.0000019', spreadBps: 0 })!.rate, '1.000001');
  });

  it('prices an amount of the currency with the smallest amount of the asset that reaches it, proven one base unit below', () => {
    for (const [terms, target] of [
      [USDT_NGN, 15_000_000n],
      [USDT_NGN, 1n],
      [USDT_NGN, 7_777_777_77n],
      [{ ...USDT_NGN, midRate: '3700', currencyMinorUnits: 0 }, 370_000n],
      [{ ...USDT_NGN, midRate: '3700', currencyMinorUnits: 0 }, 1_001n],
      [{ midRate: '100750000', spreadBps: 150, serviceFeeBps: 100, networkFee: 2_000n, assetDecimals: 8, currencyMinorUnits: 2 }, 80_000_00n],
      [{ midRate: '100750000', spreadBps: 0, serviceFeeBps: 0, networkFee: 0n, assetDecimals: 8, currencyMinorUnits: 2 }, 123_45n],
    ] as const) {
      const priced = price({ in: 'currency', minorUnits: target }, terms)!;
      assert.equal(priced.toAmount, target, 'the requested amount is paid exactly');
      const reached = price({ in: 'asset', baseUnits: priced.fromAmount }, terms)!;
      assert.ok(reached.toAmount >= target, `${priced.fromAmount} reaches ${target}`);
      const short = price({ in: 'asset', baseUnits: priced.fromAmount - 1n }, terms);
      assert.ok(short === null || short.toAmount < target, `${priced.fromAmount - 1n} falls short of ${target}`);
    }
  });

  it('finds the smallest amount of the asset for every target of a sweep, with awkward rates, fees and minor units', () => {
    const sweeps: PricingTerms[] = [
      { midRate: '3700.123457', spreadBps: 37, serviceFeeBps: 123, networkFee: 1_000_000n, assetDecimals: 6, currencyMinorUnits: 0 },
      { midRate: '604.99', spreadBps: 150, serviceFeeBps: 0, networkFee: 50_000n, assetDecimals: 6, currencyMinorUnits: 0 },
      { midRate: '1550.0000007', spreadBps: 1, serviceFeeBps: 4_999, networkFee: 1_500_000n, assetDecimals: 6, currencyMinorUnits: 2 },
      { midRate: '0.000731', spreadBps: 0, serviceFeeBps: 100, networkFee: 2_000n, assetDecimals: 8, currencyMinorUnits: 2 },
    ];
    for (const terms of sweeps) {
      for (let target = 1n; target <= 3_000n; target += 7n) {
        const priced = price({ in: 'currency', minorUnits: target }, terms)!;
        assert.ok(price({ in: 'asset', baseUnits: priced.fromAmount }, terms)!.toAmount >= target, `${terms.midRate}: ${priced.fromAmount} reaches ${target}`);
        const short = price({ in: 'asset', baseUnits: priced.fromAmount - 1n }, terms);
        assert.ok(short === null || short.toAmount < target, `${terms.midRate}: ${priced.fromAmount - 1n} falls short of ${target}`);
      }
    }
  });

  it('prices BTC in sats', () => {
    const btc: PricingTerms = { midRate: '8417500', spreadBps: 150, serviceFeeBps: 100, networkFee: 2_000n, assetDecimals: 8, currencyMinorUnits: 2 };
    const priced = price({ in: 'asset', baseUnits: 1_000_000n }, btc)!;
    // rate 8,417,500 × 0.985 = 8,291,237.5; net 1,000,000 − 10,000 − 2,000 = 988,000 sat = 0.00988 BTC → 81,917.42... KES
    assert.equal(priced.rate, '8291237.5');
    assert.equal(priced.toAmount, 8_191_742n);
  });

  it('refuses what the fees would swallow', () => {
    assert.equal(price({ in: 'asset', baseUnits: 1_000_000n }, USDT_NGN), null, 'exactly the network fee');
    assert.equal(price({ in: 'asset', baseUnits: 0n }, USDT_NGN), null);
    assert.equal(price({ in: 'currency', minorUnits: 0n }, USDT_NGN), null);
  });

  it('formats and parses fiat with exactly the currency minor units (UGX and XOF have none)', () => {
    assert.equal(toFiatDisplay('15500000', 'NGN'), '155000.00');
    assert.equal(toFiatDisplay(5n, 'KES'), '0.05');
    assert.equal(toFiatDisplay('370000', 'UGX'), '370000');
    assert.equal(parseFiat('155000.5', 'NGN'), 15_500_050n);
    assert.equal(parseFiat('155000.505', 'NGN'), null, 'never rounded');
    assert.equal(parseFiat('370000', 'UGX'), 370_000n);
    assert.equal(parseFiat('370000.5', 'UGX'), null);
    assert.equal(parseFiat('1e5', 'NGN'), null);
  });

  it('names what a corridor does not offer', () => {
    const code = (run: () => unknown) => {
      try {
        run();
      } catch (error) {
        assert.ok(error instanceof DomainError);
        return [error.code, error.param];
      }
      return null;
    };
    assert.deepEqual(code(() => findCorridor('FR', 'EUR', 'bank')), ['unsupported_corridor', 'country']);
    assert.deepEqual(code(() => findCorridor('NG', 'USD', 'bank')), ['unsupported_corridor', 'toCurrency']);
    assert.deepEqual(code(() => findCorridor('NG', 'NGN', 'mobile_money')), ['unsupported_corridor', 'paymentMethod']);
    assert.deepEqual(code(() => sourceAsset('USDC', 'tron')), ['unsupported_asset', 'fromAsset']);
    assert.deepEqual(code(() => sourceAsset('ETH', 'ethereum')), ['unsupported_asset', 'fromAsset']);
    assert.equal(sourceAsset('usdt', 'tron').id, 'USDT_TRX');
    assert.equal(findCorridor('KE', 'KES', 'mobile_money').terms.networks?.includes('MPESA'), true);
  });
});
