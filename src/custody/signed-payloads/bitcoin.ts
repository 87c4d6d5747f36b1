import { equalBytes } from '@noble/curves/abstract/utils';
import { base64 } from '@scure/base';
import * as btc from '@scure/btc-signer';
import type { Environment } from '../../api-keys/entities';
import { errors } from '../../shared/errors';
import type { DecodedSignedPayload } from './types';

/**
 * A PSBT (BIP-174) of which the wallet signs one input, hash_function `psbt`: the service computes
 * that input's sighash itself (SIGHASH_ALL: BIP-143 for p2wpkh, the legacy digest for p2pkh), so the
 * signature commits to every output read here. Outputs paying none of the wallet's own addresses are
 * its destinations: the value going to them is the amount (sats), the destination their address when
 * there is one; several, or an output with no address, leave the destination unknown. With no such
 * output the PSBT pays the wallet itself, and the first output's address is the destination. The fee
 * is the inputs' total minus the outputs', when every input says its amount.
 */

/** btc-signer computes the legacy digest with a method its types keep private. */
type LegacyPreimage = { preimageLegacy(idx: number, prevOutScript: Uint8Array, hashType: number): Uint8Array };

const PSBT_MAGIC = Uint8Array.of(0x70, 0x73, 0x62, 0x74, 0xff);

export interface PsbtSigning {
  /** The 32-byte sighash the key signs. */
  sighash: Uint8Array;
  decoded: DecodedSignedPayload;
}

export interface PsbtSigner {
  environment: Environment;
  /** The address whose key signs: the input must spend its script. */
  address: string;
  /** Every address of the wallet: outputs paying them are change. */
  ownAddresses: ReadonlySet<string>;
}

/** `payload` is the PSBT's bytes, or (text_utf8) its base64 text; 400 on `payload` or `input_index` for anything the key cannot sign. */
export function readPsbt(payload: Uint8Array, textual: boolean, inputIndex: number, signer: PsbtSigner): PsbtSigning {
  const network = signer.environment === 'live' ? btc.NETWORK : btc.TEST_NETWORK;
  const tx = parse(payload, textual);
  if (inputIndex >= tx.inputsLength) {
    throw errors.validation(`input_index ${inputIndex} is past the PSBT's last input (it has ${tx.inputsLength}).`, 'input_index', { inputs: tx.inputsLength });
  }
  const input = tx.getInput(inputIndex);
  if (input.sighashType !== undefined && input.sighashType !== btc.SigHash.ALL) {
    throw errors.validation('The input asks for a sighash type other than SIGHASH_ALL: the service signs only what commits to every input and output.', 'payload');
  }
  const spent = prevOut(input);
  const script = btc.OutScript.encode(btc.Address(network).decode(signer.address));
  if (!spent || !equalBytes(spent.script, script)) {
    throw errors.validation(`Input ${inputIndex} does not spend the signing address ${signer.address} (give its witness_utxo or non_witness_utxo), so its key cannot sign it.`, 'input_index');
  }
  const kind = btc.OutScript.decode(script);
  let sighash: Uint8Array;
  if (kind.type === 'wpkh') sighash = tx.preimageWitnessV0(inputIndex, btc.OutScript.encode({ type: 'pkh', hash: kind.hash }), btc.SigHash.ALL, spent.amount);
  else if (kind.type === 'pkh') sighash = (tx as unknown as LegacyPreimage).preimageLegacy(inputIndex, script, btc.SigHash.ALL);
  else throw errors.validation(`PSBT inputs are signed for p2wpkh and p2pkh addresses; ${signer.address} is ${kind.type === 'tr' ? 'a taproot (p2tr)' : `a ${kind.type}`} address.`, 'address_id');
  return { sighash, decoded: decodePsbt(tx, network, signer.ownAddresses) };
}

function parse(payload: Uint8Array, textual: boolean): btc.Transaction {
  let bytes = payload;
  if (textual) {
    try {
      bytes = base64.decode(new TextDecoder().decode(payload).trim());
    } catch {
      throw invalid('its text is not base64');
    }
  }
  if (!equalBytes(bytes.subarray(0, PSBT_MAGIC.length), PSBT_MAGIC)) throw invalid("it does not begin with the PSBT magic bytes 'psbt' 0xff");
  try {
    return btc.Transaction.fromPSBT(bytes, { allowLegacyWitnessUtxo: true });
  } catch (error) {
    throw invalid(error instanceof Error ? error.message : String(error));
  }
}

const invalid = (why: string) =>
  errors.validation(`payload is not a PSBT: ${why}. With hash_function psbt the payload is a BIP-174 PSBT: its bytes in hexadecimal, or its base64 text with payload_encoding text_utf8.`, 'payload');

/** The output an input spends, when the PSBT says (a nonWitnessUtxo's txid is checked by btc-signer). */
function prevOut(input: ReturnType<btc.Transaction['getInput']>): { script: Uint8Array; amount: bigint } | undefined {
  const output = input.nonWitnessUtxo && input.index !== undefined ? input.nonWitnessUtxo.outputs[input.index] : input.witnessUtxo;
  return output?.script && output.amount !== undefined ? { script: output.script, amount: output.amount } : undefined;
}

function decodePsbt(tx: btc.Transaction, network: typeof btc.NETWORK, ownAddresses: ReadonlySet<string>): DecodedSignedPayload {
  const outputs = Array.from({ length: tx.outputsLength }, (_, index) => {
    const { script, amount = 0n } = tx.getOutput(index);
    return { address: script ? addressOf(script, network) : undefined, amount };
  });
  // A zero-value output with no address (OP_RETURN data) moves nothing.
  const external = outputs.filter((output) => (output.address ? !ownAddresses.has(output.address) : output.amount > 0n));
  const paid = external.length > 0 ? external : outputs.filter((output) => output.address).slice(0, 1);
  const addresses = new Set(paid.map((output) => output.address));
  const [destination] = addresses;
  const spent = Array.from({ length: tx.inputsLength }, (_, index) => prevOut(tx.getInput(index)));
  const fee = spent.every((output) => output !== undefined) ? sum(spent.map((output) => output!.amount)) - sum(outputs.map((output) => output.amount)) : undefined;
  // Outputs above the inputs make no valid transaction: no fee to judge.
  return {
    kind: 'bitcoin_psbt',
    ...(addresses.size === 1 && destination ? { destination } : {}),
    asset: { native: true },
    amount: sum(paid.map((output) => output.amount)),
    ...(fee !== undefined && fee >= 0n ? { fee } : {}),
  };
}

const sum = (amounts: bigint[]) => amounts.reduce((total, amount) => total + amount, 0n);

function addressOf(script: Uint8Array, network: typeof btc.NETWORK): string | undefined {
  try {
    return btc.Address(network).encode(btc.OutScript.decode(script));
  } catch {
    return undefined;
  }
}
