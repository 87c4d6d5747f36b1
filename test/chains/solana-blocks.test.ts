import assert from 'node:assert/strict';
import { randomInt } from 'node:crypto';
import { base58 } from '@scure/base';
import { mnemonicToSeedSync } from '@scure/bip39';
import { SolanaRpcProvider } from '../../src/chains/providers/solana-rpc';
import { signTransfer } from '../../src/chains/transfers';
import {
  ASSOCIATED_TOKEN_PROGRAM,
  associatedTokenAccount,
  LAMPORTS_PER_SIGNATURE,
  readonly,
  signer,
  signSolanaInstructions,
  SOLANA_TOKEN_ACCOUNT_RENT,
  solanaRecentBlockhash,
  TOKEN_PROGRAM,
  writable,
} from '../../src/chains/transfers/solana';
import { coinTypeFor, deriveKey, type DerivedKey } from '../../src/keys/derivation';
import { mintData, putTokenProgramAccount, svmAddress, tokenAccountData } from '../support/litesvm';
import { SolanaNode, TOKEN_2022_PROGRAM_ID } from '../support/solana-node';

/**
 * What the Solana provider reads of a block, from transactions the runtime (LiteSVM) executed: transfers a
 * program made by CPI (inner instructions), Token-2022 transfers, and a block larger than the response
 * cap, which the node answers whole (as Agave's RPC does: it caps no answer) and the provider reads in pages.
 */

const SEED = mnemonicToSeedSync('abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about');
const ACCOUNT = randomInt(1, 2 ** 30);
const key = (index: number): DerivedKey => deriveKey(SEED, { chain: 'solana', testnet: false, coinType: coinTypeFor('solana', false), format: 'base58', account: ACCOUNT, index });
const SOL = 1_000_000_000n;
/** AssociatedTokenAccountInstruction::RecoverNested. */
const RECOVER_NESTED = 2;

describe('Solana blocks (solana-rpc): inner instructions, Token-2022 and blocks over the response cap, from what LiteSVM executed', () => {
  let node: SolanaNode;
  let provider: SolanaRpcProvider;
  const wallet = key(0);
  const limits = { timeoutMs: 5_000, maxResponseBytes: 10 * 1024 * 1024 };

  beforeEach(async () => {
    node = new SolanaNode();
    await node.start();
    node.svm.airdrop(svmAddress(wallet.address), (10n * SOL) as never);
  });

  afterEach(() => node.stop());

  /** Runs a transaction of `instructions` signed by `payer` in the runtime and seals its slot: its signature and slot. */
  const execute = async (payer: DerivedKey, instructions: Parameters<typeof signSolanaInstructions>[1]) => {
    const signed = signSolanaInstructions(payer, instructions, base58.decode((await provider.recentBlock()).hash));
    await provider.broadcast(signed.raw);
    return { txid: signed.txid, slot: node.executed.get(signed.txid)!.slot };
  };

  /** A mint configured as USDC_SOL, the wallet's associated account holding a million of it: the mint. */
  const configureMint = () => {
    const mint = key(1).address;
    provider = new SolanaRpcProvider(node.url, limits, { USDC_SOL: mint });
    putTokenProgramAccount(node.svm, mint, mintData(key(3).address, 1_000_000n, 6));
    putTokenProgramAccount(node.svm, associatedTokenAccount(wallet.address, mint), tokenAccountData(mint, wallet.address, 1_000_000n));
    return mint;
  };
  /** An SPL transfer of the wallet's, as the send workflow signs it, executed: its signature and slot. */
  const sendTokens = async (mint: string, to: string, amount: bigint, reference: string) => {
    const signed = signTransfer(
      { chain: 'solana', testnet: false, from: wallet.address, to, assetId: 'USDC_SOL', tokenAddress: mint, amount, fee: { model: 'flat', fee: LAMPORTS_PER_SIGNATURE }, recentBlock: await provider.recentBlock(), reference },
      [wallet],
    );
    await provider.broadcast(signed.raw);
    return { txid: signed.txid, slot: node.executed.get(signed.txid)!.slot };
  };

  it("sees a token transfer a program made by CPI: the ATA program's RecoverNested pays the wallet's tokens from a nested account", async () => {
    const [ownerMint, nestedMint] = [key(1).address, key(2).address];
    provider = new SolanaRpcProvider(node.url, limits, { USDC_SOL: nestedMint });
    for (const mint of [ownerMint, nestedMint]) putTokenProgramAccount(node.svm, mint, mintData(key(3).address, 1_000_000n, 6));
    // Tokens sent by mistake to the associated account of the wallet's associated account (a nested one).
    const ownerAccount = associatedTokenAccount(wallet.address, ownerMint);
    const nested = associatedTokenAccount(ownerAccount, nestedMint);
    const destination = associatedTokenAccount(wallet.address, nestedMint);
    putTokenProgramAccount(node.svm, ownerAccount, tokenAccountData(ownerMint, wallet.address, 0n));
    putTokenProgramAccount(node.svm, nested, tokenAccountData(nestedMint, ownerAccount, 4_200_000n));
    putTokenProgramAccount(node.svm, destination, tokenAccountData(nestedMint, wallet.address, 0n));

    const { txid, slot } = await execute(wallet, [
      {
        program: ASSOCIATED_TOKEN_PROGRAM,
        accounts: [writable(base58.decode(nested)), readonly(base58.decode(nestedMint)), writable(base58.decode(destination)), readonly(base58.decode(ownerAccount)), readonly(base58.decode(ownerMint)), signer(base58.decode(wallet.address)), readonly(TOKEN_PROGRAM)],
        data: Uint8Array.of(RECOVER_NESTED),
      },
    ]);
    const block = (await provider.block(slot))!;
    // The program's own CPI: TransferChecked, then CloseAccount (whose lamports are no System transfer).
    assert.deepEqual(block.transfers, [{ txid, position: 'ix:0.0', to: wallet.address, from: ownerAccount, assetId: 'USDC_SOL', amount: 4_200_000n }]);
    assert.deepEqual(block.payments, [{ txid, from: wallet.address, fee: LAMPORTS_PER_SIGNATURE, recentBlockhash: solanaRecentBlockhash(node.executed.get(txid)!.raw) }]);
    assert.equal(await provider.balance(wallet.address, 'USDC_SOL'), 4_200_000n, 'what the runtime holds agrees');
  });

  it("sees a System transfer a program made by CPI: the ATA program funds a pre-funded account's rent before the top-level token transfer", async () => {
    const mint = configureMint();
    const recipient = key(4).address;
    // Someone sent lamports to the recipient's associated address before it existed: CreateIdempotent tops it up by a CPI to System.
    const recipientAccount = associatedTokenAccount(recipient, mint);
    node.svm.airdrop(svmAddress(recipientAccount), 1_000_000n as never);
    const signed = await sendTokens(mint, recipient, 250_000n, 'tx_inner_system');
    const block = (await provider.block(signed.slot))!;
    const sol = block.transfers.filter((transfer) => transfer.assetId === 'SOL');
    assert.equal(sol.length, 1);
    assert.match(sol[0]!.position, /^ix:0\.\d+$/, 'invoked by the first top-level instruction');
    assert.deepEqual({ ...sol[0], position: undefined }, { txid: signed.txid, position: undefined, to: recipientAccount, from: wallet.address, assetId: 'SOL', amount: SOLANA_TOKEN_ACCOUNT_RENT - 1_000_000n });
    assert.deepEqual(
      block.transfers.filter((transfer) => transfer.assetId === 'USDC_SOL'),
      [{ txid: signed.txid, position: 'ix:1', to: recipient, from: wallet.address, assetId: 'USDC_SOL', amount: 250_000n }],
    );
  });

  it('sees Token-2022 Transfer and TransferChecked of a configured mint as it sees SPL Token ones', async () => {
    // LiteSVM loads no Token-2022 program: the runtime executes an SPL Token transfer, and the block is
    // answered with that program as Token-2022 (jsonParsed's `spl-token-2022`, the same instructions and layout).
    const recipient = key(4).address;
    const { txid, slot } = await sendTokens(configureMint(), recipient, 300_000n, 'tx_token_2022');
    const [answer] = await provider.relay([{ method: 'getBlock', params: [slot, { encoding: 'jsonParsed', maxSupportedTransactionVersion: 0 }] }]);
    const asToken2022 = JSON.parse(JSON.stringify((answer as { result: unknown }).result).replaceAll('"spl-token"', '"spl-token-2022"').replaceAll(base58.encode(TOKEN_PROGRAM), TOKEN_2022_PROGRAM_ID)) as unknown;
    node.recorded.set('getBlock', () => ({ result: asToken2022 }));
    assert.deepEqual((await provider.block(slot))!.transfers, [{ txid, position: 'ix:1', to: recipient, from: wallet.address, assetId: 'USDC_SOL', amount: 300_000n }]);
  });

  it('reads a block over the response cap in pages (its signatures, then its transactions in batches), as the whole block reads under a larger cap', async () => {
    provider = new SolanaRpcProvider(node.url, limits);
    const capped = new SolanaRpcProvider(node.url, { timeoutMs: 5_000, maxResponseBytes: 65_536 });
    node.sealAfterSend = false;
    const recentBlock = await provider.recentBlock();
    const recipients = Array.from({ length: 8 }, (_, index) => key(10 + index).address);
    const txids: string[] = [];
    for (let index = 0; index < 90; index += 1) {
      const signed = signTransfer(
        { chain: 'solana', testnet: false, from: wallet.address, to: recipients[index % recipients.length]!, assetId: 'SOL', amount: SOL / 100n + BigInt(index), fee: { model: 'flat', fee: LAMPORTS_PER_SIGNATURE }, recentBlock, reference: `tx_page_${index}` },
        [wallet],
      );
      txids.push((await provider.broadcast(signed.raw)).txid);
    }
    const slot = node.slot;
    node.svm.warpToSlot(BigInt(slot + 1));

    const whole = (await provider.block(slot))!;
    assert.equal(whole.payments.length, 90);
    const calls = node.calls.length;
    const paged = await capped.block(slot);
    assert.deepEqual(paged, whole, 'the same block, transaction for transaction');
    assert.deepEqual(
      paged!.transfers.map((transfer) => transfer.txid),
      txids,
      'in the block order',
    );
    const asked = node.calls.slice(calls);
    assert.deepEqual(asked.slice(0, 2), ['getBlock', 'getBlock'], 'the whole block (abandoned past the cap), then its signatures');
    // 90 transactions, some 1.2 kB each in jsonParsed: a batch of 90 is over 64 KiB and halved, each half under it.
    assert.equal(asked.filter((method) => method === 'getTransaction').length, 90 * 2, 'the whole batch (abandoned), then its two halves');
  });
});
