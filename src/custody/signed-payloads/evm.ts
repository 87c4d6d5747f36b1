import { bytesToHex, decodeFunctionData, erc20Abi, fromRlp, getAddress, isAddress, parseAbi, parseTransaction, type Hex } from 'viem';
import { errors } from '../../shared/errors';
import type { DecodedSignedPayload } from './types';

/**
 * EVM payloads signed as keccak256(payload), which is what ethers and viem sign: an unsigned
 * serialized transaction (legacy, EIP-2930, EIP-1559, EIP-4844, EIP-7702; viem's parseTransaction
 * reads them) or an EIP-7702 authorization (`0x05 || rlp([chain_id, address, nonce])`). Anything
 * else is no EVM payload (null).
 */

/** EIP-7702's MAGIC: the first byte of an authorization's signing payload (no transaction type uses it). */
const AUTHORIZATION_MAGIC = 0x05;

/** The calls that move or approve a token, beside the ERC-20 ABI's transfer, transferFrom and approve. */
const TOKEN_CALLS = [
  ...erc20Abi,
  ...parseAbi(['function increaseAllowance(address spender, uint256 addedValue)', 'function setApprovalForAll(address operator, bool approved)']),
] as const;

export function decodeEvmPayload(payload: Uint8Array): DecodedSignedPayload | null {
  if (payload[0] === AUTHORIZATION_MAGIC) return decodeAuthorization(payload);
  let transaction: ReturnType<typeof parseTransaction>;
  try {
    transaction = parseTransaction(bytesToHex(payload));
  } catch {
    return null;
  }
  const chainId = BigInt(transaction.chainId ?? 0);
  const value = transaction.value ?? 0n;
  const delegates = new Set((transaction.authorizationList ?? []).map((authorization) => getAddress(authorization.address)));
  if (delegates.size > 1) {
    // The gate judges one spender per signature: a transaction delegating to several contracts is signed one delegation at a time.
    throw errors.validation(`This EIP-7702 transaction delegates to ${delegates.size} contracts; a transaction signed here delegates to one. Sign one per delegate.`, 'payload');
  }
  const [delegate] = delegates;
  // A delegate can spend anything the address holds: no amount bounds it.
  if (delegate) return { kind: 'evm_transaction', destination: delegate, spender: delegate, chainId };
  // A contract creation: only the value sent goes, to a contract not yet known.
  if (!transaction.to) return { kind: 'evm_transaction', asset: { native: true }, amount: value, chainId };
  const to = getAddress(transaction.to);
  const data = transaction.data ?? '0x';
  if (data === '0x') return { kind: 'evm_transaction', destination: to, asset: { native: true }, amount: value, chainId };
  return { ...((value === 0n ? tokenCall(to, data) : null) ?? { kind: 'evm_transaction', destination: to }), chainId };
}

/** An ERC-20 transfer, transferFrom, approve or increaseAllowance, or an ERC-721/1155 setApprovalForAll, on the contract `token`; null for any other call. */
function tokenCall(token: `0x${string}`, data: Hex): DecodedSignedPayload | null {
  let call: ReturnType<typeof decodeFunctionData<typeof TOKEN_CALLS>>;
  try {
    call = decodeFunctionData({ abi: TOKEN_CALLS, data });
  } catch {
    return null;
  }
  const asset = { contract: token };
  switch (call.functionName) {
    case 'transfer':
      return { kind: 'evm_transaction', destination: getAddress(call.args[0]), asset, amount: call.args[1] };
    case 'transferFrom':
      return { kind: 'evm_transaction', destination: getAddress(call.args[1]), asset, amount: call.args[2] };
    case 'approve':
    case 'increaseAllowance': {
      const spender = getAddress(call.args[0]);
      return { kind: 'evm_transaction', destination: spender, spender, asset, amount: call.args[1] };
    }
    case 'setApprovalForAll': {
      // Every token of the collection: no amount bounds it.
      const operator = getAddress(call.args[0]);
      return { kind: 'evm_transaction', destination: operator, spender: operator };
    }
    default:
      return null;
  }
}

/** `0x05 || rlp([chain_id, address, nonce])`: the delegate it names may spend anything the address holds. */
function decodeAuthorization(payload: Uint8Array): DecodedSignedPayload | null {
  let fields: unknown;
  try {
    fields = fromRlp(payload.subarray(1), 'hex');
  } catch {
    return null;
  }
  if (!Array.isArray(fields) || fields.length !== 3) return null;
  const [chainId, address]: unknown[] = fields;
  if (typeof chainId !== 'string' || typeof address !== 'string' || !isAddress(address, { strict: false })) return null;
  const delegate = getAddress(address);
  return { kind: 'eip7702_authorization', destination: delegate, spender: delegate, chainId: chainId === '0x' ? 0n : BigInt(chainId) };
}
