import assert from 'node:assert/strict';
import { formatEther, keccak256, parseEther, toHex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { IncomingTransfer, LedgerDrift, OutgoingTransfer } from '../../src/monitoring/entities';
import { OutgoingTransaction } from '../../src/transactions/entities';
import { anvilFunder, anvilReceipt, receiptFee } from '../support/anvil';
import { anvilReorganisations, REORG_CONFIRMATIONS as CONFIRMATIONS } from '../support/anvil-reorgs';
import { testOrm } from '../support/environment';
import { cli } from '../support/cli';
import { eventually } from '../support/eventually';

/**
 * What a reorganisation deeper than the confirmation count leaves in the ledger's suspense, and how it
 * leaves, on a real Ethereum node (anvil): a reversed deposit already spent (overdrawn), a spend made
 * outside the platform, a settled send the new chain will never mine.
 */
describe('Reorganisations and suspense on a real Ethereum node (anvil)', () => {
  const reorgs = anvilReorganisations('anvil-reorg-suspense');
  /** What the organization has in suspense not yet proven, as `npm run cli -- ledger:suspense` lists it. */
  const openInSuspense = async () =>
    (JSON.parse((await cli(['ledger:suspense', '--org', reorgs.org.organizationId])).stdout) as { items: Record<string, string>[] }).items;
  const { funder, mine, createWallet, fundedWallet, broadcastSend, ethOf, call, ledgerMatchesChain, journalOf, suspense, suspenseMoves, usedOutside, events, broadcastAgain, reconcile } = reorgs;

  it('a reversed deposit the wallet had spent: its send reorganised out too, an overdrawn drift raised, both in suspense, all settled again when mined again', async () => {
    const ours = await createWallet('Spent deposit');
    const deposited = parseEther('2');
    const sent = parseEther('1.5');
    const snapshot = await reorgs.anvil.call('evm_snapshot');
    const depositRaw = await funder().signTransaction(await funder().prepareTransactionRequest({ to: ours.address, value: deposited }));
    await broadcastAgain(depositRaw);
    await mine(CONFIRMATIONS);
    await eventually(async () => ((await ethOf(ours.id)).balance === deposited ? true : undefined), 'deposit confirmed');
    const [deposit] = (await call('GET', `/v1/deposits?wallet_id=${ours.id}`)).body.data as { id: string }[];
    const target = privateKeyToAccount(generatePrivateKey()).address;
    const id = await broadcastSend(ours.id, target, '1.5');
    await mine(CONFIRMATIONS);
    const settled = await eventually(async () => {
      const read = await call('GET', `/v1/transactions/${id}`);
      return read.body.status === 'confirmed' ? read.body : undefined;
    }, 'send settled');
    const fee = BigInt(settled.fee_raw);
    const sendRaw = (await (await testOrm()).em.fork().findOneOrFail(OutgoingTransaction, { id })).signedTransaction!;

    // A longer chain without the deposit, and so without the send it paid for (the pool may keep them: emptied).
    await reorgs.anvil.call('evm_revert', [snapshot]);
    await reorgs.anvil.call('anvil_dropAllTransactions');
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
    // anvil mines on arrival, but after it answers: the send is checked against the state with the deposit only once that block is there.
    await anvilReceipt(reorgs.anvil, keccak256(depositRaw));
    await broadcastAgain(sendRaw);
    await mine(CONFIRMATIONS + 1);
    await eventually(async () => ((await call('GET', `/v1/transactions/${id}`)).body.block_height != null && (await suspense()) === 0n ? true : undefined), 'both settled again', 60_000);
    // The new block's base fee is its own: the send is debited what it paid there.
    const receipt = await anvilReceipt(reorgs.anvil, settled.tx_hash);
    assert.deepEqual(await ethOf(ours.id), { balance: deposited - sent - receiptFee(receipt), pending: 0n });
    const resolved = await (await testOrm()).em.fork().findOneOrFail(LedgerDrift, { id: drift.data.id as string });
    assert.equal(resolved.status, 'resolved');
    await ledgerMatchesChain();
  });


  it('a spend made outside the platform, reorganised out: the wallet stays debited, the spend waits in suspense, and leaves it when mined again', async () => {
    const funded = parseEther('2');
    const ours = await fundedWallet('Spent outside', funded);
    const snapshot = await reorgs.anvil.call('evm_snapshot');
    const outside = await usedOutside(ours.id);
    const raw = await outside.signTransaction(await outside.prepareTransactionRequest({ to: privateKeyToAccount(generatePrivateKey()).address, value: parseEther('0.5') }));
    const hash = keccak256(raw);
    await broadcastAgain(raw);
    const spent = parseEther('0.5') + receiptFee(await anvilReceipt(reorgs.anvil, hash));
    await eventually(async () => ((await ethOf(ours.id)).balance === funded - spent ? true : undefined), 'the spend debited');
    const [row] = await (await testOrm()).em.fork().find(OutgoingTransfer, { txid: hash });

    await reorgs.anvil.call('evm_revert', [snapshot]);
    await reorgs.anvil.call('anvil_dropAllTransactions');
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
    assert.equal(BigInt(placed.fee), receiptFee(await anvilReceipt(reorgs.anvil, hash)));
    assert.equal((await ethOf(ours.id)).balance, funded - parseEther('0.5') - BigInt(placed.fee));
    assert.equal(await suspense(), 0n);
    await ledgerMatchesChain();
  });


  it('a settled send whose nonce another transaction took on the new chain: failed reorged_out once that is final, what it paid back from suspense', async () => {
    const funded = parseEther('2');
    const ours = await fundedWallet('Nonce taken', funded);
    const snapshot = await reorgs.anvil.call('evm_snapshot');
    const id = await broadcastSend(ours.id, privateKeyToAccount(generatePrivateKey()).address, '0.5');
    await mine(CONFIRMATIONS);
    const settled = await eventually(async () => {
      const read = await call('GET', `/v1/transactions/${id}`);
      return read.body.status === 'confirmed' ? read.body : undefined;
    }, 'send settled');
    const paid = parseEther('0.5') + BigInt(settled.fee_raw);

    // The new chain: the send is gone, and the custody key, used outside, spent its nonce on something else.
    await reorgs.anvil.call('evm_revert', [snapshot]);
    await reorgs.anvil.call('anvil_dropAllTransactions');
    const outside = await usedOutside(ours.id);
    const other = await outside.signTransaction(await outside.prepareTransactionRequest({ to: privateKeyToAccount(generatePrivateKey()).address, value: parseEther('0.1'), nonce: 0 }));
    await broadcastAgain(other);
    const otherPaid = parseEther('0.1') + receiptFee(await anvilReceipt(reorgs.anvil, keccak256(other)));
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
    assert.deepEqual(await openInSuspense(), [], 'every round of this file so far proven: mined again, or returned');
    await ledgerMatchesChain();
  });

  it("a reversed deposit whose payer used its nonce for another transaction on the new chain: written off from suspense once that is final (deposit.reversal_final)", async () => {
    const ours = await createWallet('Deposit never mined again');
    const payer = anvilFunder(reorgs.anvil, generatePrivateKey());
    await funder().sendTransaction({ to: payer.account.address, value: parseEther('1') });
    await mine(1);
    const snapshot = await reorgs.anvil.call('evm_snapshot');
    const amount = parseEther('0.4');
    await payer.sendTransaction({ to: ours.address, value: amount });
    await mine(CONFIRMATIONS);
    await eventually(async () => ((await ethOf(ours.id)).balance === amount ? true : undefined), 'deposit confirmed');
    const [deposit] = (await call('GET', `/v1/deposits?wallet_id=${ours.id}`)).body.data as { id: string }[];

    // The new chain: the payer's nonce 0 pays someone else; longer than the branch abandoned.
    await reorgs.anvil.call('evm_revert', [snapshot]);
    await reorgs.anvil.call('anvil_dropAllTransactions');
    await payer.sendTransaction({ to: privateKeyToAccount(generatePrivateKey()).address, value: parseEther('0.1'), nonce: 0 });
    await mine(CONFIRMATIONS + 2);
    const row = async () => (await testOrm()).em.fork().findOneOrFail(IncomingTransfer, { id: deposit!.id }, { refresh: true });
    await eventually(async () => ((await row()).neverMined.lossSeenAtHeight != null ? true : undefined), 'the loss proven');
    assert.equal((await row()).neverMined.lostAt, null, 'not resolved before the proof is final');
    assert.deepEqual(await suspenseMoves(`${deposit!.id}#0`), [['suspense_entered', amount]]);
    // Operators see what waits: the CLI lists the round, /metrics counts it.
    assert.deepEqual(
      (await openInSuspense()).map((item) => [item.reference_type, item.reference_id, item.asset_id, item.counterparty, item.amount_raw]),
      [['incoming_transfer', `${deposit!.id}#0`, 'ETH', 'world', amount.toString()]],
    );
    assert.match((await reorgs.app.request('GET', '/metrics')).text, /ledger_suspense_items\{environment="sandbox",asset="ETH"\} [1-9]/);

    await mine(CONFIRMATIONS);
    await eventually(async () => ((await row()).neverMined.lostAt != null ? true : undefined), 'the reversal final');
    assert.deepEqual(await suspenseMoves(`${deposit!.id}#0`), [
      ['suspense_entered', amount],
      ['suspense_written_off', -amount],
    ]);
    assert.equal(await suspense(), 0n);
    assert.deepEqual(await openInSuspense(), []);
    assert.deepEqual(await ethOf(ours.id), { balance: 0n, pending: 0n });
    const final = await eventually(async () => events().find((event) => event.type === 'deposit.reversal_final' && event.data.id === deposit!.id), 'deposit.reversal_final delivered');
    assert.equal(final.data.status, 'dropped');
    await ledgerMatchesChain();
  });

  it('a spend made outside the platform, reorganised out, whose nonce another spend took on the new chain: what it debited returns to the wallet once that is final', async () => {
    const funded = parseEther('2');
    const ours = await fundedWallet('Spend never mined again', funded);
    const outside = await usedOutside(ours.id);
    const snapshot = await reorgs.anvil.call('evm_snapshot');
    const lostHash = await outside.sendTransaction({ to: privateKeyToAccount(generatePrivateKey()).address, value: parseEther('0.5') });
    const lostSpent = parseEther('0.5') + receiptFee(await anvilReceipt(reorgs.anvil, lostHash));
    await mine(CONFIRMATIONS);
    await eventually(async () => ((await ethOf(ours.id)).balance === funded - lostSpent ? true : undefined), 'the spend debited');
    const [lost] = await (await testOrm()).em.fork().find(OutgoingTransfer, { txid: lostHash });

    await reorgs.anvil.call('evm_revert', [snapshot]);
    await reorgs.anvil.call('anvil_dropAllTransactions');
    const keptHash = await outside.sendTransaction({ to: privateKeyToAccount(generatePrivateKey()).address, value: parseEther('0.1'), nonce: 0 });
    const keptSpent = parseEther('0.1') + receiptFee(await anvilReceipt(reorgs.anvil, keptHash));
    await mine(CONFIRMATIONS + 2);
    const row = async () => (await testOrm()).em.fork().findOneOrFail(OutgoingTransfer, { id: lost!.id }, { refresh: true });
    await eventually(async () => ((await row()).neverMined.lossSeenAtHeight != null ? true : undefined), 'the loss proven');
    assert.equal((await ethOf(ours.id)).balance, funded - lostSpent - keptSpent, 'both debited until the proof is final');

    await mine(CONFIRMATIONS);
    await eventually(async () => ((await row()).neverMined.lostAt != null ? true : undefined), 'the lost spend returned');
    assert.deepEqual(await ethOf(ours.id), { balance: funded - keptSpent, pending: 0n });
    assert.equal(await suspense(), 0n);
    assert.deepEqual(await openInSuspense(), []);
    const journal = await journalOf(lost!.id);
    assert.deepEqual(
      journal.filter((entry) => entry.kind === 'reorg_returned').map((entry) => BigInt(entry.balance)),
      [lostSpent],
    );
    const returned = await eventually(async () => events().find((event) => event.type === 'wallet.unexpected_spend_returned' && event.data.tx_hash === lostHash), 'wallet.unexpected_spend_returned delivered');
    assert.deepEqual(returned.data.returned, [{ asset: 'ETH', asset_id: 'ETH', amount: formatEther(lostSpent), amount_raw: lostSpent.toString() }]);
    await ledgerMatchesChain();
  });

  it('a surplus no transaction explains is credited only once final: a reorganisation that takes the block it was seen at starts the wait again', async () => {
    const unexplained = await createWallet('Unexplained');
    const extra = parseEther('0.7');
    const em = (await testOrm()).em.fork();
    const drift = async () => em.findOneOrFail(LedgerDrift, { wallet: unexplained.id, figure: 'balance' }, { refresh: true });
    await reorgs.scannedToTip();
    const snapshot = await reorgs.anvil.call('evm_snapshot');
    // Value arrives with no transaction the scanner reads (as a contract's internal transfer would).
    await reorgs.anvil.call('anvil_setBalance', [unexplained.address, toHex(extra)]);
    await mine(1);
    await reconcile();
    const seen = await drift();
    assert.deepEqual([seen.status, seen.surplusFloor], ['open', extra.toString()], 'seen, not credited: its block is not final');
    const seenAt = seen.surplusSeenHeight!;

    // A longer chain where the same value arrives a block later: the block it was seen at is gone.
    await reorgs.anvil.call('evm_revert', [snapshot]);
    await mine(1);
    await reorgs.anvil.call('anvil_setBalance', [unexplained.address, toHex(extra)]);
    await mine(CONFIRMATIONS);
    await reconcile();
    const again = await drift();
    assert.equal(again.status, 'open', `the surplus is not credited ${CONFIRMATIONS} blocks above a block the chain abandoned`);
    assert.ok(again.surplusSeenHeight! > seenAt, 'the wait starts again at the block compared');
    assert.equal((await ethOf(unexplained.id)).balance, 0n);

    await mine(CONFIRMATIONS - 1);
    await reconcile();
    const credited = await drift();
    assert.deepEqual([credited.status, credited.creditedAmount], ['credited', extra.toString()]);
    assert.equal((await ethOf(unexplained.id)).balance, extra, 'credited once, as an unattributed deposit');
    const announced = () => events().filter((event) => event.type === 'ledger.drift' && event.data.wallet_id === unexplained.id);
    await eventually(async () => (announced().length === 2 ? true : undefined), 'opened and credited announced');
    assert.deepEqual(announced().map((event) => [event.data.status, event.data.credited_amount_raw]), [['open', null], ['credited', extra.toString()]]);
    await ledgerMatchesChain();
  });
});
