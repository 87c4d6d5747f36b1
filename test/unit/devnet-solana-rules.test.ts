import assert from 'node:assert/strict';
import { ed25519 } from '@noble/curves/ed25519';
import { bytesToHex, concatBytes, hexToBytes } from '@noble/hashes/utils';
import { base58, base64 } from '@scure/base';
import { mnemonicToSeedSync } from '@scure/bip39';
import { solanaRules } from '../../src/chains/devnet/rules/solana';
import { DevnetRejection, type AccountTransaction } from '../../src/chains/devnet/rules/types';
import { signTransfer } from '../../src/chains/transfers';
import { LAMPORTS_PER_SIGNATURE, associatedTokenAccount } from '../../src/chains/transfers/solana';
import { deriveKey, TESTNET_COIN_TYPE } from '../../src/keys/derivation';

const ABANDON = 'abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about';
/** Circle's USDC mint stands in for the devnet's. */
const TOKENS = { USDC_SOL: 'EPjFWdd5AufqSSqeM2qA1xQuy1ZbVjxFGYvvNu2GTYkA' };
const SYSTEM_PROGRAM = new Uint8Array(32);
const COMPUTE_BUDGET_PROGRAM = base58.decode('ComputeBudget111111111111111111111111111111');
const MEMO_PROGRAM = base58.decode('MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr');

/**
 * Trust Wallet Core's Solana signer tests (tests/chains/Solana/SignerTests.cpp): transactions serialized
 * as base58. SingleSignTransaction signs a 42-lamport transfer with a known seed; SignCreateTokenAccount
 * and SignTransferToken_3vZ67C were produced by the spl-token CLI (the second is on mainnet, tx 3vZ67C…)
 * for the Serum (SRM, 6 decimals) mint, whose associated token accounts they name.
 */
const WALLET_CORE = {
  transfer: {
    seed: 'A7psj2GW7ZMdY4E5hJq14KMeYg7HFjULSsWSrTXZLvYr',
    from: '7v91N7iZ9mNicL8WfG6cgSCKyRXydQjLh6UYBWwm6y1Q',
    to: 'EN2sCsJ1WDV8UFqsiTXHcUPUxQ4juE71eCknHYYMifkd',
    signature: '5T6uZBHnHFd8uWErDBTFRVkbKuhbcm94K5MJ2beTYDruzqv4FjS7EMKvC94ZfxNAiWUXZ6bZxS3WXUbhJwYNPWn',
    serialized:
      '3p2kzZ1DvquqC6LApPuxpTg5CCDVPqJFokGSnGhnBHrta4uq7S2EyehV1XNUVXp51D69GxGzQZU' +
      'jikfDzbWBG2aFtG3gHT1QfLzyFKHM4HQtMQMNXqay1NAeiiYZjNhx9UvMX4uAQZ4Q6rx6m2AYfQ' +
      '7aoMUrejq298q1wBFdtS9XVB5QTiStnzC7zs97FUEK2T4XapjF1519EyFBViTfHpGpnf5bfizDz' +
      'sW9kYUtRDW1UC2LgHr7npgq5W9TBmHf9hSmRgM9XXucjXLqubNWE7HUMhbKjuBqkirRM',
  },
  srm: 'SRMuApVNdxXokk5GT7XD5cUUgXMBCoAz2LHeuAoKWRt',
  owner: 'B1iGmDJdvmxyUiYM8UEo2Uw2D58EmUrw4KyLYMmrhf8V',
  ownerTokenAccount: 'EDNd1ycsydWYwVmrYZvqYazFqwk1QjBgAUKFjBoz1jKP',
  createTokenAccount: {
    signature: '3doYbPs5rES3TeDSrntqUvMgXCDE2ViJX2SFhLtiptVNkqPuixXs1SwU5LUZ3KwHnCzDUth6BRr3vU3gqnuUgRvQ',
    serialized:
      'CKzRLx3AQeVeLQ7T4hss2rdbUpuAHdbwXDazxtRnSKBuncCk3WnYgy7XTrEiya19MJviYHYdTxi9gmWJY8qnR2vHVnH2DbPiKA8g72rD3VvMnjosGUBBvCwbBLge6FeQdgczMyRo9n5PcHvg9yJBTJaEEvuewyBVHwCGyGQci7eYd26xtZtCjAjwcTq4gGr3NZbeRW6jZp6j6APuew7jys4MKYRV4xPodua1TZFCkyWZr1XKzmPh7KTavtN5VzPDA8rbsvoEjHnKzjB2Bszs6pDjcBFSHyQqGsHoF8XPD35BLfjDghNtBmf9cFqo5axa6oSjANAuYg6cMSP4Hy28waSj8isr6gQjE315hWi3W1swwwPcn322gYZx6aMAcmjczaxX9aktpHYgZxixF7cYWEHxJs5QUK9mJePu9Xc6yW75UB4Ynx6dUgaSTEUzoQthF2TN3xXwu1',
  },
  transferToken:
    'PGfKqEaH2zZXDMZLcU6LUKdBSzU1GJWJ1CJXtRYCxaCH7k8uok38WSadZfrZw3TGejiau7nSpan2GvbK26hQim24jRe2AupmcYJFrgsdaCt1Aqs5kpGjPqzgj9krgxTZwwob3xgC1NdHK5BcNwhxwRtrCphGEH7zUFpGFrFrHzgpf2KY8FvPiPELQyxzTBuyNtjLjMMreehSKShEjD9Xzp1QeC1pEF8JL6vUKzxMXuveoEYem8q8JiWszYzmTMfDk13JPgv7pXFGMqDV3yNGCLsWccBeSFKN4UKECre6x2QbUEiKGkHkMc4zQwwyD8tGmEMBAGm339qdANssEMNpDeJp2LxLDStSoWShHnotcrH7pUa94xCVvCPPaomF',
  /** SignCreateTokenAccountForOther_3E6UFV: the ATA of another owner, created on mainnet. */
  other: { owner: '3xJ3MoUVFPNFEHfWdtNFa8ajXUHsJPzXcBSWMKLd76ft', tokenAccount: '67BrwFYt7qUnbAcYBVx7sQ4jeD2KWN1ohP6bMikmmQV3' },
};

interface Instruction {
  program: number;
  accounts: number[];
  data: Uint8Array;
}

/** A legacy message written by hand (every length here is under 128, one compact-u16 byte). */
function legacyMessage(header: [number, number, number], keys: Uint8Array[], instructions: Instruction[]): Uint8Array {
  const length = (count: number) => {
    assert.ok(count < 0x80);
    return Uint8Array.of(count);
  };
  return concatBytes(
    Uint8Array.from(header),
    length(keys.length),
    ...keys,
    new Uint8Array(32).fill(7),
    length(instructions.length),
    ...instructions.map(({ program, accounts, data }) => concatBytes(Uint8Array.of(program), length(accounts.length), Uint8Array.from(accounts), length(data.length), data)),
  );
}

const signedTransaction = (message: Uint8Array, signatures: Uint8Array[]) => base64.encode(concatBytes(Uint8Array.of(signatures.length), ...signatures, message));

function le(value: bigint, bytes: number): Uint8Array {
  const out = new Uint8Array(bytes);
  for (let index = 0; index < bytes; index++) out[index] = Number((value >> BigInt(8 * index)) & 0xffn);
  return out;
}

const systemTransfer = (lamports: bigint) => concatBytes(le(2n, 4), le(lamports, 8));
const refusal = (reason: DevnetRejection['reason']) => (error: unknown) => error instanceof DevnetRejection && error.reason === reason;

describe('Devnet Solana rules', () => {
  const seed = mnemonicToSeedSync(ABANDON);
  const key = (index: number) => deriveKey(seed, { chain: 'solana', testnet: true, coinType: TESTNET_COIN_TYPE, format: 'base58', account: 0, index });
  const faucet = key(0);
  const recipient = key(1);
  const stranger = key(2);
  const decode = (raw: string, tokens: Record<string, string> = TOKENS) => solanaRules.decode(raw, { tokens }) as AccountTransaction;
  const recentBlock = { height: 1, hash: base58.encode(new Uint8Array(32).fill(7)), time: new Date('2026-11-23T12:00:00Z') };
  const build = (assetId: string, amount: bigint, reference = 'tx_1') =>
    signTransfer(
      { chain: 'solana', testnet: true, from: faucet.address, to: recipient.address, assetId, amount, tokenAddress: TOKENS[assetId as 'USDC_SOL'], fee: { model: 'flat', fee: LAMPORTS_PER_SIGNATURE }, recentBlock, reference },
      [faucet],
    ).raw;
  /** The message of a one-signature transaction: what follows the count byte and the signature. */
  const messageOf = (raw: string) => base64.decode(raw).subarray(65);

  it('gives a key the address the platform derives for it', () => {
    assert.equal(solanaRules.chain, 'solana');
    assert.equal(solanaRules.addressOf(faucet.publicKey), faucet.address);
  });

  it('decodes the SOL transfer it builds: txid is the base58 of the signature, fee 5000 lamports a signature', () => {
    const raw = build('SOL', 1_234_567_890n);
    assert.deepEqual(decode(raw), {
      model: 'account',
      txid: base58.encode(base64.decode(raw).subarray(1, 65)),
      from: faucet.address,
      nonce: null,
      maxFee: 5000n,
      feeBid: 5000n,
      transfers: [{ position: 'ix:0', to: recipient.address, assetId: 'SOL', amount: 1_234_567_890n }],
      raw,
    });
    assert.notEqual(decode(build('SOL', 1_234_567_890n, 'tx_2')).txid, decode(raw).txid, 'the same terms under another reference are another transaction');
  });

  it('decodes the USDC transfer it builds between associated token accounts, crediting the owner', () => {
    const raw = build('USDC_SOL', 42_000_000n);
    const transaction = decode(raw);
    assert.equal(transaction.txid, base58.encode(base64.decode(raw).subarray(1, 65)));
    assert.equal(transaction.from, faucet.address);
    assert.equal(transaction.maxFee, 5000n);
    // Instruction 0 creates the recipient's token account if it is missing; 1 is the TransferChecked.
    assert.deepEqual(transaction.transfers, [{ position: 'ix:1', to: recipient.address, assetId: 'USDC_SOL', amount: 42_000_000n }]);
    const message = bytesToHex(messageOf(raw));
    for (const owner of [faucet.address, recipient.address]) {
      assert.ok(message.includes(bytesToHex(base58.decode(associatedTokenAccount(owner, TOKENS.USDC_SOL)))), `the ATA of ${owner} is an account key`);
    }
  });

  it("derives associated token accounts as Solana does (Trust Wallet Core's mainnet vectors)", () => {
    assert.equal(associatedTokenAccount(WALLET_CORE.owner, WALLET_CORE.srm), WALLET_CORE.ownerTokenAccount);
    assert.equal(associatedTokenAccount(WALLET_CORE.other.owner, WALLET_CORE.srm), WALLET_CORE.other.tokenAccount);
  });

  it("accepts Trust Wallet Core's signed transfer and the spl-token CLI's account creation, and signs as they do", () => {
    const { transfer } = WALLET_CORE;
    const raw = base64.encode(base58.decode(transfer.serialized));
    const decoded = decode(raw);
    assert.equal(decoded.txid, transfer.signature);
    assert.equal(decoded.from, transfer.from);
    assert.deepEqual(decoded.transfers, [{ position: 'ix:0', to: transfer.to, assetId: 'SOL', amount: 42n }]);
    // ed25519 is deterministic: the seed signs the message into the very same signature.
    const seedBytes = base58.decode(transfer.seed);
    assert.equal(solanaRules.addressOf(ed25519.getPublicKey(seedBytes)), transfer.from);
    assert.equal(base58.encode(ed25519.sign(messageOf(raw), seedBytes)), transfer.signature);

    const creation = decode(base64.encode(base58.decode(WALLET_CORE.createTokenAccount.serialized)), { USDC_SOL: WALLET_CORE.srm });
    assert.equal(creation.txid, WALLET_CORE.createTokenAccount.signature);
    assert.equal(creation.from, WALLET_CORE.owner);
    assert.deepEqual(creation.transfers, []);
    assert.equal(creation.maxFee, 5000n);
  });

  it('refuses a token transfer whose recipient owner the transaction does not name (the mainnet spl-token transfer 3vZ67C)', () => {
    const raw = base64.encode(base58.decode(WALLET_CORE.transferToken));
    // Its signature verifies and its source is the sender's ATA; only the destination's owner is unknown.
    assert.throws(() => decode(raw, { USDC_SOL: WALLET_CORE.srm }), /destination's owner is not among the transaction's accounts/);
    assert.throws(() => decode(raw), /not one of the devnet's tokens/);
  });

  it('refuses a signature by another key, a flipped signature byte, and a missing signature', () => {
    const message = messageOf(build('SOL', 10n));
    assert.throws(() => decode(signedTransaction(message, [ed25519.sign(message, stranger.privateKey)])), refusal('invalid_signature'));
    const signature = ed25519.sign(message, faucet.privateKey);
    for (const index of [0, 31, 32, 63]) {
      const flipped = Uint8Array.from(signature);
      flipped[index]! ^= 0x01;
      assert.throws(() => decode(signedTransaction(message, [flipped])), refusal('invalid_signature'), `byte ${index}`);
    }
    assert.throws(() => decode(signedTransaction(message, [])), refusal('malformed'));
  });

  it('refuses a tampered amount, SOL or token', () => {
    for (const [assetId, amount] of [['SOL', 1_234_567_890n], ['USDC_SOL', 42_000_000n]] as const) {
      const bytes = base64.decode(build(assetId, amount));
      const hex = bytesToHex(bytes);
      const tampered = hex.replace(bytesToHex(le(amount, 8)), bytesToHex(le(amount * 10n, 8)));
      assert.notEqual(tampered, hex, assetId);
      assert.throws(() => decode(base64.encode(hexToBytes(tampered))), refusal('invalid_signature'), assetId);
    }
  });

  it('refuses malformed bytes, versioned messages and instructions it does not understand', () => {
    const raw = build('SOL', 10n);
    const bytes = base64.decode(raw);
    for (const bad of ['', 'not base64!', base64.encode(bytes.subarray(0, 100)), base64.encode(concatBytes(bytes, Uint8Array.of(0))), base64.encode(new Uint8Array(1300))]) {
      assert.throws(() => decode(bad), refusal('malformed'), bad.slice(0, 20));
    }
    const payer = base58.decode(faucet.address);
    const sign = (message: Uint8Array) => signedTransaction(message, [ed25519.sign(message, faucet.privateKey)]);

    const versioned = concatBytes(Uint8Array.of(0x80), messageOf(raw));
    assert.throws(() => decode(sign(versioned)), /versioned/);

    const memo = legacyMessage([1, 0, 1], [payer, MEMO_PROGRAM], [{ program: 1, accounts: [], data: new TextEncoder().encode('hi') }]);
    assert.throws(() => decode(sign(memo)), /understands the System, SPL Token/);

    // System Program CreateAccount (0) rather than Transfer.
    const createAccount = legacyMessage([1, 0, 1], [payer, base58.decode(recipient.address), SYSTEM_PROGRAM], [{ program: 2, accounts: [0, 1], data: concatBytes(le(0n, 4), le(1n, 8)) }]);
    assert.throws(() => decode(sign(createAccount)), /only Transfer/);

    // A transfer out of a second signer: the devnet debits the fee payer only.
    const other = base58.decode(stranger.address);
    const fromSecondSigner = legacyMessage([2, 0, 1], [payer, other, SYSTEM_PROGRAM], [{ program: 2, accounts: [1, 0], data: systemTransfer(5n) }]);
    const bothSigned = signedTransaction(fromSecondSigner, [ed25519.sign(fromSecondSigner, faucet.privateKey), ed25519.sign(fromSecondSigner, stranger.privateKey)]);
    assert.throws(() => decode(bothSigned), /only the fee payer/);
    // The same with the second signature missing is refused before anything else.
    assert.throws(() => decode(signedTransaction(fromSecondSigner, [ed25519.sign(fromSecondSigner, faucet.privateKey)])), refusal('malformed'));
  });

  it('adds the Compute Budget priority fee: price (micro-lamports) times the unit limit, rounded up', () => {
    const payer = base58.decode(faucet.address);
    const message = legacyMessage(
      [1, 0, 2],
      [payer, base58.decode(recipient.address), SYSTEM_PROGRAM, COMPUTE_BUDGET_PROGRAM],
      [
        { program: 3, accounts: [], data: concatBytes(Uint8Array.of(2), le(300_001n, 4)) },
        { program: 3, accounts: [], data: concatBytes(Uint8Array.of(3), le(10_000n, 8)) },
        { program: 2, accounts: [0, 1], data: systemTransfer(77n) },
      ],
    );
    const transaction = decode(signedTransaction(message, [ed25519.sign(message, faucet.privateKey)]));
    // 5000 + ceil(10,000 × 300,001 / 1,000,000) = 5000 + 3001.
    assert.equal(transaction.maxFee, 8001n);
    assert.equal(transaction.feeBid, 8001n);
    assert.deepEqual(transaction.transfers, [{ position: 'ix:2', to: recipient.address, assetId: 'SOL', amount: 77n }]);
  });
});
