import assert from 'node:assert/strict';
import { randomInt } from 'node:crypto';
import { base58, base64 } from '@scure/base';
import { mnemonicToSeedSync } from '@scure/bip39';
import { FailedTransactionMetadata, LiteSVM } from 'litesvm';
import { assetById } from '../../src/catalogue/service';
import { signTransfer, type TransferToSign } from '../../src/chains/transfers';
import { associatedTokenAccount, LAMPORTS_PER_SIGNATURE, TOKEN_PROGRAM } from '../../src/chains/transfers/solana';
import { coinTypeFor, deriveKey, type DerivedKey } from '../../src/keys/derivation';
import { mintData, putTokenProgramAccount, runtimeTransaction, svmAddress as address, TOKEN_ACCOUNT_SIZE, tokenAccountData, u64At } from '../support/litesvm';

/**
 * The Solana transfers the platform builds and signs (src/chains/transfers/solana.ts), executed by the
 * Solana runtime itself (LiteSVM: the SVM with the real System, SPL Token and Associated Token Account
 * programs, in process). Each must succeed with exact balances: what the devnet's rules model, the
 * runtime enforces here.
 */

/** A public test mnemonic; every run takes a fresh account of it, so runs never share addresses. */
const SEED = mnemonicToSeedSync('abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about');
const ACCOUNT = randomInt(1, 2 ** 30);
const SOL = 1_000_000_000n;

/** A wallet's Solana key as custody derives it (src/keys/derivation.ts): sandbox or live coin type. */
const walletKey = (index: number, testnet = true): DerivedKey =>
  deriveKey(SEED, { chain: 'solana', testnet, coinType: coinTypeFor('solana', testnet), format: 'base58', account: ACCOUNT, index });

describe('Solana transfers in the Solana runtime (LiteSVM)', () => {
  let svm: LiteSVM;
  let sender: DerivedKey;
  let recipient: DerivedKey;
  let counter = 0;

  const lamports = (account: string) => svm.getBalance(address(account)) ?? 0n;
  const accountData = (account: string) => {
    const found = svm.getAccount(address(account));
    assert.ok(found.exists, `account ${account} exists`);
    return found;
  };
  const tokenAmount = (account: string) => u64At(accountData(account).data, 64);

  /** A transfer as the send workflow builds it (src/transactions/signing.ts), on the runtime's recent blockhash. */
  const transfer = (fields: Partial<TransferToSign> & Pick<TransferToSign, 'assetId' | 'amount'>): TransferToSign => ({
    chain: 'solana',
    testnet: true,
    from: sender.address,
    to: recipient.address,
    fee: { model: 'flat', fee: LAMPORTS_PER_SIGNATURE },
    recentBlock: { height: Number(svm.getClock().slot), hash: svm.latestBlockhash(), time: new Date() },
    reference: `tx_litesvm_${++counter}`,
    ...fields,
  });

  /** Executes the signed transfer; a runtime failure fails the test with the runtime's error and logs. */
  function execute(toSign: TransferToSign, key = sender) {
    const signed = signTransfer(toSign, [key]);
    const outcome = svm.sendTransaction(runtimeTransaction(signed.raw));
    if (outcome instanceof FailedTransactionMetadata) assert.fail(`the runtime refused the transfer: ${outcome.toString()}\n${outcome.meta().logs().join('\n')}`);
    assert.equal(base58.encode(outcome.signature()), signed.txid, "the txid is the runtime's signature");
    return { signed, outcome };
  }

  beforeEach(() => {
    svm = new LiteSVM();
    sender = walletKey(0);
    recipient = walletKey(1);
    svm.airdrop(address(sender.address), (10n * SOL) as never);
  });

  describe('native SOL', () => {
    it('moves the amount to a new account and charges exactly the base fee', () => {
      const before = lamports(sender.address);
      execute(transfer({ assetId: 'SOL', amount: 1_500_000_000n }));
      assert.equal(lamports(recipient.address), 1_500_000_000n);
      assert.equal(lamports(sender.address), before - 1_500_000_000n - LAMPORTS_PER_SIGNATURE);
    });

    it('charges exactly the flat fee asked for when it carries a priority fee (Compute Budget instructions)', () => {
      for (const fee of [LAMPORTS_PER_SIGNATURE + 1n, 10_000n, 125_000n]) {
        const [senderBefore, recipientBefore] = [lamports(sender.address), lamports(recipient.address)];
        execute(transfer({ assetId: 'SOL', amount: SOL, fee: { model: 'flat', fee } }));
        assert.equal(lamports(sender.address), senderBefore - SOL - fee, `fee ${fee}`);
        assert.equal(lamports(recipient.address), recipientBefore + SOL);
      }
    });

    it('sends from a live key to a live address the same way (mainnet and devnet share address forms)', () => {
      const liveSender = walletKey(0, false);
      svm.airdrop(address(liveSender.address), SOL as never);
      execute(transfer({ assetId: 'SOL', amount: 2_000_000n, testnet: false, from: liveSender.address, to: walletKey(1, false).address }), liveSender);
      assert.equal(lamports(liveSender.address), SOL - 2_000_000n - LAMPORTS_PER_SIGNATURE);
      assert.equal(lamports(walletKey(1, false).address), 2_000_000n);
    });

    it('lands two transfers of identical terms as two transactions (the reference key makes them distinct)', () => {
      const before = lamports(sender.address);
      const first = execute(transfer({ assetId: 'SOL', amount: SOL, reference: 'tx_same_terms_1' }));
      const second = execute(transfer({ assetId: 'SOL', amount: SOL, reference: 'tx_same_terms_2' }));
      assert.notEqual(first.signed.txid, second.signed.txid);
      assert.equal(lamports(recipient.address), 2n * SOL);
      assert.equal(lamports(sender.address), before - 2n * SOL - 2n * LAMPORTS_PER_SIGNATURE);
    });

    it('is refused by the runtime on an expired blockhash, and moves nothing', () => {
      const stale = transfer({ assetId: 'SOL', amount: SOL });
      svm.expireBlockhash();
      const outcome = svm.sendTransaction(runtimeTransaction(signTransfer(stale, [sender]).raw));
      assert.ok(outcome instanceof FailedTransactionMetadata);
      assert.match(outcome.toString(), /BlockhashNotFound/);
      assert.equal(lamports(recipient.address), 0n);
      assert.equal(lamports(sender.address), 10n * SOL);
    });

    it('is refused with a signature that is not the sender\'s (the runtime verifies it)', () => {
      const bytes = base64.decode(signTransfer(transfer({ assetId: 'SOL', amount: SOL }), [sender]).raw);
      bytes[1] ^= 1;
      const outcome = svm.sendTransaction(runtimeTransaction(base64.encode(bytes)));
      assert.ok(outcome instanceof FailedTransactionMetadata);
      assert.match(outcome.toString(), /SignatureFailure/);
      assert.equal(lamports(recipient.address), 0n);
    });

    it('is refused when it would leave a new account below the rent-exempt minimum (the runtime rule the devnet does not model)', () => {
      const outcome = svm.sendTransaction(runtimeTransaction(signTransfer(transfer({ assetId: 'SOL', amount: 1_000n }), [sender]).raw));
      assert.ok(outcome instanceof FailedTransactionMetadata);
      assert.match(outcome.toString(), /InsufficientFundsForRent/);
      assert.equal(lamports(recipient.address), 0n);
    });
  });

  describe('SPL token (USDC_SOL, a mint made here with the catalogue decimals)', () => {
    const decimals = assetById('USDC_SOL').decimals;
    const held = 1_000_000n * 10n ** BigInt(decimals);
    let mint: string;
    let senderTokens: string;
    let recipientTokens: string;

    /** A mint of `mintDecimals` whose whole supply the sender holds in its associated token account; answers that account. */
    function mintHeldBySender(mintAddress: string, mintDecimals: number): string {
      putTokenProgramAccount(svm, mintAddress, mintData(walletKey(8).address, held, mintDecimals));
      const holding = associatedTokenAccount(sender.address, mintAddress);
      putTokenProgramAccount(svm, holding, tokenAccountData(mintAddress, sender.address, held));
      return holding;
    }

    beforeEach(() => {
      mint = walletKey(9).address;
      senderTokens = mintHeldBySender(mint, decimals);
      recipientTokens = associatedTokenAccount(recipient.address, mint);
    });

    it("creates the recipient's associated token account, paying its rent, and moves the exact amount", () => {
      const rent = svm.minimumBalanceForRentExemption(BigInt(TOKEN_ACCOUNT_SIZE));
      const before = lamports(sender.address);
      const amount = 12_345_678n;
      assert.equal(svm.getAccount(address(recipientTokens)).exists, false);
      execute(transfer({ assetId: 'USDC_SOL', amount, tokenAddress: mint }));

      const created = accountData(recipientTokens);
      assert.equal(created.programAddress, base58.encode(TOKEN_PROGRAM));
      assert.equal(created.lamports, rent, 'the token account holds exactly its rent-exempt minimum');
      assert.equal(base58.encode(created.data.subarray(0, 32)), mint);
      assert.equal(base58.encode(created.data.subarray(32, 64)), recipient.address);
      assert.equal(tokenAmount(recipientTokens), amount);
      assert.equal(tokenAmount(senderTokens), held - amount);
      assert.equal(lamports(sender.address), before - LAMPORTS_PER_SIGNATURE - rent, 'the sender pays the fee and the new account rent');
      assert.equal(svm.getBalance(address(recipient.address)), null, "the recipient's own account is untouched");
    });

    it('pays no rent again once the account exists (CreateIdempotent), and exactly a priority fee', () => {
      execute(transfer({ assetId: 'USDC_SOL', amount: 1n, tokenAddress: mint }));
      const before = lamports(sender.address);
      const fee = 25_000n;
      execute(transfer({ assetId: 'USDC_SOL', amount: 2_000_000n, tokenAddress: mint, fee: { model: 'flat', fee } }));
      assert.equal(lamports(sender.address), before - fee);
      assert.equal(tokenAmount(recipientTokens), 2_000_001n);
      assert.equal(tokenAmount(senderTokens), held - 2_000_001n);
    });

    it("is refused by the token program when the catalogue's decimals are not the mint's (TransferChecked)", () => {
      const other = walletKey(10).address;
      const otherTokens = mintHeldBySender(other, decimals + 3);
      const before = lamports(sender.address);
      const outcome = svm.sendTransaction(runtimeTransaction(signTransfer(transfer({ assetId: 'USDC_SOL', amount: 1n, tokenAddress: other }), [sender]).raw));
      assert.ok(outcome instanceof FailedTransactionMetadata);
      assert.equal(tokenAmount(otherTokens), held);
      assert.equal(svm.getAccount(address(associatedTokenAccount(recipient.address, other))).exists, false, 'a failed transaction creates nothing');
      assert.equal(lamports(sender.address), before - LAMPORTS_PER_SIGNATURE, 'a failed transaction still pays its fee');
    });
  });
});
