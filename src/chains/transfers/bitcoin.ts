import { hex } from '@scure/base';
import * as btc from '@scure/btc-signer';
import { errors } from '../../shared/errors';
import type { CheckedTransfer, SignedTransfer, SigningKey } from './index';

/**
 * BIP-125 opt-in replace-by-fee on every input: a send stuck under a fee spike can be replaced by one
 * paying more that spends the same inputs, so at most one of them is ever mined (what BitGo and
 * Fireblocks call accelerating); the sequence below 0xfffffffe also leaves nLockTime enabled, at 0.
 */
export const RBF_SEQUENCE = 0xfffffffd;
/**
 * BIP-340's auxiliary randomness for taproot signatures: zeros, which BIP-340 allows, so that signing the
 * same transfer twice gives the same bytes (ECDSA is already deterministic, RFC 6979).
 */
const SCHNORR_AUX_RAND = new Uint8Array(32);

/**
 * Spends exactly the given inputs (p2wpkh, p2tr key path, p2pkh) to the recipient (output 0, any
 * address form of the network) and the change (output 1, if any); the fee is what is left, never
 * negative. Each input is signed with keys[input.key], which must own its address.
 */
export function signBitcoinTransfer({ transfer, to }: CheckedTransfer, keys: SigningKey[]): SignedTransfer {
  const network = transfer.testnet ? btc.TEST_NETWORK : btc.NETWORK;
  const inputs = transfer.bitcoin?.inputs ?? [];
  if (inputs.length === 0) throw errors.validation('A Bitcoin transfer needs inputs.', 'inputs');
  const change = transfer.bitcoin?.change;
  const inputTotal = inputs.reduce((sum, input) => sum + input.amount, 0n);
  const outputTotal = transfer.amount + (change?.amount ?? 0n);
  if (outputTotal > inputTotal) throw errors.validation(`The outputs (${outputTotal} sat) exceed the inputs (${inputTotal} sat).`, 'amount');
  if (change && change.amount <= 0n) throw errors.validation('The change must be positive when given.', 'change');

  // p2pkh inputs are signed from their output's script and amount alone (no previous transaction): the
  // fee-inflation attack that the full previous transaction guards against needs a signer that is lied
  // to about amounts, and ours come from the platform's own records of its outputs.
  const tx = new btc.Transaction({ allowLegacyWitnessUtxo: true });
  inputs.forEach((input, index) => {
    const key = keys[input.key];
    if (!key) throw errors.validation(`Input ${index} names key ${input.key}, which was not given.`, 'inputs');
    const script = outputScript(input.address, network, `inputs[${index}].address`);
    const decoded = btc.OutScript.decode(script);
    if (decoded.type !== 'wpkh' && decoded.type !== 'tr' && decoded.type !== 'pkh') {
      throw errors.validation(`Input ${index} pays a ${decoded.type} output; the platform spends p2wpkh, p2tr and p2pkh outputs.`, 'inputs');
    }
    if (!/^[0-9a-fA-F]{64}$/.test(input.txid)) throw errors.validation(`Input ${index}'s txid is not 64 hex characters.`, 'inputs');
    tx.addInput({
      txid: input.txid,
      index: input.vout,
      sequence: RBF_SEQUENCE,
      witnessUtxo: { script, amount: input.amount },
      ...(decoded.type === 'tr' ? { tapInternalKey: key.publicKey.slice(1) } : {}),
    });
  });
  tx.addOutput({ script: outputScript(to, network, 'to'), amount: transfer.amount });
  if (change) tx.addOutput({ script: outputScript(change.address, network, 'change'), amount: change.amount });
  inputs.forEach((input, index) => {
    try {
      tx.signIdx(keys[input.key]!.privateKey, index, undefined, SCHNORR_AUX_RAND);
    } catch {
      // btc-signer's message names the script; ours says which input, never the key.
      throw errors.validation(`Key ${input.key} does not own input ${index}'s address ${input.address}.`, 'inputs');
    }
  });
  tx.finalize();
  return { raw: hex.encode(tx.extract()), txid: tx.id };
}

function outputScript(address: string, network: typeof btc.NETWORK, param: string): Uint8Array {
  try {
    return btc.OutScript.encode(btc.Address(network).decode(address));
  } catch {
    throw errors.validation(`'${address}' is not a Bitcoin address of this network.`, param);
  }
}
