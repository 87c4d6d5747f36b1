import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { bytesToHex } from '@noble/hashes/utils';
import { keccak256, parseEther, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { ChainNodes } from '../../src/chains/nodes';
import { Address } from '../../src/custody/entities';
import { keyLocation } from '../../src/custody/service';
import { ChainScanCursor, LedgerDrift, OutgoingTransfer } from '../../src/monitoring/entities';
import { compareLedgerWithChain } from '../../src/monitoring/ledger-check';
import { OutgoingTransaction } from '../../src/transactions/entities';
import { anvilEthBalance, anvilFunder, anvilMine, anvilReceipt, anvilSandboxConfig, deployAnvilToken, receiptFee, startAnvil, type Anvil, anvilHeight } from '../support/anvil';
import { type TestApp, type TestOrganization } from '../support/app';
import { testConfig, testOrm } from '../support/environment';
import { eventually } from '../support/eventually';
import { testLogger } from '../support/secret-scan';
import { WebhookReceiver } from '../support/webhook-receiver';
import { startScannedService, type ScannedService } from '../support/scanned-service';

const CONFIRMATIONS = 3;
/** Code that reverts whatever calls it (PUSH1 0, PUSH1 0, REVERT): an address given it refuses ether. */
const REVERTING_CODE = '0x60006000fd';

/**
 * Reorganisations deeper than the confirmation count on a real Ethereum node (anvil): a branch is
 * abandoned with evm_snapshot / evm_revert and a longer one mined, through the real scanner,
 * Temporal and PostgreSQL.
 */
describe('Reorganisations at any depth on a real Ethereum node (anvil)', () => {
  let anvil: Anvil;
  let app: TestApp;
  let org: TestOrganization;
  let service: ScannedService;
  const receiver = new WebhookReceiver();
  const config: Record<string, string> = {};

  const funder = () => anvilFunder(anvil);
  const mine = (blocks: number) => anvilMine(anvil, blocks);
  const call = (method: string, path: string, body?: unknown) => app.request(method, path, { key: org.secret, body });

  before(async () => {
    anvil = await startAnvil();
    const token = await deployAnvilToken(anvil);
    await receiver.start();
    const taskQueue = `anvil-reorgs-${randomUUID()}`;
    Object.assign(config, anvilSandboxConfig(anvil, taskQueue, token, CONFIRMATIONS));
    service = await startScannedService('ethereum', 'Anvil reorganisations', config, () => anvilHeight(anvil));
    ({ app, org } = service);
    const endpoint = await call('POST', '/v1/webhooks', { name: 'reorgs', url: receiver.url });
    receiver.secrets = [endpoint.body.signing_secret];
  });

  after(async () => {
    await service?.stop();
    await receiver.close();
    await anvil?.stop();
  });

  async function createWallet(name: string) {
    const vault = await call('POST', '/v1/vaults', { name });
    const created = await call('POST', '/v1/wallets', { name, chain: 'ethereum', vault_id: vault.body.id, wallet_type: 'hot' });
    assert.equal(created.status, 201, created.text);
    return { id: created.body.id as string, address: created.body.primary_address.address as Hex };
  }
  async function ethOf(walletId: string) {
    const rows = (await call('GET', `/v1/wallets/${walletId}/balances`)).body.data as { asset_id: string; balance: string; pending: string }[];
    const row = rows.find((candidate) => candidate.asset_id === 'ETH')!;
    return { balance: BigInt(row.balance), pending: BigInt(row.pending) };
  }
  const cursor = async () => (await testOrm()).em.fork().findOneOrFail(ChainScanCursor, { chain: 'ethereum', environment: 'sandbox' });
  async function scannedToTip() {
    const tip = Number(await anvil.call('eth_blockNumber'));
    await eventually(async () => ((await cursor()).height >= tip ? true : undefined), 'scanning caught up with the tip', 60_000);
  }
  /**
   * The invariant once the service has caught up: a scan that follows a reorganisation to its fork takes every
   * settled send above it off its block, even one its workflow had already settled in the new chain, and places it
   * again at the end of that pass or the next (resettleRemined); the comparison is repeated until then.
   */
  async function ledgerMatchesChain() {
    const provider = await new ChainNodes(testConfig(config), testLogger('test'), await testOrm()).provider('ethereum', 'sandbox');
    let mismatches: unknown[] = [];
    await eventually(
      async () => {
        await scannedToTip();
        ({ mismatches } = await compareLedgerWithChain((await testOrm()).em.fork(), provider, { chain: 'ethereum', environment: 'sandbox', organizationId: org.organizationId, assetIds: ['ETH'] }));
        return mismatches.length === 0 ? true : undefined;
      },
      'the ledger equal to the chain',
      30_000,
      500,
    ).catch(() => assert.deepEqual(mismatches, []));
  }
  const journalOf = async (referencePrefix: string) =>
    (await testOrm()).em
      .fork()
      .getConnection()
      .execute<{ kind: string; reference_id: string; balance: string; pending: string }[]>(
        `select kind, reference_id, balance::text, pending::text from custody_journal_entries where reference_id like ? order by created_at, kind`,
        [`${referencePrefix}%`],
      );
  /** What the organization's suspense account holds of ETH: value a reorganisation made unknown, waiting for the chain's proof. */
  const suspense = async () =>
    BigInt(
      (
        await (await testOrm()).em
          .fork()
          .getConnection()
          .execute<{ sum: string }[]>(`select coalesce(sum(amount), 0)::text as sum from ledger_lines where account_key = ?`, [`suspense:${org.organizationId}:sandbox:ETH`])
      )[0]!.sum,
    );
  /** The suspense postings of one reference, in order: their kind and what they moved into suspense. */
  const suspenseMoves = async (referenceId: string) =>
    (
      await (await testOrm()).em
        .fork()
        .getConnection()
        .execute<{ kind: string; amount: string }[]>(
          `select p.kind, l.amount::text from ledger_postings p join ledger_lines l on l.posting_id = p.id
            where p.reference_id = ? and l.account_key like 'suspense:%' order by p.created_at, p.kind`,
          [referenceId],
        )
    ).map((row) => [row.kind, BigInt(row.amount)]);
  /** A client of the wallet's custody key, as someone holding it outside the platform would sign. */
  async function usedOutside(walletId: string) {
    const em = (await testOrm()).em.fork();
    const primary = await em.findOneOrFail(Address, { wallet: walletId, isPrimary: true }, { populate: ['wallet'] });
    const key = await app.deps.keys.withKeys(em, org.organizationId, [keyLocation(primary.wallet, primary.format, primary.addressIndex)], ([derived]) => `0x${bytesToHex(derived!.privateKey)}` as Hex);
    return anvilFunder(anvil, key);
  }
  const events = () => receiver.attempts.map((attempt) => JSON.parse(attempt.body) as { type: string; data: Record<string, unknown> });
  /** Sends signed bytes again, where the abandoned branch's pool may or may not still hold them. */
  async function broadcastAgain(raw: string) {
    await anvil.call('eth_sendRawTransaction', [raw]).catch((error: Error) => {
      if (!/already|known/i.test(error.message)) throw error;
    });
  }

  it('reverses a confirmed deposit whose blocks a deeper reorganisation abandoned, and credits it again when the chain mines it again', async () => {
    const ours = await createWallet('Deep reorg');
    const amount = parseEther('2');
    const snapshot = await anvil.call('evm_snapshot');
    const raw = await funder().signTransaction(await funder().prepareTransactionRequest({ to: ours.address, value: amount }));
    await broadcastAgain(raw);
    await mine(CONFIRMATIONS);
    await eventually(async () => ((await ethOf(ours.id)).balance === amount ? true : undefined), 'deposit confirmed');
    const [deposit] = (await call('GET', `/v1/deposits?wallet_id=${ours.id}`)).body.data as { id: string; status: string }[];
    assert.equal(deposit!.status, 'confirmed');

    // Every block carrying it, the confirmations too, is abandoned for a longer chain without it.
    await anvil.call('evm_revert', [snapshot]);
    await mine(CONFIRMATIONS + 2);
    const reversed = await eventually(async () => {
      const read = await call('GET', `/v1/deposits/${deposit!.id}`);
      return read.body.status === 'dropped' ? read.body : undefined;
    }, 'deposit reversed');
    assert.equal(reversed.block_height, null);
    assert.deepEqual(await ethOf(ours.id), { balance: 0n, pending: 0n }, 'the credit is taken back');
    assert.equal(await suspense(), amount, 'the credit waits in suspense, not handed back to the world');
    const announced = await eventually(async () => events().find((event) => event.type === 'deposit.reversed' && event.data.id === deposit!.id), 'deposit.reversed delivered');
    assert.equal(announced.data.status, 'dropped');
    assert.equal(announced.data.amount_raw, amount.toString());
    assert.deepEqual(
      (await journalOf(deposit!.id)).map((entry) => [entry.kind, entry.reference_id, entry.balance, entry.pending]),
      [
        ['deposit_seen', `${deposit!.id}#0`, '0', amount.toString()],
        ['deposit_confirmed', `${deposit!.id}#0`, amount.toString(), (-amount).toString()],
        ['deposit_reversed', `${deposit!.id}#0`, (-amount).toString(), '0'],
      ],
    );
    await ledgerMatchesChain();

    // The same signed transaction mined on the new chain: the same deposit, pending again, then credited once more.
    await broadcastAgain(raw);
    await mine(CONFIRMATIONS);
    await eventually(async () => ((await ethOf(ours.id)).balance === amount ? true : undefined), 'deposit credited again');
    assert.equal((await call('GET', `/v1/deposits/${deposit!.id}`)).body.status, 'confirmed');
    assert.deepEqual(
      (await journalOf(deposit!.id)).slice(3).map((entry) => [entry.kind, entry.reference_id]),
      [
        ['deposit_seen', `${deposit!.id}#1`],
        ['deposit_confirmed', `${deposit!.id}#1`],
      ],
      'the second round has references of its own',
    );
    await eventually(
      async () => (events().filter((event) => event.type === 'incoming_native_tx' && event.data.id === deposit!.id && event.data.status === 'confirmed').length === 2 ? true : undefined),
      'each round announced confirmed',
    );
    assert.deepEqual(await ethOf(ours.id), { balance: amount, pending: 0n });
    assert.equal(await suspense(), 0n, 'mined again at depth: the reversed round left suspense');
    await ledgerMatchesChain();
  });

  it('a reversed deposit the wallet had spent: its send reorganised out too, an overdrawn drift raised, both in suspense, all settled again when mined again', async () => {
    const ours = await createWallet('Spent deposit');
    const deposited = parseEther('2');
    const sent = parseEther('1.5');
    const snapshot = await anvil.call('evm_snapshot');
    const depositRaw = await funder().signTransaction(await funder().prepareTransactionRequest({ to: ours.address, value: deposited }));
    await broadcastAgain(depositRaw);
    await mine(CONFIRMATIONS);
    await eventually(async () => ((await ethOf(ours.id)).balance === deposited ? true : undefined), 'deposit confirmed');
    const [deposit] = (await call('GET', `/v1/deposits?wallet_id=${ours.id}`)).body.data as { id: string }[];
    const target = privateKeyToAccount(generatePrivateKey()).address;
    const created = await call('POST', '/v1/transactions', { wallet_id: ours.id, to_address: target, amount: '1.5', asset: 'ETH' });
    assert.equal(created.status, 201, created.text);
    const id = created.body.id as string;
    await eventually(async () => ((await call('GET', `/v1/transactions/${id}`)).body.status === 'broadcast' ? true : undefined), 'send broadcast');
    await mine(CONFIRMATIONS);
    const settled = await eventually(async () => {
      const read = await call('GET', `/v1/transactions/${id}`);
      return read.body.status === 'confirmed' ? read.body : undefined;
    }, 'send settled');
    const fee = BigInt(settled.fee_raw);
    const sendRaw = (await (await testOrm()).em.fork().findOneOrFail(OutgoingTransaction, { id })).signedTransaction!;

    // A longer chain without the deposit, and so without the send it paid for (the pool may keep them: emptied).
    await anvil.call('evm_revert', [snapshot]);
    await anvil.call('anvil_dropAllTransactions');
    // Longer than the branch abandoned (the deposit's block, the send's, and the confirmations of each).
    await mine(3 * CONFIRMATIONS + 3);
    await eventually(async () => ((await call('GET', `/v1/deposits/${deposit!.id}`)).body.status === 'dropped' ? true : undefined), 'deposit reversed');
    await eventually(async () => (events().some((event) => event.type === 'transaction.reorged' && event.data.id === id) ? true : undefined), 'transaction.reorged delivered');
    const overdrawn = -(sent + fee);
    assert.deepEqual(await ethOf(ours.id), { balance: overdrawn, pending: 0n }, 'the reversal is booked in full: the wallet owes what it spent');
    const drift = await eventually(
      async () => events().find((event) => event.type === 'ledger.drift' && event.data.wallet_id === ours.id && event.data.figure === 'overdrawn'),
      'ledger.drift overdrawn delivered',
    );
    assert.equal(drift.data.status, 'open');
    assert.equal(drift.data.ledger_amount_raw, overdrawn.toString());
    assert.equal(drift.data.chain_amount_raw, '0');
    assert.equal(await suspense(), deposited + sent + fee, 'the deposit and what the send paid out wait in suspense');
    await ledgerMatchesChain();

    // Both mined again: the deposit credited once more, the send settled in its new block, suspense empty, the drift resolved.
    await broadcastAgain(depositRaw);
    await broadcastAgain(sendRaw);
    await mine(CONFIRMATIONS + 1);
    await eventually(async () => ((await call('GET', `/v1/transactions/${id}`)).body.block_height != null && (await suspense()) === 0n ? true : undefined), 'both settled again', 60_000);
    // The new block's base fee is its own: the send is debited what it paid there.
    const receipt = await anvilReceipt(anvil, settled.tx_hash);
    assert.deepEqual(await ethOf(ours.id), { balance: deposited - sent - receiptFee(receipt), pending: 0n });
    const resolved = await (await testOrm()).em.fork().findOneOrFail(LedgerDrift, { id: drift.data.id as string });
    assert.equal(resolved.status, 'resolved');
    await ledgerMatchesChain();
  });

  it('a send settled as reverted and mined successfully after a deeper reorganisation: failure cleared, debited the amount and the fee', async () => {
    const sender = await createWallet('Re-mined sender');
    const funded = parseEther('5');
    await funder().sendTransaction({ to: sender.address, value: funded });
    await mine(CONFIRMATIONS);
    await eventually(async () => ((await ethOf(sender.id)).balance === funded ? true : undefined), 'sender funded');
    const target = privateKeyToAccount(generatePrivateKey()).address;

    // Held in the pool until the target refuses ether: mined, it reverts.
    await anvil.call('evm_setAutomine', [false]);
    const created = await call('POST', '/v1/transactions', { wallet_id: sender.id, to_address: target, amount: '1', asset: 'ETH' });
    assert.equal(created.status, 201, created.text);
    const id = created.body.id as string;
    await eventually(async () => ((await call('GET', `/v1/transactions/${id}`)).body.status === 'broadcast' ? true : undefined), 'send broadcast');
    const snapshot = await anvil.call('evm_snapshot');
    await anvil.call('anvil_setCode', [target, REVERTING_CODE]);
    await mine(1 + CONFIRMATIONS);
    const failed = await eventually(async () => {
      const read = await call('GET', `/v1/transactions/${id}`);
      return read.body.status === 'failed' ? read.body : undefined;
    }, 'send settled as reverted');
    assert.equal(failed.failure_reason, 'reverted');
    assert.equal((await ethOf(sender.id)).balance, funded - BigInt(failed.fee_raw), 'the fee only');

    // The branch is abandoned: on the longer one the target has no code and the same bytes succeed.
    const raw = (await (await testOrm()).em.fork().findOneOrFail(OutgoingTransaction, { id })).signedTransaction!;
    await anvil.call('evm_revert', [snapshot]);
    await broadcastAgain(raw);
    await mine(2 + CONFIRMATIONS);
    await anvil.call('evm_setAutomine', [true]);
    const confirmed = await eventually(async () => {
      const read = await call('GET', `/v1/transactions/${id}`);
      return read.body.status === 'confirmed' ? read.body : undefined;
    }, 'send settled again as confirmed', 60_000);
    assert.equal(confirmed.failure_reason, null);
    assert.equal(confirmed.failure_message, null);
    const receipt = await anvilReceipt(anvil, confirmed.tx_hash);
    assert.equal(receipt.status, '0x1');
    assert.equal(confirmed.block_height, Number(receipt.blockNumber));
    assert.equal(BigInt(confirmed.fee_raw), receiptFee(receipt));
    assert.equal(await anvilEthBalance(anvil, target), parseEther('1'));
    assert.deepEqual(await ethOf(sender.id), { balance: funded - parseEther('1') - receiptFee(receipt), pending: 0n }, 'the amount and the fee actually paid');
    assert.deepEqual(
      (await journalOf(id)).filter((entry) => entry.kind.endsWith('_debit')).map((entry) => [entry.kind, entry.reference_id]),
      [
        ['fee_debit', id],
        ['fee_debit', `${id}#1`],
        ['send_debit', `${id}#1`],
      ].sort((a, b) => a[1]!.localeCompare(b[1]!) || a[0]!.localeCompare(b[0]!)),
    );
    await eventually(async () => (events().some((event) => event.type === 'transaction.confirmed' && event.data.id === id) ? true : undefined), 'transaction.confirmed delivered');
    const reorged = events().find((event) => event.type === 'transaction.reorged' && event.data.id === id);
    assert.ok(reorged, 'transaction.reorged delivered');
    assert.equal(reorged.data.status, 'failed', 'as it stood when its block was taken away');
    assert.equal(reorged.data.block_height, null);
    // The fee the abandoned block had charged waited in suspense until the new block settled it, then left.
    assert.deepEqual(await suspenseMoves(`${id}#1`), [
      ['suspense_entered', BigInt(failed.fee_raw)],
      ['suspense_left', -BigInt(failed.fee_raw)],
    ]);
    assert.equal(await suspense(), 0n);
    await ledgerMatchesChain();
  });

  it('a send mined reverted, reorganised out before its confirmations and mined successfully: settled confirmed, its failure cleared', async () => {
    const sender = await createWallet('Shallow re-mined sender');
    const funded = parseEther('3');
    await funder().sendTransaction({ to: sender.address, value: funded });
    await mine(CONFIRMATIONS);
    await eventually(async () => ((await ethOf(sender.id)).balance === funded ? true : undefined), 'sender funded');
    const target = privateKeyToAccount(generatePrivateKey()).address;

    await anvil.call('evm_setAutomine', [false]);
    const created = await call('POST', '/v1/transactions', { wallet_id: sender.id, to_address: target, amount: '1', asset: 'ETH' });
    assert.equal(created.status, 201, created.text);
    const id = created.body.id as string;
    await eventually(async () => ((await call('GET', `/v1/transactions/${id}`)).body.status === 'broadcast' ? true : undefined), 'send broadcast');
    const snapshot = await anvil.call('evm_snapshot');
    await anvil.call('anvil_setCode', [target, REVERTING_CODE]);
    await mine(1);
    const reverted = await eventually(async () => {
      const read = await call('GET', `/v1/transactions/${id}`);
      return read.body.status === 'confirming' && read.body.failure_reason === 'reverted' ? read.body : undefined;
    }, 'send mined, reverted, short of its confirmations');
    assert.ok(reverted.block_height);

    const raw = (await (await testOrm()).em.fork().findOneOrFail(OutgoingTransaction, { id })).signedTransaction!;
    await anvil.call('evm_revert', [snapshot]);
    await broadcastAgain(raw);
    await mine(2 + CONFIRMATIONS);
    await anvil.call('evm_setAutomine', [true]);
    const settled = await eventually(async () => {
      const read = await call('GET', `/v1/transactions/${id}`);
      return ['confirmed', 'failed'].includes(read.body.status) ? read.body : undefined;
    }, 'send settled', 60_000);
    assert.equal(settled.status, 'confirmed');
    assert.equal(settled.failure_reason, null);
    const receipt = await anvilReceipt(anvil, settled.tx_hash);
    assert.deepEqual(await ethOf(sender.id), { balance: funded - parseEther('1') - receiptFee(receipt), pending: 0n });
    assert.deepEqual((await journalOf(id)).filter((entry) => entry.kind.endsWith('_debit')).map((entry) => [entry.kind, entry.reference_id]).sort(), [
      ['fee_debit', id],
      ['send_debit', id],
    ]);
    await ledgerMatchesChain();
  });

  it('a spend made outside the platform, reorganised out: the wallet stays debited, the spend waits in suspense, and leaves it when mined again', async () => {
    const ours = await createWallet('Spent outside');
    const funded = parseEther('2');
    await funder().sendTransaction({ to: ours.address, value: funded });
    await mine(CONFIRMATIONS);
    await eventually(async () => ((await ethOf(ours.id)).balance === funded ? true : undefined), 'wallet funded');
    const snapshot = await anvil.call('evm_snapshot');
    const outside = await usedOutside(ours.id);
    const raw = await outside.signTransaction(await outside.prepareTransactionRequest({ to: privateKeyToAccount(generatePrivateKey()).address, value: parseEther('0.5') }));
    const hash = keccak256(raw);
    await broadcastAgain(raw);
    const spent = parseEther('0.5') + receiptFee(await anvilReceipt(anvil, hash));
    await eventually(async () => ((await ethOf(ours.id)).balance === funded - spent ? true : undefined), 'the spend debited');
    const [row] = await (await testOrm()).em.fork().find(OutgoingTransfer, { txid: hash });

    await anvil.call('evm_revert', [snapshot]);
    await anvil.call('anvil_dropAllTransactions');
    await mine(CONFIRMATIONS + 2);
    await eventually(async () => ((await (await testOrm()).em.fork().findOneOrFail(OutgoingTransfer, { id: row!.id })).blockHeight === null ? true : undefined), 'the spend lost its block');
    assert.equal((await ethOf(ours.id)).balance, funded - spent, 'still debited: the same bytes are most likely mined again');
    assert.deepEqual(await suspenseMoves(`${row!.id}#1`), [['suspense_entered', spent]]);
    await ledgerMatchesChain();

    await broadcastAgain(raw);
    await mine(CONFIRMATIONS);
    await eventually(async () => ((await (await testOrm()).em.fork().findOneOrFail(OutgoingTransfer, { id: row!.id })).blockHeight !== null ? true : undefined), 'the spend placed again');
    assert.deepEqual(await suspenseMoves(`${row!.id}#1`), [
      ['suspense_entered', spent],
      ['suspense_left', -spent],
    ]);
    // Debited once: the amount, and the fee the new block charged (its base fee is its own).
    const placed = await (await testOrm()).em.fork().findOneOrFail(OutgoingTransfer, { id: row!.id });
    assert.equal(BigInt(placed.fee), receiptFee(await anvilReceipt(anvil, hash)));
    assert.equal((await ethOf(ours.id)).balance, funded - parseEther('0.5') - BigInt(placed.fee));
    assert.equal(await suspense(), 0n);
    await ledgerMatchesChain();
  });

  it('a settled send whose nonce another transaction took on the new chain: failed reorged_out once that is final, what it paid back from suspense', async () => {
    const ours = await createWallet('Nonce taken');
    const funded = parseEther('2');
    await funder().sendTransaction({ to: ours.address, value: funded });
    await mine(CONFIRMATIONS);
    await eventually(async () => ((await ethOf(ours.id)).balance === funded ? true : undefined), 'wallet funded');
    const snapshot = await anvil.call('evm_snapshot');
    const created = await call('POST', '/v1/transactions', { wallet_id: ours.id, to_address: privateKeyToAccount(generatePrivateKey()).address, amount: '0.5', asset: 'ETH' });
    assert.equal(created.status, 201, created.text);
    const id = created.body.id as string;
    await eventually(async () => ((await call('GET', `/v1/transactions/${id}`)).body.status === 'broadcast' ? true : undefined), 'send broadcast');
    await mine(CONFIRMATIONS);
    const settled = await eventually(async () => {
      const read = await call('GET', `/v1/transactions/${id}`);
      return read.body.status === 'confirmed' ? read.body : undefined;
    }, 'send settled');
    const paid = parseEther('0.5') + BigInt(settled.fee_raw);

    // The new chain: the send is gone, and the custody key, used outside, spent its nonce on something else.
    await anvil.call('evm_revert', [snapshot]);
    await anvil.call('anvil_dropAllTransactions');
    const outside = await usedOutside(ours.id);
    const other = await outside.signTransaction(await outside.prepareTransactionRequest({ to: privateKeyToAccount(generatePrivateKey()).address, value: parseEther('0.1'), nonce: 0 }));
    await broadcastAgain(other);
    const otherPaid = parseEther('0.1') + receiptFee(await anvilReceipt(anvil, keccak256(other)));
    await mine(CONFIRMATIONS + 2);
    await eventually(async () => (events().some((event) => event.type === 'transaction.reorged' && event.data.id === id) ? true : undefined), 'transaction.reorged delivered');
    // The proof (nonce consumed, no candidate known) counts once it has held for the send's confirmation count.
    await eventually(async () => ((await (await testOrm()).em.fork().findOneOrFail(OutgoingTransaction, { id })).lossSeenAtHeight != null ? true : undefined), 'the loss seen');
    assert.equal((await call('GET', `/v1/transactions/${id}`)).body.status, 'confirmed', 'not yet final');
    await mine(CONFIRMATIONS);
    const failed = await eventually(async () => {
      const read = await call('GET', `/v1/transactions/${id}`);
      return read.body.status === 'failed' ? read.body : undefined;
    }, 'send failed as reorged out');
    assert.equal(failed.failure_reason, 'reorged_out');
    assert.match(failed.failure_message, /nonce/);
    await eventually(async () => (events().some((event) => event.type === 'transaction.failed' && event.data.id === id) ? true : undefined), 'transaction.failed delivered');
    assert.deepEqual(await ethOf(ours.id), { balance: funded - otherPaid, pending: 0n }, 'what the send paid is back; the other spend is debited as unexpected');
    assert.deepEqual(
      (await journalOf(id)).filter((entry) => entry.kind === 'reorg_returned').map((entry) => [entry.reference_id, BigInt(entry.balance)]),
      [[`${id}#1`, paid]],
      'the amount and the fee, once',
    );
    assert.equal(await suspense(), 0n, 'nothing left in suspense');
    await ledgerMatchesChain();
  });

  it('with no common block among the 256 kept, raises the alert and resyncs from a checkpoint instead of stalling the chain', async () => {
    const snapshot = await anvil.call('evm_snapshot');
    await mine(300);
    await scannedToTip();
    const before = await cursor();
    await anvil.call('evm_revert', [snapshot]);
    await mine(310);
    await scannedToTip();
    const after = await cursor();
    assert.equal(after.resyncs, before.resyncs + 1);
    assert.ok(after.lastResyncAt);
    const metrics = await app.request('GET', '/metrics');
    assert.match(metrics.text, new RegExp(`chain_scan_resyncs\\{chain="ethereum",environment="sandbox"\\} ${after.resyncs}`));
    assert.match(metrics.text, /chain_scan_last_resync_timestamp_seconds\{chain="ethereum",environment="sandbox"\} \d+/);

    // Scanning goes on for every tenant: a deposit after the resync is credited.
    const ours = await createWallet('After resync');
    await funder().sendTransaction({ to: ours.address, value: parseEther('0.5') });
    await mine(CONFIRMATIONS);
    await eventually(async () => ((await ethOf(ours.id)).balance === parseEther('0.5') ? true : undefined), 'deposit after the resync credited');
    await ledgerMatchesChain();
  });
});
