import assert from 'node:assert/strict';
import { secp256k1 } from '@noble/curves/secp256k1';
import { sha256 } from '@noble/hashes/sha256';
import { bytesToHex, concatBytes, hexToBytes } from '@noble/hashes/utils';
import { mnemonicToSeedSync } from '@scure/bip39';
import { TRON_TRANSFER_FEE_SUN, tronRules } from '../../src/chains/devnet/rules/tron';
import { DevnetRejection, type AccountTransaction } from '../../src/chains/devnet/rules/types';
import { signTransfer } from '../../src/chains/transfers';
import { deriveKey, TESTNET_COIN_TYPE } from '../../src/keys/derivation';

const ABANDON = 'abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about';
/** Any valid Tron address serves as the devnet's USDT contract here. */
const TOKENS = { USDT_TRX: 'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t' };

/**
 * Trust Wallet Core's Tron signer tests (tests/chains/Tron/SignerTests.cpp, SignTransfer and
 * SignTransferTrc20Contract): key 2d8f…aa54 signs a TRX transfer and a TRC-20 transfer referencing block
 * 3111739. The raw_data below is those inputs encoded (ref_block_hash from that block header); its sha256
 * is wallet-core's expected id, and the signatures are wallet-core's expected output (v = 0/1).
 */
const WALLET_CORE = {
  owner: 'TJRyWwFs9wTFGZg3JbrVriFbNfCug5tDeC',
  trx: {
    rawData:
      '0a027b3b2208b21ace8d6ac20e7e40d8abb9bae62c5a67080112630a2d747970652e676f6f676c65617069732e636f6d2f70726f746f636f6c2e5472616e73666572436f6e747261637412320a15415cd0fb0ab3ce40f3051414c604b27756e69e43db121541521ea197907927725ef36d70f25f850d1659c7c71880897a70d889a4a9e62c',
    txid: 'dc6f6d9325ee44ab3c00528472be16e1572ab076aa161ccd12515029869d0451',
    signature: 'ede769f6df28aefe6a846be169958c155e23e7e5c9621d2e8dce1719b4d952b63e8a8bf9f00e41204ac1bf69b1a663dacdf764367e48e4a5afcd6b055a747fb200',
  },
  trc20: {
    contract: 'THTR75o8xXAgCTQqpiot2AFRAjvW1tSbVV',
    rawData:
      '0a027b3b2208b21ace8d6ac20e7e40d8abb9bae62c5aae01081f12a9010a31747970652e676f6f676c65617069732e636f6d2f70726f746f636f6c2e54726967676572536d617274436f6e747261637412740a15415cd0fb0ab3ce40f3051414c604b27756e69e43db121541521ea197907927725ef36d70f25f850d1659c7c72244a9059cbb000000000000000000000041dbd7c53729b3310e1843083000fa84abad99696100000000000000000000000000000000000000000000000000000000000003e870d889a4a9e62c',
    txid: '0d644290e3cf554f6219c7747f5287589b6e7e30e1b02793b48ba362da6a5058',
    signature: 'bec790877b3a008640781e3948b070740b1f6023c29ecb3f7b5835433c13fc5835e5cad3bd44360ff2ddad5ed7dc9d7dee6878f90e86a40355b7697f5954b88c01',
  },
};

function varint(value: number): Uint8Array {
  const out: number[] = [];
  for (; value >= 0x80; value >>>= 7) out.push((value & 0x7f) | 0x80);
  out.push(value);
  return Uint8Array.from(out);
}

/** `Transaction { raw_data = 1; signature = 2 }` framed by hand, independently of the module. */
const signedTransaction = (rawData: Uint8Array, ...signatures: Uint8Array[]) =>
  bytesToHex(concatBytes(Uint8Array.of(0x0a), varint(rawData.length), rawData, ...signatures.flatMap((signature) => [Uint8Array.of(0x12, signature.length), signature])));

/** The raw_data bytes of a signed transaction (field 1, the first one written). */
function rawDataOf(signedHex: string): Uint8Array {
  const bytes = hexToBytes(signedHex);
  assert.equal(bytes[0], 0x0a);
  let length = 0;
  let offset = 1;
  for (let shift = 0; ; shift += 7) {
    const byte = bytes[offset++]!;
    length |= (byte & 0x7f) << shift;
    if (byte < 0x80) break;
  }
  return bytes.subarray(offset, offset + length);
}

function tronSignature(digest: Uint8Array, privateKey: Uint8Array): Uint8Array {
  const signature = secp256k1.sign(digest, privateKey);
  return concatBytes(signature.toCompactRawBytes(), Uint8Array.of(27 + signature.recovery));
}

const refusal = (reason: DevnetRejection['reason']) => (error: unknown) => error instanceof DevnetRejection && error.reason === reason;

describe('Devnet Tron rules', () => {
  const seed = mnemonicToSeedSync(ABANDON);
  const key = (index: number) => deriveKey(seed, { chain: 'tron', testnet: true, coinType: TESTNET_COIN_TYPE, format: 'base58check', account: 0, index });
  const faucet = key(0);
  const recipient = key(1);
  const stranger = key(2);
  const decode = (raw: string) => tronRules.decode(raw, { tokens: TOKENS }) as AccountTransaction;
  // Block 3111739 as Tron writes its id (its height in the first 8 bytes): wallet-core's reference block below.
  const recentBlock = { height: 3_111_739, hash: `00000000002f7b3bb21ace8d6ac20e7e${'ab'.repeat(16)}`, time: new Date('2026-11-23T12:00:00Z') };
  const build = (assetId: string, amount: bigint, fee = 15_000_000n, reference = 'tx_1') =>
    signTransfer(
      { chain: 'tron', testnet: true, from: faucet.address, to: recipient.address, assetId, amount, tokenAddress: TOKENS[assetId as 'USDT_TRX'], fee: { model: 'flat', fee }, recentBlock, reference },
      [faucet],
    ).raw;

  it('gives a key the address the platform derives for it', () => {
    assert.equal(tronRules.chain, 'tron');
    assert.equal(tronRules.addressOf(faucet.publicKey), faucet.address);
    assert.match(faucet.address, /^T[1-9A-HJ-NP-Za-km-z]{33}$/);
  });

  it('decodes the TRX transfer it builds: txid is sha256(raw_data), the owner signed, a flat bandwidth fee', () => {
    const raw = build('TRX', 1_000_000n);
    const transaction = decode(raw);
    assert.deepEqual(transaction, {
      model: 'account',
      txid: bytesToHex(sha256(rawDataOf(raw))),
      from: faucet.address,
      nonce: null,
      maxFee: TRON_TRANSFER_FEE_SUN,
      feeBid: TRON_TRANSFER_FEE_SUN,
      transfers: [{ position: 'native', to: recipient.address, assetId: 'TRX', amount: 1_000_000n }],
      raw,
    });
    // The same terms under another reference are another transaction.
    assert.notEqual(decode(build('TRX', 1_000_000n, undefined, 'tx_2')).txid, transaction.txid);
  });

  it('decodes the TRC-20 transfer it builds, with fee_limit as its fee cap', () => {
    const raw = build('USDT_TRX', 25_000_000n, 30_000_000n);
    const transaction = decode(raw);
    assert.equal(transaction.txid, bytesToHex(sha256(rawDataOf(raw))));
    assert.equal(transaction.from, faucet.address);
    assert.equal(transaction.maxFee, 30_000_000n);
    assert.equal(transaction.feeBid, 30_000_000n);
    assert.deepEqual(transaction.transfers, [{ position: 'log:0', to: recipient.address, assetId: 'USDT_TRX', amount: 25_000_000n }]);
  });

  it("accepts Trust Wallet Core's signed TRX and TRC-20 transfers with their txids", () => {
    const trx = decode(signedTransaction(hexToBytes(WALLET_CORE.trx.rawData), hexToBytes(WALLET_CORE.trx.signature)));
    assert.equal(trx.txid, WALLET_CORE.trx.txid);
    assert.equal(trx.from, WALLET_CORE.owner);
    assert.deepEqual(trx.transfers, [{ position: 'native', to: 'THTR75o8xXAgCTQqpiot2AFRAjvW1tSbVV', assetId: 'TRX', amount: 2_000_000n }]);

    const tokens = { USDT_TRX: WALLET_CORE.trc20.contract };
    const raw = signedTransaction(hexToBytes(WALLET_CORE.trc20.rawData), hexToBytes(WALLET_CORE.trc20.signature));
    const trc20 = tronRules.decode(raw, { tokens }) as AccountTransaction;
    assert.equal(trc20.txid, WALLET_CORE.trc20.txid);
    assert.equal(trc20.from, WALLET_CORE.owner);
    assert.equal(trc20.maxFee, 0n);
    assert.deepEqual(trc20.transfers, [{ position: 'log:0', to: 'TW1dU4L3eNm7Lw8WvieLKEHpXWAussRG9Z', assetId: 'USDT_TRX', amount: 1000n }]);

    // The signature the module's signing convention makes (v = 27 + recovery, as TronWeb) is the same r ‖ s.
    const ours = tronSignature(hexToBytes(WALLET_CORE.trx.txid), hexToBytes('2d8f68944bdbfbc0769542fba8fc2d2a3de67393334471624364c7006da2aa54'));
    assert.equal(bytesToHex(ours.subarray(0, 64)), WALLET_CORE.trx.signature.slice(0, 128));
    assert.equal(decode(signedTransaction(hexToBytes(WALLET_CORE.trx.rawData), ours)).txid, WALLET_CORE.trx.txid);
  });

  it('refuses a signature by another key, a flipped signature byte, and an unsigned transaction', () => {
    const rawData = rawDataOf(build('TRX', 5_000_000n));
    assert.throws(() => decode(signedTransaction(rawData, tronSignature(sha256(rawData), stranger.privateKey))), refusal('invalid_signature'));

    const signature = tronSignature(sha256(rawData), faucet.privateKey);
    for (const index of [0, 40, 63]) {
      const flipped = Uint8Array.from(signature);
      flipped[index]! ^= 0x01;
      assert.throws(() => decode(signedTransaction(rawData, flipped)), refusal('invalid_signature'), `byte ${index}`);
    }
    assert.throws(() => decode(signedTransaction(rawData)), refusal('invalid_signature'));
    assert.throws(() => decode(signedTransaction(rawData, signature.subarray(0, 64))), refusal('invalid_signature'));
  });

  it('refuses a tampered amount, TRX or token', () => {
    // TRX amount 1,000,000 sun is field 3 varint c0843d; USDT 7,000,000 is the call's last word, 6acfc0.
    const trx = build('TRX', 1_000_000n);
    const tamperedTrx = trx.replace('18c0843d', '18c1843d');
    assert.notEqual(tamperedTrx, trx);
    assert.throws(() => decode(tamperedTrx), refusal('invalid_signature'));

    const token = build('USDT_TRX', 7_000_000n);
    const tamperedToken = token.replace('00000000006acfc0', '00000000016acfc0');
    assert.notEqual(tamperedToken, token);
    assert.throws(() => decode(tamperedToken), refusal('invalid_signature'));
  });

  it('refuses malformed bytes and contracts it does not understand', () => {
    const raw = build('TRX', 1_000_000n);
    for (const bad of ['', 'zz', raw.slice(1), raw.slice(0, -2), raw.slice(0, 40), `0x${raw}`, 'ff'.repeat(20)]) {
      assert.throws(() => decode(bad), refusal('malformed'), bad.slice(0, 20));
    }
    // A TRC-20 call on a contract that is not a devnet token.
    assert.throws(() => tronRules.decode(build('USDT_TRX', 1n), { tokens: { USDT_TRX: recipient.address } }), refusal('malformed'));
    // Contract type 2 (TransferAssetContract, TRC-10) instead of 1.
    const rawData = rawDataOf(raw);
    const retyped = hexToBytes(bytesToHex(rawData).replace('5a67080112', '5a67080212'));
    assert.throws(() => decode(signedTransaction(retyped, tronSignature(sha256(retyped), faucet.privateKey))), /TransferContract and TRC-20/);
    // Two signatures: multi-signature permissions are not modelled.
    const signature = tronSignature(sha256(rawData), faucet.privateKey);
    assert.throws(() => decode(signedTransaction(rawData, signature, signature)), refusal('malformed'));
  });
});
