import { ed25519 } from '@noble/curves/ed25519';
import { secp256k1 } from '@noble/curves/secp256k1';
import { sha256 } from '@noble/hashes/sha256';
import { base58, base58check } from '@scure/base';
import { bytesToHex, getAddress } from 'viem';
import type { ChainId } from '../../catalogue/service';
import type { FeeLevel } from '../provider';

/**
 * The devnet's own constants per chain: who its faucet is, where its tokens live, how much a block
 * holds and where fees start. Public by design, like a testnet's: docs/devnet.md lists the values.
 */

/** The devnet answers `eth_chainId` with Sepolia's id, since sandbox Ethereum wallets say `sepolia`. */
export const DEVNET_ETHEREUM_CHAIN_ID = 11_155_111;
/** Tron's eth-compatible `eth_chainId` on Nile, the network sandbox Tron wallets name. */
export const DEVNET_TRON_CHAIN_ID = 3_448_148_188;

/**
 * Every secret-looking value of the devnet comes from this public seed phrase: the faucet key of a
 * chain is sha256(`<seed>/faucet/<chain>`), a token's contract or mint is sha256(`<seed>/token/<asset>`).
 */
export const DEVNET_SEED = 'custody-platform devnet';

const seeded = (label: string) => sha256(new TextEncoder().encode(`${DEVNET_SEED}/${label}`));

/** The faucet's private key on `chain`: a public test key of the devnet itself, never an organization's. */
export const faucetPrivateKey = (chain: ChainId): Uint8Array => seeded(`faucet/${chain}`);

/** The faucet's public key in the chain's curve (compressed secp256k1, or ed25519 on Solana). */
export const faucetPublicKey = (chain: ChainId): Uint8Array =>
  chain === 'solana' ? ed25519.getPublicKey(faucetPrivateKey(chain)) : secp256k1.getPublicKey(faucetPrivateKey(chain), true);

/** The token contract (Ethereum, Tron) or mint (Solana) of each devnet token, in the chain's address form. */
export const DEVNET_TOKENS: Readonly<Record<ChainId, Readonly<Record<string, string>>>> = {
  bitcoin: {},
  ethereum: {
    USDC_ETH: getAddress(bytesToHex(seeded('token/USDC_ETH').slice(12))),
    USDT_ETH: getAddress(bytesToHex(seeded('token/USDT_ETH').slice(12))),
  },
  tron: { USDT_TRX: base58check(sha256).encode(Uint8Array.from([0x41, ...seeded('token/USDT_TRX').slice(12)])) },
  solana: { USDC_SOL: base58.encode(seeded('token/USDC_SOL')) },
};

export interface DevnetChainParams {
  nativeAssetId: string;
  /** How a block holds transactions: gas (Ethereum), virtual bytes (Bitcoin), a count (Tron, Solana). */
  blockCapacity: bigint;
  /** What each fee level offers when the mempool is shallow: sat/vB, priority wei per gas, or the flat fee. */
  feeFloors: Record<FeeLevel, bigint>;
  /** Whether a deep mempool raises the levels above their floors; Tron's fee is its bandwidth, which no bid changes. */
  feeMovesWithLoad: boolean;
  /** The faucet's genesis balance of each asset, base units. */
  genesis: Readonly<Record<string, bigint>>;
  /** How the chain writes a 32-byte hash (blocks, and txids where they are hashes). */
  formatHash: (bytes: Uint8Array) => string;
}

const hex = (bytes: Uint8Array) => bytesToHex(bytes).slice(2);

export const DEVNET_PARAMS: Record<ChainId, DevnetChainParams> = {
  bitcoin: {
    nativeAssetId: 'BTC',
    // 4 million weight units.
    blockCapacity: 1_000_000n,
    feeFloors: { low: 1n, medium: 2n, high: 3n },
    feeMovesWithLoad: true,
    genesis: { BTC: 1_000_000n * 100_000_000n },
    formatHash: hex,
  },
  ethereum: {
    nativeAssetId: 'ETH',
    blockCapacity: 30_000_000n,
    feeFloors: { low: 100_000_000n, medium: 1_000_000_000n, high: 2_000_000_000n },
    feeMovesWithLoad: true,
    genesis: { ETH: 1_000_000_000n * 10n ** 18n, USDC_ETH: 10n ** 15n, USDT_ETH: 10n ** 15n },
    formatHash: bytesToHex,
  },
  tron: {
    nativeAssetId: 'TRX',
    blockCapacity: 1_000n,
    // A TRX transfer burns the bandwidth of its ~268 bytes at 1,000 sun a byte: the same at every level and under any load.
    feeFloors: { low: 268_000n, medium: 268_000n, high: 268_000n },
    feeMovesWithLoad: false,
    genesis: { TRX: 1_000_000_000n * 1_000_000n, USDT_TRX: 10n ** 15n },
    formatHash: hex,
  },
  solana: {
    nativeAssetId: 'SOL',
    blockCapacity: 1_000n,
    // 5000 lamports per signature, plus a priority fee at the higher levels.
    feeFloors: { low: 5_000n, medium: 10_000n, high: 50_000n },
    feeMovesWithLoad: true,
    // Solana's JSON-RPC writes lamports as JSON numbers: the faucet stays below 2^53.
    genesis: { SOL: 1_000_000n * 1_000_000_000n, USDC_SOL: 10n ** 15n },
    formatHash: (bytes) => base58.encode(bytes),
  },
};

/** Bitcoin: what each block's coinbase pays the faucet besides the fees (no halving is modelled). */
export const BITCOIN_BLOCK_SUBSIDY = 50n * 100_000_000n;
/** Bitcoin Core's dust threshold for the outputs it relays (p2pkh at 3 sat/vB). */
export const BITCOIN_DUST_LIMIT = 546n;
/** EIP-1559: the base fee of the first block, and how far it moves per block (1/8 at most). */
export const ETHEREUM_INITIAL_BASE_FEE = 1_000_000_000n;
export const ETHEREUM_BASE_FEE_CHANGE_DENOMINATOR = 8n;
export const ETHEREUM_ELASTICITY_MULTIPLIER = 2n;

/** A txid in the form the ledger keys it by: hex lower-case (Tron without 0x); Solana signatures as written. */
export function canonicalTxid(chain: ChainId, txid: string): string {
  if (chain === 'solana') return txid;
  const lower = txid.toLowerCase();
  return chain === 'tron' ? lower.replace(/^0x/, '') : lower;
}
