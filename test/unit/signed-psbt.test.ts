import assert from 'node:assert/strict';
import { secp256k1 } from '@noble/curves/secp256k1';
import { base64, hex } from '@scure/base';
import * as btc from '@scure/btc-signer';
import { readPsbt } from '../../src/custody/signed-payloads';
import { DomainError } from '../../src/shared/errors';

const NETWORK = btc.TEST_NETWORK;
const keyed = () => {
  const privateKey = secp256k1.utils.randomPrivateKey();
  const publicKey = secp256k1.getPublicKey(privateKey, true);
  return { privateKey, publicKey, wpkh: btc.p2wpkh(publicKey, NETWORK), pkh: btc.p2pkh(publicKey, NETWORK) };
};
const signer = keyed();
const change = keyed().wpkh.address!;
const payee = keyed().wpkh.address!;
const other = keyed().pkh.address!;
const TXID = 'aa'.repeat(32);

/** A PSBT spending `inputs` of the signer's p2wpkh address (and one stranger's input when asked) to `outputs`. */
function psbt(outputs: [string, bigint][], { inputs = [100_000n], stranger = false } = {}) {
  const tx = new btc.Transaction();
  inputs.forEach((amount, index) => tx.addInput({ txid: TXID, index, witnessUtxo: { script: signer.wpkh.script, amount } }));
  if (stranger) tx.addInput({ txid: 'bb'.repeat(32), index: 0, witnessUtxo: { script: keyed().wpkh.script, amount: 5_000n } });
  outputs.forEach(([address, amount]) => tx.addOutputAddress(address, amount, NETWORK));
  return tx;
}

const own = new Set([signer.wpkh.address!, change]);
const read = (tx: btc.Transaction, inputIndex = 0, address = signer.wpkh.address!) => readPsbt(tx.toPSBT(), false, inputIndex, { environment: 'sandbox', address, ownAddresses: own });

const refused = (run: () => unknown, param: string) =>
  assert.throws(run, (error: unknown) => error instanceof DomainError && error.param === param);

describe('PSBT signing (hash_function psbt)', () => {
  it('reads the external output as destination and amount, change aside, and the fee from the inputs', () => {
    const { decoded } = read(psbt([[payee, 60_000n], [change, 39_000n]]));
    assert.deepEqual(decoded, { kind: 'bitcoin_psbt', destination: payee, asset: { native: true }, amount: 60_000n, fee: 1_000n });
  });

  it('leaves the destination unknown for two external addresses and counts their total; a PSBT paying the wallet itself names its address', () => {
    assert.deepEqual(read(psbt([[payee, 30_000n], [other, 20_000n], [change, 49_000n]])).decoded, { kind: 'bitcoin_psbt', asset: { native: true }, amount: 50_000n, fee: 1_000n });
    assert.deepEqual(read(psbt([[change, 99_500n]])).decoded, { kind: 'bitcoin_psbt', destination: change, asset: { native: true }, amount: 99_500n, fee: 500n });
  });

  it('names no fee when an input does not say its amount', () => {
    const tx = psbt([[payee, 1_000n]]);
    tx.addInput({ txid: 'cc'.repeat(32), index: 1 });
    assert.deepEqual(read(tx).decoded, { kind: 'bitcoin_psbt', destination: payee, asset: { native: true }, amount: 1_000n });
  });

  it('signs the BIP-143 sighash of a p2wpkh input, which btc-signer finalizes into a spend that verifies', () => {
    const tx = psbt([[payee, 60_000n], [change, 39_000n]], { inputs: [50_000n, 50_000n] });
    const { sighash } = read(tx, 1);
    const expected = tx.preimageWitnessV0(1, btc.p2pkh(signer.publicKey).script, btc.SigHash.ALL, 50_000n);
    assert.equal(hex.encode(sighash), hex.encode(expected));
    // The same digest btc-signer signs for the input: its own signature verifies against ours.
    tx.signIdx(signer.privateKey, 1);
    const [[, signature]] = tx.getInput(1).partialSig!;
    assert.ok(secp256k1.verify(secp256k1.Signature.fromDER(signature!.slice(0, -1)), sighash, signer.publicKey));
  });

  it('signs the legacy sighash of a p2pkh input, and reads base64 text', () => {
    const tx = new btc.Transaction({ allowLegacyWitnessUtxo: true });
    tx.addInput({ txid: TXID, index: 0, witnessUtxo: { script: signer.pkh.script, amount: 10_000n } });
    tx.addOutputAddress(payee, 9_000n, NETWORK);
    const { sighash, decoded } = readPsbt(new TextEncoder().encode(base64.encode(tx.toPSBT())), true, 0, { environment: 'sandbox', address: signer.pkh.address!, ownAddresses: new Set([signer.pkh.address!]) });
    assert.equal(decoded.destination, payee);
    tx.signIdx(signer.privateKey, 0);
    const [[, signature]] = tx.getInput(0).partialSig!;
    assert.ok(secp256k1.verify(secp256k1.Signature.fromDER(signature!.slice(0, -1)), sighash, signer.publicKey));
  });

  it('refuses what the key cannot sign: no PSBT, an input past the last, a stranger\'s input, a sighash other than ALL, a taproot address', () => {
    refused(() => readPsbt(hex.decode('00'.repeat(40)), false, 0, { environment: 'sandbox', address: signer.wpkh.address!, ownAddresses: own }), 'payload');
    refused(() => readPsbt(new TextEncoder().encode('not base64!'), true, 0, { environment: 'sandbox', address: signer.wpkh.address!, ownAddresses: own }), 'payload');
    refused(() => read(psbt([[payee, 1_000n]]), 1), 'input_index');
    refused(() => read(psbt([[payee, 1_000n]], { stranger: true }), 1), 'input_index');
    const anyoneCanPay = psbt([[payee, 1_000n]]);
    anyoneCanPay.updateInput(0, { sighashType: btc.SigHash.ALL_ANYONECANPAY });
    refused(() => read(anyoneCanPay), 'payload');
    const taproot = btc.p2tr(signer.publicKey.slice(1), undefined, NETWORK);
    const tx = new btc.Transaction();
    tx.addInput({ txid: TXID, index: 0, witnessUtxo: { script: taproot.script, amount: 10_000n }, tapInternalKey: signer.publicKey.slice(1) });
    tx.addOutputAddress(payee, 9_000n, NETWORK);
    refused(() => read(tx, 0, taproot.address!), 'address_id');
  });
});
