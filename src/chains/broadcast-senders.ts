import { base58, base64, hex } from '@scure/base';
import * as btc from '@scure/btc-signer';
import { recoverTransactionAddress, type TransactionSerialized } from 'viem';
import type { Environment } from '../api-keys/entities';
import type { ChainId } from '../catalogue/service';
import { canonicalAddress } from './addresses';
import { solanaSigners } from './devnet/rules/solana';
import { tronSigners } from './devnet/rules/tron';
import type { RelayedCall } from './provider';

/**
 * Who a raw transaction given to a chain's broadcast method spends from, read from its bytes alone:
 * pure, no I/O. The pass-through refuses to broadcast for a custody address (src/transactions/raw-broadcasts.ts).
 */

/** What a broadcast reveals of its senders. */
export interface BroadcastSenders {
  /**
   * Canonical addresses. Ethereum: the signer recovered from the signature. Tron: the address each
   * signature recovers to. Solana: each required signer whose signature verifies. Bitcoin: the
   * p2wpkh / p2pkh address of the public key each input's witness or scriptSig reveals.
   */
  addresses: string[];
  /** Bitcoin: the outputs the inputs spend (txid in display order, lower case). Other chains: none. */
  outpoints: { txid: string; vout: number }[];
}

/** The broadcast's bytes are not a transaction of the chain (or not where the method takes them). */
export class UndecodableBroadcast extends Error {
  override name = 'UndecodableBroadcast';
}

/** The senders of the raw transaction a broadcast call carries; throws UndecodableBroadcast. */
export async function broadcastSenders(chain: ChainId, environment: Environment, call: RelayedCall): Promise<BroadcastSenders> {
  const raw = rawTransactionOf(chain, call.params);
  const canonical = (addresses: string[]) => addresses.map((address) => canonicalAddress(chain, environment, address) ?? address);
  try {
    switch (chain) {
      case 'ethereum':
        if (!/^0x([0-9a-fA-F]{2})+$/.test(raw)) throw new UndecodableBroadcast('the transaction is not 0x-prefixed hex');
        return { addresses: canonical([await recoverTransactionAddress({ serializedTransaction: raw as TransactionSerialized })]), outpoints: [] };
      case 'tron':
        return { addresses: canonical(tronSigners(raw.replace(/^0x/i, ''))), outpoints: [] };
      case 'solana':
        return { addresses: solanaSigners(solanaBytes(raw, call.params)), outpoints: [] };
      case 'bitcoin':
        return bitcoinSenders(raw, environment);
    }
  } catch (error) {
    if (error instanceof UndecodableBroadcast) throw error;
    // viem's, btc-signer's and the chains' rules' refusals alike: the bytes are not a signed transaction.
    throw new UndecodableBroadcast(`the transaction could not be decoded as a signed ${chain} transaction`);
  }
}

/** The first positional param; Bitcoin Core also names it `hexstring`. */
function rawTransactionOf(chain: ChainId, params: RelayedCall['params']): string {
  const raw = Array.isArray(params) ? params[0] : chain === 'bitcoin' ? params?.hexstring : undefined;
  if (typeof raw !== 'string' || raw.length === 0) throw new UndecodableBroadcast('the signed transaction is missing: it is the first param, a string');
  return raw;
}

/** sendTransaction's encoding option: base58 by default (Solana's own), or base64. */
function solanaBytes(raw: string, params: RelayedCall['params']): Uint8Array {
  const config = Array.isArray(params) ? params[1] : undefined;
  const encoding = typeof config === 'object' && config !== null ? ((config as { encoding?: unknown }).encoding ?? 'base58') : 'base58';
  if (encoding === 'base58') return base58.decode(raw);
  if (encoding === 'base64') return base64.decode(raw);
  throw new UndecodableBroadcast(`encoding '${String(encoding)}' is not base58 or base64`);
}

/**
 * Every outpoint the inputs spend, and the address of each public key an input reveals: a p2wpkh
 * witness [signature, 33-byte key] or a p2pkh scriptSig [signature, key]. A taproot key-path input
 * reveals no key (its witness is the signature alone): only its outpoint names it.
 */
function bitcoinSenders(raw: string, environment: Environment): BroadcastSenders {
  const network = environment === 'live' ? btc.NETWORK : btc.TEST_NETWORK;
  const tx = btc.RawTx.decode(hex.decode(raw));
  const addresses = tx.inputs.flatMap((input, index) => {
    const witness = tx.witnesses?.[index] ?? [];
    if (witness.length === 2 && witness[1]!.length === 33) return [btc.p2wpkh(witness[1]!, network).address!];
    if (witness.length === 0 && input.finalScriptSig.length > 0) {
      const parts = btc.Script.decode(input.finalScriptSig);
      const key = parts[1];
      if (parts.length === 2 && key instanceof Uint8Array && (key.length === 33 || key.length === 65)) return [btc.p2pkh(key, network).address!];
    }
    return [];
  });
  return { addresses, outpoints: tx.inputs.map((input) => ({ txid: hex.encode(input.txid), vout: input.index })) };
}
