import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { CHAIN_IDS, type ChainId } from '../../src/catalogue/service';
import { mineDevnetBlocks } from '../../src/chains/devnet/block-production';
import { devnetBlocksWorkflowId } from '../../src/chains/flows/devnet-blocks';
import { ChainNodes } from '../../src/chains/nodes';
import { Organization } from '../../src/organizations/entities';
import { toDisplay } from '../../src/shared/money';
import { chainScanWorkflowId } from '../../src/monitoring/flows/chain-scan';
import { compareLedgerWithChain } from '../../src/monitoring/ledger-check';
import { createTestOrganization, startTestApp, type TestApp, type TestOrganization } from '../support/app';
import { localTemporal, testConfig, testOrm } from '../support/environment';
import { eventually } from '../support/eventually';
import { terminateWorkflows } from '../support/scanning';
import { testLogger } from '../support/secret-scan';
import { WebhookReceiver } from '../support/webhook-receiver';
import { RestartableWorker } from '../support/worker';
import { SOLANA_TOKEN_ACCOUNT_RENT } from '../../src/chains/transfers/solana';

const CONFIRMATIONS: Record<ChainId, number> = { bitcoin: 2, ethereum: 2, tron: 2, solana: 2 };

interface Transaction {
  id: string;
  status: string;
  amount_raw: string;
  recipient_amount_raw: string;
  fee_raw: string | null;
  fee_limit_raw: string;
  tx_hash: string | null;
  confirmations: number;
  workflow_id: string;
  inputs_used: { txid: string; vout: string; amount_raw: string }[];
}

/** Sends on the embedded devnet of every chain, through the real API, Temporal and PostgreSQL. */
describe('Transactions: sends from custody wallets on the devnet', () => {
  let app: TestApp;
  let org: TestOrganization;
  const receiver = new WebhookReceiver();
  const taskQueue = `transactions-${randomUUID()}`;
  const config = {
    TEMPORAL_TASK_QUEUE: taskQueue,
    DEVNET_BLOCK_INTERVAL_SECONDS: '3600',
    CHAIN_SCAN_INTERVAL_SECONDS: '0.2',
    CHAIN_CONFIRMATIONS_BITCOIN: String(CONFIRMATIONS.bitcoin),
    CHAIN_CONFIRMATIONS_ETHEREUM: String(CONFIRMATIONS.ethereum),
    CHAIN_CONFIRMATIONS_TRON: String(CONFIRMATIONS.tron),
    CHAIN_CONFIRMATIONS_SOLANA: String(CONFIRMATIONS.solana),
  };

  const worker = new RestartableWorker(taskQueue, config);

  before(async () => {
    await receiver.start();
    app = await startTestApp({ config });
    await worker.start();
    org = await createTestOrganization('Sends');
    const endpoint = await app.request('POST', '/v1/webhooks', { key: org.secret, body: { name: 'sends', url: receiver.url } });
    receiver.secrets = [endpoint.body.signing_secret];
  });
  after(async () => {
    await terminateWorkflows((await localTemporal()).client, CHAIN_IDS.flatMap((chain) => [devnetBlocksWorkflowId(chain), chainScanWorkflowId(chain, 'sandbox')]));
    await worker.stop();
    await app?.close();
    await receiver.close();
  });

  const call = (method: string, path: string, body?: unknown, key = org.secret) => app.request(method, path, { key, body });

  async function createWallet(chain: ChainId, owner = org) {
    const vault = await call('POST', '/v1/vaults', { name: chain }, owner.secret);
    const wallet = await call('POST', '/v1/wallets', { name: chain, chain, vault_id: vault.body.id, wallet_type: 'hot' }, owner.secret);
    assert.equal(wallet.status, 201, wallet.text);
    return { id: wallet.body.id as string, address: wallet.body.primary_address.address as string };
  }
  const balance = async (walletId: string, assetId: string, owner = org) => {
    const rows = (await call('GET', `/v1/wallets/${walletId}/balances`, undefined, owner.secret)).body.data as { asset_id: string; balance: string; available: string; locked: string }[];
    const row = rows.find((candidate) => candidate.asset_id === assetId)!;
    return { balance: row.balance, available: row.available, locked: row.locked };
  };
  const mine = async (chain: ChainId, count: number) => {
    const mined = await call('POST', `/v1/sandbox/chains/${chain}/blocks`, { count });
    assert.equal(mined.status, 200, mined.text);
  };
  /** Funds a wallet address from the devnet's faucet and confirms the deposit. */
  async function fund(chain: ChainId, address: string, asset: string, amount: string, owner = org) {
    const response = await call('POST', '/v1/sandbox/deposits', { chain, address, asset, amount }, owner.secret);
    assert.equal(response.status, 201, response.text);
    await mine(chain, CONFIRMATIONS[chain]);
  }
  const send = (body: Record<string, unknown>, key = org.secret) => call('POST', '/v1/transactions', body, key);
  const read = async (id: string) => (await call('GET', `/v1/transactions/${id}`)).body as Transaction;
  /** Mines a block at a time until the send settles (its workflow checks every 5 s). */
  async function settle(chain: ChainId, id: string, until = 'confirmed'): Promise<Transaction> {
    await eventually(async () => ((await read(id)).status !== 'pending' && (await read(id)).status !== 'signed' ? true : undefined), `transaction ${id} broadcast`);
    return eventually(
      async () => {
        const transaction = await read(id);
        if (transaction.status === until) return transaction;
        if (transaction.status === 'broadcast' || transaction.status === 'confirming') await mine(chain, 1);
        return undefined;
      },
      `transaction ${id} ${until}`,
      60_000,
      1_000,
    );
  }
  const ledgerMatchesChain = async (chain: ChainId) => {
    const nodes = new ChainNodes(testConfig(config), testLogger('test'), await testOrm());
    const result = await compareLedgerWithChain((await testOrm()).em.fork(), await nodes.provider(chain, 'sandbox'), { chain, environment: 'sandbox', organizationId: org.organizationId });
    assert.deepEqual(result.mismatches, [], `${chain} ledger equals the chain`);
  };

  const cases: { chain: ChainId; native: string; fund: string; amount: string; token?: { asset: string; fund: string; amount: string } }[] = [
    { chain: 'bitcoin', native: 'BTC', fund: '0.5', amount: '0.1' },
    { chain: 'ethereum', native: 'ETH', fund: '2', amount: '0.5', token: { asset: 'USDC_ETH', fund: '100', amount: '40.25' } },
    { chain: 'tron', native: 'TRX', fund: '200', amount: '12.5', token: { asset: 'USDT_TRX', fund: '100', amount: '40' } },
    { chain: 'solana', native: 'SOL', fund: '3', amount: '0.75', token: { asset: 'USDC_SOL', fund: '100', amount: '7.25' } },
  ];
  for (const { chain, native, fund: funding, amount, token } of cases) {
    it(`${chain}: a send locks, signs, broadcasts, confirms and settles exactly; the other wallet is credited; the ledger equals the chain`, async () => {
      const from = await createWallet(chain);
      const to = await createWallet(chain);
      await fund(chain, from.address, native, funding);
      if (token) await fund(chain, from.address, token.asset, token.fund);
      const before = await balance(from.id, native);

      const created = await send({ wallet_id: from.id, to_address: to.address, amount, asset: native });
      assert.equal(created.status, 201, created.text);
      assert.equal(created.body.object, 'transaction');
      assert.equal(created.body.status, 'pending');
      assert.equal(created.body.workflow_id, `transaction-${created.body.id}`);
      const locked = await balance(from.id, native);
      assert.equal(BigInt(locked.locked), BigInt(created.body.amount_raw) + BigInt(created.body.fee_limit_raw), 'amount and fee limit locked');

      const confirmed = await settle(chain, created.body.id);
      assert.match(confirmed.tx_hash!, /\S+/);
      const fee = BigInt(confirmed.fee_raw!);
      assert.ok(fee > 0n && fee <= BigInt(confirmed.fee_limit_raw), 'the fee paid is within its limit');
      const after = await balance(from.id, native);
      assert.equal(BigInt(after.balance), BigInt(before.balance) - BigInt(confirmed.amount_raw) - fee, 'debited amount and fee exactly');
      assert.equal(after.locked, '0', 'the lock is released in full');
      if (chain === 'bitcoin') assert.ok(confirmed.inputs_used.length > 0, 'the inputs it spent are shown');
      await eventually(async () => ((await balance(to.id, native)).balance === confirmed.amount_raw ? true : undefined), 'the recipient wallet credited');

      if (token) {
        const sent = await send({ wallet_id: from.id, to_address: to.address, amount: token.amount, asset: token.asset.split('_')[0] });
        assert.equal(sent.status, 201, sent.text);
        if (chain === 'solana') {
          // It may create the recipient's token account: that rent is locked with the fee, and debited only if paid (the devnet charges none).
          assert.equal(BigInt(sent.body.fee_limit_raw) - BigInt(sent.body.fee_raw), SOLANA_TOKEN_ACCOUNT_RENT, "the token account's rent locked with the fee");
        }
        const nativeBefore = await balance(from.id, native);
        const tokenBefore = await balance(from.id, token.asset);
        const tokenConfirmed = await settle(chain, sent.body.id);
        assert.equal(BigInt((await balance(from.id, token.asset)).balance), BigInt(tokenBefore.balance) - BigInt(tokenConfirmed.amount_raw));
        assert.equal(BigInt((await balance(from.id, native)).balance), BigInt(nativeBefore.balance) - BigInt(tokenConfirmed.fee_raw!), 'the token send paid its fee in the native asset');
        await eventually(async () => (receiver.attempts.some((attempt) => JSON.parse(attempt.body).type === 'transfer.success' && JSON.parse(attempt.body).data.transaction_id === sent.body.id) ? true : undefined), 'transfer.success');
        const success = receiver.attempts.map((attempt) => JSON.parse(attempt.body)).find((event) => event.type === 'transfer.success' && event.data.transaction_id === sent.body.id);
        assert.match(success.event_id, /\S+/, 'transfer.success carries a top-level event_id');
      }
      await ledgerMatchesChain(chain);

      const events = async () =>
        receiver.attempts
          .map((attempt) => JSON.parse(attempt.body) as { type: string; data: { id: string } })
          .filter((event) => event.data.id === created.body.id)
          .map((event) => event.type)
          .sort();
      await eventually(async () => ((await events()).length >= 3 ? true : undefined), 'transaction events');
      assert.deepEqual(await events(), ['transaction.broadcast', 'transaction.confirmed', 'transaction.created']);
    });
  }

  it('treat_as_gross_amount: the fee comes out of the amount; the wallet gives no more than the amount', async () => {
    const from = await createWallet('ethereum');
    const to = await createWallet('ethereum');
    await fund('ethereum', from.address, 'ETH', '1');
    const created = await send({ wallet_id: from.id, to_address: to.address, amount: '1', asset: 'ETH', treat_as_gross_amount: true });
    assert.equal(created.status, 201, created.text);
    assert.equal(BigInt(created.body.recipient_amount_raw), BigInt(created.body.amount_raw) - BigInt(created.body.fee_limit_raw));
    const confirmed = await settle('ethereum', created.body.id);
    const after = await balance(from.id, 'ETH');
    assert.equal(BigInt(after.balance), 10n ** 18n - BigInt(confirmed.recipient_amount_raw) - BigInt(confirmed.fee_raw!));
    assert.ok(BigInt(after.balance) >= 0n);
    await ledgerMatchesChain('ethereum');
  });

  it('locks per address: a send leaves from the address that holds the amount; none holding it alone is refused, naming what each can spend', async () => {
    const from = await createWallet('ethereum');
    const to = await createWallet('ethereum');
    const second = await call('POST', `/v1/wallets/${from.id}/addresses`, { label: 'second' });
    assert.equal(second.status, 201, second.text);
    await fund('ethereum', second.body.address, 'ETH', '1');
    await fund('ethereum', from.address, 'ETH', '0.3');
    await eventually(async () => ((await balance(from.id, 'ETH')).balance === (13n * 10n ** 17n).toString() ? true : undefined), 'both deposits credited');

    // 0.5 ETH: only the second address holds it, though the primary holds some ether.
    const created = await send({ wallet_id: from.id, to_address: to.address, amount: '0.5', asset: 'ETH' });
    assert.equal(created.status, 201, created.text);
    assert.equal(created.body.from_address, second.body.address);
    // The wallet still holds 0.8 ETH unlocked in all, but no address holds 0.6 ETH and a fee alone.
    const refused = await send({ wallet_id: from.id, to_address: to.address, amount: '0.6', asset: 'ETH' });
    assert.equal(refused.status, 400, refused.text);
    assert.equal(refused.body.error.code, 'insufficient_funds');
    assert.equal(refused.body.error.param, 'amount');
    const spendable = Object.fromEntries(
      (refused.body.error.details.addresses as { address: string; available: { ETH: string } }[]).map((entry) => [entry.address, entry.available.ETH]),
    );
    assert.equal(spendable[from.address], '0.3');
    assert.equal(spendable[second.body.address], toDisplay(10n ** 18n - BigInt(created.body.amount_raw) - BigInt(created.body.fee_limit_raw), 18), 'the second address can spend what its send left');
    assert.match(refused.body.error.message, new RegExp(`${second.body.address} has`));

    const confirmed = await settle('ethereum', created.body.id);
    const rows = await (await testOrm()).em
      .fork()
      .execute<{ address_id: string; balance: string; locked: string }[]>(`select address_id, balance::text, locked::text from address_balances where wallet_id = ? and asset_id = 'ETH'`, [from.id]);
    const bySecond = rows.find((row) => row.address_id === second.body.id)!;
    assert.equal(BigInt(bySecond.balance), 10n ** 18n - BigInt(confirmed.amount_raw) - BigInt(confirmed.fee_raw!), 'the sending address debited amount and fee');
    assert.equal(bySecond.locked, '0');
    assert.equal(rows.find((row) => row.address_id !== second.body.id)!.balance, (3n * 10n ** 17n).toString(), 'the primary untouched');
    await ledgerMatchesChain('ethereum');
  });

  it('refuses bad sends with 400 and a named param or code, locking nothing', async () => {
    const wallet = await createWallet('ethereum');
    const btc = await createWallet('bitcoin');
    await fund('ethereum', wallet.address, 'ETH', '1');
    const base = { wallet_id: wallet.id, to_address: wallet.address, amount: '0.1', asset: 'ETH' };
    const refusals: [Record<string, unknown>, number, string, string?][] = [
      [{ ...base, amount: '0' }, 400, 'validation_failed', 'amount'],
      [{ ...base, amount: '0.1234567890123456789' }, 400, 'validation_failed', 'amount'],
      [{ ...base, amount: 0.1 }, 400, 'validation_failed', 'amount'],
      [{ ...base, asset: 'BTC' }, 400, 'validation_failed', 'asset'],
      [{ ...base, to_address: '0x1234' }, 400, 'validation_failed', 'to_address'],
      [{ ...base, amount: '5' }, 400, 'insufficient_funds', 'amount'],
      [{ ...base, fee_rate: '5' }, 400, 'bitcoin_only', 'fee_rate'],
      [{ ...base, inputs: [{ txid: 'ab'.repeat(32), vout: '0' }] }, 400, 'bitcoin_only', 'inputs'],
      [{ ...base, asset: 'USDC', treat_as_gross_amount: true }, 400, 'gross_amount_native_only', 'treat_as_gross_amount'],
      [{ ...base, sponsor: true }, 400, 'sponsorship_unavailable', 'sponsor'],
      [{ ...base, fee_level: 'urgent' }, 400, 'validation_failed', 'fee_level'],
      [{ ...base, wallet_id: randomUUID() }, 404, 'resource_missing', 'wallet_id'],
      [{ ...base, surprise: true }, 400, 'validation_failed'],
      [{ wallet_id: btc.id, to_address: 'tb1qw508d6qejxtdg4y5r3zarvary0c5xw7kxpjzsx', amount: '0.1', asset: 'BTC', inputs: [{ txid: 'ab'.repeat(32), vout: '0' }], treat_as_gross_amount: true }, 400, 'inputs_with_gross_amount', 'inputs'],
      [{ wallet_id: btc.id, to_address: 'tb1qw508d6qejxtdg4y5r3zarvary0c5xw7kxpjzsx', amount: '0.1', asset: 'BTC', inputs: [{ txid: 'zz'.repeat(32), vout: '0' }] }, 400, 'validation_failed', 'inputs[0].txid'],
      [{ wallet_id: btc.id, to_address: 'tb1qw508d6qejxtdg4y5r3zarvary0c5xw7kxpjzsx', amount: '0.1', asset: 'BTC', inputs: [{ txid: 'ab'.repeat(31), vout: '0' }] }, 400, 'validation_failed'],
      [{ wallet_id: btc.id, to_address: 'tb1qw508d6qejxtdg4y5r3zarvary0c5xw7kxpjzsx', amount: '0.1', asset: 'BTC', inputs: Array.from({ length: 251 }, () => ({ txid: 'ab'.repeat(32), vout: '0' })) }, 400, 'validation_failed'],
      [{ wallet_id: btc.id, to_address: 'tb1qw508d6qejxtdg4y5r3zarvary0c5xw7kxpjzsx', amount: '0.1', asset: 'BTC', fill_fee_from_unselected: true }, 400, 'validation_failed', 'fill_fee_from_unselected'],
    ];
    for (const [body, status, code, param] of refusals) {
      const refused = await send(body);
      assert.equal(refused.status, status, `${JSON.stringify(body).slice(0, 200)}: ${refused.text}`);
      assert.equal(refused.body.error.code, code, refused.text);
      if (param) assert.equal(refused.body.error.param, param, refused.text);
    }
    assert.equal((await balance(wallet.id, 'ETH')).locked, '0', 'no refused send locked anything');
    const list = await call('GET', `/v1/transactions?wallet_id=${wallet.id}`);
    assert.deepEqual(list.body.data, [], 'no refused send was recorded');
  });

  it('judges a Bitcoin fee_rate against the market: above 3x its high level refused naming fee_rate unless max_fee_rate is stated; the ceiling always', async () => {
    const wallet = await createWallet('bitcoin');
    await fund('bitcoin', wallet.address, 'BTC', '0.5');
    const fees = await call('GET', '/v1/chains/bitcoin/fees');
    const high = BigInt(fees.body.fees.high.fee_per_byte);
    const allowed = high * 3n;
    const base = { wallet_id: wallet.id, to_address: 'tb1qw508d6qejxtdg4y5r3zarvary0c5xw7kxpjzsx', amount: '0.01', asset: 'BTC' };
    const refusals: [Record<string, unknown>, string, string, Record<string, string>?][] = [
      [{ ...base, fee_rate: '9999999' }, 'fee_above_ceiling', 'fee_rate', { ceiling: '10000', given: '9999999', unit: 'sat/vB' }],
      [{ ...base, fee_rate: '9999999', max_fee_rate: '9999999' }, 'fee_above_ceiling', 'fee_rate'],
      [{ ...base, fee_rate: '20', max_fee_rate: '10001' }, 'fee_above_ceiling', 'max_fee_rate'],
      [{ ...base, fee_rate: String(allowed + 1n) }, 'fee_above_market', 'fee_rate', { market_high: String(high), allowed_max: String(allowed), given: String(allowed + 1n), unit: 'sat/vB' }],
      // With the caller's own ceiling the market is not the judge, the ceiling is.
      [{ ...base, fee_rate: String(allowed + 1n), max_fee_rate: String(allowed) }, 'fee_rate_above_max', 'max_fee_rate'],
    ];
    for (const [body, code, param, details] of refusals) {
      const refused = await send(body);
      assert.equal(refused.status, 400, refused.text);
      assert.equal(refused.body.error.code, code, refused.text);
      assert.equal(refused.body.error.param, param, refused.text);
      if (details) assert.deepEqual(refused.body.error.details, details);
    }
    assert.equal((await balance(wallet.id, 'BTC')).locked, '0', 'no refused send locked anything');
    assert.deepEqual((await call('GET', `/v1/transactions?wallet_id=${wallet.id}`)).body.data, [], 'no refused send was recorded');

    const stated = await send({ ...base, fee_rate: String(allowed + 1n), max_fee_rate: String(allowed + 1n) });
    assert.equal(stated.status, 201, stated.text);
    assert.equal(stated.body.fee_rate, String(allowed + 1n));
    assert.equal(stated.body.max_fee_rate, String(allowed + 1n));
  });

  it('policies decide every send (rule 3): block 403, approval or delay 400 with details; nothing is locked', async () => {
    const guarded = await createTestOrganization('Guarded sends');
    await (await testOrm()).em.fork().nativeUpdate(Organization, { id: guarded.organizationId }, { policyActivationRequiredApprovals: 0 });
    const wallet = await createWallet('ethereum', guarded);
    await fund('ethereum', wallet.address, 'ETH', '1', guarded);
    const approver = await call('POST', '/v1/members', { name: 'Ann', email: `ann-${Date.now()}@example.com`, org_role: 'approver' }, guarded.secret);
    const policy = await call(
      'POST',
      '/v1/policies',
      {
        name: 'Send limits',
        rules: [
          { name: 'Big ones wait', action_type: 'delay', action_config: { delay_minutes: 30 }, conditions: [{ field: 'amount', operator: 'greater_than', value: '0.5' }] },
          {
            name: 'Medium need approval',
            action_type: 'require_approval',
            action_config: { approvers: [{ id: approver.body.id, type: 'user' }], required_approvals: 1, expiry_hours: 4 },
            conditions: [{ field: 'amount', operator: 'greater_than', value: '0.2' }],
          },
          { name: 'No sends to this one', action_type: 'block', conditions: [{ field: 'to_address', operator: 'equal', value: '0x000000000000000000000000000000000000dEaD' }] },
          { name: 'Small ones go', action_type: 'allow', conditions: [{ field: 'operation_type', operator: 'equal', value: 'transfer' }] },
        ],
      },
      guarded.secret,
    );
    assert.equal(policy.status, 201, policy.text);
    assert.equal((await call('POST', `/v1/policies/${policy.body.id}/activate`, {}, guarded.secret)).status, 200);

    const base = { wallet_id: wallet.id, to_address: wallet.address, asset: 'ETH' };
    const delayed = await send({ ...base, amount: '0.6' }, guarded.secret);
    assert.equal(delayed.status, 400, delayed.text);
    assert.equal(delayed.body.error.code, 'policy_delay_required');
    assert.equal(delayed.body.error.details.delay_minutes, 30);
    const held = await send({ ...base, amount: '0.3' }, guarded.secret);
    assert.equal(held.status, 400, held.text);
    assert.equal(held.body.error.code, 'policy_approval_required');
    assert.equal(held.body.error.details.required_approvals, 1);
    const blocked = await send({ ...base, amount: '0.1', to_address: '0x000000000000000000000000000000000000dead' }, guarded.secret);
    assert.equal(blocked.status, 403, blocked.text);
    assert.equal(blocked.body.error.code, 'policy_blocked');
    assert.equal((await balance(wallet.id, 'ETH', guarded)).locked, '0');

    const allowed = await send({ ...base, amount: '0.1' }, guarded.secret);
    assert.equal(allowed.status, 201, allowed.text);
    assert.equal(allowed.body.policy_decision.policy_id, policy.body.id);
  });

  it('address rules are written in the form sends carry: a lowercase Ethereum address blocks the checksummed send, an upper-case bech32 one the lower-case send', async () => {
    const guarded = await createTestOrganization('Canonical rules');
    await (await testOrm()).em.fork().nativeUpdate(Organization, { id: guarded.organizationId }, { policyActivationRequiredApprovals: 0 });
    const ether = await createWallet('ethereum', guarded);
    const bitcoin = await createWallet('bitcoin', guarded);
    await fund('ethereum', ether.address, 'ETH', '1', guarded);
    await fund('bitcoin', bitcoin.address, 'BTC', '0.5', guarded);
    const etherDestination = (await createWallet('ethereum', guarded)).address;
    const bitcoinDestination = (await createWallet('bitcoin', guarded)).address;
    assert.notEqual(etherDestination, etherDestination.toLowerCase(), 'the API answers checksummed addresses');

    const rules = [
      { name: 'Not this one', action_type: 'block', conditions: [{ field: 'to_address', operator: 'equal', value: etherDestination.toLowerCase() }] },
      {
        name: 'Nor this one',
        action_type: 'block',
        conditions: [
          { field: 'chain', operator: 'equal', value: 'bitcoin' },
          { field: 'to_address', operator: 'in', values: [bitcoinDestination.toUpperCase()] },
        ],
      },
      { name: 'Else go', action_type: 'allow', conditions: [{ field: 'operation_type', operator: 'equal', value: 'transfer' }] },
    ];
    // Named on a chain, an address that chain does not read (a wrong checksum) could never match: 400 naming it.
    const mixed = `0x${[...etherDestination.slice(2)].map((digit) => (digit === digit.toLowerCase() ? digit.toUpperCase() : digit.toLowerCase())).join('')}`;
    const misspelled = await call(
      'POST',
      '/v1/policies',
      { name: 'Misspelled', rules: [{ name: 'Typo', action_type: 'block', conditions: [{ field: 'chain', operator: 'equal', value: 'ethereum' }, { field: 'to_address', operator: 'equal', value: mixed }] }] },
      guarded.secret,
    );
    assert.equal(misspelled.status, 400, misspelled.text);
    assert.equal(misspelled.body.error.param, 'rules.0.conditions.1.value', misspelled.text);

    const policy = await call('POST', '/v1/policies', { name: 'Destinations', rules }, guarded.secret);
    assert.equal(policy.status, 201, policy.text);
    const stored = policy.body.rules as { conditions: { value?: string; values?: string[] }[] }[];
    assert.equal(stored[0]!.conditions[0]!.value, etherDestination, 'stored EIP-55');
    assert.deepEqual(stored[1]!.conditions[1]!.values, [bitcoinDestination.toLowerCase()], 'stored lower-case bech32');
    assert.equal((await call('POST', `/v1/policies/${policy.body.id}/activate`, {}, guarded.secret)).status, 200);

    const blockedEther = await send({ wallet_id: ether.id, to_address: etherDestination, amount: '0.1', asset: 'ETH' }, guarded.secret);
    assert.equal(blockedEther.status, 403, blockedEther.text);
    assert.equal(blockedEther.body.error.code, 'policy_blocked');
    const blockedBitcoin = await send({ wallet_id: bitcoin.id, to_address: bitcoinDestination, amount: '0.1', asset: 'BTC' }, guarded.secret);
    assert.equal(blockedBitcoin.status, 403, blockedBitcoin.text);
    const dryRun = await call('POST', '/v1/policies/evaluate', { chain: 'ethereum', to_address: etherDestination.toLowerCase(), operation_type: 'transfer', amount: '0.1' }, guarded.secret);
    assert.equal(dryRun.status, 200, dryRun.text);
    assert.equal(dryRun.body.rule_id, (policy.body.rules as { id: string }[])[0]!.id, 'the dry run reads the address as a send would carry it');
    assert.equal((await send({ wallet_id: ether.id, to_address: ether.address, amount: '0.1', asset: 'ETH' }, guarded.secret)).status, 201, 'other destinations go');
  });

  it('50 concurrent sends from one wallet never lock more than its balance; every accepted one settles', async function () {
    // Twenty or so sends to settle a block at a time: at the suite's load of about 25 that has taken over 180 s.
    this.timeout(420_000);
    const from = await createWallet('ethereum');
    const to = await createWallet('ethereum');
    await fund('ethereum', from.address, 'ETH', '1');
    const answers = await Promise.all(Array.from({ length: 50 }, () => send({ wallet_id: from.id, to_address: to.address, amount: '0.05', asset: 'ETH' })));
    const accepted = answers.filter((answer) => answer.status === 201);
    const refused = answers.filter((answer) => answer.status !== 201);
    assert.ok(accepted.length > 0 && refused.length > 0, `${accepted.length} accepted, ${refused.length} refused`);

    for (const answer of refused) assert.equal(answer.body.error.code, 'insufficient_funds', answer.text);
    const locked = accepted.reduce((sum, answer) => sum + BigInt(answer.body.amount_raw) + BigInt(answer.body.fee_limit_raw), 0n);
    assert.ok(locked <= 10n ** 18n, 'never more locked than the balance');
    assert.equal(BigInt((await balance(from.id, 'ETH')).locked), locked);

    await eventually(
      async () => {
        const page = (await call('GET', `/v1/transactions?wallet_id=${from.id}&limit=100`)).body.data as Transaction[];
        if (page.every((transaction) => transaction.status === 'confirmed' || transaction.status === 'failed')) return true;
        await mine('ethereum', 1);
        return undefined;
      },
      'every accepted send confirmed',
      300_000,
      2_000,
    );
    const page = (await call('GET', `/v1/transactions?wallet_id=${from.id}&limit=100`)).body.data as Transaction[];
    assert.deepEqual(
      page.filter((transaction) => transaction.status !== 'confirmed').map((transaction) => `${transaction.id}: ${transaction.status}`),
      [],
      'every accepted send confirmed',
    );
    assert.equal(page.length, accepted.length);
    const spent = page.reduce((sum, transaction) => sum + BigInt(transaction.amount_raw) + BigInt(transaction.fee_raw!), 0n);
    const after = await balance(from.id, 'ETH');
    assert.equal(BigInt(after.balance), 10n ** 18n - spent);
    assert.equal(after.locked, '0');
    assert.equal(new Set(page.map((transaction) => transaction.tx_hash)).size, page.length, 'one transaction on chain per send');
    await ledgerMatchesChain('ethereum');
  });

  it('a worker stopped between broadcast and confirmation resumes: broadcast once, settled once', async () => {
    const from = await createWallet('tron');
    const to = await createWallet('tron');
    await fund('tron', from.address, 'TRX', '100');
    const created = await send({ wallet_id: from.id, to_address: to.address, amount: '10', asset: 'TRX' });
    assert.equal(created.status, 201, created.text);
    await eventually(async () => ((await read(created.body.id)).status === 'broadcast' ? true : undefined), 'broadcast');
    await worker.stop();
    // No worker, so no block producer to ask: blocks are mined on the devnet's ledger directly.
    await mineDevnetBlocks((await testOrm()).em.fork(), 'tron', CONFIRMATIONS.tron);
    await worker.start();
    const confirmed = await settle('tron', created.body.id);
    assert.equal(BigInt((await balance(from.id, 'TRX')).balance), 100_000_000n - BigInt(confirmed.amount_raw) - BigInt(confirmed.fee_raw!));
    const types = () =>
      receiver.attempts
        .map((attempt) => JSON.parse(attempt.body) as { type: string; data: { id: string } })
        .filter((event) => event.data.id === created.body.id)
        .map((event) => event.type)
        .sort();
    // A delivery the stopped worker was making is retried by the new one: wait for every step's, then count them.
    await eventually(async () => (['transaction.broadcast', 'transaction.confirmed'].every((type) => types().includes(type)) ? true : undefined), 'every step delivered');
    assert.deepEqual(types(), ['transaction.broadcast', 'transaction.confirmed', 'transaction.created'], 'each step announced once');
    await ledgerMatchesChain('tron');
  });

  it('lists and reads transactions only in their own organization and environment', async () => {
    const wallet = await createWallet('solana');
    await fund('solana', wallet.address, 'SOL', '1');
    const created = await send({ wallet_id: wallet.id, to_address: wallet.address, amount: '0.1', asset: 'SOL' });
    assert.equal(created.status, 201, created.text);
    const listed = await call('GET', `/v1/transactions?wallet_id=${wallet.id}`);
    assert.deepEqual(listed.body.data.map((transaction: Transaction) => transaction.id), [created.body.id]);
    const live = await org.key(['*'], 'live');
    assert.equal((await call('GET', `/v1/transactions/${created.body.id}`, undefined, live.secret)).status, 404);
    const other = await createTestOrganization('Someone else');
    assert.equal((await call('GET', `/v1/transactions/${created.body.id}`, undefined, other.secret)).status, 404);
    assert.deepEqual((await call('GET', '/v1/transactions', undefined, other.secret)).body.data, []);
    await settle('solana', created.body.id);
  });
});
