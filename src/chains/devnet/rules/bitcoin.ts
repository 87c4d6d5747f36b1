import { schnorr, secp256k1 } from '@noble/curves/secp256k1';
import { ripemd160 } from '@noble/hashes/ripemd160';
import { sha256 } from '@noble/hashes/sha256';
import { hex } from '@scure/base';
import * as btc from '@scure/btc-signer';
import { DevnetRejection, type ChainRules, type SpentOutput, type UtxoTransaction } from './types';

const NETWORK = btc.TEST_NETWORK;
/** Taproot key-path signatures: 64 bytes with SIGHASH_DEFAULT, 65 with an explicit sighash byte. */
const SCHNORR_SIGNATURE_BYTES = 64;

/** btc-signer computes the legacy sighash but keeps it private in its types; it is the real BIP-143-less preimage. */
type LegacyPreimage = { preimageLegacy(idx: number, prevOutScript: Uint8Array, hashType: number): Uint8Array };

/**
 * Bitcoin on the devnet: real transactions in their network serialization (testnet addresses),
 * every input's signature checked against the output it spends: p2wpkh (BIP-143), p2tr key path
 * (BIP-341) and p2pkh, the three forms the platform derives.
 */
export const bitcoinRules: ChainRules = {
  chain: 'bitcoin',

  spends(raw) {
    const tx = parse(raw);
    return Array.from({ length: tx.inputsLength }, (_, index) => outpoint(tx, index));
  },

  decode(raw, context): UtxoTransaction {
    const tx = parse(raw);
    if (tx.inputsLength === 0 || tx.outputsLength === 0) throw new DevnetRejection('malformed', 'A transaction needs inputs and outputs.');
    const spent: SpentOutput[] = Array.from({ length: tx.inputsLength }, (_, index) => {
      const { txid, vout } = outpoint(tx, index);
      const output = context.spentOutput?.(txid, vout);
      if (!output) throw new DevnetRejection('unknown_input', `Input ${index} spends ${txid}:${vout}, which the devnet does not know.`);
      return output;
    });
    spent.forEach((_, index) => verifyInput(tx, index, spent));
    const outputs = Array.from({ length: tx.outputsLength }, (_, vout) => {
      const output = tx.getOutput(vout);
      return { vout, script: hex.encode(output.script!), address: addressOfScript(output.script!), amount: output.amount! };
    });
    const inputTotal = spent.reduce((sum, output) => sum + output.amount, 0n);
    const outputTotal = outputs.reduce((sum, output) => sum + output.amount, 0n);
    if (outputTotal > inputTotal) throw new DevnetRejection('insufficient_funds', `The outputs (${outputTotal} sat) exceed the inputs (${inputTotal} sat).`);
    return {
      model: 'utxo',
      txid: tx.id,
      inputs: spent.map(({ txid, vout }) => ({ txid, vout })),
      outputs,
      fee: inputTotal - outputTotal,
      vsize: tx.vsize,
      raw: hex.encode(tx.toBytes(true, true)),
    };
  },

  buildCoinbase({ height, address, amount }) {
    const script = btc.OutScript.encode(btc.Address(NETWORK).decode(address));
    // BIP-34: the scriptSig starts with the height; the tag keeps it at the 2 bytes consensus asks for, even at height 0.
    const scriptSig = btc.Script.encode([btc.ScriptNum().encode(BigInt(height)), new TextEncoder().encode('devnet')]);
    const bytes = btc.RawTx.encode({
      version: 2,
      segwitFlag: false,
      witnesses: [],
      inputs: [{ txid: new Uint8Array(32), index: 0xffffffff, finalScriptSig: scriptSig, sequence: 0xffffffff }],
      outputs: [{ amount, script }],
      lockTime: 0,
    });
    return {
      model: 'utxo',
      txid: hex.encode(sha256(sha256(bytes)).reverse()),
      inputs: [],
      outputs: [{ vout: 0, script: hex.encode(script), address, amount }],
      fee: 0n,
      vsize: bytes.length,
      raw: hex.encode(bytes),
    };
  },

  addressOf(publicKey) {
    return btc.p2wpkh(publicKey, NETWORK).address!;
  },
};

function parse(raw: string): btc.Transaction {
  try {
    return btc.Transaction.fromRaw(hex.decode(raw), { allowUnknownOutputs: true });
  } catch {
    throw new DevnetRejection('malformed', 'The transaction is not a Bitcoin transaction in hex.');
  }
}

function outpoint(tx: btc.Transaction, index: number) {
  const input = tx.getInput(index);
  return { txid: hex.encode(input.txid!), vout: input.index! };
}

/** The address of an output script on the sandbox network, or null for scripts without one (OP_RETURN...). */
export function addressOfScript(script: Uint8Array): string | null {
  try {
    return btc.Address(NETWORK).encode(btc.OutScript.decode(script));
  } catch {
    return null;
  }
}

/** Checks input `index`'s signature against the script of the output it spends; throws invalid_signature. */
function verifyInput(tx: btc.Transaction, index: number, spent: SpentOutput[]): void {
  const prevScript = hex.decode(spent[index]!.script);
  const input = tx.getInput(index);
  const witness = input.finalScriptWitness ?? [];
  const invalid = () => new DevnetRejection('invalid_signature', `Input ${index}'s signature does not match the output it spends.`);
  let decoded: ReturnType<typeof btc.OutScript.decode>;
  try {
    decoded = btc.OutScript.decode(prevScript);
  } catch {
    throw new DevnetRejection('malformed', `Input ${index} spends an output the devnet cannot check.`);
  }
  switch (decoded.type) {
    case 'wpkh': {
      if (witness.length !== 2 || input.finalScriptSig?.length) throw invalid();
      const [signature, publicKey] = witness as [Uint8Array, Uint8Array];
      if (!bytesEqual(hash160(publicKey), decoded.hash)) throw invalid();
      const hashType = signature.at(-1)!;
      const digest = tx.preimageWitnessV0(index, btc.OutScript.encode({ type: 'pkh', hash: decoded.hash }), hashType, spent[index]!.amount);
      if (!ecdsaValid(signature.slice(0, -1), digest, publicKey)) throw invalid();
      return;
    }
    case 'tr': {
      if (witness.length !== 1) throw new DevnetRejection('malformed', `Input ${index}: the devnet checks taproot key-path spends only.`);
      const signature = witness[0]!;
      const hashType = signature.length === SCHNORR_SIGNATURE_BYTES ? 0 : signature.at(-1)!;
      const digest = tx.preimageWitnessV1(
        index,
        spent.map((output) => hex.decode(output.script)),
        hashType,
        spent.map((output) => output.amount),
      );
      let valid = false;
      try {
        valid = schnorr.verify(signature.slice(0, SCHNORR_SIGNATURE_BYTES), digest, decoded.pubkey);
      } catch {
        valid = false;
      }
      if (!valid) throw invalid();
      return;
    }
    case 'pkh': {
      if (witness.length) throw invalid();
      let parts: ReturnType<typeof btc.Script.decode>;
      try {
        parts = btc.Script.decode(input.finalScriptSig ?? new Uint8Array());
      } catch {
        throw invalid();
      }
      const [signature, publicKey] = parts;
      if (parts.length !== 2 || !(signature instanceof Uint8Array) || !(publicKey instanceof Uint8Array)) throw invalid();
      if (!bytesEqual(hash160(publicKey), decoded.hash)) throw invalid();
      const digest = (tx as unknown as LegacyPreimage).preimageLegacy(index, prevScript, signature.at(-1)!);
      if (!ecdsaValid(signature.slice(0, -1), digest, publicKey)) throw invalid();
      return;
    }
    default:
      throw new DevnetRejection('malformed', `Input ${index} spends a ${decoded.type} output: the devnet spends p2wpkh, p2tr and p2pkh outputs only.`);
  }
}

/** A DER signature, low-s as Bitcoin Core's standardness rules require. */
function ecdsaValid(der: Uint8Array, digest: Uint8Array, publicKey: Uint8Array): boolean {
  try {
    return secp256k1.verify(secp256k1.Signature.fromDER(der), digest, publicKey, { lowS: true });
  } catch {
    return false;
  }
}

const hash160 = (bytes: Uint8Array) => ripemd160(sha256(bytes));
const bytesEqual = (a: Uint8Array, b: Uint8Array) => a.length === b.length && a.every((byte, index) => byte === b[index]);
