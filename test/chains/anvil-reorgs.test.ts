import assert from 'node:assert/strict';
import { parseEther } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { OutgoingTransaction } from '../../src/transactions/entities';
import { anvilEthBalance, anvilReceipt, receiptFee } from '../support/anvil';
import { anvilReorganisations, REORG_CONFIRMATIONS } from '../support/anvil-reorgs';
import { testOrm } from '../support/environment';
import { eventually } from '../support/eventually';

const CONFIRMATIONS = REORG_CONFIRMATIONS;
/** Code that reverts whatever calls it (PUSH1 0, PUSH1 0, REVERT): an address given it refuses ether. */
const REVERTING_CODE = '0x60006000fd';

/**
 * Reorganisations deeper than the confirmation count on a real Ethereum node (anvil): a branch is
 * abandoned with evm_snapshot / evm_revert and a longer one mined, through the real scanner,
 * Temporal and PostgreSQL.
 */
describe('Reorganisations at any depth on a real Ethereum node (anvil)', () => {
  const reorgs = anvilReorganisations('anvil-reorgs');
  const { funder, mine, call, createWallet, fundedWallet, broadcastSend, ethOf, cursor, scannedToTip, ledgerMatchesChain, journalOf, suspense, suspenseMoves, events, broadcastAgain } = reorgs;

  it('reverses a confirmed deposit whose blocks a deeper reorganisation abandoned, and credits it again when the chain mines it again', async () => {
    const ours = await createWallet('Deep reorg');
    const amount = parseEther('2');
    const snapshot = await reorgs.anvil.call('evm_snapshot');
    const raw = await funder().signTransaction(await funder().prepareTransactionRequest({ to: ours.address, value: amount }));
    await broadcastAgain(raw);
    await mine(CONFIRMATIONS);
    await eventually(async () => ((await ethOf(ours.id)).balance === amount ? true : undefined), 'deposit confirmed');
    const [deposit] = (await call('GET', `/v1/deposits?wallet_id=${ours.id}`)).body.data as { id: string; status: string }[];
    assert.equal(deposit!.status, 'confirmed');

    // Every block carrying it, the confirmations too, is abandoned for a longer chain without it.
    await reorgs.anvil.call('evm_revert', [snapshot]);
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
    await eventually(async () => ((await ethOf(ours.id)).balance === amount ? true : undefined), 'deposit credited again', 60_000);
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

  it('a send settled as reverted and mined successfully after a deeper reorganisation: failure cleared, debited the amount and the fee', async () => {
    const funded = parseEther('5');
    const sender = await fundedWallet('Re-mined sender', funded);
    const target = privateKeyToAccount(generatePrivateKey()).address;

    // Held in the pool until the target refuses ether: mined, it reverts.
    await reorgs.anvil.call('evm_setAutomine', [false]);
    const id = await broadcastSend(sender.id, target, '1');
    const snapshot = await reorgs.anvil.call('evm_snapshot');
    await reorgs.anvil.call('anvil_setCode', [target, REVERTING_CODE]);
    await mine(1 + CONFIRMATIONS);
    const failed = await eventually(async () => {
      const read = await call('GET', `/v1/transactions/${id}`);
      return read.body.status === 'failed' ? read.body : undefined;
    }, 'send settled as reverted');
    assert.equal(failed.failure_reason, 'reverted');
    assert.equal((await ethOf(sender.id)).balance, funded - BigInt(failed.fee_raw), 'the fee only');

    // The branch is abandoned: on the longer one the target has no code and the same bytes succeed.
    const raw = (await (await testOrm()).em.fork().findOneOrFail(OutgoingTransaction, { id })).signedTransaction!;
    await reorgs.anvil.call('evm_revert', [snapshot]);
    await broadcastAgain(raw);
    await mine(2 + CONFIRMATIONS);
    await reorgs.anvil.call('evm_setAutomine', [true]);
    const confirmed = await eventually(async () => {
      const read = await call('GET', `/v1/transactions/${id}`);
      return read.body.status === 'confirmed' ? read.body : undefined;
    }, 'send settled again as confirmed', 60_000);
    assert.equal(confirmed.failure_reason, null);
    assert.equal(confirmed.failure_message, null);
    const receipt = await anvilReceipt(reorgs.anvil, confirmed.tx_hash);
    assert.equal(receipt.status, '0x1');
    assert.equal(confirmed.block_height, Number(receipt.blockNumber));
    assert.equal(BigInt(confirmed.fee_raw), receiptFee(receipt));
    assert.equal(await anvilEthBalance(reorgs.anvil, target), parseEther('1'));
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
    const funded = parseEther('3');
    const sender = await fundedWallet('Shallow re-mined sender', funded);
    const target = privateKeyToAccount(generatePrivateKey()).address;

    await reorgs.anvil.call('evm_setAutomine', [false]);
    const id = await broadcastSend(sender.id, target, '1');
    const snapshot = await reorgs.anvil.call('evm_snapshot');
    await reorgs.anvil.call('anvil_setCode', [target, REVERTING_CODE]);
    await mine(1);
    const reverted = await eventually(async () => {
      const read = await call('GET', `/v1/transactions/${id}`);
      return read.body.status === 'confirming' && read.body.failure_reason === 'reverted' ? read.body : undefined;
    }, 'send mined, reverted, short of its confirmations');
    assert.ok(reverted.block_height);

    const raw = (await (await testOrm()).em.fork().findOneOrFail(OutgoingTransaction, { id })).signedTransaction!;
    await reorgs.anvil.call('evm_revert', [snapshot]);
    await broadcastAgain(raw);
    await mine(2 + CONFIRMATIONS);
    await reorgs.anvil.call('evm_setAutomine', [true]);
    const settled = await eventually(async () => {
      const read = await call('GET', `/v1/transactions/${id}`);
      return ['confirmed', 'failed'].includes(read.body.status) ? read.body : undefined;
    }, 'send settled', 60_000);
    assert.equal(settled.status, 'confirmed');
    assert.equal(settled.failure_reason, null);
    const receipt = await anvilReceipt(reorgs.anvil, settled.tx_hash);
    assert.deepEqual(await ethOf(sender.id), { balance: funded - parseEther('1') - receiptFee(receipt), pending: 0n });
    assert.deepEqual((await journalOf(id)).filter((entry) => entry.kind.endsWith('_debit')).map((entry) => [entry.kind, entry.reference_id]).sort(), [
      ['fee_debit', id],
      ['send_debit', id],
    ]);
    await ledgerMatchesChain();
  });

  it('with no common block among the 256 kept, raises the alert and resyncs from a checkpoint instead of stalling the chain', async () => {
    const snapshot = await reorgs.anvil.call('evm_snapshot');
    await mine(300);
    await scannedToTip();
    const before = await cursor();
    await reorgs.anvil.call('evm_revert', [snapshot]);
    await mine(310);
    await scannedToTip();
    const after = await cursor();
    assert.equal(after.resyncs, before.resyncs + 1);
    assert.ok(after.lastResyncAt);
    const metrics = await reorgs.app.request('GET', '/metrics');
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
