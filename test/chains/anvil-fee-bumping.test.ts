import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { erc20Abi, parseEther, parseUnits, toHex, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { ChainNodes } from '../../src/chains/nodes';
import { createApiKey } from '../../src/api-keys/service';
import { Event } from '../../src/events/entities';
import { Organization } from '../../src/organizations/entities';
import { ChainScanCursor, OutgoingTransfer } from '../../src/monitoring/entities';
import { compareLedgerWithChain } from '../../src/monitoring/ledger-check';
import { OutgoingTransaction } from '../../src/transactions/entities';
import { transactionWorkflowId } from '../../src/transactions/flows/transaction';
import { anvilEthBalance, anvilFunder, anvilMine, anvilReceipt, anvilSandboxConfig, anvilTokenBalance, deployAnvilToken, receiptFee, startAnvil, type Anvil, anvilHeight } from '../support/anvil';
import { type TestApp, type TestOrganization } from '../support/app';
import { localTemporal, testConfig, testOrm } from '../support/environment';
import { eventually } from '../support/eventually';
import { activitiesScheduled, recordHistoryIfAsked } from '../support/histories';
import { setRequiredApprovals } from '../support/isolation-fixtures';
import { testLogger } from '../support/secret-scan';
import { startScannedService, type ScannedService } from '../support/scanned-service';

const CONFIRMATIONS = 2;
/** Blocks a send waits unmined before its workflow bumps its fee. */
const BUMP_AFTER = 3;
/** The base fee a send here is priced at (1 gwei), and a spike far above what it is signed with. */
const CALM_BASE_FEE = 1_000_000_000n;
const SPIKE_BASE_FEE = 100_000_000_000n;

interface Replacement {
  id: string;
  kind: string;
  origin: string;
  status: string;
  tx_hash: string | null;
  fee_limit_raw: string;
}
interface Transaction {
  id: string;
  status: string;
  tx_hash: string | null;
  fee_raw: string | null;
  fee_limit_raw: string;
  recipient_amount_raw: string;
  failure_reason: string | null;
  replacements: Replacement[];
}

/**
 * Fee bumping on a real Ethereum node (anvil, mining only when told): a send caught by a fee spike
 * stays unmined; speed-up, cancel and the automatic bump replace it by the same nonce at a higher
 * fee, and the send settles once on the candidate mined, through the API, Temporal and PostgreSQL.
 */
describe('Fee bumping on a real Ethereum node (anvil): speed-up, cancel and the automatic bump of a send stuck by a fee spike', function () {
  this.timeout(180_000);
  let anvil: Anvil;
  let app: TestApp;
  let org: TestOrganization;
  let service: ScannedService;
  const config: Record<string, string> = {};
  /** Nobody's address: what it holds on chain is exactly what the sends gave it. */
  const outside = privateKeyToAccount(generatePrivateKey()).address;
  let wallet: { id: string; address: Hex };
  let token: Hex;
  const FUNDED = parseEther('10');
  const ONE = parseEther('1');

  const mine = (blocks: number) => anvilMine(anvil, blocks);
  const call = (method: string, path: string, body?: unknown, headers?: Record<string, string>) => app.request(method, path, { key: org.secret, body, ...(headers ? { headers } : {}) });
  const read = async (id: string) => (await call('GET', `/v1/transactions/${id}`)).body as Transaction;
  async function ledger(assetId = 'ETH') {
    const rows = (await call('GET', `/v1/wallets/${wallet.id}/balances`)).body.data as { asset_id: string; balance: string; locked: string }[];
    const row = rows.find((candidate) => candidate.asset_id === assetId);
    return { balance: BigInt(row?.balance ?? '0'), locked: BigInt(row?.locked ?? '0') };
  }
  const until = <T>(what: string, probe: () => Promise<T | undefined>) => eventually(probe, what, 60_000, 250);

  before(async () => {
    anvil = await startAnvil();
    token = await deployAnvilToken(anvil);
    const taskQueue = `anvil-fee-bumping-${randomUUID()}`;
    Object.assign(config, anvilSandboxConfig(anvil, taskQueue, token, CONFIRMATIONS), { FEE_BUMP_AFTER_BLOCKS: String(BUMP_AFTER), FEE_BUMP_MAX_MULTIPLE: '1000' });
    service = await startScannedService('ethereum', 'Anvil fee bumping', config, () => anvilHeight(anvil));
    ({ app, org } = service);
    await setRequiredApprovals(org.organizationId, 0);

    const vault = await call('POST', '/v1/vaults', { name: 'Bumps' });
    const created = await call('POST', '/v1/wallets', { name: 'Bumps', chain: 'ethereum', vault_id: vault.body.id, wallet_type: 'hot' });
    assert.equal(created.status, 201, created.text);
    wallet = { id: created.body.id, address: created.body.primary_address.address };
    await anvilFunder(anvil).sendTransaction({ to: wallet.address, value: FUNDED });
    await mine(CONFIRMATIONS);
    await until('the deposit credited', async () => ((await ledger()).balance === FUNDED ? true : undefined));
    // From here on a block is mined only when a test says so: a send can wait unmined.
    await anvil.call('evm_setAutomine', [false]);
  });

  after(async () => {
    await service?.stop();
    await anvil?.stop();
  });

  /** A send (1 ETH unless told) to `outside` priced in a calm market, broadcast, then a fee spike: a block is mined without it, and it waits. */
  async function stuckSend(asset = 'ETH', amount = '1', secret = org.secret): Promise<Transaction> {
    await anvil.call('anvil_setNextBlockBaseFeePerGas', [toHex(CALM_BASE_FEE)]);
    await mine(1);
    const created = await app.request('POST', '/v1/transactions', { key: secret, body: { wallet_id: wallet.id, to_address: outside, amount, asset } });
    assert.equal(created.status, 201, created.text);
    const id = created.body.id as string;
    await until('the send broadcast', async () => ((await read(id)).status === 'broadcast' ? true : undefined));
    await anvil.call('anvil_setNextBlockBaseFeePerGas', [toHex(SPIKE_BASE_FEE)]);
    await mine(1);
    const sent = await read(id);
    assert.equal(await anvil.call('eth_getTransactionReceipt', [sent.tx_hash]), null, 'the spike keeps it out of the block');
    assert.equal(sent.status, 'broadcast');
    return sent;
  }
  /** Mines the confirmations once the newest replacement is broadcast, and waits for the send to settle. */
  async function settleOnReplacement(id: string): Promise<Transaction> {
    await until('the replacement broadcast', async () => {
      const transaction = await read(id);
      return transaction.replacements.at(-1)?.status === 'broadcast' ? true : undefined;
    });
    await mine(CONFIRMATIONS);
    return until('the send settled', async () => {
      const transaction = await read(id);
      return ['confirmed', 'failed'].includes(transaction.status) ? transaction : undefined;
    });
  }
  async function scannedToTip() {
    const tip = Number(await anvil.call('eth_blockNumber'));
    await until('scanning caught up with the tip', async () => {
      const cursor = await (await testOrm()).em.fork().findOne(ChainScanCursor, { chain: 'ethereum', environment: 'sandbox' });
      return cursor && cursor.height >= tip ? true : undefined;
    });
  }

  it('speeds up a stuck send: the replacement is mined, the recipient paid once, the wallet debited its actual fee once (Idempotency-Key replays)', async () => {
    const before = await ledger();
    const stuck = await stuckSend();
    const key = randomUUID();
    const asked = await call('POST', `/v1/transactions/${stuck.id}/speed-up`, { fee_level: 'high' }, { 'idempotency-key': key });
    assert.equal(asked.status, 200, asked.text);
    const replay = await call('POST', `/v1/transactions/${stuck.id}/speed-up`, { fee_level: 'high' }, { 'idempotency-key': key });
    assert.equal(replay.headers.get('idempotent-replayed'), 'true');
    assert.deepEqual(replay.body, asked.body);
    const [requested] = (asked.body as Transaction).replacements;
    assert.equal((asked.body as Transaction).replacements.length, 1, 'one replacement, the replay recorded none');
    assert.deepEqual([requested!.kind, requested!.origin, requested!.status], ['speed_up', 'api', 'requested']);
    assert.ok(BigInt(requested!.fee_limit_raw) > 21_000n * SPIKE_BASE_FEE, 'priced above the spike');
    assert.equal((await ledger()).locked, ONE + BigInt(requested!.fee_limit_raw), 'the extra fee is locked before it is signed');

    const settled = await settleOnReplacement(stuck.id);
    assert.equal(settled.status, 'confirmed');
    const [replacement] = settled.replacements;
    assert.equal(replacement!.status, 'mined');
    assert.equal(settled.tx_hash, replacement!.tx_hash, 'the send carries the mined hash');
    assert.equal(await anvil.call('eth_getTransactionReceipt', [stuck.tx_hash]), null, 'the original was never mined');
    const fee = receiptFee(await anvilReceipt(anvil, replacement!.tx_hash!));
    assert.equal(settled.fee_raw, fee.toString());
    assert.equal(await anvilEthBalance(anvil, outside), ONE, 'the recipient got the amount once');
    assert.deepEqual(await ledger(), { balance: before.balance - ONE - fee, locked: 0n }, 'debited once, every lock released');
    await recordHistoryIfAsked((await localTemporal()).client.workflow.getHandle(transactionWorkflowId(stuck.id)), 'send-transaction-speed-up');

    const again = await call('POST', `/v1/transactions/${stuck.id}/speed-up`, {});
    assert.equal(again.status, 409, again.text);
    assert.equal(again.body.error.code, 'invalid_state_transition');
  });

  it('cancels a stuck send: a zero-value transfer back to the address takes its nonce; the send fails as cancelled, only the fee debited', async () => {
    const before = await ledger();
    const paid = await anvilEthBalance(anvil, outside);
    const stuck = await stuckSend();
    const asked = await call('POST', `/v1/transactions/${stuck.id}/cancel`, {});
    assert.equal(asked.status, 200, asked.text);
    const settled = await settleOnReplacement(stuck.id);
    assert.deepEqual([settled.status, settled.failure_reason, settled.recipient_amount_raw], ['failed', 'cancelled', '0']);
    const cancel = settled.replacements[0]!;
    assert.deepEqual([cancel.kind, cancel.status], ['cancel', 'mined']);
    const receipt = await anvilReceipt(anvil, cancel.tx_hash!);
    assert.equal(receipt.to.toLowerCase(), wallet.address.toLowerCase(), 'back to the sending address');
    assert.equal(await anvilEthBalance(anvil, outside), paid, 'the recipient got nothing');
    assert.deepEqual(await ledger(), { balance: before.balance - receiptFee(receipt), locked: 0n });
  });

  it('bumps a send left unmined for FEE_BUMP_AFTER_BLOCKS blocks by itself, judged as an automated speed_up', async () => {
    const before = await ledger();
    const stuck = await stuckSend();
    const row = async () => (await testOrm()).em.fork().findOneOrFail(OutgoingTransaction, { id: stuck.id });
    await until('the wait counted from a height', async () => ((await row()).waitingSinceHeight != null ? true : undefined));
    await mine(BUMP_AFTER);
    const settled = await settleOnReplacement(stuck.id);
    assert.equal(settled.status, 'confirmed');
    const [bump] = settled.replacements;
    assert.deepEqual([bump!.kind, bump!.origin, bump!.status], ['speed_up', 'automatic', 'mined']);
    const fee = receiptFee(await anvilReceipt(anvil, bump!.tx_hash!));
    assert.deepEqual(await ledger(), { balance: before.balance - ONE - fee, locked: 0n }, 'debited once');
  });

  it("stops bumping a send by itself once the key that sent it is revoked (automation.paused); a key may still speed it up by hand", async () => {
    // A service key, as the operator CLI makes one (the organization's key here acts for no member, so it mints none).
    const em = (await testOrm()).em.fork();
    const serviceKey = createApiKey(em, { organization: em.getReference(Organization, org.organizationId), name: 'Payouts job', scopes: ['transactions:write', 'custody:read'], environment: 'sandbox' });
    await em.flush();
    const stuck = await stuckSend('ETH', '1', serviceKey.secret);
    const row = async () => (await testOrm()).em.fork().findOneOrFail(OutgoingTransaction, { id: stuck.id });
    await until('the wait counted from a height', async () => ((await row()).waitingSinceHeight != null ? true : undefined));
    assert.equal((await call('DELETE', `/v1/api-keys/${serviceKey.key.id}`)).status, 200);
    const paused = await (await testOrm()).em.fork().find(Event, { organization: org.organizationId, type: 'automation.paused' });
    assert.deepEqual(
      paused.map((event) => event.data),
      [{ automation_type: 'fee_bump', automation_id: stuck.id, revoked_api_key_id: serviceKey.key.id }],
    );
    const checks = async () => activitiesScheduled((await localTemporal()).client.workflow.getHandle(transactionWorkflowId(stuck.id)), 'checkTransaction');
    await mine(BUMP_AFTER);
    const checked = await checks();
    await until('three checks past the bump height', async () => ((await checks()) >= checked + 3 ? true : undefined));
    await mine(BUMP_AFTER);
    await until('three more checks', async () => ((await checks()) >= checked + 6 ? true : undefined));
    assert.deepEqual((await read(stuck.id)).replacements, [], 'no automatic bump for a revoked key');

    const asked = await call('POST', `/v1/transactions/${stuck.id}/speed-up`, { fee_level: 'high' });
    assert.equal(asked.status, 200, asked.text);
    const settled = await settleOnReplacement(stuck.id);
    assert.deepEqual([settled.status, settled.replacements.map((replacement) => replacement.origin)], ['confirmed', ['api']]);
  });

  it('tries a bump the node refuses again only after another FEE_BUMP_AFTER_BLOCKS blocks, not at every check; once it can pay, the bump is mined', async () => {
    const before = await ledger();
    const stuck = await stuckSend();
    const row = async () => (await testOrm()).em.fork().findOneOrFail(OutgoingTransaction, { id: stuck.id });
    await until('the wait counted from a height', async () => ((await row()).waitingSinceHeight != null ? true : undefined));
    // The chain holds less than the ledger says: enough for the send as signed, not for a bump priced above the spike.
    const held = await anvilEthBalance(anvil, wallet.address);
    await anvil.call('anvil_setBalance', [wallet.address, toHex(ONE + BigInt(stuck.fee_limit_raw))]);
    const refusedBumps = async (count: number) =>
      until(`${count} refused bump(s)`, async () => {
        const replacements = (await read(stuck.id)).replacements;
        return replacements.length === count && replacements.every((replacement) => replacement.status === 'refused') ? replacements : undefined;
      });
    const checks = async () => activitiesScheduled((await localTemporal()).client.workflow.getHandle(transactionWorkflowId(stuck.id)), 'checkTransaction');

    await mine(BUMP_AFTER);
    const [first] = await refusedBumps(1);
    assert.equal(first!.origin, 'automatic');
    assert.equal((await ledger()).locked, ONE + BigInt(stuck.fee_limit_raw), "the refused bump's extra lock released");
    const checked = await checks();
    await until('three more checks', async () => ((await checks()) >= checked + 3 ? true : undefined));
    assert.equal((await read(stuck.id)).replacements.length, 1, 'no new bump at every check');

    await mine(BUMP_AFTER);
    await refusedBumps(2);
    await anvil.call('anvil_setBalance', [wallet.address, toHex(held)]);
    await mine(BUMP_AFTER);
    const settled = await settleOnReplacement(stuck.id);
    assert.equal(settled.status, 'confirmed');
    const bump = settled.replacements.at(-1)!;
    assert.deepEqual([settled.replacements.length, bump.origin, bump.status], [3, 'automatic', 'mined']);
    const fee = receiptFee(await anvilReceipt(anvil, bump.tx_hash!));
    assert.deepEqual(await ledger(), { balance: before.balance - ONE - fee, locked: 0n }, 'debited once, the refused bumps cost nothing');
  });

  it('speeds up a stuck USDC send: the same token transfer again at a higher fee, mined once; USDC debited the amount, ether the fee', async () => {
    const FUNDED_USDC = parseUnits('500', 6);
    await anvilFunder(anvil).writeContract({ address: token, abi: erc20Abi, functionName: 'transfer', args: [wallet.address, FUNDED_USDC] });
    await mine(CONFIRMATIONS);
    await until('the USDC deposit credited', async () => ((await ledger('USDC_ETH')).balance === FUNDED_USDC ? true : undefined));
    const before = { eth: await ledger(), usdc: await ledger('USDC_ETH') };
    const stuck = await stuckSend('USDC', '120.5');
    const asked = await call('POST', `/v1/transactions/${stuck.id}/speed-up`, {});
    assert.equal(asked.status, 200, asked.text);
    const requested = (asked.body as Transaction).replacements[0]!;
    assert.equal((await ledger()).locked, BigInt(requested.fee_limit_raw), "ether: locked up to the replacement's fee limit");
    assert.equal((await ledger('USDC_ETH')).locked, parseUnits('120.5', 6), 'USDC: the amount, locked once');

    const settled = await settleOnReplacement(stuck.id);
    assert.equal(settled.status, 'confirmed');
    const replacement = settled.replacements[0]!;
    assert.deepEqual([replacement.kind, replacement.status], ['speed_up', 'mined']);
    const receipt = await anvilReceipt(anvil, replacement.tx_hash!);
    assert.equal(receipt.to.toLowerCase(), token.toLowerCase(), 'the token contract called again');
    assert.equal(await anvilTokenBalance(anvil, token, outside), parseUnits('120.5', 6), 'the recipient got the tokens once');
    const fee = receiptFee(receipt);
    assert.equal(settled.fee_raw, fee.toString());
    assert.deepEqual(await ledger('USDC_ETH'), { balance: before.usdc.balance - parseUnits('120.5', 6), locked: 0n }, 'USDC: the amount, once');
    assert.deepEqual(await ledger(), { balance: before.eth.balance - fee, locked: 0n }, 'ether: the mined fee, once');
  });

  it('refuses what cannot be replaced (400/404/409), a max_fee below the price and a policy block, changing nothing', async () => {
    const stuck = await stuckSend();
    const locked = (await ledger()).locked;
    const refusals: [string, unknown, number, string][] = [
      [`/v1/transactions/${randomUUID()}/speed-up`, {}, 404, 'resource_missing'],
      [`/v1/transactions/${stuck.id}/speed-up`, { fee_rate: '10' }, 400, 'bitcoin_only'],
      [`/v1/transactions/${stuck.id}/speed-up`, { gas: '1' }, 400, 'validation_failed'],
      [`/v1/transactions/${stuck.id}/cancel`, { fee_level: 'urgent' }, 400, 'validation_failed'],
      [`/v1/transactions/${stuck.id}/speed-up`, { max_fee: '0.000001' }, 400, 'max_fee_exceeded'],
    ];
    for (const [path, body, status, code] of refusals) {
      const answer = await call('POST', path, body);
      assert.equal(answer.status, status, `${path} ${JSON.stringify(body)}: ${answer.text}`);
      assert.equal(answer.body.error.code, code);
    }

    const policy = await call('POST', '/v1/policies', {
      name: `No speed-ups ${randomUUID()}`,
      rules: [
        { name: 'No speed-ups', action_type: 'block', conditions: [{ field: 'operation_type', operator: 'equal', value: 'speed_up' }] },
        { name: 'Allow the rest', action_type: 'allow', conditions: [{ field: 'amount', operator: 'greater_than_or_equal', value: '0' }] },
      ],
    });
    assert.equal(policy.status, 201, policy.text);
    const activated = await call('POST', `/v1/policies/${policy.body.id}/activate`, {});
    assert.equal(activated.status, 200, activated.text);
    const blocked = await call('POST', `/v1/transactions/${stuck.id}/speed-up`, {});
    assert.equal(blocked.status, 403, blocked.text);
    assert.equal(blocked.body.error.code, 'policy_blocked');
    assert.deepEqual((await read(stuck.id)).replacements, [], 'nothing recorded');
    assert.equal((await ledger()).locked, locked, 'nothing more locked');

    // A cancel is its own kind: the block on speed-ups lets it through, and the stuck send ends.
    const cancelled = await call('POST', `/v1/transactions/${stuck.id}/cancel`, {});
    assert.equal(cancelled.status, 200, cancelled.text);
    const pending = await call('POST', `/v1/transactions/${stuck.id}/cancel`, {});
    assert.equal(pending.status, 409, pending.text);
    assert.equal(pending.body.error.code, 'replacement_pending');
    assert.equal((await settleOnReplacement(stuck.id)).failure_reason, 'cancelled');
    assert.equal((await call('DELETE', `/v1/policies/${policy.body.id}`)).status, 200);

    await scannedToTip();
    const nodes = new ChainNodes(testConfig(config), testLogger('test'), await testOrm());
    const result = await compareLedgerWithChain((await testOrm()).em.fork(), await nodes.provider('ethereum', 'sandbox'), { chain: 'ethereum', environment: 'sandbox', organizationId: org.organizationId, assetIds: ['ETH', 'USDC_ETH'] });
    assert.deepEqual(result.mismatches, [], 'ledger = chain');
    const scanned = await (await testOrm()).em.fork().find(OutgoingTransfer, { organization: org.organizationId });
    assert.ok(scanned.length >= 4, 'every mined send and replacement seen going out');
    assert.deepEqual(scanned.filter((transfer) => transfer.unexpected || transfer.transactionId == null), [], "each replacement scanned as its send's, never an unexpected spend");
  });
});
