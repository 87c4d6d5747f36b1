import { sha256 } from '@noble/hashes/sha2';
import { secp256k1 } from '@noble/curves/secp256k1';
import { bech32 } from '@scure/base';

/**
 * BOLT #11 payment requests: encoder (signed with a node key) and decoder (checksum, amount,
 * tagged fields, signature recovery and, when an `n` field names the payee, verification).
 */

/** Currency prefixes of BOLT #11 / SLIP-0173, longest first so `bcrt` wins over `bc`. */
const NETWORKS = [
  ['bcrt', 'regtest'],
  ['bc', 'mainnet'],
  ['tbs', 'signet'],
  ['tb', 'testnet'],
] as const;
export type Bolt11Network = (typeof NETWORKS)[number][1];

/** msat per unit of each multiplier (`p` is a tenth of a msat, handled apart). */
const MSAT_PER_BTC = 100_000_000_000n;
const MULTIPLIERS: Record<string, bigint> = { m: MSAT_PER_BTC / 1_000n, u: MSAT_PER_BTC / 1_000_000n, n: MSAT_PER_BTC / 1_000_000_000n };

const TAG = { paymentHash: 1, routeHint: 3, features: 5, expiry: 6, fallback: 9, description: 13, secret: 16, payee: 19, descriptionHash: 23, minFinalCltv: 24, metadata: 27 } as const;
const SIGNATURE_WORDS = 104;
/** var_onion_optin, payment_secret, basic_mpp, payment_metadata. */
const KNOWN_COMPULSORY_FEATURES = new Set([8, 14, 16, 48]);
const TIMESTAMP_WORDS = 7;
export const DEFAULT_EXPIRY_SECONDS = 3600;
export const DEFAULT_MIN_FINAL_CLTV = 18;

/** A BOLT11 string that is not a valid payment request; the message says what is wrong. */
export class Bolt11Error extends Error {
  override name = 'Bolt11Error';
}

export interface DecodedInvoice {
  network: Bolt11Network;
  /** null: the payer chooses the amount ("any amount" invoice). */
  amountMsat: bigint | null;
  /** Unix seconds. */
  timestamp: number;
  paymentHash: string;
  paymentSecret: string | null;
  description: string | null;
  descriptionHash: string | null;
  expirySeconds: number;
  minFinalCltvExpiry: number;
  /** 33-byte compressed node key, hex: recovered from the signature (and equal to `n` when present). */
  payee: string;
  /** Feature bits that are set. */
  features: number[];
  /** Unix seconds. */
  expiresAt: number;
}

export interface InvoiceToEncode {
  network: Bolt11Network;
  amountMsat: bigint | null;
  timestamp: number;
  paymentHash: Uint8Array;
  paymentSecret: Uint8Array;
  description: string;
  expirySeconds: number;
  minFinalCltvExpiry: number;
}

const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString('hex');

/** 5-bit words to bytes, keeping the trailing partial byte's bits only when `pad` (the signing preimage). */
function wordsToBytes(words: number[], pad: boolean): Uint8Array {
  const out: number[] = [];
  let acc = 0;
  let bits = 0;
  for (const word of words) {
    acc = (acc << 5) | word;
    bits += 5;
    while (bits >= 8) {
      bits -= 8;
      out.push((acc >> bits) & 0xff);
    }
    acc &= (1 << bits) - 1;
  }
  if (pad && bits > 0) out.push((acc << (8 - bits)) & 0xff);
  return Uint8Array.from(out);
}

const wordsToInt = (words: number[]) => words.reduce((value, word) => value * 32 + word, 0);

function intToWords(value: number, minLength = 1): number[] {
  const words: number[] = [];
  for (let rest = value; rest > 0; rest = Math.floor(rest / 32)) words.unshift(rest % 32);
  while (words.length < minLength) words.unshift(0);
  return words;
}

function parseAmount(amount: string): bigint | null {
  if (amount === '') return null;
  const match = /^(\d+)([a-z]?)$/.exec(amount);
  if (!match) throw new Bolt11Error(`malformed amount '${amount}'`);
  const [, digits, multiplier] = match as unknown as [string, string, string];
  if (digits.length > 1 && digits.startsWith('0')) throw new Bolt11Error(`malformed amount '${amount}': leading zeros`);
  const value = BigInt(digits);
  let msat: bigint;
  if (multiplier === '') msat = value * MSAT_PER_BTC;
  else if (multiplier === 'p') {
    if (value % 10n !== 0n) throw new Bolt11Error(`malformed amount '${amount}': sub-millisatoshi precision`);
    msat = value / 10n;
  } else if (MULTIPLIERS[multiplier] !== undefined) msat = value * MULTIPLIERS[multiplier]!;
  else throw new Bolt11Error(`malformed amount '${amount}': invalid multiplier '${multiplier}'`);
  if (msat === 0n) throw new Bolt11Error(`malformed amount '${amount}': zero`);
  return msat;
}

/** The shortest exact amount: the largest unit that divides it. */
function formatAmount(msat: bigint): string {
  if (msat % MSAT_PER_BTC === 0n) return (msat / MSAT_PER_BTC).toString();
  for (const unit of ['m', 'u', 'n'] as const) {
    if (msat % MULTIPLIERS[unit]! === 0n) return `${msat / MULTIPLIERS[unit]!}${unit}`;
  }
  return `${msat * 10n}p`;
}

function splitPrefix(prefix: string): { network: Bolt11Network; amount: string } {
  if (!prefix.startsWith('ln')) throw new Bolt11Error(`prefix '${prefix}' does not start with 'ln'`);
  for (const [code, network] of NETWORKS) {
    if (prefix.startsWith(code, 2)) {
      const amount = prefix.slice(2 + code.length);
      // `lntbs...` is signet, not testnet with an amount starting with `s`: amounts start with a digit.
      if (amount === '' || /^\d/.test(amount)) return { network, amount };
    }
  }
  throw new Bolt11Error(`unknown network in prefix '${prefix}' (expected lnbc, lntb, lntbs or lnbcrt)`);
}

const networkCode = (network: Bolt11Network) => NETWORKS.find(([, name]) => name === network)![0];

/** The message a node signs: SHA-256 of the human-readable part and the data words (zero-padded to bytes). */
function signingHash(prefix: string, dataWords: number[]): Uint8Array {
  const prefixBytes = new TextEncoder().encode(prefix);
  const dataBytes = wordsToBytes(dataWords, true);
  const message = new Uint8Array(prefixBytes.length + dataBytes.length);
  message.set(prefixBytes);
  message.set(dataBytes, prefixBytes.length);
  return sha256(message);
}

export function decodeBolt11(request: string): DecodedInvoice {
  const trimmed = request.trim();
  let prefix: string;
  let words: number[];
  try {
    // BOLT11 strings exceed bech32's 90-character limit; lightning removed it.
    ({ prefix, words } = bech32.decode(trimmed as `${string}1${string}`, false));
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new Bolt11Error(/checksum/i.test(reason) ? 'bad bech32 checksum' : `malformed bech32 string: ${reason}`);
  }
  const { network, amount } = splitPrefix(prefix);
  const amountMsat = parseAmount(amount);
  if (words.length < TIMESTAMP_WORDS + SIGNATURE_WORDS) throw new Bolt11Error('too short to hold a timestamp and a signature');

  const dataWords = words.slice(0, -SIGNATURE_WORDS);
  const signatureBytes = wordsToBytes(words.slice(-SIGNATURE_WORDS), false);
  const timestamp = wordsToInt(dataWords.slice(0, TIMESTAMP_WORDS));

  const fields: Omit<DecodedInvoice, 'network' | 'amountMsat' | 'timestamp' | 'payee' | 'expiresAt'> & { payeeTag: string | null } = {
    paymentHash: '',
    paymentSecret: null,
    description: null,
    descriptionHash: null,
    expirySeconds: DEFAULT_EXPIRY_SECONDS,
    minFinalCltvExpiry: DEFAULT_MIN_FINAL_CLTV,
    features: [],
    payeeTag: null,
  };
  let seenHash = false;
  for (let at = TIMESTAMP_WORDS; at < dataWords.length; ) {
    if (at + 3 > dataWords.length) throw new Bolt11Error('truncated tagged field');
    const tag = dataWords[at]!;
    const length = dataWords[at + 1]! * 32 + dataWords[at + 2]!;
    const value = dataWords.slice(at + 3, at + 3 + length);
    if (value.length !== length) throw new Bolt11Error('tagged field runs past the signature');
    at += 3 + length;
    // Fields of an unexpected length are skipped, as BOLT #11 requires; the first valid one counts.
    switch (tag) {
      case TAG.paymentHash:
        if (length === 52 && !seenHash) {
          fields.paymentHash = hex(wordsToBytes(value, false));
          seenHash = true;
        }
        break;
      case TAG.secret:
        if (length === 52 && fields.paymentSecret === null) fields.paymentSecret = hex(wordsToBytes(value, false));
        break;
      case TAG.descriptionHash:
        if (length === 52 && fields.descriptionHash === null) fields.descriptionHash = hex(wordsToBytes(value, false));
        break;
      case TAG.payee:
        if (length === 53 && fields.payeeTag === null) fields.payeeTag = hex(wordsToBytes(value, false));
        break;
      case TAG.description:
        if (fields.description === null) {
          try {
            fields.description = new TextDecoder('utf-8', { fatal: true }).decode(wordsToBytes(value, false));
          } catch {
            throw new Bolt11Error('description is not valid UTF-8');
          }
        }
        break;
      case TAG.expiry:
        fields.expirySeconds = wordsToInt(value);
        break;
      case TAG.minFinalCltv:
        fields.minFinalCltvExpiry = wordsToInt(value);
        break;
      case TAG.features:
        fields.features = value
          .slice()
          .reverse()
          .flatMap((word, index) => [0, 1, 2, 3, 4].filter((bit) => (word >> bit) & 1).map((bit) => index * 5 + bit));
        break;
      default:
        break; // fallback addresses, route hints, metadata and unknown fields: not needed to pay
    }
  }
  if (!seenHash) throw new Bolt11Error('missing payment hash (p field)');
  if (fields.description === null && fields.descriptionHash === null) throw new Bolt11Error('missing description (d or h field)');
  // Even feature bits are compulsory: one we do not know means we cannot pay it correctly.
  const unknownRequired = fields.features.filter((bit) => bit % 2 === 0 && !KNOWN_COMPULSORY_FEATURES.has(bit));
  if (unknownRequired.length) throw new Bolt11Error(`requires unknown feature bit ${unknownRequired[0]}`);

  const hash = signingHash(prefix, dataWords);
  const recovery = signatureBytes[64]!;
  if (recovery > 3) throw new Bolt11Error(`bad signature: recovery flag ${recovery}`);
  let payee: string;
  try {
    const signature = secp256k1.Signature.fromCompact(signatureBytes.subarray(0, 64)).addRecoveryBit(recovery);
    payee = signature.recoverPublicKey(hash).toHex(true);
    if (fields.payeeTag !== null && !secp256k1.verify(signature, hash, fields.payeeTag, { lowS: false })) {
      throw new Bolt11Error('bad signature: not made by the payee node key in the n field');
    }
  } catch (error) {
    if (error instanceof Bolt11Error) throw error;
    throw new Bolt11Error('bad signature: the payee key cannot be recovered from it');
  }
  const { payeeTag, ...rest } = fields;
  void payeeTag;
  return { network, amountMsat, timestamp, ...rest, payee, expiresAt: timestamp + fields.expirySeconds };
}

function taggedField(tag: number, value: number[]): number[] {
  if (value.length >= 1024) throw new Error(`tagged field ${tag} is too long`);
  return [tag, value.length >> 5, value.length & 31, ...value];
}

/**
 * A signed payment request. Always carries `s` (payment secret), `n` (our node key, so decoders
 * verify rather than just recover), `9` (var_onion_optin and payment_secret compulsory), `x` and `c`.
 */
export function encodeBolt11(invoice: InvoiceToEncode, nodePrivateKey: Uint8Array): string {
  if (invoice.paymentHash.length !== 32 || invoice.paymentSecret.length !== 32) throw new Error('payment hash and secret are 32 bytes');
  const prefix = `ln${networkCode(invoice.network)}${invoice.amountMsat === null ? '' : formatAmount(invoice.amountMsat)}`;
  const description = bech32.toWords(new TextEncoder().encode(invoice.description));
  const words = [
    ...intToWords(invoice.timestamp, TIMESTAMP_WORDS),
    ...taggedField(TAG.paymentHash, bech32.toWords(invoice.paymentHash)),
    ...taggedField(TAG.secret, bech32.toWords(invoice.paymentSecret)),
    ...taggedField(TAG.description, description),
    ...taggedField(TAG.expiry, intToWords(invoice.expirySeconds)),
    ...taggedField(TAG.minFinalCltv, intToWords(invoice.minFinalCltvExpiry)),
    ...taggedField(TAG.payee, bech32.toWords(secp256k1.getPublicKey(nodePrivateKey, true))),
    ...taggedField(TAG.features, intToWords(2 ** 8 + 2 ** 14)),
  ];
  const signature = secp256k1.sign(signingHash(prefix, words), nodePrivateKey);
  const signatureBytes = new Uint8Array(65);
  signatureBytes.set(signature.toCompactRawBytes());
  signatureBytes[64] = signature.recovery;
  return bech32.encode(prefix, [...words, ...bech32.toWords(signatureBytes)], false);
}

export const networkForEnvironment = (environment: 'sandbox' | 'live'): Bolt11Network => (environment === 'live' ? 'mainnet' : 'testnet');
