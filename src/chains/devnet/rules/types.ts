import type { ChainId } from '../../../catalogue/service';

/**
 * The devnet's chain-true rules, one module per chain (bitcoin.ts, ethereum.ts, tron.ts, solana.ts):
 * each decodes a raw signed transaction in its chain's real encoding, checks its signature against
 * the spending address (src/chains/transfers/ builds them, the faucet's too). The devnet's
 * ledger (mempool, blocks, balances, spent outputs, nonces) is not here: these are pure functions.
 */

/** Why the devnet refuses a transaction; `reason` is the machine code of TransactionRejectedError. */
export class DevnetRejection extends Error {
  override name = 'DevnetRejection';
  constructor(
    readonly reason: 'malformed' | 'invalid_signature' | 'double_spend' | 'nonce_too_low' | 'nonce_too_high' | 'insufficient_funds' | 'fee_too_low' | 'dust_output' | 'unknown_input' | 'wrong_chain' | 'expired' | 'gas_limit_too_low',
    message: string,
  ) {
    super(message);
  }
}

/** One value movement a transaction makes on an account chain. */
export interface AccountTransferIntent {
  /** As in ObservedTransfer: `native`, `log:<n>` (ERC-20 / TRC-20), `ix:<n>` (Solana instruction). */
  position: string;
  to: string;
  assetId: string;
  amount: bigint;
}

/** A decoded, signature-checked transaction of an account chain (Ethereum, Tron, Solana). */
export interface AccountTransaction {
  model: 'account';
  txid: string;
  /** The signer, in the chain's address form: the account debited. */
  from: string;
  /**
   * Replay protection. Ethereum: the account nonce, which must equal the account's next one.
   * Tron and Solana: null; the txid must be new (their reference block / recent blockhash is not modelled).
   */
  nonce: bigint | null;
  /** The most the sender pays in fees, native base units (Ethereum: gas limit x max fee; charged as used). */
  maxFee: bigint;
  /**
   * Ethereum: the priority fee per gas offered, for block ordering. Tron and Solana: the fee itself,
   * which the devnet charges as is when the transaction is mined and refuses below the market's low level.
   */
  feeBid: bigint;
  /** Ethereum only: the gas terms, and the gas the transaction uses when mined (charged x the effective price). */
  gas?: EthereumGas;
  transfers: AccountTransferIntent[];
  /** The signed bytes, as broadcast (hex, Solana base64), kept for eth_getTransactionByHash and friends. */
  raw: string;
}

export interface EthereumGas {
  limit: bigint;
  maxFeePerGas: bigint;
  maxPriorityFeePerGas: bigint;
  /** Intrinsic gas (21000 + calldata + access list) plus a token transfer's execution; at most `limit`. */
  used: bigint;
}

/** An output a Bitcoin transaction spends, as the ledger knows it: needed to check the input's signature. */
export interface SpentOutput {
  txid: string;
  vout: number;
  /** scriptPubKey, hex. */
  script: string;
  amount: bigint;
}

/** A decoded Bitcoin transaction whose every input's signature was checked against the output it spends. */
export interface UtxoTransaction {
  model: 'utxo';
  txid: string;
  inputs: { txid: string; vout: number }[];
  outputs: { vout: number; script: string; address: string | null; amount: bigint }[];
  /** Inputs minus outputs, satoshis. */
  fee: bigint;
  vsize: number;
  raw: string;
}

/** What each chain's module exports; the devnet picks one by chain. */
export interface ChainRules {
  chain: ChainId;
  /**
   * Decodes `raw` and verifies its signature(s). Bitcoin looks each input up with `spentOutput`
   * (null: the output does not exist or is already spent → DevnetRejection unknown_input / double_spend
   * is the ledger's call: the module throws `unknown_input`). Throws DevnetRejection for anything wrong.
   */
  decode(raw: string, context: DecodeContext): AccountTransaction | UtxoTransaction;
  /**
   * UTXO chains only: the outputs `raw` spends, read before `decode` so that the ledger can load them
   * (and refuse a spent one as `double_spend`). Throws DevnetRejection `malformed`.
   */
  spends?(raw: string): { txid: string; vout: number }[];
  /**
   * UTXO chains only: a block's coinbase transaction at `height`, paying `amount` (subsidy plus fees)
   * to `address`, in the chain's real serialization.
   */
  buildCoinbase?(input: { height: number; address: string; amount: bigint }): UtxoTransaction;
  /** The address of a key on the sandbox network, in the form the platform uses. */
  addressOf(publicKey: Uint8Array): string;
}

export interface DecodeContext {
  /** Bitcoin: the unspent output an input names, or null. */
  spentOutput?: (txid: string, vout: number) => SpentOutput | null;
  /** The devnet's token contracts / mints: asset id → address. */
  tokens: Readonly<Record<string, string>>;
  /** Ethereum: the chain id transactions must be signed for. */
  chainId?: number;
}
