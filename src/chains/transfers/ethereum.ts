import { secp256k1 } from '@noble/curves/secp256k1';
import { encodeFunctionData, erc20Abi, getAddress, hexToBytes, keccak256, serializeTransaction, type Hex, type TransactionSerializableEIP1559 } from 'viem';
import { errors } from '../../shared/errors';
import type { CheckedTransfer, SignedTransfer, SigningKey } from './index';

/** The call data of ERC-20 `transfer(to, amount)`. */
export const erc20TransferData = (to: string, amount: bigint): Hex => encodeFunctionData({ abi: erc20Abi, functionName: 'transfer', args: [getAddress(to), amount] });

/**
 * An EIP-1559 (type 2) transaction: ether as its value, or ERC-20 `transfer(to, amount)` to the token
 * contract; the gas terms as given. Signed with RFC 6979 nonces and a low s (EIP-2), so the same terms
 * give the same bytes and the same hash.
 */
export function signEthereumTransfer({ transfer, to, token }: CheckedTransfer, keys: SigningKey[]): SignedTransfer {
  if (!transfer.ethereum) throw errors.validation('An Ethereum transfer needs its chain id and nonce.', 'ethereum');
  if (transfer.fee.model !== 'eip1559') throw errors.validation('An Ethereum transfer takes eip1559 fee terms.', 'fee');
  const { gasLimit, maxFeePerGas, maxPriorityFeePerGas } = transfer.fee;
  if (maxPriorityFeePerGas > maxFeePerGas) throw errors.validation('The max priority fee per gas is above the max fee per gas.', 'fee');
  const nonce = transfer.ethereum.nonce;
  if (nonce < 0n || nonce > BigInt(Number.MAX_SAFE_INTEGER)) throw errors.validation('The nonce is out of range.', 'nonce');
  const unsigned: TransactionSerializableEIP1559 = {
    type: 'eip1559',
    chainId: transfer.ethereum.chainId,
    nonce: Number(nonce),
    to: getAddress(token ?? to),
    value: token ? 0n : transfer.amount,
    data: token ? erc20TransferData(to, transfer.amount) : undefined,
    gas: gasLimit,
    maxFeePerGas,
    maxPriorityFeePerGas,
  };
  const signature = secp256k1.sign(hexToBytes(keccak256(serializeTransaction(unsigned))), keys[0]!.privateKey, { lowS: true });
  const word = (value: bigint): Hex => `0x${value.toString(16).padStart(64, '0')}`;
  const raw = serializeTransaction(unsigned, { r: word(signature.r), s: word(signature.s), yParity: signature.recovery });
  return { raw, txid: keccak256(raw) };
}
