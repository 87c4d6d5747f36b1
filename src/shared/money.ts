import Decimal from 'decimal.js';

/**
 * Exact decimal arithmetic for every money path. Precision is far beyond any asset's decimals
 * (ETH has 18), and exponent thresholds keep `toString()` out of scientific notation.
 */
export const Money = Decimal.clone({ precision: 80, rounding: Decimal.ROUND_DOWN, toExpNeg: -80, toExpPos: 80 });
export type MoneyValue = InstanceType<typeof Money>;

export class AmountError extends Error {
  override name = 'AmountError';
}

/**
 * The most digits an amount may have on each side of the point: base units are stored as
 * numeric(78,0), and the largest amount, MAX_BASE_UNITS (an EVM uint256), has 78 digits.
 */
export const MAX_AMOUNT_DIGITS = 78;
export const MAX_BASE_UNITS = 2n ** 256n - 1n;

// MAX_AMOUNT_DIGITS as bounded quantifiers: a string of any length is refused within its first 158
// characters, so a million digits cost what ten do, and no arithmetic ever sees them.
export const DISPLAY_PATTERN = /^(0|[1-9]\d{0,77})(\.\d{1,78})?$/;
export const BASE_UNIT_PATTERN = /^(0|[1-9]\d{0,77})$/;

// DISPLAY_PATTERN but zero ("0", "0.000"), by a bounded lookahead: one pattern, so the document says it too.
export const POSITIVE_DISPLAY_PATTERN = /^(?!0(\.0{1,78})?$)(0|[1-9]\d{0,77})(\.\d{1,78})?$/;

export const isDisplayAmount = (value: string): boolean => DISPLAY_PATTERN.test(value);
export const isPositiveDisplayAmount = (value: string): boolean => POSITIVE_DISPLAY_PATTERN.test(value);
export const isBaseUnitAmount = (value: string): boolean => BASE_UNIT_PATTERN.test(value);

/**
 * "1.5" with 8 decimals -> 150000000n. More fractional digits than the asset has is an error, never a
 * rounding, and so is more than MAX_BASE_UNITS; both are checked on the text, before any arithmetic.
 */
export function toBaseUnits(display: string, decimals: number): bigint {
  if (!isDisplayAmount(display)) throw new AmountError(`not a non-negative decimal amount of at most ${MAX_AMOUNT_DIGITS} digits`);
  const [whole, fraction = ''] = display.split('.') as [string, string?];
  const significantFraction = fraction.replace(/0+$/, '');
  if (significantFraction.length > decimals) throw new AmountError(`'${display}' has more than ${decimals} decimal places`);
  const units = BigInt(whole + significantFraction.padEnd(decimals, '0'));
  if (units > MAX_BASE_UNITS) throw new AmountError(`'${display}' is more than the largest amount (${MAX_BASE_UNITS} base units)`);
  return units;
}

/** 150000000n with 8 decimals -> "1.5"; trailing zeros dropped, never exponent notation. */
export function toDisplay(baseUnits: bigint | string, decimals: number): string {
  const raw = typeof baseUnits === 'bigint' ? baseUnits.toString() : baseUnits;
  if (!/^-?(0|[1-9]\d*)$/.test(raw)) throw new AmountError(`'${raw}' is not an integer amount`);
  return pointMovedLeft(raw, decimals, 'trim');
}

/** Cents (card amounts) to a two-place decimal string: 5000 -> "50.00". */
export const centsToDecimalString = (cents: bigint): string => pointMovedLeft(cents.toString(), 2, 'keep');

/**
 * An integer's text divided by 10^places, exactly: dividing by a power of ten only moves the point, so
 * it is done on the text (Decimal's power and division were most of the CPU a balance read spends presenting).
 * `trim` drops the fraction's trailing zeros (and the point with them); `keep` writes all `places` digits.
 */
function pointMovedLeft(integer: string, places: number, zeros: 'trim' | 'keep'): string {
  if (!Number.isInteger(places) || places < 0) throw new AmountError(`${places} is not a number of decimal places`);
  const negative = integer.startsWith('-');
  const digits = (negative ? integer.slice(1) : integer).padStart(places + 1, '0');
  const whole = digits.slice(0, digits.length - places);
  const fraction = digits.slice(digits.length - places);
  const kept = zeros === 'trim' ? fraction.replace(/0+$/, '') : fraction;
  const text = kept ? `${whole}.${kept}` : whole;
  // Zero has no sign, as Decimal writes it.
  return negative && /[1-9]/.test(digits) ? `-${text}` : text;
}

/** A decimal currency string (card_limits) to cents: "50" -> 5000n. */
export const decimalStringToCents = (value: string): bigint => toBaseUnits(value, 2);
