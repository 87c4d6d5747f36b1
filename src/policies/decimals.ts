import { Money } from '../shared/money';

/**
 * A decimal operand in canonical parts, so that comparing two is comparing strings: exact as
 * decimal.js compares, without building a Decimal per operand on every evaluation (the hot path of
 * sending). Zero is never negative, as "-0" equals "0".
 */
export interface PlainDecimal {
  negative: boolean;
  /** Integer digits without leading zeros ('' for zero). */
  integer: string;
  /** Fraction digits without trailing zeros. */
  fraction: string;
}

const PLAIN_DECIMAL = /^(-?)(\d+)(?:\.(\d+))?$/;

export function toDecimal(value: unknown): PlainDecimal | null {
  let text: string;
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) return null;
    text = String(value);
    // 1e21, 1e-7: a number's exponent notation, written out exactly.
    if (!PLAIN_DECIMAL.test(text)) text = new Money(text).toFixed();
  } else if (typeof value === 'string') {
    text = value.trim();
  } else {
    return null;
  }
  const match = PLAIN_DECIMAL.exec(text);
  if (!match) return null;
  const digits = match[2]!;
  let start = 0;
  while (start < digits.length && digits.charCodeAt(start) === 48) start++;
  const decimals = match[3] ?? '';
  let end = decimals.length;
  while (end > 0 && decimals.charCodeAt(end - 1) === 48) end--;
  const integer = digits.slice(start);
  const fraction = decimals.slice(0, end);
  return { negative: match[1] === '-' && (integer !== '' || fraction !== ''), integer, fraction };
}

/** The sign of x - y. */
export function compare(x: PlainDecimal, y: PlainDecimal): number {
  if (x.negative !== y.negative) return x.negative ? -1 : 1;
  let magnitude = 0;
  if (x.integer.length !== y.integer.length) magnitude = x.integer.length < y.integer.length ? -1 : 1;
  else if (x.integer !== y.integer) magnitude = x.integer < y.integer ? -1 : 1;
  else if (x.fraction !== y.fraction) magnitude = x.fraction < y.fraction ? -1 : 1;
  return x.negative ? -magnitude : magnitude;
}
