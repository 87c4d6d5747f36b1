import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { ServiceWorkers as Worker } from '../../src/worker-setup';
import { assetById, CHAIN_IDS } from '../../src/catalogue/service';
import { devnetBlocksWorkflowId } from '../../src/chains/flows/devnet-blocks';
import type { ChainProvider } from '../../src/chains/provider';
import { chainScanWorkflowId } from '../../src/monitoring/flows/chain-scan';
import { erc20TransferData } from '../../src/chains/transfers/ethereum';
import { Money, toBaseUnits, toDisplay } from '../../src/shared/money';
import { clientKey, signClientTransfer, type ClientChain, type ClientKey, type ClientSigning } from '../support/client-transfers';
import { createTestOrganization, startTestApp, type TestApp, type TestOrganization } from '../support/app';
import { localTemporal } from '../support/environment';
import { setRequiredApprovals } from '../support/isolation-fixtures';
import { eventually } from '../support/eventually';
import { terminateWorkflows } from '../support/scanning';
import { createTestWorker } from '../support/worker';

type Chain = ClientChain;

/**
 * Fee sponsorship through the real API, Temporal and PostgreSQL on the Ethereum and Tron devnets:
 * sponsored sends (`sponsor: true`), the daily budget, the platform's sponsorship, and
 * sponsor-broadcast of client-signed transactions.
 */
describe('Gas stations: fee sponsorship', () => {
  let app: TestApp;
  let worker: Worker | undefined;
  let running: Promise<void> | undefined;
  let org: TestOrganization;
  let paymaster: TestOrganization;
  let beneficiary: TestOrganization;
  const taskQueue = `sponsorship-${randomUUID()}`;
  const config = {
    TEMPORAL_TASK_QUEUE: taskQueue,
    DEVNET_BLOCK_INTERVAL_SECONDS: '3600',
    CHAIN_SCAN_INTERVAL_SECONDS: '0.2',
    CHAIN_CONFIRMATIONS_ETHEREUM: '2',
    CHAIN_CONFIRMATIONS_TRON: '2',
  };

  before(async () => {
    paymaster = await createTestOrganization('Platform paymaster');
    const appConfig = { ...config, HEDGE_PAYMASTER_ORGANIZATION_ID: paymaster.organizationId, HEDGE_PAYMASTER_DAILY_BUDGET_USD: '1000' };
    app = await startTestApp({ config: appConfig });
    ({ worker } = await createTestWorker(await localTemporal(), taskQueue, appConfig));
    running = worker.run();
    org = await createTestOrganization('Sponsored');
    // Raising a station's limits is a governance change (test/api/governance.test.ts): with no approvals required it applies at once.
    await setRequiredApprovals(org.organizationId, 0);
    beneficiary = await createTestOrganization('Sponsored by the platform');
  });
  after(async () => {
    await terminateWorkflows((await localTemporal()).client, CHAIN_IDS.flatMap((chain) => [devnetBlocksWorkflowId(chain), chainScanWorkflowId(chain, 'sandbox')]));
    worker?.shutdown();
    await running;
    await app?.close();
  });

  const call = (method: string, path: string, body?: unknown, key = org.secret) => app.request(method, path, { key, body });
  const provider = (chain: Chain): Promise<ChainProvider> => app.deps.chains.provider(chain, 'sandbox');
  const chainBalance = async (chain: Chain, address: string, assetId: string) => (await provider(chain)).balance(address, assetId);
  const mine = async (chain: Chain, count = 1) => assert.equal((await call('POST', `/v1/sandbox/chains/${chain}/blocks`, { count })).status, 200);
  const deposit = async (chain: Chain, address: string, asset: string, amount: string, key = org.secret) => {
    const made = await call('POST', '/v1/sandbox/deposits', { chain, address, asset, amount }, key);
    assert.equal(made.status, 201, made.text);
  };
  async function ledger(walletId: string, assetId: string, key = org.secret) {
    const rows = (await call('GET', `/v1/wallets/${walletId}/balances`, undefined, key)).body.data as { asset_id: string; balance: string; locked: string }[];
    const row = rows.find((candidate) => candidate.asset_id === assetId);
    return { balance: BigInt(row?.balance ?? '0'), locked: BigInt(row?.locked ?? '0') };
  }
  async function credited(walletId: string, assetId: string, amount: bigint, key = org.secret) {
    await eventually(async () => ((await ledger(walletId, assetId, key)).balance === amount ? true : undefined), `${assetId} credited to wallet ${walletId}`, 30_000, 300);
  }
  async function createWallet(chain: Chain, owner = org) {
    const vault = await call('POST', '/v1/vaults', { name: `Senders ${chain}` }, owner.secret);
    const wallet = await call('POST', '/v1/wallets', { name: `Sender ${chain}`, chain, vault_id: vault.body.id, wallet_type: 'hot' }, owner.secret);
    assert.equal(wallet.status, 201, wallet.text);
    return { id: wallet.body.id as string, address: wallet.body.primary_address.address as string };
  }
  async function createStation(chain: Chain, fund: string, owner = org, extra: Record<string, unknown> = {}) {
    const created = await call('POST', '/v1/gas-stations', { name: `${chain} gas`, chain, threshold: '0', ...extra }, owner.secret);
    assert.equal(created.status, 201, created.text);
    const native = assetById(chain === 'ethereum' ? 'ETH' : 'TRX');
    await deposit(chain, created.body.address, native.id, fund, owner.secret);
    await mine(chain, 2);
    await credited(created.body.wallet_id, native.id, BigInt(created.body.balance) + BigInt(Math.round(Number(fund) * 10 ** native.decimals)), owner.secret);
    return created.body as { id: string; address: string; wallet_id: string };
  }
  /**
   * Records every node call the API's providers make until restored, and whether one of `stationIds` was
   * row-locked by a transaction at that moment (a lock another connection cannot take at once).
   */
  function watchNodeCallsUnderLock(stationIds: string[]) {
    const chains = app.deps.chains;
    const provider = chains.provider.bind(chains);
    const calls: { method: string; locked: boolean }[] = [];
    const knex = app.deps.orm.em.getKnex();
    const locked = async () => {
      try {
        await knex.transaction((trx) => trx.raw(`select id from gas_stations where id in (${stationIds.map(() => '?').join(', ')}) for no key update nowait`, stationIds));
        return false;
      } catch (error) {
        if ((error as { code?: string }).code === '55P03') return true;
        throw error;
      }
    };
    const nodeCalls = new Set(['identifyNetwork', 'feeMarket', 'relay', 'tip', 'block', 'balance', 'broadcast', 'transactionStatus', 'nonces', 'spentInChain', 'recentBlock', 'estimateGas']);
    chains.provider = async (...args) => {
      const real = await provider(...args);
      return new Proxy(real, {
        get(target, name, receiver) {
          const member: unknown = Reflect.get(target, name, receiver);
          if (typeof name !== 'string' || !nodeCalls.has(name) || typeof member !== 'function') return member;
          return async (...callArgs: unknown[]) => {
            calls.push({ method: name, locked: await locked() });
            return (member as (...forwarded: unknown[]) => unknown).apply(target, callArgs);
          };
        },
      });
    };
    return { calls, restore: () => void (chains.provider = provider) };
  }
  /** Mines until `read` answers (each round one block), for flows that wait for several confirmations. */
  async function mineUntil<T>(chain: Chain, read: () => Promise<T | undefined>, what: string): Promise<T> {
    return eventually(
      async () => {
        const value = await read();
        if (value !== undefined) return value;
        await mine(chain);
        return undefined;
      },
      what,
      90_000,
      500,
    );
  }

  describe('sponsored sends (sponsor: true)', () => {
    let sender: { id: string; address: string };
    let station: { id: string; address: string; wallet_id: string };

    before(async () => {
      sender = await createWallet('ethereum');
      await deposit('ethereum', sender.address, 'USDC_ETH', '100');
      station = await createStation('ethereum', '1');
      await credited(sender.id, 'USDC_ETH', 100_000_000n);
    });

    it('estimates the sponsored fee before anyone sends: the station can pay it, the platform not on this chain without its station', async () => {
      const estimate = await call('POST', '/v1/transactions/estimate-fee', { wallet_id: sender.id, to_address: RECIPIENT, amount: '10', asset: 'USDC_ETH', sponsor: true });
      assert.equal(estimate.status, 200, estimate.text);
      const medium = estimate.body.fee_levels.medium;
      assert.equal(medium.total_debit_amount, '10', 'sponsored, the wallet gives the amount and nothing else');
      const item = (key: string) => medium.breakdown.find((entry: { key: string }) => entry.key === key).value as string;
      const gas = BigInt(item('gas_limit'));
      assert.equal(gas, await (await provider('ethereum')).estimateGas!({ from: sender.address, to: (await provider('ethereum')).tokenAddress('USDC_ETH')!, data: erc20TransferData(RECIPIENT, 10_000_000n) }), "the node's exact gas");
      assert.equal(BigInt(medium.amount_raw), gas * toBaseUnits(item('gas_price'), 9), 'the sponsored fee is that gas at one fixed price');
      const [platform, customer] = medium.funding_options;
      assert.equal(customer.funding_model, 'customer_gas_station');
      assert.equal(customer.available, true, customer.status_label);
      assert.equal(customer.network_fee_amount_raw, medium.amount_raw);
      assert.ok(BigInt(customer.fee_asset_amount_raw) > BigInt(customer.network_fee_amount_raw), "the station also pays its own fuel send's fee");
      assert.equal(platform.funding_model, 'provider_sponsorship');
      assert.equal(platform.available, false);
      assert.equal(platform.unavailable_reason, 'sponsorship_not_configured', 'the paymaster organization has no Ethereum station');

      const bitcoin = await call('POST', '/v1/transactions', { wallet_id: (await createBitcoinWallet()).id, to_address: 'tb1qw508d6qejxtdg4y5r3zarvary0c5xw7kxpjzsx', amount: '0.001', asset: 'BTC', sponsor: true });
      assert.equal(bitcoin.status, 400);
      assert.equal(bitcoin.body.error.code, 'sponsorship_unavailable');
      assert.equal(bitcoin.body.error.details.reason, 'unsupported_chain');
    });

    async function createBitcoinWallet() {
      const vault = await call('POST', '/v1/vaults', { name: 'Bitcoin' });
      return (await call('POST', '/v1/wallets', { name: 'Bitcoin', chain: 'bitcoin', vault_id: vault.body.id, wallet_type: 'hot' })).body as { id: string };
    }

    it("sends a token with the fee paid by the station: the sender's ether ends where it began, the station is debited the fee and its fuel send's fee exactly", async () => {
      const senderEthBefore = await chainBalance('ethereum', sender.address, 'ETH');
      assert.equal(senderEthBefore, 0n, 'the sender holds no ether at all');
      const stationBefore = await chainBalance('ethereum', station.address, 'ETH');
      // Other files of this process's devnet pay the same recipient.
      const recipientBefore = await chainBalance('ethereum', RECIPIENT, 'USDC_ETH');

      const sent = await call('POST', '/v1/transactions', { wallet_id: sender.id, to_address: RECIPIENT, amount: '10', asset: 'USDC_ETH', sponsor: true });
      assert.equal(sent.status, 201, sent.text);
      assert.equal(sent.body.sponsor, true);
      assert.ok(sent.body.sponsorship_id);
      assert.equal(sent.body.status, 'pending', 'it waits for the fuel');
      assert.equal((await ledger(sender.id, 'ETH')).locked, 0n, "nothing of the sender's ether is locked for the fee");

      const confirmed = await mineUntil(
        'ethereum',
        async () => {
          const transaction = (await call('GET', `/v1/transactions/${sent.body.id}`)).body;
          return transaction.status === 'confirmed' ? transaction : undefined;
        },
        'the sponsored send confirmed',
      );
      const fuels = (await call('GET', `/v1/transactions?wallet_id=${station.wallet_id}`)).body.data as { id: string; to_address: string; amount_raw: string; fee_raw: string; status: string; policy_decision: unknown }[];
      const fuel = fuels.find((candidate) => candidate.to_address === sender.address)!;
      assert.equal(fuel.status, 'confirmed');
      assert.equal(fuel.amount_raw, confirmed.fee_raw, 'the fuel is exactly the fee the send paid');
      assert.equal(confirmed.fee_raw, confirmed.fee_limit_raw, 'a sponsored send pays exactly its signed gas at its fixed price');
      assert.equal(await chainBalance('ethereum', sender.address, 'ETH'), senderEthBefore, "the sender's native balance ends where it began");
      assert.equal((await chainBalance('ethereum', RECIPIENT, 'USDC_ETH')) - recipientBefore, 10_000_000n);
      assert.equal(stationBefore - (await chainBalance('ethereum', station.address, 'ETH')), BigInt(fuel.amount_raw) + BigInt(fuel.fee_raw), 'the station paid the fee and its fuel send, nothing else');
      await eventually(async () => ((await ledger(sender.id, 'ETH')).balance === 0n ? true : undefined), "the sender's ledger: the fuel credited, the fee debited");
    });

    it('stops at the daily budget with a clear reason, and the estimate says so before anyone sends', async () => {
      const estimate = await call('POST', '/v1/transactions/estimate-fee', { wallet_id: sender.id, to_address: RECIPIENT, amount: '1', asset: 'USDC_ETH', sponsor: true });
      const cost = BigInt(estimate.body.fee_levels.medium.funding_options[1].fee_asset_amount_raw);
      // Today the station already paid one sponsorship: a budget of that plus one more fee's cost allows exactly one more.
      const [spent] = await app.deps.orm.em.fork().execute<{ spent: string }[]>('select sum(budget_charge)::text as spent from sponsorships where station_id = ?', [station.id]);
      const budget = BigInt(spent!.spent) + cost;
      const patched = await call('PATCH', `/v1/gas-stations/${station.id}`, { daily_sponsorship_budget: toDisplay(budget, 18) });
      assert.equal(patched.status, 200, patched.text);
      assert.equal(patched.body.daily_sponsorship_budget_raw, budget.toString());

      const first = await call('POST', '/v1/transactions', { wallet_id: sender.id, to_address: RECIPIENT, amount: '1', asset: 'USDC_ETH', sponsor: true });
      assert.equal(first.status, 201, first.text);
      const after = await call('POST', '/v1/transactions/estimate-fee', { wallet_id: sender.id, to_address: RECIPIENT, amount: '1', asset: 'USDC_ETH', sponsor: true });
      const option = after.body.fee_levels.medium.funding_options[1];
      assert.equal(option.available, false);
      assert.equal(option.unavailable_reason, 'daily_budget_exhausted');
      assert.match(option.status_label, /daily sponsorship budget/);
      const lockedBefore = await ledger(sender.id, 'USDC_ETH');
      const refused = await call('POST', '/v1/transactions', { wallet_id: sender.id, to_address: RECIPIENT, amount: '1', asset: 'USDC_ETH', sponsor: true });
      assert.equal(refused.status, 400);
      assert.equal(refused.body.error.code, 'sponsorship_unavailable');
      assert.equal(refused.body.error.param, 'sponsor');
      assert.equal(refused.body.error.details.reason, 'daily_budget_exhausted');
      assert.deepEqual(await ledger(sender.id, 'USDC_ETH'), lockedBefore, 'a refused sponsorship locks nothing');
      // Unsponsored, the same send is the wallet's own business (here: it has no ether for the fee).
      const unsponsored = await call('POST', '/v1/transactions', { wallet_id: sender.id, to_address: RECIPIENT, amount: '1', asset: 'USDC_ETH' });
      assert.equal(unsponsored.body.error.code, 'insufficient_funds');
      await mineUntil('ethereum', async () => ((await call('GET', `/v1/transactions/${first.body.id}`)).body.status === 'confirmed' ? true : undefined), 'the budgeted send confirmed');
    });

    it("falls back to the platform's sponsorship for an organization without a station, within its daily USD budget", async () => {
      await createStation('ethereum', '1', paymaster);
      const own = await createWallet('ethereum', beneficiary);
      await deposit('ethereum', own.address, 'USDC_ETH', '5', beneficiary.secret);
      await mine('ethereum', 2);
      await credited(own.id, 'USDC_ETH', 5_000_000n, beneficiary.secret);
      const body = { wallet_id: own.id, to_address: RECIPIENT, amount: '1', asset: 'USDC_ETH', sponsor: true };
      const estimate = await call('POST', '/v1/transactions/estimate-fee', body, beneficiary.secret);
      const [platform, customer] = estimate.body.fee_levels.medium.funding_options;
      assert.equal(customer.unavailable_reason, 'no_gas_station');
      assert.equal(platform.available, true, platform.status_label);
      assert.equal(platform.execution_control, 'platform');
      // The operator's budget: one and a half of this fee's cost in USD a day (ETH at the sandbox's 3000 USD), so one send fits and two do not.
      const usd = new Money(platform.fee_asset_amount).times(3000).times('1.5').toFixed(8);
      app.deps.config.HEDGE_PAYMASTER_DAILY_BUDGET_USD = usd;

      const sent = await call('POST', '/v1/transactions', body, beneficiary.secret);
      assert.equal(sent.status, 201, sent.text);
      const second = await call('POST', '/v1/transactions', body, beneficiary.secret);
      assert.equal(second.status, 400);
      assert.equal(second.body.error.details.reason, 'daily_budget_exhausted');
      assert.equal(second.body.error.details.funding_model, 'provider_sponsorship');
      await mineUntil('ethereum', async () => ((await call('GET', `/v1/transactions/${sent.body.id}`, undefined, beneficiary.secret)).body.status === 'confirmed' ? true : undefined), 'the platform-sponsored send confirmed');
      assert.equal(await chainBalance('ethereum', own.address, 'ETH'), 0n);
    });

    it("asks the node nothing while a paying station's row is locked: the organization's own station, the platform's shared one", async () => {
      // The budgets the tests above exhausted, raised again.
      app.deps.config.HEDGE_PAYMASTER_DAILY_BUDGET_USD = '1000';
      assert.equal((await call('PATCH', `/v1/gas-stations/${station.id}`, { daily_sponsorship_budget: '1' })).status, 200);
      const platformStation = ((await call('GET', '/v1/gas-stations', undefined, paymaster.secret)).body.data as { id: string }[])[0]!;
      const sponsored = await createWallet('ethereum', beneficiary);
      await deposit('ethereum', sponsored.address, 'USDC_ETH', '5', beneficiary.secret);
      await mine('ethereum', 2);
      await credited(sponsored.id, 'USDC_ETH', 5_000_000n, beneficiary.secret);

      const watch = watchNodeCallsUnderLock([station.id, platformStation.id]);
      let sends;
      try {
        sends = [
          await call('POST', '/v1/transactions', { wallet_id: sender.id, to_address: RECIPIENT, amount: '1', asset: 'USDC_ETH', sponsor: true }),
          await call('POST', '/v1/transactions', { wallet_id: sponsored.id, to_address: RECIPIENT, amount: '1', asset: 'USDC_ETH', sponsor: true }, beneficiary.secret),
        ];
      } finally {
        watch.restore();
      }
      sends.forEach((sent) => assert.equal(sent.status, 201, sent.text));
      assert.ok(watch.calls.length >= 4, `the node was asked (fee market, gas) during the sends: ${watch.calls.join(', ')}`);
      assert.deepEqual(watch.calls.filter((made) => made.locked), [], 'no node call waited under a station lock');
      for (const [sent, key] of [[sends[0]!, org.secret], [sends[1]!, beneficiary.secret]] as const) {
        await mineUntil('ethereum', async () => ((await call('GET', `/v1/transactions/${sent.body.id}`, undefined, key)).body.status === 'confirmed' ? true : undefined), 'the sponsored send confirmed');
      }
    });
  });

  describe('sponsor-broadcast of client-signed transactions', () => {
    for (const chain of ['tron', 'ethereum'] as const) {
      const token = chain === 'tron' ? assetById('USDT_TRX') : assetById('USDC_ETH');
      const native = chain === 'tron' ? 'TRX' : 'ETH';

      it(`${chain}: refuses a forged or mismatched transaction naming the field, broadcasting nothing; funds and broadcasts the true one`, async () => {
        const client = clientKey(chain);
        const recipient = clientKey(chain).address;
        await deposit(chain, client.address, token.id, '10');
        const station = chain === 'tron' ? await createStation('tron', '100') : (await call('GET', '/v1/gas-stations')).body.data.find((s: { chain: string }) => s.chain === 'ethereum');
        await mineUntil(chain, async () => ((await chainBalance(chain, client.address, token.id)) === 10n * 10n ** BigInt(token.decimals) ? true : undefined), 'the client funded');
        // The budget test left exactly nothing: a day's budget of the station's whole balance.
        if (chain === 'ethereum') await call('PATCH', `/v1/gas-stations/${station.id}`, { daily_sponsorship_budget: '1' });
        const stationBefore = await chainBalance(chain, station.address, native);

        const signed = await signClientTransfer(await provider(chain), chain, client, recipient, token.id, 4n * 10n ** BigInt(token.decimals));
        const claim = { from_address: client.address, to_address: recipient, asset: token.symbol, amount: '4', network: chain === 'tron' ? 'nile' : 'sepolia', signed_tx: signed.raw, tx_hash: signed.txid };
        const forged = signed.raw.slice(0, -6) + (signed.raw.endsWith('1b') || signed.raw.endsWith('1c') ? '00ff' : 'ff00') + signed.raw.slice(-2);
        const cases: [Record<string, unknown>, string][] = [
          [{ ...claim, amount: '5' }, 'amount'],
          [{ ...claim, to_address: clientKey(chain).address }, 'to_address'],
          [{ ...claim, from_address: clientKey(chain).address }, 'from_address'],
          [{ ...claim, network: 'mainnet' }, 'network'],
          [{ ...claim, asset: native }, 'asset'],
          [{ ...claim, tx_hash: signed.txid.replace(/.$/, (c) => (c === '0' ? '1' : '0')) }, 'tx_hash'],
          // A forged Ethereum signature recovers some other key (Ethereum names no sender); Tron's is refused as a signature.
          [{ ...claim, signed_tx: forged, tx_hash: undefined }, chain === 'ethereum' ? 'from_address' : 'signed_tx'],
        ];
        for (const [body, param] of cases) {
          const refused = await call('POST', '/v1/gas-stations/sponsor-broadcast', body);
          assert.equal(refused.status, 400, `${param}: ${refused.text}`);
          assert.equal(refused.body.error.param, param, refused.text);
        }
        // A fee cap far above the transfer's need (Ethereum: 5,000,000 gas; Tron: a 1,000 TRX fee_limit) is refused, never funded.
        const oversized = await signClientTransfer(await provider(chain), chain, client, recipient, token.id, 4n * 10n ** BigInt(token.decimals), chain === 'tron' ? { feeLimit: 1_000_000_000n } : { gasLimit: 5_000_000n });
        const aboveNeed = await call('POST', '/v1/gas-stations/sponsor-broadcast', { ...claim, signed_tx: oversized.raw, tx_hash: undefined });
        assert.equal(aboveNeed.status, 400, aboveNeed.text);
        assert.deepEqual([aboveNeed.body.error.code, aboveNeed.body.error.param], ['sponsored_fee_above_need', 'signed_tx']);
        if (chain === 'tron') assert.equal(aboveNeed.body.error.details.fee_limit, '1000000000');
        assert.equal((await (await provider(chain)).transactionStatus(signed.txid)).state, 'unknown', 'nothing was broadcast');
        assert.equal(await chainBalance(chain, client.address, native), 0n, 'nothing was funded');

        const accepted = await call('POST', '/v1/gas-stations/sponsor-broadcast', claim);
        assert.equal(accepted.status, 202, accepted.text);
        assert.equal(accepted.body.object, 'sponsor_broadcast');
        assert.equal(accepted.body.status, 'funding');
        assert.equal(accepted.body.broadcast_accepted, false);
        assert.equal(accepted.body.tx_hash, signed.txid);
        assert.equal(accepted.body.mode, 'customer_gas_station');
        assert.equal(accepted.body.gas_station_id, station.id);
        assert.equal(accepted.body.sponsor_amount_raw, signed.maxFee.toString());
        if (chain === 'tron') {
          assert.equal(accepted.body.sponsor_amount_sun, signed.maxFee.toString());
          assert.equal(accepted.body.sponsor_amount_trx, (Number(signed.maxFee) / 1e6).toString());
        } else {
          assert.equal(accepted.body.sponsor_amount_sun, null);
        }
        const again = await call('POST', '/v1/gas-stations/sponsor-broadcast', claim);
        assert.equal(again.body.id, accepted.body.id, 'the same signed transaction is sponsored once');

        const done = await mineUntil(
          chain,
          async () => {
            const read = (await call('GET', `/v1/gas-stations/sponsor-broadcasts/${accepted.body.id}`)).body;
            return read.status === 'confirmed' || read.status === 'failed' ? read : undefined;
          },
          'the sponsored broadcast confirmed',
        );
        assert.equal(done.status, 'confirmed', done.failure_message);
        assert.equal(done.broadcast_accepted, true);
        assert.equal(await chainBalance(chain, recipient, token.id), 4n * 10n ** BigInt(token.decimals));
        assert.equal(await chainBalance(chain, client.address, native), 0n, "the client's fee was exactly the fuel");
        const fuel = (await call('GET', `/v1/transactions/${done.sponsor_tx_id}`)).body;
        assert.equal(stationBefore - (await chainBalance(chain, station.address, native)), BigInt(fuel.amount_raw) + BigInt(fuel.fee_raw));
        assert.equal((await call('GET', `/v1/gas-stations/sponsor-broadcasts/${accepted.body.id}`, undefined, beneficiary.secret)).status, 404, "another organization's sponsorship is missing");
      });
    }
  });

  describe('sponsor-broadcast: the fuel is bounded by need, the nonce is the next one, the budgets count', () => {
    const MARGIN = 20n;
    const token = assetById('USDC_ETH');
    const units = (display: number) => BigInt(display) * 10n ** BigInt(token.decimals);
    let bounded: TestOrganization;
    let station: { id: string; address: string; wallet_id: string };

    before(async () => {
      bounded = await createTestOrganization('Sponsored within need');
      station = await createStation('ethereum', '1', bounded);
    });

    /** A fresh client holding 10 USDC_ETH (no ether), and the claim of its transfer of 4 to a recipient of its own. */
    async function fundedClient() {
      const client = clientKey('ethereum');
      const recipient = clientKey('ethereum').address;
      await deposit('ethereum', client.address, token.id, '10');
      await mineUntil('ethereum', async () => ((await chainBalance('ethereum', client.address, token.id)) === units(10) ? true : undefined), 'the client funded');
      const sign = async (signing: ClientSigning = {}) => signClientTransfer(await provider('ethereum'), 'ethereum', client, recipient, token.id, units(4), signing);
      const claim = (signed: { raw: string }) => ({ from_address: client.address, to_address: recipient, asset: token.symbol, amount: '4', network: 'sepolia', signed_tx: signed.raw });
      return { client, recipient, sign, claim };
    }
    const sponsorshipsOf = async (sender: string) =>
      Number((await app.deps.orm.em.fork().execute<{ count: string }[]>('select count(*)::text as count from sponsorships where sender_address = ?', [sender]))[0]!.count);
    /** The need of an ERC-20 transfer at the market's high level: its gas and the high level's max fee per gas. */
    async function need(client: ClientKey, recipient: string) {
      const node = await provider('ethereum');
      const market = await node.feeMarket();
      assert.equal(market.model, 'eip1559');
      const gas = await node.estimateGas!({ from: client.address, to: node.tokenAddress(token.id)!, data: erc20TransferData(recipient, units(4)) });
      return { gas, maxFeePerGas: 2n * market.baseFeePerGas + market.priorityFeePerGas.high };
    }
    const withMargin = (value: bigint) => (value * (100n + MARGIN)) / 100n;

    it("refuses the issue's example (5,000,000 gas at 1,000 gwei for a 1 wei transfer) naming signed_tx, funding nothing; a fee cap above need on either count is refused alike", async () => {
      const { client, recipient, sign, claim } = await fundedClient();
      const stationBefore = await chainBalance('ethereum', station.address, 'ETH');
      const ledgerBefore = await ledger(station.wallet_id, 'ETH', bounded.secret);
      const wei = await signClientTransfer(await provider('ethereum'), 'ethereum', client, recipient, 'ETH', 1n, { gasLimit: 5_000_000n, maxFeePerGas: 1_000n * 10n ** 9n });
      const example = await call('POST', '/v1/gas-stations/sponsor-broadcast', { ...claim(wei), asset: 'ETH', amount: '0.000000000000000001' }, bounded.secret);
      assert.equal(example.status, 400, example.text);
      assert.equal(example.body.error.param, 'signed_tx');
      assert.equal(example.body.error.code, 'sponsored_fee_above_need');
      assert.equal(example.body.error.details.gas_limit, '5000000');
      assert.equal(example.body.error.details.gas_needed, '21000', 'an ether transfer needs 21,000 gas');
      assert.equal(example.body.error.details.max_fee_per_gas, (1_000n * 10n ** 9n).toString());
      assert.equal(example.body.error.details.fee, (5_000_000n * 1_000n * 10n ** 9n).toString());
      assert.ok(BigInt(example.body.error.details.fee_allowed) < BigInt(example.body.error.details.fee));

      const needed = await need(client, recipient);
      const cases: [string, ClientSigning][] = [
        ['a gas limit above need plus the margin, at a fair price', { gasLimit: withMargin(needed.gas) + 1n }],
        ['a fair gas limit at a price above the high level plus the margin', { maxFeePerGas: withMargin(needed.maxFeePerGas) + 1n }],
        // Each within the margin, the fee 44% above need: the margin bounds the fee once.
        ['a gas limit and a price each at need plus the margin', { gasLimit: withMargin(needed.gas), maxFeePerGas: withMargin(needed.maxFeePerGas) }],
      ];
      for (const [what, signing] of cases) {
        const refused = await call('POST', '/v1/gas-stations/sponsor-broadcast', claim(await sign(signing)), bounded.secret);
        assert.equal(refused.status, 400, `${what}: ${refused.text}`);
        assert.equal(refused.body.error.code, 'sponsored_fee_above_need', what);
        assert.equal(refused.body.error.param, 'signed_tx', what);
        assert.equal(refused.body.error.details.gas_needed, needed.gas.toString(), what);
      }
      assert.equal(await sponsorshipsOf(client.address), 0, 'no sponsorship was recorded');
      assert.equal(await chainBalance('ethereum', client.address, 'ETH'), 0n, 'nothing was funded');
      assert.equal(await chainBalance('ethereum', station.address, 'ETH'), stationBefore, "the station's balance is unchanged");
      assert.deepEqual(await ledger(station.wallet_id, 'ETH', bounded.secret), ledgerBefore, "nothing of the station's ledger is locked");
    });

    it("funds a correctly sized transaction with at most its need; refuses a nonce that is not the sender's next (too high, too low) and a second one while the first waits", async () => {
      const { client, recipient, sign, claim } = await fundedClient();
      const tooHigh = await call('POST', '/v1/gas-stations/sponsor-broadcast', claim(await sign({ nonce: 1n })), bounded.secret);
      assert.equal(tooHigh.status, 400, tooHigh.text);
      assert.equal(tooHigh.body.error.code, 'nonce_mismatch');
      assert.equal(tooHigh.body.error.param, 'signed_tx');
      assert.deepEqual(tooHigh.body.error.details, { expected: '0', actual: '1' });

      const needed = await need(client, recipient);
      const signed = await sign();
      const accepted = await call('POST', '/v1/gas-stations/sponsor-broadcast', claim(signed), bounded.secret);
      assert.equal(accepted.status, 202, accepted.text);
      assert.equal(accepted.body.sponsor_amount_raw, signed.maxFee.toString(), 'the fuel is the signed fee cap');
      assert.ok(signed.maxFee <= withMargin(needed.gas * needed.maxFeePerGas), 'which is within the need plus the margin, once');

      // Its fuel not yet confirmed, the node's next nonce is still 0: another transaction of the sender waits for the first.
      const second = await call('POST', '/v1/gas-stations/sponsor-broadcast', claim(await sign({ nonce: 1n })), bounded.secret);
      assert.equal(second.status, 409, second.text);
      assert.equal(second.body.error.code, 'sponsorship_pending');
      assert.equal(second.body.error.details.sponsorship_id, accepted.body.id);

      const done = await mineUntil(
        'ethereum',
        async () => {
          const read = (await call('GET', `/v1/gas-stations/sponsor-broadcasts/${accepted.body.id}`, undefined, bounded.secret)).body;
          return read.status === 'confirmed' || read.status === 'failed' ? read : undefined;
        },
        'the sponsored broadcast confirmed',
      );
      assert.equal(done.status, 'confirmed', done.failure_message);
      const tooLow = await call('POST', '/v1/gas-stations/sponsor-broadcast', claim(await sign({ nonce: 0n, gasLimit: needed.gas + 1n })), bounded.secret);
      assert.equal(tooLow.status, 400, tooLow.text);
      assert.equal(tooLow.body.error.code, 'nonce_mismatch');
      assert.deepEqual(tooLow.body.error.details, { expected: '1', actual: '0' });
      assert.equal(await sponsorshipsOf(client.address), 1, 'only the accepted one was recorded');
    });

    it("stops at the station's default daily budget (it named none) before any fuel is sent", async () => {
      const read = (await call('GET', `/v1/gas-stations/${station.id}`, undefined, bounded.secret)).body;
      assert.equal(read.daily_sponsorship_budget, app.deps.config.GAS_STATION_DEFAULT_DAILY_BUDGET_ETHEREUM, 'the station named no budget: the default applies');
      const [spent] = await app.deps.orm.em.fork().execute<{ spent: string }[]>('select sum(budget_charge)::text as spent from sponsorships where station_id = ?', [station.id]);
      const { client, sign, claim } = await fundedClient();
      const original = app.deps.config.GAS_STATION_DEFAULT_DAILY_BUDGET_ETHEREUM;
      // The default lowered to what the station spent today: nothing is left of it.
      app.deps.config.GAS_STATION_DEFAULT_DAILY_BUDGET_ETHEREUM = toDisplay(spent!.spent, 18);
      try {
        assert.equal((await call('GET', `/v1/gas-stations/${station.id}`, undefined, bounded.secret)).body.daily_sponsorship_budget_raw, spent!.spent);
        const stationBefore = await ledger(station.wallet_id, 'ETH', bounded.secret);
        const refused = await call('POST', '/v1/gas-stations/sponsor-broadcast', claim(await sign()), bounded.secret);
        assert.equal(refused.status, 400, refused.text);
        assert.equal(refused.body.error.code, 'sponsorship_unavailable');
        assert.equal(refused.body.error.details.reason, 'daily_budget_exhausted');
        assert.equal(refused.body.error.details.funding_model, 'customer_gas_station');
        assert.equal(await sponsorshipsOf(client.address), 0);
        assert.deepEqual(await ledger(station.wallet_id, 'ETH', bounded.secret), stationBefore, 'nothing was sent or locked');
      } finally {
        app.deps.config.GAS_STATION_DEFAULT_DAILY_BUDGET_ETHEREUM = original;
      }
    });

    it("the platform's sponsorship of an organization without a station: bounded by need, capped by the default max gas price, counted against its daily USD budget", async () => {
      const unstationed = await createTestOrganization('Sponsored by the platform, within need');
      if (!(await call('GET', '/v1/gas-stations', undefined, paymaster.secret)).body.data.some((candidate: { chain: string }) => candidate.chain === 'ethereum')) {
        await createStation('ethereum', '1', paymaster);
      }
      const { client, recipient, sign, claim } = await fundedClient();
      const post = (signed: { raw: string }) => call('POST', '/v1/gas-stations/sponsor-broadcast', claim(signed), unstationed.secret);

      const oversized = await post(await sign({ gasLimit: 5_000_000n }));
      assert.equal(oversized.status, 400, oversized.text);
      assert.equal(oversized.body.error.code, 'sponsored_fee_above_need');

      const signed = await sign();
      const price = (await need(client, recipient)).maxFeePerGas;
      const config = app.deps.config;
      const original = { price: config.GAS_STATION_DEFAULT_MAX_GAS_PRICE_ETHEREUM, usd: config.HEDGE_PAYMASTER_DAILY_BUDGET_USD };
      try {
        // The platform's station named no max_gas_price: the default, lowered below the client's price, refuses it.
        config.GAS_STATION_DEFAULT_MAX_GAS_PRICE_ETHEREUM = toDisplay(price / 4n, 9);
        const ceiling = await post(signed);
        assert.equal(ceiling.status, 400, ceiling.text);
        assert.deepEqual([ceiling.body.error.details.reason, ceiling.body.error.details.funding_model], ['gas_price_above_ceiling', 'provider_sponsorship']);
        config.GAS_STATION_DEFAULT_MAX_GAS_PRICE_ETHEREUM = original.price;
        // A USD budget below this fee's cost (ETH at 3000 USD in the sandbox): refused before anything is sent.
        config.HEDGE_PAYMASTER_DAILY_BUDGET_USD = new Money(toDisplay(signed.maxFee, 18)).times(3000).toFixed(8);
        const budget = await post(signed);
        assert.equal(budget.status, 400, budget.text);
        assert.deepEqual([budget.body.error.details.reason, budget.body.error.details.funding_model], ['daily_budget_exhausted', 'provider_sponsorship']);
        assert.equal(await sponsorshipsOf(client.address), 0, 'nothing was recorded or sent');
        config.HEDGE_PAYMASTER_DAILY_BUDGET_USD = '1000';
        const accepted = await post(signed);
        assert.equal(accepted.status, 202, accepted.text);
        assert.equal(accepted.body.mode, 'provider_sponsorship');
        assert.equal(accepted.body.sponsor_amount_raw, signed.maxFee.toString(), 'the fuel is the checked fee cap, never more');
        const [charged] = await app.deps.orm.em.fork().execute<{ usd: string }[]>('select budget_charge_usd as usd from sponsorships where id = ?', [accepted.body.id]);
        assert.ok(new Money(charged!.usd).gt(0), "counted against the organization's USD budget when reserved, before the fuel is sent");
      } finally {
        Object.assign(config, { GAS_STATION_DEFAULT_MAX_GAS_PRICE_ETHEREUM: original.price, HEDGE_PAYMASTER_DAILY_BUDGET_USD: original.usd });
      }
    });
  });
});

const RECIPIENT = '0x000000000000000000000000000000000000dEaD';
