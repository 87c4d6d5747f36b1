import { sha256 } from '@noble/hashes/sha2';
import { secp256k1 } from '@noble/curves/secp256k1';
import { bech32 } from '@scure/base';
import type * as Libsecp256k1 from 'tiny-secp256k1';

/**
 * libsecp256k1 compiled to WebAssembly: signs in about 90 µs and verifies in about 180 µs where
 * @noble/curves takes 210 and 1,200 (bench/HISTORY.md, lightning-invoices), the same RFC 6979 signatures.
 * Loaded on first use: its compiled module holds about 10 MiB, which a process that never signs nor
 * checks a signature (the worker's payments decode with `verifiedPayee`) does not carry.
 */
let loaded: typeof Libsecp256k1 | undefined;
// eslint-disable-next-line @typescript-eslint/no-require-imports -- synchronous on first use (see above); import() would make every caller async
const libsecp256k1 = (): typeof Libsecp256k1 => (loaded ??= require('tiny-secp256k1') as typeof Libsecp256k1);

/**
 * BOLT #11 payment requests: encoder (signed with a node key) and decoder. The decoder enforces
 * the reader requirements of BOLT #11 (lightning/bolts 11-payment-encoding.md, 2026 text):
 * bech32 without the length limit, prefix and amount, fixed field lengths (p, h, s: 52, n: 53; other
 * lengths skipped),
 * mandatory p and s, exactly one of d and h, minimal x, c and 9, feature bits (unknown even bits
 * and missing dependencies refused), the signature (verified against `n`, low-S only, when `n`
 * is present; public-key recovery accepting both S forms otherwise) and, when the caller knows
 * the description, the `h` commitment.
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
/** The letter of each tag, for messages. */
const TAG_LETTER: Record<number, string> = { 1: 'p', 3: 'r', 5: '9', 6: 'x', 9: 'f', 13: 'd', 16: 's', 19: 'n', 23: 'h', 24: 'c', 27: 'm' };
/**
 * Fields with a fixed `data_length`: a field of any other length is skipped, as the example "Same, but
 * including fields which must be ignored" requires (a future variant of a different length reaches old
 * readers as an unknown field). The 2026 reader text says fail, contradicting that example: we keep the example.
 */
const FIXED_LENGTH: Record<number, number> = { [TAG.paymentHash]: 52, [TAG.secret]: 52, [TAG.descriptionHash]: 52, [TAG.payee]: 53 };
/** Fields an invoice carries at most once (`r` and `f` may repeat). */
const SINGLE_FIELDS = new Set<number>([TAG.paymentHash, TAG.secret, TAG.description, TAG.descriptionHash, TAG.payee, TAG.expiry, TAG.minFinalCltv, TAG.features, TAG.metadata]);
const SIGNATURE_WORDS = 104;
/** var_onion_optin, payment_secret, basic_mpp, payment_metadata. */
const KNOWN_COMPULSORY_FEATURES = new Set([8, 14, 16, 48]);
/** BOLT #9 dependencies of the features an invoice may carry: basic_mpp needs payment_secret. */
const FEATURE_DEPENDENCIES: { feature: string; bits: [number, number]; needs: string; neededBits: [number, number] }[] = [
  { feature: 'basic_mpp', bits: [16, 17], needs: 'payment_secret', neededBits: [14, 15] },
];
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
  /** Always present: BOLT #11 readers fail invoices without a valid `s` field. */
  paymentSecret: string;
  /** The `m` field, hex, to send as payment_metadata; null when absent. */
  paymentMetadata: string | null;
  description: string | null;
  descriptionHash: string | null;
  expirySeconds: number;
  minFinalCltvExpiry: number;
  /** 33-byte compressed node key, hex: the `n` field when present (the signature verified against it), else recovered from the signature. */
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

export interface DecodeOptions {
  /** The description the payer holds for an invoice with an `h` field: its SHA-256 must equal `h`. */
  description?: string;
  /**
   * The payee this very request's signature was found to name when the payment was accepted (its
   * stored destination): the signature, an elliptic-curve recovery or verification costing about
   * 2 ms of CPU, is not checked again.
   */
  verifiedPayee?: string;
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

/** Big-endian 5-bit words, minimal (no leading zero word; 0 is no word at all) unless `minLength` asks for more. */
function intToWords(value: number, minLength = 0): number[] {
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

/** A variable-length integer field (`x`, `c`): minimal (no leading zero word), as BOLT #11 readers SHOULD require, and exact in a JS number. */
function readInteger(letter: string, value: number[]): number {
  if (value[0] === 0) throw new Bolt11Error(`${letter} field is not minimally encoded (leading zero)`);
  const result = wordsToInt(value);
  if (!Number.isSafeInteger(result)) throw new Bolt11Error(`${letter} field value is too large`);
  return result;
}

/** Feature bits that are set; the `9` field is big-endian, bit 0 the least significant bit of the last word. */
function readFeatures(value: number[]): number[] {
  if (value[0] === 0) throw new Bolt11Error('9 field is not minimally encoded (leading zero)');
  return value
    .slice()
    .reverse()
    .flatMap((word, index) => [0, 1, 2, 3, 4].filter((bit) => (word >> bit) & 1).map((bit) => index * 5 + bit));
}

function checkFeatures(features: number[]) {
  // Even feature bits are compulsory: one we do not know means we cannot pay it correctly. Odd ones are ignored.
  const unknownRequired = features.filter((bit) => bit % 2 === 0 && !KNOWN_COMPULSORY_FEATURES.has(bit));
  if (unknownRequired.length) throw new Bolt11Error(`requires unknown feature bit ${unknownRequired[0]}`);
  // BOLT #9: a feature vector that does not set all known transitive dependencies must not be paid.
  const set = new Set(features);
  for (const { feature, bits, needs, neededBits } of FEATURE_DEPENDENCIES) {
    if (bits.some((bit) => set.has(bit)) && !neededBits.some((bit) => set.has(bit))) {
      throw new Bolt11Error(`feature ${feature} (bit ${bits.find((bit) => set.has(bit))}) is set without its dependency ${needs} (bit ${neededBits[0]} or ${neededBits[1]})`);
    }
  }
}

interface Fields {
  paymentHash: string | null;
  paymentSecret: string | null;
  paymentMetadata: string | null;
  description: string | null;
  descriptionHash: string | null;
  expirySeconds: number;
  minFinalCltvExpiry: number;
  features: number[];
  payeeTag: string | null;
}

function readFields(dataWords: number[]): Fields {
  const fields: Fields = {
    paymentHash: null,
    paymentSecret: null,
    paymentMetadata: null,
    description: null,
    descriptionHash: null,
    expirySeconds: DEFAULT_EXPIRY_SECONDS,
    // BOLT #11: without a `c` field, the payment uses a final expiry delta of at least 18.
    minFinalCltvExpiry: DEFAULT_MIN_FINAL_CLTV,
    features: [],
    payeeTag: null,
  };
  /** The words of each single-valued field seen, to tell harmless repeats from conflicting ones. */
  const seen = new Map<number, string>();
  for (let at = TIMESTAMP_WORDS; at < dataWords.length; ) {
    if (at + 3 > dataWords.length) throw new Bolt11Error('truncated tagged field');
    const tag = dataWords[at]!;
    const length = dataWords[at + 1]! * 32 + dataWords[at + 2]!;
    const value = dataWords.slice(at + 3, at + 3 + length);
    if (value.length !== length) throw new Bolt11Error('tagged field runs past the signature');
    at += 3 + length;
    const letter = TAG_LETTER[tag] ?? `type ${tag}`;
    const fixed = FIXED_LENGTH[tag];
    if (fixed !== undefined && length !== fixed) continue;
    if (SINGLE_FIELDS.has(tag)) {
      const previous = seen.get(tag);
      // Two payment hashes are refused outright (payers disagreeing on which one counts has been
      // exploited; lightning/bolts#1357); other repeats only when they differ.
      if (previous !== undefined && (tag === TAG.paymentHash || previous !== value.join(','))) throw new Bolt11Error(`more than one ${letter} field`);
      seen.set(tag, value.join(','));
      if (previous !== undefined) continue;
    }
    switch (tag) {
      case TAG.paymentHash:
        fields.paymentHash = hex(wordsToBytes(value, false));
        break;
      case TAG.secret:
        fields.paymentSecret = hex(wordsToBytes(value, false));
        break;
      case TAG.descriptionHash:
        fields.descriptionHash = hex(wordsToBytes(value, false));
        break;
      case TAG.payee:
        fields.payeeTag = hex(wordsToBytes(value, false));
        break;
      case TAG.metadata:
        fields.paymentMetadata = hex(wordsToBytes(value, false));
        break;
      case TAG.description:
        try {
          fields.description = new TextDecoder('utf-8', { fatal: true }).decode(wordsToBytes(value, false));
        } catch {
          throw new Bolt11Error('description is not valid UTF-8');
        }
        break;
      case TAG.expiry:
        fields.expirySeconds = readInteger('x', value);
        break;
      case TAG.minFinalCltv:
        fields.minFinalCltvExpiry = readInteger('c', value);
        break;
      case TAG.features:
        fields.features = readFeatures(value);
        break;
      default:
        break; // fallback addresses (any version), route hints and unknown fields: skipped, not needed to pay
    }
  }
  return fields;
}

/**
 * The payee key. With a valid `n` field the signature is verified against it (no recovery) and must
 * be low-S; without one the key is recovered, high-S and low-S signatures alike (BOLT #11).
 */
function checkSignature(hash: Uint8Array, signatureBytes: Uint8Array, payeeTag: string | null): string {
  const recovery = signatureBytes[64]!;
  if (recovery > 3) throw new Bolt11Error(`bad signature: recovery flag ${recovery}`);
  let signature: ReturnType<typeof secp256k1.Signature.fromCompact>;
  try {
    signature = secp256k1.Signature.fromCompact(signatureBytes.subarray(0, 64));
  } catch {
    throw new Bolt11Error('bad signature: r or s out of range');
  }
  if (payeeTag !== null) {
    const payee = Buffer.from(payeeTag, 'hex');
    if (payee.length !== 33 || !libsecp256k1().isPoint(payee)) throw new Bolt11Error('n field is not a valid public key');
    if (signature.hasHighS()) throw new Bolt11Error('bad signature: not in low-S form, as required when the n field names the payee');
    if (!libsecp256k1().verify(hash, payee, signatureBytes.subarray(0, 64), true)) throw new Bolt11Error('bad signature: not made by the payee node key in the n field');
    return payeeTag;
  }
  const recovered = recoverPayee(hash, signatureBytes.subarray(0, 64), recovery);
  if (!recovered) throw new Bolt11Error('bad signature: the payee key cannot be recovered from it');
  return Buffer.from(recovered).toString('hex');
}

/** The compressed key that made `signature` over `hash`, or null; either S form (libsecp256k1 recovers high-S as low-S would). */
function recoverPayee(hash: Uint8Array, signature: Uint8Array, recovery: number): Uint8Array | null {
  try {
    return libsecp256k1().recover(hash, signature, recovery as 0 | 1 | 2 | 3, true);
  } catch {
    return null;
  }
}

/**
 * Decodes and checks a payment request; every fault is a Bolt11Error naming it. `options.description`
 * is the description the payer holds for an `h` invoice: checked against the hash when given.
 */
export function decodeBolt11(request: string, options: DecodeOptions = {}): DecodedInvoice {
  const trimmed = request.trim();
  let prefix: string;
  let words: number[];
  try {
    // BOLT11 strings exceed bech32's 90-character limit; lightning removed it (no limit at all: not 1023 either).
    // Upper case is accepted, mixed case refused, as BIP-173 says.
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

  const { payeeTag, paymentHash, paymentSecret, ...fields } = readFields(dataWords);
  if (paymentHash === null) throw new Bolt11Error('missing payment hash (p field)');
  if (paymentSecret === null) throw new Bolt11Error('missing payment secret (s field)');
  if (fields.description === null && fields.descriptionHash === null) throw new Bolt11Error('missing description (d or h field)');
  if (fields.description !== null && fields.descriptionHash !== null) throw new Bolt11Error('both a description (d field) and a description hash (h field)');
  checkFeatures(fields.features);

  const payee = options.verifiedPayee ?? checkSignature(signingHash(prefix, dataWords), signatureBytes, payeeTag);

  if (fields.descriptionHash !== null && options.description !== undefined) {
    if (hex(sha256(new TextEncoder().encode(options.description))) !== fields.descriptionHash) {
      throw new Bolt11Error('description hash (h field) does not match the description');
    }
  }
  return { network, amountMsat, timestamp, paymentHash, paymentSecret, ...fields, payee, expiresAt: timestamp + fields.expirySeconds };
}

function taggedField(tag: number, value: number[]): number[] {
  if (value.length >= 1024) throw new Error(`tagged field ${tag} is too long`);
  return [tag, value.length >> 5, value.length & 31, ...value];
}

/**
 * A signed payment request. Always carries `s` (payment secret), `n` (our node key, so decoders
 * verify rather than just recover), `9` (var_onion_optin and payment_secret compulsory), `x` and `c`.
 * `payee` is the node key's compressed public key when the caller holds it (deriving it costs about as
 * much as the signature); by default it is derived from the private key.
 */
export function encodeBolt11(invoice: InvoiceToEncode, nodePrivateKey: Uint8Array, payee: Uint8Array = libsecp256k1().pointFromScalar(nodePrivateKey, true)!): string {
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
    ...taggedField(TAG.payee, bech32.toWords(payee)),
    ...taggedField(TAG.features, intToWords(2 ** 8 + 2 ** 14)),
  ];
  const { signature, recoveryId } = libsecp256k1().signRecoverable(signingHash(prefix, words), nodePrivateKey);
  const signatureBytes = new Uint8Array(65);
  signatureBytes.set(signature);
  signatureBytes[64] = recoveryId;
  return bech32.encode(prefix, [...words, ...bech32.toWords(signatureBytes)], false);
}

export const networkForEnvironment = (environment: 'sandbox' | 'live'): Bolt11Network => (environment === 'live' ? 'mainnet' : 'testnet');
