import { ed25519 } from '@noble/curves/ed25519';
import { secp256k1 } from '@noble/curves/secp256k1';
import { hmac } from '@noble/hashes/hmac';
import { sha256 } from '@noble/hashes/sha256';
import { sha512 } from '@noble/hashes/sha512';
import { keccak_256 } from '@noble/hashes/sha3';
import { base58, base58check } from '@scure/base';
import { HDKey } from '@scure/bip32';
import * as btc from '@scure/btc-signer';
import { bytesToHex, getAddress } from 'viem';
import type { ChainId } from '../catalogue/service';

/** Bitcoin's address formats, each with its own BIP purpose. */
export const BITCOIN_ADDRESS_FORMATS = ['p2wpkh', 'p2tr', 'p2pkh'] as const;
export type BitcoinAddressFormat = (typeof BITCOIN_ADDRESS_FORMATS)[number];

/** Account-based chains have one address form each; the API reports it as the address's `format`. */
export const ACCOUNT_ADDRESS_FORMATS = { ethereum: 'eip55', tron: 'base58check', solana: 'base58' } as const;
export type AddressFormat = BitcoinAddressFormat | (typeof ACCOUNT_ADDRESS_FORMATS)[keyof typeof ACCOUNT_ADDRESS_FORMATS];

export type Curve = 'secp256k1' | 'ed25519';

/** Where a key sits in the organization's tree. */
export interface KeyLocation {
  chain: ChainId;
  /** Sandbox networks: Bitcoin's testnet encodings (tb1…, m/n…). */
  testnet: boolean;
  /** The BIP-44 coin type of the path: the wallet's own (coinTypeFor when it was made). */
  coinType: number;
  format: AddressFormat;
  /** The wallet's BIP-44 account. */
  account: number;
  /** The address's index within the wallet. */
  index: number;
}

export interface DerivedKey {
  curve: Curve;
  path: string;
  address: string;
  /** Compressed SEC1 (secp256k1) or the 32-byte ed25519 key. */
  publicKey: Uint8Array;
  /** Only ever held in memory for one request; callers wipe it after use. */
  privateKey: Uint8Array;
}

const BIP_PURPOSE: Record<BitcoinAddressFormat, number> = { p2pkh: 44, p2wpkh: 84, p2tr: 86 };
/** SLIP-44 coin types of the main networks; every test network shares coin type 1. */
const MAINNET_COIN_TYPE: Record<ChainId, number> = { bitcoin: 0, ethereum: 60, tron: 195, solana: 501 };
export const TESTNET_COIN_TYPE = 1;
const HARDENED = 0x80000000;

export const curveOf = (chain: ChainId): Curve => (chain === 'solana' ? 'ed25519' : 'secp256k1');

/** Bitcoin: the requested format, p2wpkh by default. Other chains: their only format (a requested one is ignored). */
export function addressFormatFor(chain: ChainId, requested?: BitcoinAddressFormat): AddressFormat {
  return chain === 'bitcoin' ? (requested ?? 'p2wpkh') : ACCOUNT_ADDRESS_FORMATS[chain];
}

/**
 * The coin type a new wallet derives under: the chain's own on the main network, 1 on every test
 * network (BIP-44), so a sandbox key never sits on a path that holds mainnet funds. Wallets keep the
 * coin type they were made with (sandbox Ethereum, Tron and Solana wallets made before this rule
 * keep their chain's).
 */
export const coinTypeFor = (chain: ChainId, testnet: boolean): number => (testnet ? TESTNET_COIN_TYPE : MAINNET_COIN_TYPE[chain]);

/**
 * BIP-44/84/86 for Bitcoin (`m/purpose'/coin'/account'/0/index`), BIP-44 for Ethereum and Tron,
 * and for Solana the all-hardened SLIP-10 form that Solana wallets use (`m/44'/coin'/account'/index'`).
 */
export function derivationPath(location: KeyLocation): string {
  const { chain, coinType, account, index } = location;
  if (chain === 'bitcoin') {
    const purpose = BIP_PURPOSE[location.format as BitcoinAddressFormat];
    if (!purpose) throw new Error(`'${location.format}' is not a Bitcoin address format`);
    return `m/${purpose}'/${coinType}'/${account}'/0/${index}`;
  }
  if (chain === 'solana') return `m/44'/${coinType}'/${account}'/${index}'`;
  return `m/44'/${coinType}'/${account}'/0/${index}`;
}

/** The key and address at `location` of the tree grown from a BIP-39 seed (the 64-byte PBKDF2 output). */
export function deriveKey(seed: Uint8Array, location: KeyLocation): DerivedKey {
  const path = derivationPath(location);
  if (location.chain === 'solana') {
    const privateKey = slip10Ed25519(seed, path);
    const publicKey = ed25519.getPublicKey(privateKey);
    return { curve: 'ed25519', path, address: base58.encode(publicKey), publicKey, privateKey };
  }
  const node = bip32Derive(seed, path);
  const privateKey = Uint8Array.from(node.privateKey!);
  const publicKey = Uint8Array.from(node.publicKey!);
  node.wipePrivateData();
  return { curve: 'secp256k1', path, address: secp256k1Address(location, publicKey), publicKey, privateKey };
}

/**
 * The deepest node of `location`'s path that only the seed can give: secp256k1, the account
 * (`m/purpose'/coin'/account'`), below which addresses derive from its extended public key;
 * ed25519 (Solana), which derives only hardened, the address's own key.
 */
export function hardenedPath(location: KeyLocation): string {
  const path = derivationPath(location);
  return location.chain === 'solana' ? path : path.split('/').slice(0, 4).join('/');
}

/**
 * The public side of `location`'s hardened node (hardenedPath): secp256k1, the account's extended
 * public key (xpub); ed25519, the address's public key (hex). The private keys met on the way are wiped.
 */
export function derivePublicNode(seed: Uint8Array, location: KeyLocation): { path: string; publicKey: string } {
  const path = hardenedPath(location);
  if (location.chain === 'solana') {
    const privateKey = slip10Ed25519(seed, path);
    const publicKey = ed25519.getPublicKey(privateKey);
    privateKey.fill(0);
    return { path, publicKey: bytesToHex(publicKey).slice(2) };
  }
  const node = bip32Derive(seed, path);
  const publicKey = node.publicExtendedKey;
  node.wipePrivateData();
  return { path, publicKey };
}

/** The address at `location` from its hardened node's public side (derivePublicNode): no seed, no private key. */
export function addressFromPublicNode(location: KeyLocation, publicNode: string): { address: string; path: string; publicKey: Uint8Array } {
  const path = derivationPath(location);
  if (location.chain === 'solana') {
    const publicKey = Uint8Array.from(Buffer.from(publicNode, 'hex'));
    return { address: base58.encode(publicKey), path, publicKey };
  }
  // Below the account: the external chain (0), then the address's index, both unhardened.
  const publicKey = HDKey.fromExtendedKey(publicNode).deriveChild(0).deriveChild(location.index).publicKey!;
  return { address: secp256k1Address(location, publicKey), path, publicKey };
}

/** BIP-32 private derivation one step at a time, each parent's private key wiped once its child exists. */
function bip32Derive(seed: Uint8Array, path: string): HDKey {
  let node = HDKey.fromMasterSeed(seed);
  for (const segment of path.split('/').slice(1)) {
    const hardened = segment.endsWith("'");
    const child = node.deriveChild(Number(hardened ? segment.slice(0, -1) : segment) + (hardened ? HARDENED : 0));
    node.wipePrivateData();
    node = child;
  }
  return node;
}

/** The address a compressed secp256k1 public key has at `location` (also how tests check recovered keys). */
export function secp256k1Address(location: Pick<KeyLocation, 'chain' | 'testnet' | 'format'>, publicKey: Uint8Array): string {
  switch (location.chain) {
    case 'bitcoin': {
      const network = location.testnet ? btc.TEST_NETWORK : btc.NETWORK;
      if (location.format === 'p2tr') return btc.p2tr(publicKey.slice(1), undefined, network).address!;
      if (location.format === 'p2pkh') return btc.p2pkh(publicKey, network).address!;
      return btc.p2wpkh(publicKey, network).address!;
    }
    case 'ethereum':
      return getAddress(bytesToHex(accountHash(publicKey)));
    case 'tron':
      return base58check(sha256).encode(Uint8Array.from([0x41, ...accountHash(publicKey)]));
    default:
      throw new Error(`${location.chain} does not use secp256k1 addresses`);
  }
}

/** The last 20 bytes of keccak256 over the uncompressed public key without its 0x04 prefix (Ethereum and Tron). */
function accountHash(compressedPublicKey: Uint8Array): Uint8Array {
  const uncompressed = secp256k1.ProjectivePoint.fromHex(compressedPublicKey).toRawBytes(false);
  return keccak_256(uncompressed.slice(1)).slice(12);
}

/** SLIP-10 private derivation on ed25519, where every step is hardened. */
export function slip10Ed25519(seed: Uint8Array, path: string): Uint8Array {
  const segments = path.split('/');
  if (segments[0] !== 'm') throw new Error(`invalid derivation path '${path}'`);
  let digest = hmac(sha512, new TextEncoder().encode('ed25519 seed'), seed);
  for (const segment of segments.slice(1)) {
    if (!/^\d+'$/.test(segment)) throw new Error(`ed25519 derivation needs hardened steps only: '${path}'`);
    const index = Number(segment.slice(0, -1)) + HARDENED;
    const data = new Uint8Array(37);
    data.set(digest.subarray(0, 32), 1);
    new DataView(data.buffer).setUint32(33, index >>> 0, false);
    const next = hmac(sha512, digest.subarray(32), data);
    digest.fill(0);
    digest = next;
  }
  const key = digest.slice(0, 32);
  digest.fill(0);
  return key;
}
