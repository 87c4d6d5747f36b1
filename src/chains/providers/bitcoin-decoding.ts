/**
 * Bitcoin's wire forms as the provider reads them from a node: serialized blocks and transactions,
 * and the addresses output scripts pay. Validity is the node's business; these only read.
 */
import { sha256 } from '@noble/hashes/sha256';
import { hex } from '@scure/base';
import * as btc from '@scure/btc-signer';
import { NodeUnavailableError } from '../provider';

export type AddressNetwork = typeof btc.NETWORK;

/** The address paying `script` in `network`'s encoding, or null when no address form names it. */
export function addressOf(script: Uint8Array, network: AddressNetwork): string | null {
  try {
    return btc.Address(network).encode(btc.OutScript.decode(script));
  } catch {
    return null;
  }
}

/** A coinbase has one input, which spends no output (the null txid). */
export const isCoinbase = (transaction: DecodedTransaction) => transaction.inputs.length === 1 && /^0{64}$/.test(transaction.inputs[0]!.txid);

export function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((byte, index) => byte === b[index]);
}

export interface DecodedTransaction {
  txid: string;
  /** The outputs spent, txids in display order. */
  inputs: { txid: string; vout: number }[];
  outputs: { script: Uint8Array; amount: bigint }[];
  /** How many bytes of the input the transaction took. */
  length: number;
}

/**
 * The transaction at the start of `raw` (more may follow, as in a block). Read with the bare serializer:
 * validity is the node's business, and Transaction.fromRaw refuses versions beyond 3 that consensus allows.
 */
export function decodeTransaction(raw: Uint8Array): DecodedTransaction {
  const transaction = btc.RawTx.decode(raw, { allowUnreadBytes: true });
  // A transaction carries no length: re-encoding it (serializations are canonical) says how many bytes it took.
  const length = btc.RawTx.encode(transaction).length;
  // The txid hashes the serialization without witnesses, and is shown byte-reversed.
  const txid = hex.encode(sha256(sha256(btc.RawTx.encode({ ...transaction, segwitFlag: false }))).reverse());
  // The serializer reads txids in their display order (its byte-reversed form).
  const inputs = transaction.inputs.map((input) => ({ txid: hex.encode(input.txid), vout: input.index }));
  return { txid, inputs, outputs: transaction.outputs, length };
}

/** A serialized block: the 80-byte header (version, previous hash, merkle root, time, bits, nonce), then its transactions. */
export function decodeBlock(raw: Uint8Array): { parentHash: string; time: Date; transactions: DecodedTransaction[] } {
  if (raw.length < 81) throw new NodeUnavailableError('The node sent a block shorter than its header.');
  const view = new DataView(raw.buffer, raw.byteOffset, raw.byteLength);
  const parentHash = hex.encode(raw.slice(4, 36).reverse());
  const time = new Date(view.getUint32(68, true) * 1000);
  let offset = 80;
  const readCompactSize = (): number => {
    const first = raw[offset]!;
    offset += 1;
    if (first < 0xfd) return first;
    const width = first === 0xfd ? 2 : first === 0xfe ? 4 : 8;
    let value = 0;
    for (let index = width - 1; index >= 0; index--) value = value * 256 + raw[offset + index]!;
    offset += width;
    return value;
  };
  const count = readCompactSize();
  const transactions: DecodedTransaction[] = [];
  try {
    for (let index = 0; index < count; index++) {
      const transaction = decodeTransaction(raw.subarray(offset));
      transactions.push(transaction);
      offset += transaction.length;
    }
  } catch {
    throw new NodeUnavailableError('The node sent a block that does not decode.');
  }
  if (offset !== raw.length) throw new NodeUnavailableError('The node sent a block with trailing bytes.');
  return { parentHash, time, transactions };
}
