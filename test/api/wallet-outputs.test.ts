import { testLogger } from '../support/secret-scan';
import assert from 'node:assert/strict';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { ObservedTransfer } from '../../src/chains/provider';
import type { Address, Wallet } from '../../src/custody/entities';
import { WalletBalance } from '../../src/custody/entities';
import { createAddress, createVault, createWallet } from '../../src/custody/service';
import { Event } from '../../src/events/entities';
import { keyServiceFor } from '../../src/keys/service';
import { IncomingTransfer } from '../../src/monitoring/entities';
import { confirmDue, dropAbove, recordTransfers } from '../../src/monitoring/service';
import { Organization } from '../../src/organizations/entities';
import { DomainError } from '../../src/shared/errors';
import { selectCoins } from '../../src/transactions/coin-selection';
import { OutgoingTransaction, WalletOutput, type WalletOutputStatus } from '../../src/transactions/entities';
import { lockOutputs, pinnedOutputs, recordChange, releaseOutputs, settleOutputs, spendableOutputs } from '../../src/transactions/wallet-outputs';
import { createTestOrganization, type TestOrganization } from '../support/app';
import { testConfig, testOrm } from '../support/environment';

const RECIPIENT = 'tb1qw508d6qejxtdg4y5r3zarvary0c5xw7kxpjzsx';
let txidSequence = 0;
/** A fresh 64-hex txid, unique in the database (outputs are unique per environment and outpoint). */
const newTxid = () => `${Date.now().toString(16)}${(txidSequence++).toString(16).padStart(8, '0')}`.padStart(64, 'c');

describe('Wallet outputs (real PostgreSQL)', () => {
  let org: TestOrganization;
  let fork: () => EntityManager;
  const keys = keyServiceFor(testConfig());

  before(async () => {
    const orm = await testOrm();
    fork = () => orm.em.fork();
    org = await createTestOrganization('Wallet outputs');
  });

  async function bitcoinWallet(): Promise<{ wallet: Wallet; primary: Address; taproot: Address }> {
    const em = fork();
    const tenant = { organizationId: org.organizationId, environment: 'sandbox' as const };
    const vault = createVault(em, tenant, { name: 'Outputs' });
    await em.flush();
    const { wallet, primary } = await createWallet(em, keys, tenant, { name: 'BTC', chain: 'bitcoin', vault_id: vault.id, wallet_type: 'hot' });
    await em.flush();
    const taproot = await createAddress(em, keys, wallet, { address_format: 'p2tr' });
    await em.flush();
    return { wallet, primary, taproot };
  }

  async function addOutput(address: Address, amount: bigint, status: WalletOutputStatus = 'available'): Promise<WalletOutput> {
    const em = fork();
    const row = em.create(WalletOutput, {
      organization: em.getReference(Organization, org.organizationId),
      environment: 'sandbox',
      wallet: address.wallet.id,
      address: address.id,
      txid: newTxid(),
      vout: 0,
      amount: amount.toString(),
      origin: 'deposit',
      status,
      createdAt: new Date(),
      updatedAt: new Date(),
    });
    await em.flush();
    return row;
  }

  function newSend(em: EntityManager, wallet: Wallet, from: Address, amount: bigint): OutgoingTransaction {
    return em.create(OutgoingTransaction, {
      organization: em.getReference(Organization, org.organizationId),
      environment: 'sandbox',
      wallet: wallet.id,
      chain: 'bitcoin',
      network: wallet.network,
      assetId: 'BTC',
      fromAddress: from.id,
      toAddress: RECIPIENT,
      amount: amount.toString(),
      recipientAmount: amount.toString(),
      feeLimit: '0',
      feeTerms: { model: 'per_byte', satPerVbyte: '1', vsize: 0 },
      feeLevel: 'medium',
      lockedAmount: amount.toString(),
      lockedFee: '0',
      requiredConfirmations: 1,
      policyRequest: {},
      policyDecision: { result: 'allow', policy_id: null, rule_id: null, action: null },
      apiKeyId: org.apiKeyId,
      gross: false,
      fillFeeFromUnselected: false,
      note: '',
      status: 'pending',
      confirmations: 0,
      createdAt: new Date(),
      updatedAt: new Date(),
    });
  }

  const statuses = async (rows: WalletOutput[]) => {
    const found = await fork().find(WalletOutput, { id: { $in: rows.map((row) => row.id) } });
    return rows.map((row) => found.find((one) => one.id === row.id)?.status ?? 'deleted');
  };

  function refusal(error: unknown): DomainError {
    assert.ok(error instanceof DomainError, String(error));
    return error;
  }

  it('lists available outputs only, with the format of their address', async () => {
    const { wallet, primary, taproot } = await bitcoinWallet();
    const spendable = await addOutput(primary, 50_000n);
    const schnorr = await addOutput(taproot, 70_000n);
    for (const status of ['unconfirmed', 'locked', 'spent'] as const) await addOutput(primary, 10_000n, status);
    const listed = await fork().transactional((em) => spendableOutputs(em, wallet));
    assert.deepEqual(
      listed.map((output) => [output.id, output.amount, output.address, output.format]).sort(),
      [
        [spendable.id, 50_000n, primary.address, 'p2wpkh'],
        [schnorr.id, 70_000n, taproot.address, 'p2tr'],
      ].sort(),
    );
  });

  it('resolves pinned inputs in order, and refuses unknown, foreign, unspendable and repeated ones with their index', async () => {
    const { wallet, primary } = await bitcoinWallet();
    const other = await bitcoinWallet();
    const first = await addOutput(primary, 20_000n);
    const second = await addOutput(primary, 30_000n);
    const unconfirmed = await addOutput(primary, 40_000n, 'unconfirmed');
    const locked = await addOutput(primary, 40_000n, 'locked');
    const foreign = await addOutput(other.primary, 50_000n);
    const pin = (inputs: { txid: string; vout: number }[]) => fork().transactional((em) => pinnedOutputs(em, wallet, inputs));
    const outpoint = (row: WalletOutput) => ({ txid: row.txid.toUpperCase(), vout: row.vout });

    const pinned = await pin([outpoint(second), outpoint(first)]);
    assert.deepEqual(
      pinned.map((output) => output.id),
      [second.id, first.id],
    );
    const cases: [{ txid: string; vout: number }, string][] = [
      [{ txid: first.txid, vout: 1 }, 'input_not_found'],
      [outpoint(foreign), 'input_not_found'],
      [outpoint(unconfirmed), 'input_not_spendable'],
      [outpoint(locked), 'input_not_spendable'],
      [outpoint(first), 'duplicate_input'],
    ];
    for (const [input, code] of cases) {
      const error = refusal(await pin([outpoint(first), input]).catch((caught: unknown) => caught));
      assert.equal(error.code, code);
      assert.equal(error.param, 'inputs[1]');
    }
  });

  it('locks all or nothing, only outputs of the send’s wallet', async () => {
    const { wallet, primary } = await bitcoinWallet();
    const other = await bitcoinWallet();
    const available = await addOutput(primary, 20_000n);
    const unconfirmed = await addOutput(primary, 20_000n, 'unconfirmed');
    const foreign = await addOutput(other.primary, 20_000n);
    const em = fork();
    const send = newSend(em, wallet, primary, 10_000n);
    await em.flush();
    for (const ids of [
      [available.id, unconfirmed.id],
      [available.id, foreign.id],
    ]) {
      const error = refusal(await fork().transactional((tx) => lockOutputs(tx, send.id, ids)).catch((caught: unknown) => caught));
      assert.equal(error.code, 'outputs_unavailable');
      assert.deepEqual(await statuses([available, unconfirmed, foreign]), ['available', 'unconfirmed', 'available']);
    }
    await fork().transactional((tx) => lockOutputs(tx, send.id, [available.id]));
    const row = await fork().findOneOrFail(WalletOutput, { id: available.id });
    assert.equal(row.status, 'locked');
    assert.equal(row.spentBy?.id, send.id);
  });

  it('settles a send: spent inputs, the mined candidate\'s change spendable, a replaced candidate\'s kept unconfirmed (never spendable, never a deposit); releases a failed one: inputs back, every change gone', async () => {
    const { wallet, primary } = await bitcoinWallet();
    const inputs = [await addOutput(primary, 30_000n), await addOutput(primary, 40_000n)];
    const run = async (outcome: 'settle' | 'release') => {
      const em = fork();
      const send = newSend(em, wallet, primary, 50_000n);
      await em.flush();
      await fork().transactional((tx) => lockOutputs(tx, send.id, inputs.map((row) => row.id)));
      const txid = newTxid();
      const change = await fork().transactional(async (tx) => {
        const transaction = await tx.findOneOrFail(OutgoingTransaction, { id: send.id }, { populate: ['fromAddress'] });
        const recorded = await recordChange(tx, transaction, { txid: txid.toUpperCase(), vout: 1, amount: 19_000n, address: transaction.fromAddress });
        // A retried activity records it again: the same row.
        assert.equal((await recordChange(tx, transaction, { txid, vout: 1, amount: 19_000n, address: transaction.fromAddress })).id, recorded.id);
        return recorded;
      });
      assert.deepEqual([change.origin, change.status, change.txid, change.createdBy?.id], ['change', 'unconfirmed', txid, send.id]);
      // A replacement of the send (BIP-125: the same inputs, another txid) has its own change; the chain mines the original.
      const replaced = await fork().transactional(async (tx) => {
        const transaction = await tx.findOneOrFail(OutgoingTransaction, { id: send.id }, { populate: ['fromAddress'] });
        return recordChange(tx, transaction, { txid: newTxid(), vout: 1, amount: 18_000n, address: transaction.fromAddress });
      });
      for (let twice = 0; twice < 2; twice++) await fork().transactional((tx) => (outcome === 'settle' ? settleOutputs(tx, send.id, txid.toUpperCase()) : releaseOutputs(tx, send.id)));
      return { send, change, replaced };
    };

    const released = await run('release');
    assert.deepEqual(await statuses([...inputs, released.change, released.replaced]), ['available', 'available', 'deleted', 'deleted']);
    const settled = await run('settle');
    assert.deepEqual(await statuses([...inputs, settled.change, settled.replaced]), ['spent', 'spent', 'available', 'unconfirmed']);
    await assert.rejects(
      fork().transactional((tx) => releaseOutputs(tx, settled.send.id)),
      /is settled/,
    );
  });

  it('50 concurrent sends from one wallet lock distinct outputs, the rest are refused insufficient_funds', async () => {
    const { wallet, primary } = await bitcoinWallet();
    const outputs = await Promise.all(Array.from({ length: 24 }, () => addOutput(primary, 100_000n)));
    // Each send needs two of the outputs: at most 12 can succeed.
    const send = () =>
      fork().transactional(async (em) => {
        const selection = selectCoins({
          amount: 150_000n,
          gross: false,
          satPerVbyte: 2n,
          recipient: RECIPIENT,
          changeFormat: 'p2wpkh',
          pinned: null,
          others: await spendableOutputs(em, wallet),
          fillFromUnselected: false,
        });
        const transaction = newSend(em, wallet, primary, 150_000n);
        await em.flush();
        await lockOutputs(em, transaction.id, selection.inputs.map((input) => input.id));
        return { transaction: transaction.id, inputs: selection.inputs.map((input) => input.id) };
      });
    const results = await Promise.allSettled(Array.from({ length: 50 }, send));
    const succeeded = results.flatMap((result) => (result.status === 'fulfilled' ? [result.value] : []));
    for (const result of results) {
      if (result.status === 'rejected') assert.equal(refusal(result.reason).code, 'insufficient_funds');
    }
    assert.equal(succeeded.length, 12);
    const spent = succeeded.flatMap((one) => one.inputs);
    assert.equal(new Set(spent).size, spent.length, 'no output in two sends');
    const rows = await fork().find(WalletOutput, { id: { $in: outputs.map((row) => row.id) } });
    for (const one of succeeded) {
      assert.deepEqual(
        rows.filter((row) => row.spentBy?.id === one.transaction).map((row) => row.id).sort(),
        [...one.inputs].sort(),
      );
    }
    assert.ok(rows.every((row) => row.status === 'locked'));
  });

  describe('block scanning', () => {
    const scope = { chain: 'bitcoin' as const, environment: 'sandbox' as const, requiredConfirmations: 2 };
    /** Heights far above anything another test records, so confirming and dropping them touches only this test's rows. */
    let height = 10_000_000 + Math.floor(Math.random() * 1_000_000) * 10;

    const record = (transfers: ObservedTransfer[], block: { height: number; hash: string } | null, tipHeight: number) =>
      fork().transactional((em) => recordTransfers(em, { ...scope, tipHeight }, transfers, block));
    const outputOf = (txid: string, vout: number) => fork().findOne(WalletOutput, { environment: 'sandbox', txid, vout });
    const balance = async (wallet: Wallet) => {
      const row = await fork().findOne(WalletBalance, { wallet: wallet.id, assetId: 'BTC' });
      return { balance: row?.balance ?? '0', pending: row?.pending ?? '0' };
    };

    it('a deposit records its output, unconfirmed until the deposit confirms, then spendable', async () => {
      const { wallet, taproot } = await bitcoinWallet();
      const txid = newTxid();
      const transfer: ObservedTransfer = { txid, position: 'out:3', to: taproot.address, from: null, assetId: 'BTC', amount: 25_000n };
      await record([transfer], null, height);
      const seen = await outputOf(txid, 3);
      assert.deepEqual([seen?.origin, seen?.status, seen?.amount, seen?.address.id, seen?.wallet.id], ['deposit', 'unconfirmed', '25000', taproot.id, wallet.id]);
      height += 1;
      await record([transfer], { height, hash: `block-${height}` }, height);
      await fork().transactional((em) => confirmDue(em, testLogger('test'), scope, height));
      assert.equal((await outputOf(txid, 3))?.status, 'unconfirmed', 'one confirmation of two');
      await fork().transactional((em) => confirmDue(em, testLogger('test'), scope, height + 1));
      assert.equal((await outputOf(txid, 3))?.status, 'available');
      assert.deepEqual(
        (await fork().transactional((em) => spendableOutputs(em, wallet))).map((output) => [output.txid, output.vout, output.format]),
        [[txid, 3, 'p2tr']],
      );
      height += 10;
    });

    it('a deposit a reorganisation drops loses its output, which comes back with it', async () => {
      const { primary } = await bitcoinWallet();
      const txid = newTxid();
      const transfer: ObservedTransfer = { txid, position: 'out:0', to: primary.address, from: null, assetId: 'BTC', amount: 30_000n };
      height += 1;
      await record([transfer], { height, hash: `block-${height}` }, height);
      assert.equal((await outputOf(txid, 0))?.status, 'unconfirmed');
      await fork().transactional((em) => dropAbove(em, testLogger('test'), scope, height - 1));
      assert.equal(await outputOf(txid, 0), null);
      await record([transfer], { height, hash: `other-block-${height}` }, height);
      assert.equal((await outputOf(txid, 0))?.status, 'unconfirmed');
      height += 10;
    });

    it('the change of the wallet’s own send is no deposit: no transfer, no credit, no event', async () => {
      const { wallet, primary } = await bitcoinWallet();
      const em = fork();
      const send = newSend(em, wallet, primary, 10_000n);
      await em.flush();
      const txid = newTxid();
      await fork().transactional(async (tx) => {
        const transaction = await tx.findOneOrFail(OutgoingTransaction, { id: send.id }, { populate: ['fromAddress'] });
        await recordChange(tx, transaction, { txid, vout: 1, amount: 80_000n, address: transaction.fromAddress });
      });
      const before = await balance(wallet);
      const changeTransfer: ObservedTransfer = { txid, position: 'out:1', to: primary.address, from: null, assetId: 'BTC', amount: 80_000n };
      // The same transaction also pays the wallet on another output: that one is a deposit (a send to itself).
      const selfPayment: ObservedTransfer = { txid, position: 'out:0', to: primary.address, from: null, assetId: 'BTC', amount: 10_000n };
      height += 1;
      const recorded = await record([changeTransfer, selfPayment], null, height);
      assert.deepEqual(
        recorded.map((row) => row.position),
        ['out:0'],
      );
      await record([changeTransfer, selfPayment], { height, hash: `block-${height}` }, height);
      const transfers = await fork().find(IncomingTransfer, { organization: org.organizationId, txid });
      assert.deepEqual(
        transfers.map((row) => row.position),
        ['out:0'],
      );
      assert.equal(BigInt((await balance(wallet)).pending) - BigInt(before.pending), 10_000n, 'only the payment is pending');
      const events = await fork().find(Event, { organization: org.organizationId });
      assert.ok(!events.some((event) => JSON.stringify(event.data).includes(`"position":"out:1"`) && JSON.stringify(event.data).includes(txid)), 'no event for the change');
      const change = await outputOf(txid, 1);
      assert.deepEqual([change?.origin, change?.status], ['change', 'unconfirmed']);
      assert.deepEqual([(await outputOf(txid, 0))?.origin], ['deposit']);
      height += 10;
    });
  });
});
