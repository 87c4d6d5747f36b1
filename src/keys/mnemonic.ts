import { pbkdf2, randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import { sha256 } from '@noble/hashes/sha256';
import { wordlist } from '@scure/bip39/wordlists/english';

/**
 * BIP-39 on bytes: a mnemonic is held as its UTF-8 bytes from the moment it exists to PBKDF2 and
 * then wiped, never as a JS string (a string cannot be wiped and lingers in the heap until a
 * collection). English words only, joined by single spaces, which are already NFKD-normalized.
 */
const pbkdf2Async = promisify(pbkdf2);
const SPACE = 0x20;
/** The English list, sorted, as bytes: words are looked up by comparing bytes, never by making strings. */
const WORDS: readonly Buffer[] = wordlist.map((word) => Buffer.from(word, 'ascii'));
const WORD_COUNTS = [12, 15, 18, 21, 24];

/** A fresh 24-word mnemonic (256 bits of entropy), as bytes; the caller wipes it. */
export function generateMnemonicBytes(): Buffer {
  const entropy = randomBytes(32);
  try {
    return entropyToMnemonicBytes(entropy);
  } finally {
    entropy.fill(0);
  }
}

function entropyToMnemonicBytes(entropy: Uint8Array): Buffer {
  // entropy || its checksum: the first entropy-bits/32 bits of its SHA-256, here one byte or less.
  const checksum = sha256(entropy);
  const bits = Buffer.alloc(entropy.length + 1);
  bits.set(entropy);
  bits[entropy.length] = checksum[0]!;
  checksum.fill(0);
  const count = ((entropy.length * 8) / 32) * 3;
  const indices = new Uint16Array(count);
  for (let word = 0; word < count; word++) indices[word] = readBits(bits, word * 11, 11);
  bits.fill(0);
  let length = count - 1;
  for (const index of indices) length += WORDS[index]!.length;
  const mnemonic = Buffer.alloc(length);
  let offset = 0;
  indices.forEach((index, word) => {
    if (word > 0) mnemonic[offset++] = SPACE;
    offset += WORDS[index]!.copy(mnemonic, offset);
  });
  indices.fill(0);
  return mnemonic;
}

/** True when `mnemonic` is English words joined by single spaces, of a BIP-39 length, with a valid checksum. */
export function isValidMnemonicBytes(mnemonic: Uint8Array): boolean {
  const words = splitWords(mnemonic);
  if (!WORD_COUNTS.includes(words.length)) return false;
  const indices = words.map(wordIndex);
  const bits = Buffer.alloc(Math.ceil((words.length * 11) / 8));
  try {
    if (indices.some((index) => index < 0)) return false;
    indices.forEach((index, word) => writeBits(bits, word * 11, 11, index));
    const entropyBytes = (words.length * 11 * 32) / 33 / 8;
    const checksumBits = (entropyBytes * 8) / 32;
    const hash = sha256(bits.subarray(0, entropyBytes));
    const valid = readBits(bits, entropyBytes * 8, checksumBits) === hash[0]! >> (8 - checksumBits);
    hash.fill(0);
    return valid;
  } finally {
    bits.fill(0);
    indices.fill(0);
  }
}

/** BIP-39 seed: PBKDF2-HMAC-SHA512, 2048 rounds, salt "mnemonic" (no passphrase); native, off the event loop. The caller wipes it. */
export function mnemonicToSeed(mnemonic: Uint8Array): Promise<Buffer> {
  return pbkdf2Async(mnemonic, Buffer.from('mnemonic', 'ascii'), 2048, 64, 'sha512');
}

/** Views of the words (no copies); an empty list for anything but lowercase a-z words separated by single spaces. */
function splitWords(mnemonic: Uint8Array): Uint8Array[] {
  const words: Uint8Array[] = [];
  let start = 0;
  for (let at = 0; at <= mnemonic.length; at++) {
    if (at < mnemonic.length && mnemonic[at] !== SPACE) {
      const byte = mnemonic[at]!;
      if (byte < 0x61 || byte > 0x7a) return [];
      continue;
    }
    if (at === start) return [];
    words.push(mnemonic.subarray(start, at));
    start = at + 1;
  }
  return words;
}

/** The word's place in the (sorted) list by binary search over bytes; -1 when it is not in the list. */
function wordIndex(word: Uint8Array): number {
  let low = 0;
  let high = WORDS.length - 1;
  while (low <= high) {
    const middle = (low + high) >> 1;
    const order = Buffer.compare(WORDS[middle]!, word);
    if (order === 0) return middle;
    if (order < 0) low = middle + 1;
    else high = middle - 1;
  }
  return -1;
}

function readBits(bytes: Uint8Array, offset: number, count: number): number {
  let value = 0;
  for (let bit = offset; bit < offset + count; bit++) value = (value << 1) | ((bytes[bit >> 3]! >> (7 - (bit & 7))) & 1);
  return value;
}

function writeBits(bytes: Uint8Array, offset: number, count: number, value: number): void {
  for (let i = 0; i < count; i++) {
    if ((value >> (count - 1 - i)) & 1) bytes[(offset + i) >> 3]! |= 1 << (7 - ((offset + i) & 7));
  }
}
