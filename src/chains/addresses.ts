import { base58, base58check } from '@scure/base';
import * as btc from '@scure/btc-signer';
import { sha256 } from '@noble/hashes/sha256';
import { getAddress, isAddress } from 'viem';
import type { Environment } from '../api-keys/entities';
import type { ChainId } from '../catalogue/service';

const tronBase58 = base58check(sha256);

/**
 * The canonical form of an address on the environment's network, or null when it is not one:
 * Bitcoin on mainnet for live keys and testnet forms for sandbox keys (lower-case bech32),
 * Ethereum EIP-55 checksummed (see ethereumAddress), Tron base58check of a 0x41 account, Solana
 * base58 of 32 bytes. Comparisons between addresses go through this form.
 */
export function canonicalAddress(chain: ChainId, environment: Environment, address: string): string | null {
  try {
    switch (chain) {
      case 'bitcoin': {
        const network = environment === 'live' ? btc.NETWORK : btc.TEST_NETWORK;
        const normalized = /^(bc1|tb1)/i.test(address) ? address.toLowerCase() : address;
        btc.Address(network).decode(normalized);
        return normalized;
      }
      case 'ethereum':
        return ethereumAddress(address);
      case 'tron': {
        const bytes = tronBase58.decode(address);
        return bytes.length === 21 && bytes[0] === 0x41 ? address : null;
      }
      case 'solana':
        return base58.decode(address).length === 32 ? address : null;
    }
  } catch {
    return null;
  }
}

/**
 * EIP-55: an address in one case (all lower or all upper hex digits) carries no checksum and is
 * accepted; a mixed-case one is a checksum and must be the right one, since a wrong one is a mistyped
 * address.
 */
function ethereumAddress(address: string): string | null {
  if (!isAddress(address, { strict: false })) return null;
  const digits = address.slice(2);
  const checksummed = getAddress(address);
  const oneCase = digits === digits.toLowerCase() || digits === digits.toUpperCase();
  return oneCase || address === checksummed ? checksummed : null;
}

/** An address as the sandbox's devnet keys it: its canonical form, or as given when it is none (the devnet then refuses it). */
export const sandboxAddress = (chain: ChainId, address: string): string => canonicalAddress(chain, 'sandbox', address) ?? address;
