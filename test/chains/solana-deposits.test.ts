import assert from 'node:assert/strict';
import { randomInt } from 'node:crypto';
import { base58 } from '@scure/base';
import { mnemonicToSeedSync } from '@scure/bip39';
import type { SolanaRpcProvider } from '../../src/chains/providers/solana-rpc';
import { ASSOCIATED_TOKEN_PROGRAM, ATA_CREATE_IDEMPOTENT, associatedTokenAddress, readonly, signer, signSolanaInstructions, SYSTEM_PROGRAM, TOKEN_TRANSFER_CHECKED, writable } from '../../src/chains/transfers/solana';
import { coinTypeFor, deriveKey } from '../../src/keys/derivation';
import { ChainScanCursor } from '../../src/monitoring/entities';
import { testOrm } from '../support/environment';
import { eventually } from '../support/eventually';
import { mintData, putTokenProgramAccount, svmAddress, tokenAccountData, u64 } from '../support/litesvm';
import { createHotWallet, signingOutside, walletBalances } from '../support/reconciliation';
import type { ScannedService } from '../support/scanned-service';
import { SolanaNode, TOKEN_2022_PROGRAM_ID } from '../support/solana-node';
import { startSolanaService } from '../support/solana-service';

const SOL = 1_000_000_000n;
const USDC = 1_000_000n;
/** AssociatedTokenAccountInstruction::RecoverNested. */
const RECOVER_NESTED = 2;
const TOKEN_2022 = base58.decode(TOKEN_2022_PROGRAM_ID);
const SEED = mnemonicToSeedSync('abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about');
const ACCOUNT = randomInt(1, 2 ** 30);
const outsideKey = (index: number) => deriveKey(SEED, { chain: 'solana', testnet: false, coinType: coinTypeFor('solana', false), format: 'base58', account: ACCOUNT, index });
const funder = outsideKey(0);
/** The Token-2022 associated token account of `owner` for `mint` (base58). */
const token2022Account = (owner: string, mint: string) => base58.encode(associatedTokenAddress(base58.decode(owner), base58.decode(mint), TOKEN_2022));

interface Deposit {
  status: string;
  asset_id: string;
  amount_raw: string;
  tx_hash: string;
  position: string;
  to_address: string;
}

/**
 * Deposits the runtime (LiteSVM, which ships the Token-2022 and Associated Token Account programs)
 * executed, read by the real scanner through Solana's JSON-RPC and credited through Temporal and
 * PostgreSQL: a Token-2022 TransferChecked to a custody address, and a Token-2022 TransferChecked a
 * program made by CPI (the ATA program's RecoverNested). The catalogue's USDC_SOL is a Token-2022 mint
 * on this node. No SBF toolchain is at hand to build a program of our own: the CPI is one a program
 * the runtime ships makes.
 */
describe('Solana deposits through the scanner (LiteSVM): a Token-2022 transfer and a transfer made by CPI, each credited once', () => {
  const node = new SolanaNode();
  let service: ScannedService;
  let provider: SolanaRpcProvider;
  const mint = outsideKey(1).address;

  before(async () => {
    putTokenProgramAccount(node.svm, mint, mintData(funder.address, 1_000_000n * USDC, 6), TOKEN_2022_PROGRAM_ID);
    putTokenProgramAccount(node.svm, token2022Account(funder.address, mint), tokenAccountData(mint, funder.address, 1_000_000n * USDC), TOKEN_2022_PROGRAM_ID);
    node.svm.airdrop(svmAddress(funder.address), (100n * SOL) as never);
    ({ service, provider } = await startSolanaService(node, 'Solana deposits', mint));
  });

  after(async () => {
    await service?.stop();
    await node.stop();
  });

  const deposits = async (walletId: string) => (await service.call('GET', `/v1/deposits?wallet_id=${walletId}`)).body.data as Deposit[];
  const recentBlockhash = async () => base58.decode((await provider.recentBlock()).hash);

  it('credits a top-level Token-2022 TransferChecked and a CPI one (RecoverNested) to the custody address, once each', async () => {
    const wallet = await createHotWallet(service, 'Token-2022 deposits', 'solana');
    const custodyTokens = token2022Account(wallet.address, mint);

    // As a wallet pays a Token-2022 mint: the recipient's associated account created (idempotent) with the Token-2022 program, then TransferChecked.
    const direct = signSolanaInstructions(
      funder,
      [
        {
          program: ASSOCIATED_TOKEN_PROGRAM,
          accounts: [signer(funder.publicKey), writable(base58.decode(custodyTokens)), readonly(base58.decode(wallet.address)), readonly(base58.decode(mint)), readonly(SYSTEM_PROGRAM), readonly(TOKEN_2022)],
          data: Uint8Array.of(ATA_CREATE_IDEMPOTENT),
        },
        {
          program: TOKEN_2022,
          accounts: [writable(base58.decode(token2022Account(funder.address, mint))), readonly(base58.decode(mint)), writable(base58.decode(custodyTokens)), signer(funder.publicKey)],
          data: Uint8Array.of(TOKEN_TRANSFER_CHECKED, ...u64(3n * USDC), 6),
        },
      ],
      await recentBlockhash(),
    );
    await provider.broadcast(direct.raw);

    // Tokens someone sent to the associated account of the custody address's associated account (a nested one): the
    // custody key signs RecoverNested (the funder pays its fee), and the ATA program moves them by CPI.
    const ownerMint = outsideKey(2).address;
    putTokenProgramAccount(node.svm, ownerMint, mintData(funder.address, 0n, 6), TOKEN_2022_PROGRAM_ID);
    const ownerAccount = token2022Account(wallet.address, ownerMint);
    const nested = token2022Account(ownerAccount, mint);
    putTokenProgramAccount(node.svm, ownerAccount, tokenAccountData(ownerMint, wallet.address, 0n), TOKEN_2022_PROGRAM_ID);
    putTokenProgramAccount(node.svm, nested, tokenAccountData(mint, ownerAccount, 4_200_000n), TOKEN_2022_PROGRAM_ID);
    const recovered = await signingOutside(service, wallet.id, async (custody) =>
      signSolanaInstructions(
        funder,
        [
          {
            program: ASSOCIATED_TOKEN_PROGRAM,
            accounts: [
              writable(base58.decode(nested)),
              readonly(base58.decode(mint)),
              writable(base58.decode(custodyTokens)),
              readonly(base58.decode(ownerAccount)),
              readonly(base58.decode(ownerMint)),
              signer(custody.publicKey),
              readonly(TOKEN_2022),
            ],
            data: Uint8Array.of(RECOVER_NESTED),
          },
        ],
        await recentBlockhash(),
        [custody],
      ),
    );
    await provider.broadcast(recovered.raw);
    const inner = node.executed.get(recovered.txid)!.inner[0]!;
    assert.equal(inner[0]!.program, TOKEN_2022_PROGRAM_ID, 'the runtime ran a Token-2022 instruction by CPI');
    assert.equal(inner[0]!.data[0], TOKEN_TRANSFER_CHECKED);

    const expected = [
      { status: 'confirmed', asset_id: 'USDC_SOL', amount_raw: (3n * USDC).toString(), tx_hash: direct.txid, position: 'ix:1', to_address: wallet.address },
      { status: 'confirmed', asset_id: 'USDC_SOL', amount_raw: '4200000', tx_hash: recovered.txid, position: 'ix:0.0', to_address: wallet.address },
    ];
    const seen = (rows: Deposit[]) => rows.map(({ status, asset_id, amount_raw, tx_hash, position, to_address }) => ({ status, asset_id, amount_raw, tx_hash, position, to_address })).sort((a, b) => a.position.localeCompare(b.position));
    await eventually(async () => (JSON.stringify(seen(await deposits(wallet.id))) === JSON.stringify(seen(expected)) ? true : undefined), 'both deposits confirmed', 30_000, 250);
    assert.equal((await walletBalances(service, wallet.id)).USDC_SOL, 7_200_000n);

    // Scanned further on, nothing is credited twice.
    const slot = node.confirmedSlot;
    await eventually(async () => (((await (await testOrm()).em.fork().findOne(ChainScanCursor, { chain: 'solana', environment: 'sandbox' }))?.height ?? 0) > slot + 3 ? true : undefined), 'the scanner past more slots');
    assert.deepEqual(seen(await deposits(wallet.id)), seen(expected));
    assert.equal((await walletBalances(service, wallet.id)).USDC_SOL, 7_200_000n);
  });
});

