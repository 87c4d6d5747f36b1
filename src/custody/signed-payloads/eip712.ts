import { getAddress, hashTypedData, hexToBytes, isAddress, validateTypedData, type TypedDataDefinition } from 'viem';
import { errors } from '../../shared/errors';
import { z } from '../../shared/schemas';
import { MAX_UINT256, UNDECODED, type DecodedSignedPayload } from './types';

/**
 * EIP-712 typed data, submitted as the JSON of eth_signTypedData_v4 ({types, primaryType, domain,
 * message}) with hash_function `eip712`: the service computes its digest (viem's hashTypedData) and
 * signs that, so viem's verifyTypedData verifies the signature. Permits are read: EIP-2612 (and DAI's
 * allowed-flag permit) on the token that is the domain's verifyingContract, and Permit2's
 * PermitSingle, PermitBatch and (witness) transfer permits; any other typed data names no destination.
 */

const TypedDataJson = z.object({
  types: z.record(z.string(), z.array(z.object({ name: z.string(), type: z.string() }).strict())),
  primaryType: z.string(),
  domain: z.record(z.string(), z.unknown()).default({}),
  message: z.record(z.string(), z.unknown()),
});

/** The typed data's digest (the bytes signed) and what it authorizes; 400 on `payload` for anything that is not valid typed data. */
export function readTypedData(text: string): { digest: Uint8Array; decoded: DecodedSignedPayload } {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw invalid('it is not JSON');
  }
  const parsed = TypedDataJson.safeParse(json);
  if (!parsed.success) throw invalid('give an object with types, primaryType, domain and message (eth_signTypedData_v4)');
  assertExactNumbers(parsed.data);
  const typedData = parsed.data as unknown as TypedDataDefinition;
  let digest: `0x${string}`;
  try {
    validateTypedData(typedData);
    digest = hashTypedData(typedData);
  } catch (error) {
    // viem's errors (a type it does not know, a value not of its type), or a message nested past the stack.
    throw invalid(error instanceof RangeError ? 'it nests too deeply' : ((error as { shortMessage?: string }).shortMessage ?? String(error)));
  }
  return { digest: hexToBytes(digest), decoded: decodeTypedData(parsed.data) };
}

const invalid = (why: string) =>
  errors.validation(`payload is not EIP-712 typed data: ${why}. With hash_function eip712 the payload is the typed data's JSON, payload_encoding text_utf8.`, 'payload');

/** JSON numbers past 2^53 are not exact: integers that large travel as decimal strings. Walked without recursion, however deep the JSON nests. */
function assertExactNumbers(json: unknown): void {
  const pending = [json];
  while (pending.length > 0) {
    const value = pending.pop();
    if (typeof value === 'number' && !Number.isSafeInteger(value)) throw invalid(`the number ${value} is not an exact integer; write large integers as decimal strings`);
    if (value !== null && typeof value === 'object') pending.push(...Object.values(value));
  }
}

const PERMIT2_SINGLE = new Set(['PermitSingle', 'PermitTransferFrom', 'PermitWitnessTransferFrom']);
const PERMIT2_BATCH = new Set(['PermitBatch', 'PermitBatchTransferFrom', 'PermitBatchWitnessTransferFrom']);

type TypedDataValues = z.infer<typeof TypedDataJson>;

function decodeTypedData(typedData: TypedDataValues): DecodedSignedPayload {
  // The domain's chain id, when it names one, is where the signature can be used.
  const chainId = integer(typedData.domain.chainId);
  const decoded = decodeAuthorizedSpend(typedData);
  return chainId === undefined ? decoded : { ...decoded, chainId };
}

function decodeAuthorizedSpend({ primaryType, domain, message }: TypedDataValues): DecodedSignedPayload {
  const spender = address(message.spender);
  if (!spender) return { ...UNDECODED, kind: 'eip712_typed_data' };
  const permit = { kind: 'eip712_typed_data' as const, destination: spender, spender };
  if (primaryType === 'Permit') {
    const token = address(domain.verifyingContract);
    // DAI's permit grants all or nothing by its `allowed` flag; EIP-2612's grants `value`.
    const amount = typeof message.allowed === 'boolean' ? (message.allowed ? MAX_UINT256 : 0n) : integer(message.value);
    return { ...permit, ...(token ? { asset: { contract: token } } : {}), ...(amount !== undefined ? { amount } : {}) };
  }
  // Permit2: PermitSingle's details, the transfer permits' permitted ({token, amount}); a batch names one asset only when it holds one.
  const permitted = message.details ?? message.permitted;
  const single = PERMIT2_SINGLE.has(primaryType) ? permitted : PERMIT2_BATCH.has(primaryType) && Array.isArray(permitted) && permitted.length === 1 ? permitted[0] : undefined;
  if (single === null || typeof single !== 'object') return permit;
  const { token, amount } = single as Record<string, unknown>;
  const contract = address(token);
  const units = integer(amount);
  return contract && units !== undefined ? { ...permit, asset: { contract }, amount: units } : permit;
}

const address = (value: unknown): `0x${string}` | undefined => (typeof value === 'string' && isAddress(value, { strict: false }) ? getAddress(value) : undefined);

function integer(value: unknown): bigint | undefined {
  if (typeof value !== 'string' && typeof value !== 'number' && typeof value !== 'bigint') return undefined;
  try {
    return BigInt(value);
  } catch {
    return undefined;
  }
}
