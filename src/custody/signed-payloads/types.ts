/**
 * What a payload signed through `POST /v1/wallets/:id/sign` authorizes, as far as it can be read:
 * the movement gate judges a signature by it (custody/signing.ts). Each format has a module of its
 * own (evm, eip712, tron, solana, bitcoin); `decodeSignedPayload` (index.ts) picks by chain and hash function.
 */
export type SignedPayloadKind = 'evm_transaction' | 'eip712_typed_data' | 'eip7702_authorization' | 'tron_transaction' | 'solana_message' | 'bitcoin_psbt' | 'unknown';

/** The asset a decoded payload moves or approves: the chain's native coin, or a token by its contract (mint). */
export type SignedAsset = { native: true } | { contract: string };

export interface DecodedSignedPayload {
  kind: SignedPayloadKind;
  /** Where value goes: a transfer's recipient, a called contract, an approval's or permit's spender, a 7702 delegate. Absent when unknown. */
  destination?: string;
  /** Who the signature lets spend from the address (approvals, permits, 7702 delegation). */
  spender?: string;
  /** What moves, and how many base units of it; absent when unknown (a delegation or an arbitrary contract call can move anything). */
  asset?: SignedAsset;
  amount?: bigint;
  /** The most the transaction pays in fees, in base units of the native coin, when the payload says (a PSBT whose inputs all name their amounts). */
  fee?: bigint;
  /** The EVM chain id the payload is valid on, when it names one; 0n when it is valid on every chain (a pre-EIP-155 transaction, a 7702 authorization for chain 0). */
  chainId?: bigint;
}

export const UNDECODED: DecodedSignedPayload = { kind: 'unknown' };

/** The largest uint256: an unlimited allowance. */
export const MAX_UINT256 = (1n << 256n) - 1n;
