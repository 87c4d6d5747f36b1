import { secp256k1 } from '@noble/curves/secp256k1';
import {
  bytesToHex,
  decodeFunctionData,
  erc20Abi,
  getAddress,
  hexToBytes,
  keccak256,
  parseTransaction,
  serializeTransaction,
  type Hex,
  type TransactionSerializableEIP1559,
} from 'viem';
import { DevnetRejection, type AccountTransaction, type AccountTransferIntent, type ChainRules, type DecodeContext, type EthereumGas } from './types';

/** Gas every transaction pays before its calldata (the yellow paper's G_transaction). */
const TRANSACTION_GAS = 21_000n;
const CALLDATA_ZERO_BYTE_GAS = 4n;
const CALLDATA_NONZERO_BYTE_GAS = 16n;
const ACCESS_LIST_ADDRESS_GAS = 2_400n;
const ACCESS_LIST_STORAGE_KEY_GAS = 1_900n;
/**
 * What a devnet token's `transfer(to, amount)` costs beyond the intrinsic gas: two warm-ish storage
 * writes and a log, about what USDC costs on mainnet for a holder that already has a balance.
 */
export const TOKEN_TRANSFER_EXECUTION_GAS = 30_000n;
/** secp256k1's group order halved: EIP-2 refuses a signature whose s is above it. */
const HALF_CURVE_ORDER = secp256k1.CURVE.n / 2n;

/**
 * Ethereum on the devnet: signed EIP-1559 (type 2) transactions only, the sender recovered from the
 * signature, ERC-20 `transfer(to, amount)` to a devnet token contract as the only contract call
 * (src/chains/transfers/ethereum.ts builds them).
 */
export const ethereumRules: ChainRules = {
  chain: 'ethereum',

  /** The signed transaction, and the devnet's own gas rule: the limit covers the gas the devnet charges. */
  decode(raw, context): AccountTransaction {
    const transaction = readSignedEthereumTransaction(raw, context);
    const { limit, used } = transaction.gas;
    if (limit < used) throw new DevnetRejection('gas_limit_too_low', `The gas limit ${limit} is below the ${used} gas the transaction uses.`);
    return transaction;
  },

  addressOf(publicKey) {
    const uncompressed = secp256k1.ProjectivePoint.fromHex(publicKey).toRawBytes(false);
    return getAddress(bytesToHex(hexToBytes(keccak256(uncompressed.slice(1))).slice(12)));
  },
};

/**
 * A signed EIP-1559 transaction read as Ethereum reads it: the signer recovered, the ether and devnet-token
 * transfers it makes, its gas terms (`used`: what the devnet would charge). Without the devnet's gas rule,
 * so that a transaction meant for a real node, whose execution only that node can price, is read too.
 */
export function readSignedEthereumTransaction(raw: string, context: DecodeContext): AccountTransaction & { gas: EthereumGas } {
  if (!/^0x([0-9a-fA-F]{2})+$/.test(raw)) throw new DevnetRejection('malformed', 'The transaction is not 0x-prefixed hex.');
  let parsed: ReturnType<typeof parseTransaction>;
  try {
    parsed = parseTransaction(raw as Hex);
  } catch {
    throw new DevnetRejection('malformed', 'The transaction could not be decoded.');
  }
  if (parsed.type !== 'eip1559') throw new DevnetRejection('malformed', 'The devnet takes EIP-1559 (type 2) transactions only.');
  const tx = parsed as TransactionSerializableEIP1559 & { r?: Hex; s?: Hex; yParity?: number };
  if (tx.chainId !== context.chainId) throw new DevnetRejection('wrong_chain', `The transaction is signed for chain id ${tx.chainId}, the devnet is ${context.chainId}.`);
  if (!tx.to) throw new DevnetRejection('malformed', 'Contract creation is not available on the devnet.');
  if (tx.r === undefined || tx.s === undefined || tx.yParity === undefined) throw new DevnetRejection('malformed', 'The transaction is not signed.');
  const from = recoverSender(unsignedOf(tx), BigInt(tx.r), BigInt(tx.s), tx.yParity);
  const to = getAddress(tx.to);
  const value = tx.value ?? 0n;
  const maxFeePerGas = tx.maxFeePerGas ?? 0n;
  const maxPriorityFeePerGas = tx.maxPriorityFeePerGas ?? 0n;
  if (maxPriorityFeePerGas > maxFeePerGas) throw new DevnetRejection('malformed', 'The max priority fee per gas is higher than the max fee per gas.');

  const transfers: AccountTransferIntent[] = [];
  if (value > 0n) transfers.push({ position: 'native', to, assetId: 'ETH', amount: value });
  const token = tokenCall(to, tx.data, context.tokens);
  if (token && token.amount > 0n) transfers.push({ position: 'log:0', to: token.to, assetId: token.assetId, amount: token.amount });

  const limit = tx.gas ?? 0n;
  const gas: EthereumGas = { limit, maxFeePerGas, maxPriorityFeePerGas, used: gasUsed(tx, token !== undefined) };
  return {
    model: 'account',
    txid: keccak256(raw as Hex),
    from,
    nonce: BigInt(tx.nonce ?? 0),
    maxFee: limit * maxFeePerGas,
    feeBid: maxPriorityFeePerGas,
    gas,
    transfers,
    raw,
  };
}

function unsignedOf(tx: TransactionSerializableEIP1559): TransactionSerializableEIP1559 {
  const { type, chainId, nonce, to, value, data, gas, maxFeePerGas, maxPriorityFeePerGas, accessList } = tx;
  return { type, chainId, nonce, to, value, data, gas, maxFeePerGas, maxPriorityFeePerGas, accessList };
}

/** The signer of the transaction's signing hash; a signature that recovers no key, or a high s, is invalid. */
function recoverSender(unsigned: TransactionSerializableEIP1559, r: bigint, s: bigint, yParity: number): string {
  if (s > HALF_CURVE_ORDER || s === 0n || r === 0n) throw new DevnetRejection('invalid_signature', 'The signature is not valid (EIP-2: s must be in the lower half of the curve order).');
  try {
    const hash = hexToBytes(keccak256(serializeTransaction(unsigned)));
    const publicKey = new secp256k1.Signature(r, s).addRecoveryBit(yParity).recoverPublicKey(hash);
    return ethereumRules.addressOf(publicKey.toRawBytes(true));
  } catch {
    throw new DevnetRejection('invalid_signature', 'The signature does not recover a public key.');
  }
}

/** A call to a devnet token contract: only `transfer(to, amount)` exists there. */
function tokenCall(to: string, data: Hex | undefined, tokens: Readonly<Record<string, string>>) {
  const assetId = Object.keys(tokens).find((id) => tokens[id]!.toLowerCase() === to.toLowerCase());
  if (!assetId) return undefined;
  try {
    const call = decodeFunctionData({ abi: erc20Abi, data: data ?? '0x' });
    if (call.functionName === 'transfer') return { assetId, to: getAddress(call.args[0]), amount: call.args[1] };
  } catch {
    // Not an ERC-20 call: refused below.
  }
  throw new DevnetRejection('malformed', `The devnet ${assetId} contract answers transfer(address,uint256) only.`);
}

/**
 * The gas a transaction to `to` with this calldata uses on the devnet, what decode charges: its intrinsic
 * gas, plus a token transfer's execution when it calls a devnet token (a call there other than
 * `transfer` is refused as malformed, as decode does). The devnet's eth_estimateGas.
 */
export function devnetCallGas(call: Pick<TransactionSerializableEIP1559, 'data' | 'accessList'> & { to: string }, tokens: Readonly<Record<string, string>>): bigint {
  return gasUsed(call, tokenCall(call.to, call.data, tokens) !== undefined);
}

const gasUsed = (tx: Pick<TransactionSerializableEIP1559, 'data' | 'accessList'>, callsToken: boolean): bigint => intrinsicGas(tx) + (callsToken ? TOKEN_TRANSFER_EXECUTION_GAS : 0n);

/** The gas a transaction pays before it runs: 21000, its calldata and its access list (the faucet sizes its gas limit with it). */
export function intrinsicGas(tx: Pick<TransactionSerializableEIP1559, 'data' | 'accessList'>): bigint {
  const data = tx.data ? hexToBytes(tx.data) : new Uint8Array();
  let gas = TRANSACTION_GAS;
  for (const byte of data) gas += byte === 0 ? CALLDATA_ZERO_BYTE_GAS : CALLDATA_NONZERO_BYTE_GAS;
  for (const entry of tx.accessList ?? []) gas += ACCESS_LIST_ADDRESS_GAS + ACCESS_LIST_STORAGE_KEY_GAS * BigInt(entry.storageKeys.length);
  return gas;
}
