import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { erc20Abi, parseEther, parseTransaction, parseUnits, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { ChainNodes } from '../../src/chains/nodes';
import { erc20TransferData } from '../../src/chains/transfers/ethereum';
import { ChainScanCursor } from '../../src/monitoring/entities';
import { sponsorshipFlow } from '../../src/gas-stations/flows/sponsorship';
import { compareLedgerWithChain } from '../../src/monitoring/ledger-check';
import { anvilFunder, anvilReceipt, anvilSandboxConfig, deployAnvilToken, startAnvil, type Anvil , anvilEthBalance, anvilMine, anvilTokenBalance, receiptFee, anvilHeight } from '../support/anvil';
import { type TestApp, type TestOrganization } from '../support/app';
import { clientKey, signClientTransfer, type ClientKey } from '../support/client-transfers';
import { localTemporal, testConfig, testOrm } from '../support/environment';
import { eventually } from '../support/eventually';
import { recordHistoryIfAsked } from '../support/histories';
import { testLogger } from '../support/secret-scan';
import { startScannedService, type ScannedService } from '../support/scanned-service';

const CONFIRMATIONS = 2;

interface Transaction {
  id: string;
  status: string;
  to_address: string;
  amount_raw: string;
  fee_raw: string | null;
  fee_limit_raw: string;
  tx_hash: string | null;
  sponsor: boolean;
  sponsorship_id: string | null;
}


/** Fee sponsorship on a real Ethereum node (anvil), through the API, Temporal and PostgreSQL: a sponsored ERC-20 send, and sponsor-broadcast of a client-signed one. */
describe('Fee sponsorship on a real Ethereum node (anvil): a gas station fuels a sponsored token send and a client-signed transfer, exactly their fee', () => {
  let anvil: Anvil;
  let app: TestApp;
  let org: TestOrganization;
  let service: ScannedService;
  let token: Hex;
  const config: Record<string, string> = {};

  const funderWallet = () => anvilFunder(anvil);
  const mine = (blocks: number) => anvilMine(anvil, blocks);
  const ethBalance = (address: string) => anvilEthBalance(anvil, address);
  const tokenBalance = (address: string) => anvilTokenBalance(anvil, token, address);
  const receiptOf = (hash: string) => anvilReceipt(anvil, hash);

  before(async () => {
    anvil = await startAnvil();
    token = await deployAnvilToken(anvil);
    const taskQueue = `anvil-sponsorship-${randomUUID()}`;
    Object.assign(config, anvilSandboxConfig(anvil, taskQueue, token, CONFIRMATIONS));
    service = await startScannedService('ethereum', 'Anvil sponsorship', config, () => anvilHeight(anvil));
    ({ app, org } = service);
  });

  after(async () => {
    await service?.stop();
    await anvil?.stop();
  });

  const call = (method: string, path: string, body?: unknown) => app.request(method, path, { key: org.secret, body });
  const read = async (id: string) => (await call('GET', `/v1/transactions/${id}`)).body as Transaction;

  async function ledger(walletId: string, assetId: string) {
    const rows = (await call('GET', `/v1/wallets/${walletId}/balances`)).body.data as { asset_id: string; balance: string; locked: string }[];
    const row = rows.find((candidate) => candidate.asset_id === assetId);
    return { balance: BigInt(row?.balance ?? '0'), locked: BigInt(row?.locked ?? '0') };
  }
  /** Mines the confirmations of what anvil already mined, and waits until `walletId`'s ledger books `amount` of `assetId`. */
  async function credited(walletId: string, assetId: string, amount: bigint) {
    await mine(CONFIRMATIONS);
    await eventually(async () => ((await ledger(walletId, assetId)).balance === amount ? true : undefined), `${assetId} credited to wallet ${walletId}`, 90_000, 250);
  }
  /** Mines one block a round until `settled` answers: each sponsorship waits for its fuel's confirmations, then for its own (at the suite's load 25 a workflow step can take seconds: 90 s). */
  async function mineUntil<T>(settled: () => Promise<T | undefined>, what: string): Promise<T> {
    return eventually(
      async () => {
        const value = await settled();
        if (value !== undefined) return value;
        await mine(1);
        return undefined;
      },
      what,
      90_000,
      300,
    );
  }
  /** The station's fuel send to `address`, from the station wallet's transactions. */
  async function fuelTo(stationWalletId: string, address: string): Promise<Transaction> {
    const sends = (await call('GET', `/v1/transactions?wallet_id=${stationWalletId}`)).body.data as Transaction[];
    const fuels = sends.filter((send) => send.to_address.toLowerCase() === address.toLowerCase());
    assert.equal(fuels.length, 1, `one fuel send to ${address}`);
    return fuels[0]!;
  }

  /** The ledger invariant for every wallet of the organization (the station's and the sender's), once scanning has caught up with the tip. */
  async function ledgerMatchesChain() {
    const tip = Number(await anvil.call('eth_blockNumber'));
    await eventually(async () => {
      const cursor = await (await testOrm()).em.fork().findOne(ChainScanCursor, { chain: 'ethereum', environment: 'sandbox' });
      return cursor && cursor.height >= tip ? true : undefined;
    }, 'scanning caught up with the tip');
    const nodes = new ChainNodes(testConfig(config), testLogger('test'), await testOrm());
    const provider = await nodes.provider('ethereum', 'sandbox');
    const result = await compareLedgerWithChain((await testOrm()).em.fork(), provider, { chain: 'ethereum', environment: 'sandbox', organizationId: org.organizationId, assetIds: ['ETH', 'USDC_ETH'] });
    assert.equal(result.wallets, 2);
    assert.deepEqual(result.mismatches, []);
  }

  let station: { id: string; address: string; wallet_id: string };
  /** The client of the sponsored broadcast, and its recipient: its nonce 0 is then mined. */
  let client: ClientKey;
  let recipient: string;
  const STATION_FUNDED = parseEther('1');
  const SENDER_FUNDED = parseUnits('100', 6);

  it("a sponsored ERC-20 send: the station fuels exactly the fee, the sender's ether is 0 before and after, and the ledger equals the chain", async () => {
    const created = await call('POST', '/v1/gas-stations', { name: 'Ethereum gas', chain: 'ethereum', threshold: '0' });
    assert.equal(created.status, 201, created.text);
    station = created.body;
    const vault = await call('POST', '/v1/vaults', { name: 'Senders' });
    const wallet = await call('POST', '/v1/wallets', { name: 'Sender', chain: 'ethereum', vault_id: vault.body.id, wallet_type: 'hot' });
    assert.equal(wallet.status, 201, wallet.text);
    const sender = { id: wallet.body.id as string, address: wallet.body.primary_address.address as string };
    await funderWallet().sendTransaction({ to: station.address as Hex, value: STATION_FUNDED });
    await funderWallet().writeContract({ address: token, abi: erc20Abi, functionName: 'transfer', args: [sender.address as Hex, SENDER_FUNDED] });
    await credited(station.wallet_id, 'ETH', STATION_FUNDED);
    await credited(sender.id, 'USDC_ETH', SENDER_FUNDED);

    const recipient = privateKeyToAccount(generatePrivateKey()).address;
    const body = { wallet_id: sender.id, to_address: recipient, amount: '10', asset: 'USDC_ETH', sponsor: true };
    const estimate = await call('POST', '/v1/transactions/estimate-fee', body);
    assert.equal(estimate.status, 200, estimate.text);
    const options = estimate.body.fee_levels.medium.funding_options as { funding_model: string; available: boolean; status_label: string }[];
    const customer = options.find((option) => option.funding_model === 'customer_gas_station')!;
    assert.equal(customer.available, true, customer.status_label);

    assert.equal(await ethBalance(sender.address), 0n, 'the sender holds no ether at all');
    const stationBefore = await ethBalance(station.address);
    const sent = await call('POST', '/v1/transactions', body);
    assert.equal(sent.status, 201, sent.text);
    assert.equal(sent.body.status, 'pending', 'it waits for the fuel');
    assert.equal(sent.body.sponsor, true);
    assert.ok(sent.body.sponsorship_id, 'the send names its sponsorship');

    const confirmed = await mineUntil(async () => {
      const transaction = await read(sent.body.id);
      return ['confirmed', 'failed'].includes(transaction.status) ? transaction : undefined;
    }, 'the sponsored send settled');
    assert.equal(confirmed.status, 'confirmed');
    const receipt = await receiptOf(confirmed.tx_hash!);
    assert.equal(receipt.status, '0x1');
    assert.equal(BigInt(confirmed.fee_raw!), receiptFee(receipt), "the send's fee_raw is its receipt's gas used x effective gas price");
    const signedGas = BigInt(((await anvil.call('eth_getTransactionByHash', [confirmed.tx_hash])) as { gas: Hex }).gas);
    assert.equal(
      await ethBalance(sender.address),
      0n,
      `the sender's ether ends where it began (signed gas limit ${signedGas}, gas used ${BigInt(receipt.gasUsed)}, price ${BigInt(receipt.effectiveGasPrice)})`,
    );
    assert.equal(await tokenBalance(recipient), parseUnits('10', 6), 'the recipient got the tokens');

    const fuel = await fuelTo(station.wallet_id, sender.address);
    assert.equal(fuel.status, 'confirmed');
    const fuelReceipt = await receiptOf(fuel.tx_hash!);
    assert.equal(BigInt(fuel.fee_raw!), receiptFee(fuelReceipt), "the fuel send's fee_raw is its receipt's");
    assert.equal(fuel.amount_raw, confirmed.fee_raw, 'the fuel is exactly the fee the sponsored send paid');
    assert.equal(stationBefore - (await ethBalance(station.address)), BigInt(fuel.amount_raw) + BigInt(fuel.fee_raw!), 'the station paid the fuel and its own fee, nothing else');

    await eventually(async () => ((await ledger(sender.id, 'ETH')).balance === 0n ? true : undefined), "the sender's ledger: the fuel credited, the fee debited");
    await ledgerMatchesChain();
  });

  it("sponsor-broadcast of a client-signed ERC-20 transfer: a mismatched claim is refused unbroadcast, the true one is fuelled gas x price and confirmed, the client's ether ends at 0", async () => {
    const provider = await app.deps.chains.provider('ethereum', 'sandbox');
    client = clientKey('ethereum');
    recipient = clientKey('ethereum').address;
    await receiptOf(await funderWallet().writeContract({ address: token, abi: erc20Abi, functionName: 'transfer', args: [client.address as Hex, parseUnits('10', 6)] }));
    const stationBefore = await ethBalance(station.address);

    const amount = parseUnits('4', 6);
    const signed = await signClientTransfer(provider, 'ethereum', client, recipient, 'USDC_ETH', amount);
    const claim = { from_address: client.address, to_address: recipient, asset: 'USDC', amount: '4', network: 'sepolia', signed_tx: signed.raw, tx_hash: signed.txid };

    const mismatched = await call('POST', '/v1/gas-stations/sponsor-broadcast', { ...claim, amount: '5' });
    assert.equal(mismatched.status, 400, mismatched.text);
    assert.equal(mismatched.body.error.param, 'amount', mismatched.text);
    assert.equal(await anvil.call('eth_getTransactionByHash', [signed.txid]), null, 'the node does not know the transaction');
    assert.equal(await ethBalance(client.address), 0n, 'nothing was funded');

    const accepted = await call('POST', '/v1/gas-stations/sponsor-broadcast', claim);
    assert.equal(accepted.status, 202, accepted.text);
    assert.equal(accepted.body.status, 'funding');
    assert.equal(accepted.body.tx_hash, signed.txid);
    assert.equal(accepted.body.gas_station_id, station.id);
    const { gas, maxFeePerGas } = parseTransaction(signed.raw as Hex);
    assert.equal(accepted.body.sponsor_amount_raw, (gas! * maxFeePerGas!).toString(), 'the fuel is the signed gas x price');
    assert.equal(accepted.body.sponsor_amount_raw, signed.maxFee.toString());
    assert.equal(accepted.body.sponsor_amount_sun, null);
    const market = await provider.feeMarket();
    assert.equal(market.model, 'eip1559');
    const withMargin = (value: bigint) => (value * BigInt(100 + app.deps.config.SPONSORSHIP_FEE_MARGIN_PERCENT)) / 100n;
    const gasNeeded = await provider.estimateGas!({ from: client.address, to: token, data: erc20TransferData(recipient, amount) });
    assert.ok(
      gas! <= withMargin(gasNeeded) && BigInt(accepted.body.sponsor_amount_raw) <= withMargin(gasNeeded * (2n * market.baseFeePerGas + market.priorityFeePerGas.high)),
      "the fuel is within the need: the node's gas estimate at the fee market's high level, plus the margin once",
    );

    const done = await mineUntil(async () => {
      const current = (await call('GET', `/v1/gas-stations/sponsor-broadcasts/${accepted.body.id}`)).body;
      return current.status === 'confirmed' || current.status === 'failed' ? current : undefined;
    }, 'the sponsored broadcast settled');
    assert.equal(done.status, 'confirmed', done.failure_message);
    assert.equal(done.broadcast_accepted, true);
    // The branch that broadcasts the client's bytes and follows them: the replay fixture test/workflows/sponsorship.test.ts runs.
    await recordHistoryIfAsked((await localTemporal()).client.workflow.getHandle(sponsorshipFlow.workflowId({ sponsorshipId: accepted.body.id })), 'fund-sponsorship-broadcast');
    assert.equal(await tokenBalance(recipient), amount, 'the recipient holds the tokens');
    const receipt = await receiptOf(signed.txid);
    assert.equal(receipt.status, '0x1');
    assert.equal(
      await ethBalance(client.address),
      0n,
      `the client's fee was exactly the fuel (gas estimate ${gas}, gas used ${BigInt(receipt.gasUsed)}, price ${BigInt(receipt.effectiveGasPrice)})`,
    );

    const fuel = (await call('GET', `/v1/transactions/${done.sponsor_tx_id}`)).body as Transaction;
    assert.equal(fuel.status, 'confirmed');
    assert.equal(BigInt(fuel.fee_raw!), receiptFee(await receiptOf(fuel.tx_hash!)));
    assert.equal(stationBefore - (await ethBalance(station.address)), BigInt(fuel.amount_raw) + BigInt(fuel.fee_raw!), 'the station paid the fuel and its own fee, nothing else');
    await ledgerMatchesChain();
  });

  it("on the real node: the issue's example (5,000,000 gas at 1,000 gwei for 1 wei) is refused naming signed_tx, and so is a nonce not the sender's next (too high, too low); nothing is funded", async () => {
    const provider = await app.deps.chains.provider('ethereum', 'sandbox');
    // The client's 1 wei, so that the node can estimate its 1 wei transfer; its first transaction (nonce 0) was mined above.
    await receiptOf(await funderWallet().sendTransaction({ to: client.address as Hex, value: 1n }));
    const stationBefore = await ethBalance(station.address);
    const stationLedger = await ledger(station.wallet_id, 'ETH');
    const sponsorships = async () =>
      Number((await (await testOrm()).em.fork().execute<{ count: string }[]>('select count(*)::text as count from sponsorships where sender_address = ?', [client.address]))[0]!.count);
    assert.equal(await sponsorships(), 1, 'the one sponsored above');
    const claim = { from_address: client.address, to_address: recipient, network: 'sepolia' };

    const example = await signClientTransfer(provider, 'ethereum', client, recipient, 'ETH', 1n, { nonce: 1n, gasLimit: 5_000_000n, maxFeePerGas: parseUnits('1000', 9) });
    const refused = await call('POST', '/v1/gas-stations/sponsor-broadcast', { ...claim, asset: 'ETH', amount: '0.000000000000000001', signed_tx: example.raw });
    assert.equal(refused.status, 400, refused.text);
    assert.deepEqual([refused.body.error.code, refused.body.error.param], ['sponsored_fee_above_need', 'signed_tx']);
    assert.deepEqual([refused.body.error.details.gas_limit, refused.body.error.details.gas_needed], ['5000000', '21000']);

    // The margin on the gas and on the price each, 44% on the fee: refused, the fee bounded by need plus the margin once.
    const market = await provider.feeMarket();
    assert.equal(market.model, 'eip1559');
    const withMargin = (value: bigint) => (value * BigInt(100 + app.deps.config.SPONSORSHIP_FEE_MARGIN_PERCENT)) / 100n;
    const highPrice = 2n * market.baseFeePerGas + market.priorityFeePerGas.high;
    const twice = await signClientTransfer(provider, 'ethereum', client, recipient, 'ETH', 1n, { nonce: 1n, gasLimit: withMargin(21_000n), maxFeePerGas: withMargin(highPrice) });
    const compounded = await call('POST', '/v1/gas-stations/sponsor-broadcast', { ...claim, asset: 'ETH', amount: '0.000000000000000001', signed_tx: twice.raw });
    assert.equal(compounded.status, 400, compounded.text);
    assert.deepEqual([compounded.body.error.code, compounded.body.error.param], ['sponsored_fee_above_need', 'signed_tx']);
    assert.deepEqual(
      [compounded.body.error.details.fee, compounded.body.error.details.fee_allowed],
      [(withMargin(21_000n) * withMargin(highPrice)).toString(), withMargin(21_000n * highPrice).toString()],
    );

    for (const [nonce, what] of [
      [2n, 'too high: it would wait in the mempool for nonce 1'],
      [0n, 'too low: nonce 0 is mined already'],
    ] as const) {
      const signed = await signClientTransfer(provider, 'ethereum', client, recipient, 'USDC_ETH', parseUnits('1', 6), { nonce });
      const wrong = await call('POST', '/v1/gas-stations/sponsor-broadcast', { ...claim, asset: 'USDC', amount: '1', signed_tx: signed.raw });
      assert.equal(wrong.status, 400, `${what}: ${wrong.text}`);
      assert.deepEqual([wrong.body.error.code, wrong.body.error.param], ['nonce_mismatch', 'signed_tx'], what);
      assert.deepEqual(wrong.body.error.details, { expected: '1', actual: nonce.toString() }, what);
    }
    assert.equal(await sponsorships(), 1, 'no sponsorship was recorded');
    assert.equal(await ethBalance(client.address), 1n, 'nothing was funded');
    assert.equal(await ethBalance(station.address), stationBefore, "the station's balance is unchanged");
    assert.deepEqual(await ledger(station.wallet_id, 'ETH'), stationLedger, "nothing of the station's ledger is locked");
  });
  it("a sender that spends its nonce once the fuel arrived forfeits it: nothing is relayed, the sponsorship fails nonce_spent, its fuel stays charged and an event says so", async () => {
    const provider = await app.deps.chains.provider('ethereum', 'sandbox');
    const spender = clientKey('ethereum');
    await receiptOf(await funderWallet().writeContract({ address: token, abi: erc20Abi, functionName: 'transfer', args: [spender.address as Hex, parseUnits('10', 6)] }));
    const signed = await signClientTransfer(provider, 'ethereum', spender, recipient, 'USDC_ETH', parseUnits('2', 6));
    const accepted = await call('POST', '/v1/gas-stations/sponsor-broadcast', {
      from_address: spender.address,
      to_address: recipient,
      asset: 'USDC',
      amount: '2',
      network: 'sepolia',
      signed_tx: signed.raw,
    });
    assert.equal(accepted.status, 202, accepted.text);
    const fuel = BigInt(accepted.body.sponsor_amount_raw);

    // The fuel is mined (one confirmation of two): the sender sends all of it elsewhere with the sponsored transaction's nonce 0.
    await eventually(async () => ((await ethBalance(spender.address)) === fuel ? true : undefined), 'the fuel reached the sender');
    const price = fuel / 21_000n;
    const elsewhere = clientKey('ethereum').address;
    const drain = await signClientTransfer(provider, 'ethereum', spender, elsewhere, 'ETH', fuel - 21_000n * price, { nonce: 0n, gasLimit: 21_000n, maxFeePerGas: price });
    await receiptOf((await anvil.call('eth_sendRawTransaction', [drain.raw])) as string);

    const done = await mineUntil(async () => {
      const current = (await call('GET', `/v1/gas-stations/sponsor-broadcasts/${accepted.body.id}`)).body;
      return current.status === 'confirmed' || current.status === 'failed' ? current : undefined;
    }, 'the sponsored broadcast settled');
    assert.equal(done.status, 'failed');
    assert.equal(done.failure_reason, 'nonce_spent', done.failure_message);
    assert.equal(done.broadcast_accepted, false, 'nothing was relayed');
    assert.equal(await anvil.call('eth_getTransactionByHash', [signed.txid]), null, 'the node never saw the sponsored transaction');
    assert.equal(await tokenBalance(recipient), parseUnits('4', 6), 'the recipient holds only the tokens of the sponsored broadcast above');

    const fuelSend = (await call('GET', `/v1/transactions/${done.sponsor_tx_id}`)).body as Transaction;
    assert.equal(fuelSend.status, 'confirmed');
    const db = (await testOrm()).em.fork();
    const [row] = await db.execute<{ budget_charge: string }[]>('select budget_charge::text from sponsorships where id = ?', [done.id]);
    assert.equal(row!.budget_charge, (fuel + BigInt(fuelSend.fee_raw!)).toString(), "the station's budget stays charged the fuel and its send's fee");
    const events = await db.execute<{ data: Record<string, unknown> }[]>(`select data from events where organization_id = ? and type = 'sponsor_broadcast.failed'`, [org.organizationId]);
    assert.equal(events.length, 1);
    assert.deepEqual(
      [events[0]!.data.id, events[0]!.data.failure_reason, events[0]!.data.sponsor_amount_raw, events[0]!.data.budget_charge_raw],
      [done.id, 'nonce_spent', fuel.toString(), row!.budget_charge],
      'the event names the sponsorship, why, and what the organization was charged',
    );
    await ledgerMatchesChain();
  });
});
