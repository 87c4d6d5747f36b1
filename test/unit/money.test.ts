import assert from 'node:assert/strict';
import { AmountError, centsToDecimalString, decimalStringToCents, isBaseUnitAmount, isDisplayAmount, MAX_BASE_UNITS, Money, toBaseUnits, toDisplay } from '../../src/shared/money';

describe('Money conversions', () => {
  it('converts display amounts to base units exactly, at every decimals', () => {
    assert.equal(toBaseUnits('1.5', 8), 150_000_000n);
    assert.equal(toBaseUnits('0.000000000000000001', 18), 1n);
    assert.equal(toBaseUnits('123456789.123456789123456789', 18), 123456789123456789123456789n);
    assert.equal(toBaseUnits('0.10', 1), 1n, 'trailing zeros beyond the decimals are fine');
    assert.equal(toBaseUnits('0.1', 6) + toBaseUnits('0.2', 6), toBaseUnits('0.3', 6));
  });

  it('refuses precision the asset does not have and anything that is not a plain decimal', () => {
    assert.throws(() => toBaseUnits('0.123456789', 8), AmountError);
    for (const bad of ['-1', '1e5', '.5', '1.', '01', ' 1', 'NaN', '']) assert.throws(() => toBaseUnits(bad, 8), AmountError, bad);
  });

  it('bounds amounts on the text: at most 78 digits each side of the point, at most 2^256 - 1 base units', () => {
    assert.equal(isDisplayAmount('9'.repeat(78)), true);
    assert.equal(isDisplayAmount(`1.${'0'.repeat(78)}`), true);
    for (const long of ['9'.repeat(79), `1.${'0'.repeat(79)}`, '9'.repeat(1_000_000)]) assert.equal(isDisplayAmount(long), false, `${long.length} characters`);
    assert.equal(isBaseUnitAmount('9'.repeat(78)), true);
    assert.equal(isBaseUnitAmount('9'.repeat(79)), false);
    assert.equal(toBaseUnits(MAX_BASE_UNITS.toString(), 0), MAX_BASE_UNITS);
    assert.equal(toBaseUnits(toDisplay(MAX_BASE_UNITS, 18), 18), MAX_BASE_UNITS);
    assert.throws(() => toBaseUnits((MAX_BASE_UNITS + 1n).toString(), 0), AmountError);
    assert.throws(() => toBaseUnits('9'.repeat(62), 18), AmountError, '80 digits of wei');
    assert.throws(() => toBaseUnits('9'.repeat(1_000_000), 0), (error: Error) => error instanceof AmountError && error.message.length < 200, 'the input is not echoed');
  });

  it('formats base units as display decimals without exponent notation', () => {
    assert.equal(toDisplay(150_000_000n, 8), '1.5');
    assert.equal(toDisplay('1', 18), '0.000000000000000001');
    assert.equal(toDisplay('123456789123456789123456789', 18), '123456789.123456789123456789');
    assert.equal(toDisplay(0n, 6), '0');
    assert.equal(toDisplay(-1500n, 3), '-1.5');
    assert.equal(toDisplay(7n, 0), '7');
    assert.throws(() => toDisplay('1.5', 8), AmountError);
  });

  it('moves the point on the text exactly as dividing by a power of ten does', () => {
    // Every length of amount up to 2^256, each sign, and decimals around the amount's own length.
    const amounts = [0n, MAX_BASE_UNITS];
    for (let digits = 1; digits <= 78; digits += 1) amounts.push(10n ** BigInt(digits - 1), 10n ** BigInt(digits) - 1n, BigInt(`${digits % 9 + 1}0${'7'.repeat(digits)}00`));
    for (const amount of amounts.flatMap((value) => [value, -value])) {
      for (const decimals of [0, 1, 2, 6, 8, 18, 30, 79, 85]) {
        assert.equal(toDisplay(amount, decimals), new Money(amount.toString()).dividedBy(new Money(10).pow(decimals)).toFixed(), `${amount} / 10^${decimals}`);
      }
      assert.equal(centsToDecimalString(amount), new Money(amount.toString()).dividedBy(100).toFixed(2), `${amount} cents`);
    }
  });

  it('handles card cents and decimal currency strings', () => {
    assert.equal(centsToDecimalString(5000n), '50.00');
    assert.equal(centsToDecimalString(5n), '0.05');
    assert.equal(decimalStringToCents('50'), 5000n);
    assert.equal(decimalStringToCents('0.1'), 10n);
    assert.equal(new Money('0.1').plus('0.2').equals('0.3'), true);
  });
});
