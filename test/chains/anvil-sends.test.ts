import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { encodeAbiParameters, erc20Abi, keccak256, parseEther, parseUnits, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { ChainNodes } from '../../src/chains/nodes';
import { erc20TransferData } from '../../src/chains/transfers/ethereum';
import { ChainScanCursor } from '../../src/monitoring/entities';
import { compareLedgerWithChain } from '../../src/monitoring/ledger-check';
import { anvilFunder, anvilReceipt, anvilSandboxConfig, deployAnvilToken, startAnvil, type Anvil , anvilEthBalance, anvilMine, anvilTokenBalance, receiptFee, anvilHeight } from '../support/anvil';
import { type TestApp, type TestOrganization } from '../support/app';
import { testConfig, testOrm } from '../support/environment';
import { eventually } from '../support/eventually';
import { testLogger } from '../support/secret-scan';
import { startScannedService, type ScannedService } from '../support/scanned-service';

const CONFIRMATIONS = 3;

interface Transaction {
  id: string;
  status: string;
  asset_id: string;
  amount_raw: string;
  recipient_amount_raw: string;
  fee_raw: string | null;
  fee_limit_raw: string;
  tx_hash: string | null;
  nonce: string | null;
  block_height: number | null;
  failure_reason: string | null;
}


/** Sends from a custody wallet on a real Ethereum node (anvil), through the API, Temporal and PostgreSQL. */
describe('Sends on a real Ethereum node (anvil): ETH and an ERC-20, to outside and to our own wallets, gross, reverted and refused', () => {
  let anvil: Anvil;
  let app: TestApp;
  let org: TestOrganization;
  let service: ScannedService;
  let token: Hex;
  const config: Record<string, string> = {};
  /** Nobody's address: what it holds on chain is exactly what the sends gave it. */
  const outside = privateKeyToAccount(generatePrivateKey()).address;

  const funderWallet = () => anvilFunder(anvil);
  const mine = (blocks: number) => anvilMine(anvil, blocks);
  const ethBalance = (address: Hex) => anvilEthBalance(anvil, address);
  const tokenBalance = (address: Hex) => anvilTokenBalance(anvil, token, address);
  const receiptOf = (hash: string) => anvilReceipt(anvil, hash);

  before(async () => {
    anvil = await startAnvil();
    token = await deployAnvilToken(anvil);
    const taskQueue = `anvil-sends-${randomUUID()}`;
    Object.assign(config, anvilSandboxConfig(anvil, taskQueue, token, CONFIRMATIONS));
    service = await startScannedService('ethereum', 'Anvil sends', config, () => anvilHeight(anvil));
    ({ app, org } = service);
  });

  after(async () => {
    await service?.stop();
    await anvil?.stop();
  });

  const call = (method: string, path: string, body?: unknown) => app.request(method, path, { key: org.secret, body });
  const read = async (id: string) => (await call('GET', `/v1/transactions/${id}`)).body as Transaction;

  async function createWallet(name: string) {
    const vault = await call('POST', '/v1/vaults', { name });
    const created = await call('POST', '/v1/wallets', { name, chain: 'ethereum', vault_id: vault.body.id, wallet_type: 'hot' });
    assert.equal(created.status, 201, created.text);
    return { id: created.body.id as string, address: created.body.primary_address.address as Hex };
  }
  async function balance(walletId: string, assetId: string) {
    const rows = (await call('GET', `/v1/wallets/${walletId}/balances`)).body.data as { asset_id: string; balance: string; locked: string; pending: string }[];
    const row = rows.find((candidate) => candidate.asset_id === assetId);
    return { balance: BigInt(row?.balance ?? '0'), locked: BigInt(row?.locked ?? '0'), pending: BigInt(row?.pending ?? '0') };
  }
  async function send(body: Record<string, unknown>): Promise<Transaction> {
    const created = await call('POST', '/v1/transactions', body);
    assert.equal(created.status, 201, created.text);
    return created.body as Transaction;
  }
  /**
   * anvil mines each transaction as it arrives: once every send is broadcast, the confirmations are mined, and the workflows settle.
   * Each wait as long as the suite's load needs (eventually's note): only a failing test waits it out.
   */
  async function settleAll(ids: string[]): Promise<Transaction[]> {
    await eventually(async () => ((await Promise.all(ids.map(read))).every((transaction) => !['pending', 'signed'].includes(transaction.status)) ? true : undefined), 'every send broadcast', 90_000, 250);
    await mine(CONFIRMATIONS);
    return eventually(
      async () => {
        const transactions = await Promise.all(ids.map(read));
        return transactions.every((transaction) => ['confirmed', 'failed'].includes(transaction.status)) ? transactions : undefined;
      },
      'every send settled',
      90_000,
      250,
    );
  }
  async function scannedToTip() {
    const tip = Number(await anvil.call('eth_blockNumber'));
    await eventually(async () => {
      const cursor = await (await testOrm()).em.fork().findOne(ChainScanCursor, { chain: 'ethereum', environment: 'sandbox' });
      return cursor && cursor.height >= tip ? true : undefined;
    }, 'scanning caught up with the tip');
  }

  /** The ledger invariant for every wallet of the organization, once scanning has caught up with the tip. */
  async function ledgerMatchesChain() {
    await scannedToTip();
    const nodes = new ChainNodes(testConfig(config), testLogger('test'), await testOrm());
    const provider = await nodes.provider('ethereum', 'sandbox');
    const result = await compareLedgerWithChain((await testOrm()).em.fork(), provider, { chain: 'ethereum', environment: 'sandbox', organizationId: org.organizationId, assetIds: ['ETH', 'USDC_ETH'] });
    assert.equal(result.wallets, 2);
    assert.deepEqual(result.mismatches, []);
  }
  const statusIs = async (ids: string[], status: string) => ((await Promise.all(ids.map(read))).every((transaction) => transaction.status === status) ? true : undefined);

  let treasury: { id: string; address: Hex };
  let payroll: { id: string; address: Hex };
  const ETH_FUNDED = parseEther('10');
  const USDC_FUNDED = parseUnits('1000', 6);

  it('credits ETH and the ERC-20 deposited from an anvil account once confirmed', async () => {
    treasury = await createWallet('Treasury');
    payroll = await createWallet('Payroll');
    await funderWallet().sendTransaction({ to: treasury.address, value: ETH_FUNDED });
    await funderWallet().writeContract({ address: token, abi: erc20Abi, functionName: 'transfer', args: [treasury.address, USDC_FUNDED] });
    await eventually(async () => ((await balance(treasury.id, 'USDC_ETH')).pending === USDC_FUNDED && (await balance(treasury.id, 'ETH')).pending === ETH_FUNDED ? true : undefined), 'deposits pending');
    await mine(CONFIRMATIONS);
    await eventually(async () => ((await balance(treasury.id, 'USDC_ETH')).balance === USDC_FUNDED && (await balance(treasury.id, 'ETH')).balance === ETH_FUNDED ? true : undefined), 'deposits confirmed');
  });

  it('sends ETH and USDC to an outside address and to another wallet of the organization, and a gross ETH send: debited exactly what the node says left', async () => {
    const before = { eth: await balance(treasury.id, 'ETH'), usdc: await balance(treasury.id, 'USDC_ETH') };
    // An ERC-20 send's gas limit: anvil's eth_estimateGas of its transfer from the sending address, plus the 20% margin (ERC20_GAS_MARGIN_PERCENT).
    const usdcGas = async (to: Hex, amount: bigint) =>
      (BigInt((await anvil.call('eth_estimateGas', [{ from: treasury.address, to: token, data: erc20TransferData(to, amount) }])) as Hex) * 120n) / 100n;
    const expectedGas = { out: await usdcGas(outside, parseUnits('100.5', 6)), in: await usdcGas(payroll.address, parseUnits('40', 6)) };
    const quoted = await call('POST', '/v1/transactions/estimate-fee', { wallet_id: treasury.id, to_address: outside, amount: '100.5', asset: 'USDC' });
    assert.equal(quoted.status, 200, quoted.text);
    for (const level of Object.values(quoted.body.fee_levels) as { breakdown: { key: string; value: string }[] }[]) {
      assert.equal(level.breakdown.find((entry) => entry.key === 'gas_limit')?.value, expectedGas.out.toString(), 'the fee estimate quotes the gas its send signs');
    }
    // All in one block, so that they are all mined and short of the confirmations at once.
    await anvil.call('evm_setAutomine', [false]);
    const ethOut = await send({ wallet_id: treasury.id, to_address: outside, amount: '1.25', asset: 'ETH' });
    const usdcOut = await send({ wallet_id: treasury.id, to_address: outside, amount: '100.5', asset: 'USDC' });
    const ethIn = await send({ wallet_id: treasury.id, to_address: payroll.address, amount: '0.75', asset: 'ETH', fee_level: 'high' });
    const usdcIn = await send({ wallet_id: treasury.id, to_address: payroll.address, amount: '40', asset: 'USDC_ETH', fee_level: 'low' });
    const gross = await send({ wallet_id: treasury.id, to_address: outside, amount: '0.5', asset: 'ETH', treat_as_gross_amount: true });
    assert.equal(BigInt(gross.recipient_amount_raw), parseEther('0.5') - BigInt(gross.fee_limit_raw), 'gross: the recipient gets the amount less the fee limit');
    const created = [ethOut, usdcOut, ethIn, usdcIn, gross];
    const locked = await balance(treasury.id, 'ETH');
    const ethSends = [ethOut, ethIn, gross];
    assert.equal(
      locked.locked,
      ethSends.reduce((sum, sent) => sum + BigInt(sent.recipient_amount_raw), 0n) + created.reduce((sum, sent) => sum + BigInt(sent.fee_limit_raw), 0n),
      'the ETH amounts and every fee limit are locked',
    );
    assert.equal((await balance(treasury.id, 'USDC_ETH')).locked, parseUnits('140.5', 6));

    // Mined, short of the confirmations: the ledger still equals the chain, the sends' debits not yet booked.
    await eventually(() => statusIs(created.map((sent) => sent.id), 'broadcast'), 'every send broadcast', 90_000, 250);
    await mine(1);
    await anvil.call('evm_setAutomine', [true]);
    await eventually(() => statusIs(created.map((sent) => sent.id), 'confirming'), 'every send mined', 90_000, 250);
    await ledgerMatchesChain();

    const settled = await settleAll(created.map((sent) => sent.id));
    assert.deepEqual(
      settled.map((sent) => sent.status),
      created.map(() => 'confirmed'),
    );
    assert.deepEqual(
      settled.map((sent) => Number(sent.nonce)).sort((a, b) => a - b),
      [0, 1, 2, 3, 4],
      'one nonce each, from the account nonce, no gap',
    );

    // The node's own view: each receipt's fee is the API's fee_raw, within the fee limit; each call succeeded.
    let feesPaid = 0n;
    for (const sent of settled) {
      const receipt = await receiptOf(sent.tx_hash!);
      assert.equal(receipt.status, '0x1', `${sent.id} succeeded`);
      assert.equal(receipt.from.toLowerCase(), treasury.address.toLowerCase());
      assert.equal(BigInt(sent.fee_raw!), receiptFee(receipt), `${sent.id}: fee_raw is the receipt's gas used x effective gas price`);
      assert.ok(BigInt(sent.fee_raw!) <= BigInt(sent.fee_limit_raw));
      assert.equal(sent.block_height, Number(receipt.blockNumber));
      feesPaid += BigInt(sent.fee_raw!);
    }
    for (const [sent, gas] of [[usdcOut, expectedGas.out], [usdcIn, expectedGas.in]] as const) {
      const mined = settled.find((candidate) => candidate.id === sent.id)!;
      const signed = (await anvil.call('eth_getTransactionByHash', [mined.tx_hash])) as { gas: Hex; maxFeePerGas: Hex };
      assert.equal(BigInt(signed.gas), gas, `${sent.id}: signed with the node's estimate plus the margin`);
      assert.equal(BigInt(sent.fee_limit_raw), gas * BigInt(signed.maxFeePerGas), `${sent.id}: the fee limit locked is that gas at the signed max fee`);
      const used = BigInt((await receiptOf(mined.tx_hash!)).gasUsed);
      assert.ok(used > 21_000n && used <= gas, `${sent.id}: the transfer used ${used} gas, within its limit ${gas}`);
    }
    const ethSent = settled.filter((sent) => sent.asset_id === 'ETH').reduce((sum, sent) => sum + BigInt(sent.recipient_amount_raw), 0n);
    const after = { eth: await balance(treasury.id, 'ETH'), usdc: await balance(treasury.id, 'USDC_ETH') };
    assert.equal(after.eth.balance, before.eth.balance - ethSent - feesPaid, 'ETH: the amounts and the fees actually paid');
    assert.equal(after.usdc.balance, before.usdc.balance - parseUnits('140.5', 6), 'USDC: the amounts; their fees were paid in ETH');
    assert.equal(after.eth.locked, 0n, 'every lock released, the unused part of the fee limits included');
    assert.equal(after.usdc.locked, 0n);
    assert.equal(await ethBalance(treasury.address), after.eth.balance, "the node's ETH balance of the wallet is the ledger's");
    assert.equal(await tokenBalance(treasury.address), after.usdc.balance);

    const grossSettled = settled.find((sent) => sent.id === gross.id)!;
    assert.equal(BigInt(grossSettled.recipient_amount_raw) + BigInt(grossSettled.fee_raw!) <= parseEther('0.5'), true, 'gross: the wallet gave no more than the amount');
    assert.equal(await ethBalance(outside), parseEther('1.25') + BigInt(grossSettled.recipient_amount_raw), 'the outside address holds what was sent to it');
    assert.equal(await tokenBalance(outside), parseUnits('100.5', 6));

    // The other wallet sees the sends as deposits, credited once confirmed.
    await eventually(
      async () => ((await balance(payroll.id, 'ETH')).balance === parseEther('0.75') && (await balance(payroll.id, 'USDC_ETH')).balance === parseUnits('40', 6) ? true : undefined),
      'the other wallet credited',
    );
  });

  it('a send whose call reverts fails with its fee paid and nothing sent; a send the node refuses fails with nothing paid and its lock released', async () => {
    const before = await balance(treasury.id, 'ETH');
    // A plain ether payment to the token contract: it has no receive function, so the call reverts, once mined.
    const reverted = await send({ wallet_id: treasury.id, to_address: token, amount: '0.3', asset: 'ETH' });
    const [revertSettled] = await settleAll([reverted.id]);
    assert.equal(revertSettled!.status, 'failed');
    assert.equal(revertSettled!.failure_reason, 'reverted');
    const receipt = await receiptOf(revertSettled!.tx_hash!);
    assert.equal(receipt.status, '0x0', 'the node says it reverted');
    assert.equal(BigInt(revertSettled!.fee_raw!), receiptFee(receipt));
    const afterRevert = await balance(treasury.id, 'ETH');
    assert.equal(afterRevert.balance, before.balance - receiptFee(receipt), 'debited the fee only');
    assert.equal(afterRevert.locked, 0n);
    assert.equal(await ethBalance(token), 0n, 'the contract received nothing');
    assert.equal(await ethBalance(treasury.address), afterRevert.balance);

    // The node refuses a payment the address cannot pay for: the chain holds less than the ledger, for a moment.
    const held = await ethBalance(treasury.address);
    await anvil.call('anvil_setBalance', [treasury.address, '0x0']);
    const refused = await send({ wallet_id: treasury.id, to_address: outside, amount: '0.2', asset: 'ETH' });
    const failed = await eventually(async () => {
      const transaction = await read(refused.id);
      return transaction.status === 'failed' ? transaction : undefined;
    }, 'the refused send failed');
    await anvil.call('anvil_setBalance', [treasury.address, `0x${held.toString(16)}`]);
    assert.equal(failed.failure_reason, 'insufficient_funds');
    assert.equal(failed.fee_raw === null || failed.fee_raw === '0', true, 'nothing was paid');
    assert.equal(await anvil.call('eth_getTransactionByHash', [failed.tx_hash]), null, 'the node does not have it');
    assert.deepEqual(await balance(treasury.id, 'ETH'), { ...afterRevert, locked: 0n }, 'nothing debited, the lock released');

    // The nonce the refused send had is free again: the next send takes it and confirms.
    const next = await send({ wallet_id: treasury.id, to_address: outside, amount: '0.2', asset: 'ETH' });
    const [nextSettled] = await settleAll([next.id]);
    assert.equal(nextSettled!.status, 'confirmed');
    assert.equal(nextSettled!.nonce, failed.nonce, 'the nonce of the refused send is reused');
    assert.equal(await ethBalance(treasury.address), (await balance(treasury.id, 'ETH')).balance);
  });

  it('a dropped send the node refuses again stays pending and locked; another transaction mined at its nonce fails it, its lock released; the send after it confirms', async () => {
    // Without automine both sends wait in the pool, in nonce order: the first is then dropped, and refused when broadcast again.
    await anvil.call('evm_setAutomine', [false]);
    const first = await send({ wallet_id: treasury.id, to_address: outside, amount: '3', asset: 'ETH' });
    const firstBroadcast = await eventually(async () => {
      const transaction = await read(first.id);
      return transaction.status === 'broadcast' ? transaction : undefined;
    }, 'the first send broadcast');
    const heldBack = await send({ wallet_id: treasury.id, to_address: payroll.address, amount: '0.1', asset: 'ETH' });
    const heldBackBroadcast = await eventually(async () => {
      const transaction = await read(heldBack.id);
      return transaction.status === 'broadcast' ? transaction : undefined;
    }, 'the second send broadcast');
    assert.equal(BigInt(heldBackBroadcast.nonce!), BigInt(firstBroadcast.nonce!) + 1n);
    const lockedBefore = await balance(treasury.id, 'ETH');

    const held = await ethBalance(treasury.address);
    const short = parseEther('1');
    await anvil.call('anvil_setBalance', [treasury.address, `0x${short.toString(16)}`]);
    await anvil.call('anvil_dropTransaction', [firstBroadcast.tx_hash]);
    // Two checks (5 s apart) find it missing and broadcast it again: refused (insufficient_funds), which proves nothing.
    await new Promise((resolve) => setTimeout(resolve, 12_000));
    assert.equal((await read(first.id)).status, 'broadcast', 'a refusal is no proof: still pending');
    assert.deepEqual(await balance(treasury.id, 'ETH'), lockedBefore, 'nothing released');

    // The key is used elsewhere: a zero-value, zero-fee transaction takes the first send's nonce and is mined (with the held-back send).
    await anvil.call('anvil_impersonateAccount', [treasury.address]);
    await anvil.call('anvil_setNextBlockBaseFeePerGas', ['0x0']);
    const replacement = (await anvil.call('eth_sendTransaction', [
      { from: treasury.address, to: outside, value: '0x0', gas: '0x5208', maxFeePerGas: '0x0', maxPriorityFeePerGas: '0x0', nonce: `0x${BigInt(firstBroadcast.nonce!).toString(16)}` },
    ])) as string;
    await anvil.call('anvil_stopImpersonatingAccount', [treasury.address]);
    await mine(1);
    assert.equal((await receiptOf(replacement)).status, '0x1');
    await anvil.call('anvil_setBalance', [treasury.address, `0x${(held - (short - (await ethBalance(treasury.address)))).toString(16)}`]);
    await anvil.call('evm_setAutomine', [true]);

    const failed = await eventually(async () => {
      const transaction = await read(first.id);
      return transaction.status === 'failed' ? transaction : undefined;
    }, 'the send whose nonce another transaction consumed failed');
    assert.equal(failed.failure_reason, 'nonce_consumed');
    assert.equal(await anvil.call('eth_getTransactionByHash', [failed.tx_hash]), null, 'never mined');
    const [settled] = await settleAll([heldBack.id]);
    assert.equal(settled!.status, 'confirmed');
    const ledger = await balance(treasury.id, 'ETH');
    assert.equal(ledger.locked, 0n, 'the failed send released its lock; the confirmed one settled');
    assert.equal(await ethBalance(treasury.address), ledger.balance);
  });

  it('an ERC-20 send whose transfer the node says would fail is refused with 400 gas_estimate_failed: nothing locked, recorded or sent', async () => {
    // The chain holds no USDC on the address for a moment (OpenZeppelin's balances are the mapping at slot 0); the ledger still says it does.
    const slot = keccak256(encodeAbiParameters([{ type: 'address' }, { type: 'uint256' }], [treasury.address, 0n]));
    const held = (await anvil.call('eth_getStorageAt', [token, slot, 'latest'])) as Hex;
    const ledger = await balance(treasury.id, 'USDC_ETH');
    const sends = (await call('GET', `/v1/transactions?wallet_id=${treasury.id}&limit=100`)).body.data.length;
    await anvil.call('anvil_setStorageAt', [token, slot, `0x${'0'.repeat(64)}`]);
    try {
      for (const path of ['/v1/transactions/estimate-fee', '/v1/transactions']) {
        const refused = await call('POST', path, { wallet_id: treasury.id, to_address: outside, amount: '1', asset: 'USDC' });
        assert.equal(refused.status, 400, `${path}: ${refused.text}`);
        assert.equal(refused.body.error.code, 'gas_estimate_failed');
        assert.equal(refused.body.error.details.asset_id, 'USDC_ETH');
        assert.match(refused.body.error.message, /exceeds balance/, "the node's reason");
        assert.ok(!refused.text.includes(anvil.url), 'the node URL is not shown');
      }
    } finally {
      await anvil.call('anvil_setStorageAt', [token, slot, held]);
    }
    assert.deepEqual(await balance(treasury.id, 'USDC_ETH'), ledger, 'nothing locked');
    assert.equal((await call('GET', `/v1/transactions?wallet_id=${treasury.id}&limit=100`)).body.data.length, sends, 'nothing recorded');
    assert.equal(await tokenBalance(treasury.address), ledger.balance);
  });

  it("keeps the ledger invariant after the mix: each wallet's ledger equals what anvil says its addresses hold", async () => {
    await mine(1);
    await ledgerMatchesChain();
  });
});
