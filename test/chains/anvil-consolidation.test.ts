import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { erc20Abi, getAddress, parseEther, parseUnits, type Hex } from 'viem';
import { ChainNodes } from '../../src/chains/nodes';
import { ChainScanCursor } from '../../src/monitoring/entities';
import { compareLedgerWithChain } from '../../src/monitoring/ledger-check';
import { toDisplay } from '../../src/shared/money';
import { anvilFunder, anvilReceipt, anvilSandboxConfig, deployAnvilToken, startAnvil, type Anvil , anvilEthBalance, anvilMine, anvilTokenBalance, receiptFee, anvilHeight } from '../support/anvil';
import { type TestApp, type TestOrganization } from '../support/app';
import { testConfig, testOrm } from '../support/environment';
import { eventually } from '../support/eventually';
import { testLogger } from '../support/secret-scan';
import { startScannedService, type ScannedService } from '../support/scanned-service';

const CONFIRMATIONS = 2;

interface Sweep {
  id: string;
  source_address_id: string;
  destination_address: string;
  asset_symbol: string;
  asset_address: string | null;
  is_native: boolean;
  amount: string;
  gas_source: string;
  status: string;
  failure_reason: string | null;
  transaction_id: string | null;
  tx_hash: string | null;
}

interface Transaction {
  id: string;
  status: string;
  to_address: string;
  amount_raw: string;
  fee_raw: string | null;
  tx_hash: string | null;
}

/** A consolidation run on a real Ethereum node (anvil), through the API, Temporal and PostgreSQL: token sweeps whose gas a gas station pays. */
describe('Consolidation on a real Ethereum node (anvil): token sweeps from a vault to another, gas paid by a gas station, the ledger equal to the chain', () => {
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
    const taskQueue = `anvil-consolidation-${randomUUID()}`;
    Object.assign(config, anvilSandboxConfig(anvil, taskQueue, token, CONFIRMATIONS));
    service = await startScannedService('ethereum', 'Anvil consolidation', config, () => anvilHeight(anvil));
    ({ app, org } = service);
  });

  after(async () => {
    await service?.stop();
    await anvil?.stop();
  });

  const call = (method: string, path: string, body?: unknown) => app.request(method, path, { key: org.secret, body });

  async function ledger(walletId: string, assetId: string) {
    const rows = (await call('GET', `/v1/wallets/${walletId}/balances`)).body.data as { asset_id: string; balance: string }[];
    return BigInt(rows.find((candidate) => candidate.asset_id === assetId)?.balance ?? '0');
  }
  /** Mines the confirmations of what anvil already mined, and waits until `walletId`'s ledger books `amount` of `assetId`. */
  async function credited(walletId: string, assetId: string, amount: bigint) {
    await mine(CONFIRMATIONS);
    await eventually(async () => ((await ledger(walletId, assetId)) === amount ? true : undefined), `${assetId} credited to wallet ${walletId}`, 30_000, 250);
  }
  async function createWallet(vaultId: string, name: string) {
    const created = await call('POST', '/v1/wallets', { name, chain: 'ethereum', vault_id: vaultId, wallet_type: 'hot' });
    assert.equal(created.status, 201, created.text);
    return { id: created.body.id as string, address: created.body.primary_address.address as Hex };
  }
  async function createVault(name: string) {
    const created = await call('POST', '/v1/vaults', { name });
    assert.equal(created.status, 201, created.text);
    return created.body.id as string;
  }
  async function depositToken(address: Hex, amount: bigint) {
    await receiptOf(await funderWallet().writeContract({ address: token, abi: erc20Abi, functionName: 'transfer', args: [address, amount] }));
  }

  /** The ledger invariant for every wallet of the organization, once scanning has caught up with the tip. */
  async function ledgerMatchesChain(wallets: number) {
    const tip = Number(await anvil.call('eth_blockNumber'));
    await eventually(async () => {
      const cursor = await (await testOrm()).em.fork().findOne(ChainScanCursor, { chain: 'ethereum', environment: 'sandbox' });
      return cursor && cursor.height >= tip ? true : undefined;
    }, 'scanning caught up with the tip');
    const nodes = new ChainNodes(testConfig(config), testLogger('test'), await testOrm());
    const provider = await nodes.provider('ethereum', 'sandbox');
    const result = await compareLedgerWithChain((await testOrm()).em.fork(), provider, { chain: 'ethereum', environment: 'sandbox', organizationId: org.organizationId, assetIds: ['ETH', 'USDC_ETH'] });
    assert.equal(result.wallets, wallets);
    assert.deepEqual(result.mismatches, []);
  }

  it('sweeps every address of the vault to the destination vault: the station fuels each sweep its signed gas and pays nothing else, the run reports what moved, and the ledger equals the chain', async function () {
    this.timeout(90_000);
    const source = await createVault('Deposits');
    const treasuryVault = await createVault('Treasury');
    const first = await createWallet(source, 'Customer one');
    const added = await call('POST', `/v1/wallets/${first.id}/addresses`, { label: 'second' });
    assert.equal(added.status, 201, added.text);
    const firstSecond = added.body.address as Hex;
    const second = await createWallet(source, 'Customer two');
    const treasury = await createWallet(treasuryVault, 'Treasury ETH');
    const created = await call('POST', '/v1/gas-stations', { name: 'Ethereum gas', chain: 'ethereum', threshold: '0' });
    assert.equal(created.status, 201, created.text);
    const station = created.body as { id: string; address: Hex; wallet_id: string };

    const deposits: [Hex, bigint][] = [
      [first.address, parseUnits('100', 6)],
      [firstSecond, parseUnits('50.5', 6)],
      [second.address, parseUnits('25', 6)],
    ];
    const swept = deposits.reduce((sum, [, amount]) => sum + amount, 0n);
    await receiptOf(await funderWallet().sendTransaction({ to: station.address, value: parseEther('1') }));
    for (const [address, amount] of deposits) await depositToken(address, amount);
    await credited(station.wallet_id, 'ETH', parseEther('1'));
    await credited(first.id, 'USDC_ETH', parseUnits('150.5', 6));
    await credited(second.id, 'USDC_ETH', parseUnits('25', 6));
    for (const [address] of deposits) assert.equal(await ethBalance(address), 0n, `${address} holds no ether: the station must pay its gas`);

    const rule = await call('POST', '/v1/consolidation/rules', {
      vault_id: source,
      chain: 'ethereum',
      destination_type: 'vault',
      destination_vault_id: treasuryVault,
      gas_source: 'customer_gas_station',
      gas_station_id: station.id,
      trigger_type: 'manual',
      assets: [{ symbol: 'USDC' }],
    });
    assert.equal(rule.status, 201, rule.text);
    assert.equal(rule.body.assets[0].contract_address.toLowerCase(), token.toLowerCase(), "the rule names anvil's token, as the node configuration knows it");
    const stationBefore = await ethBalance(station.address);

    const started = await call('POST', `/v1/consolidation/rules/${rule.body.id}/runs`);
    assert.equal(started.status, 202, started.text);
    assert.equal(started.body.trigger_source, 'manual');
    // Each sweep waits for its fuel's confirmations, then for its own: a block a round until the run settles.
    const run = await eventually(
      async () => {
        const current = (await call('GET', `/v1/consolidation/runs/${started.body.id}`)).body;
        if (['completed', 'partially_failed', 'failed'].includes(current.status)) return current;
        await mine(1);
        return undefined;
      },
      'the run settled',
      75_000,
      300,
    );
    assert.equal(run.status, 'completed', JSON.stringify(run));
    assert.equal(run.addresses_scanned, 3, "the vault's three addresses: not the treasury's, not the station's");
    assert.deepEqual([run.transfers_created, run.transfers_confirmed, run.transfers_failed], [3, 3, 0]);
    assert.equal(run.failure_reason, null);
    assert.deepEqual(run.per_asset_totals, [{ asset_address: rule.body.assets[0].contract_address, asset_symbol: 'USDC', amount_swept: '175.5', sweep_count: 3 }]);

    const sweeps = (await call('GET', `/v1/consolidation/runs/${run.id}/sweeps`)).body.data as Sweep[];
    assert.equal(sweeps.length, 3);
    for (const sweep of sweeps) {
      assert.equal(sweep.status, 'confirmed', JSON.stringify(sweep));
      assert.match(sweep.tx_hash ?? '', /^0x[0-9a-f]{64}$/);
      assert.equal(sweep.destination_address, treasury.address, "the destination vault's wallet's primary address");
      assert.equal(sweep.gas_source, 'customer_gas_station');
      assert.equal(sweep.is_native, false);
    }
    assert.deepEqual(sweeps.map((sweep) => sweep.amount).sort(), ['100', '25', '50.5']);

    assert.equal(await tokenBalance(treasury.address), swept, "the destination holds on chain exactly what the run says it swept");
    // The station fuels each sweep its signed gas limit at its fixed price (the node accepts nothing less); the
    // EVM charges the gas used, which for a sweep is less: emptying the token balance earns a storage refund, and a
    // destination balance another sweep already made non-zero costs less than the estimate said. The difference
    // stays with the swept address, booked on its wallet's ledger: what the station paid, nothing more, is accounted for.
    const fuels = ((await call('GET', `/v1/transactions?wallet_id=${station.wallet_id}`)).body.data as Transaction[]).filter((send) => send.to_address !== treasury.address);
    assert.equal(fuels.length, 3, 'one fuel send per sweep');
    let sweepFees = 0n;
    const sweptFrom: string[] = [];
    for (const sweep of sweeps) {
      const signed = (await anvil.call('eth_getTransactionByHash', [sweep.tx_hash])) as { from: Hex; gas: Hex; maxFeePerGas: Hex };
      const receipt = await receiptOf(sweep.tx_hash!);
      assert.equal(receipt.status, '0x1');
      const fee = receiptFee(receipt);
      sweepFees += fee;
      sweptFrom.push(getAddress(signed.from));
      const sent = (await call('GET', `/v1/transactions/${sweep.transaction_id}`)).body as Transaction;
      assert.equal(sent.fee_raw, fee.toString(), "the sweep's fee_raw is its receipt's gas used x effective gas price");
      const fuel = fuels.filter((candidate) => candidate.to_address.toLowerCase() === signed.from.toLowerCase());
      assert.equal(fuel.length, 1, `one fuel send to ${signed.from}`);
      assert.equal(fuel[0]!.status, 'confirmed');
      assert.equal(BigInt(fuel[0]!.amount_raw), BigInt(signed.gas) * BigInt(signed.maxFeePerGas), "the fuel is the sweep's signed gas x price");
      assert.equal(
        await ethBalance(signed.from),
        BigInt(fuel[0]!.amount_raw) - fee,
        `${signed.from} keeps the fuel its sweep did not burn (signed gas ${BigInt(signed.gas)}, used ${BigInt(receipt.gasUsed)}, price ${BigInt(receipt.effectiveGasPrice)})`,
      );
      assert.equal(await tokenBalance(signed.from), 0n, `${signed.from} swept clean`);
    }
    assert.deepEqual(sweptFrom.sort(), deposits.map(([address]) => getAddress(address)).sort(), 'each address of the vault swept once, from itself');
    assert.deepEqual(
      run.fees.breakdown.map((entry: { kind: string; currency: string; amount: string }) => [entry.kind, entry.currency, entry.amount]),
      [['gas_sponsorship', 'ETH', toDisplay(sweepFees, 18)]],
      "the run's fees are its sweeps' receipts', paid by the station",
    );
    assert.equal(stationBefore - (await ethBalance(station.address)), fuels.reduce((sum, fuel) => sum + BigInt(fuel.amount_raw) + BigInt(fuel.fee_raw!), 0n), 'the station paid the fuel and its own fees, nothing else');

    await eventually(async () => ((await ledger(treasury.id, 'USDC_ETH')) === swept ? true : undefined), 'the sweeps credited to the treasury', 30_000, 250);
    // The organization's wallets: the two sources, the treasury and the station's.
    await ledgerMatchesChain(4);
  });
});
