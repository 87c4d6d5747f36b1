import assert from 'node:assert/strict';
import { randomInt, randomUUID } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import ERC20PresetFixedSupply from '@openzeppelin/contracts/build/contracts/ERC20PresetFixedSupply.json';
import { hex } from '@scure/base';
import { mnemonicToSeedSync } from '@scure/bip39';
import * as btc from '@scure/btc-signer';
import { createWalletClient, erc20Abi, getAddress, http, parseEther, parseUnits, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import type { ChainId } from '../../src/catalogue/service';
import { fundFromFaucet } from '../../src/chains/devnet/faucet';
import { mineDevnetBlocks } from '../../src/chains/devnet/block-production';
import { DEVNET_ETHEREUM_CHAIN_ID } from '../../src/chains/devnet/params';
import { DevnetProvider } from '../../src/chains/devnet/provider';
import { TRON_TRANSFER_FEE_SUN } from '../../src/chains/devnet/rules/tron';
import type { ChainProvider, FeeMarket, RecentBlock, TransactionStatus } from '../../src/chains/provider';
import { BitcoinRpcProvider } from '../../src/chains/providers/bitcoin-rpc';
import { EvmRpcProvider } from '../../src/chains/providers/evm-rpc';
import { signTransfer, type FeeTerms, type TransferToSign } from '../../src/chains/transfers';
import { RBF_SEQUENCE } from '../../src/chains/transfers/bitcoin';
import { deriveKey, TESTNET_COIN_TYPE, type BitcoinAddressFormat, type DerivedKey } from '../../src/keys/derivation';
import { DomainError } from '../../src/shared/errors';
import { ANVIL_CHAIN_ID, startAnvil, type Anvil } from '../support/anvil';
import { COINBASE_MATURITY, coinbaseOutput, payFromMiner, startBtcdOrSkip, type Btcd } from '../support/btcd';
import { testOrm } from '../support/environment';
import { eventually } from '../support/eventually';

/** A public test mnemonic; every run takes a fresh account of it, so runs never share addresses. */
const SEED = mnemonicToSeedSync('abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about');
const ACCOUNT = randomInt(1, 2 ** 30);
const FORMATS = { ethereum: 'eip55', tron: 'base58check', solana: 'base58' } as const;

function key(chain: ChainId, index: number, format?: BitcoinAddressFormat): DerivedKey {
  return deriveKey(SEED, { chain, testnet: true, coinType: TESTNET_COIN_TYPE, format: format ?? (chain === 'bitcoin' ? 'p2wpkh' : FORMATS[chain]), account: ACCOUNT, index });
}

const em = async () => (await testOrm()).em.fork() as EntityManager;
const mined = (status: TransactionStatus) => {
  assert.equal(status.state, 'mined', JSON.stringify(status, (_, value: unknown) => (typeof value === 'bigint' ? value.toString() : value)));
  return status as Extract<TransactionStatus, { state: 'mined' }>;
};
const validationError = (param: string) => (error: unknown) => error instanceof DomainError && error.code === 'validation_failed' && error.param === param;

/** EIP-1559 terms at the medium tip: twice the base fee on top, as wallets bid. */
function eip1559Terms(market: FeeMarket, gasLimit: bigint): FeeTerms {
  assert.equal(market.model, 'eip1559');
  const tip = market.priorityFeePerGas.medium;
  return { model: 'eip1559', gasLimit, maxFeePerGas: 2n * market.baseFeePerGas + tip, maxPriorityFeePerGas: tip };
}

describe('Transfers: signTransfer on every chain', () => {
  describe('building', () => {
    const recentBlock: RecentBlock = { height: 7, hash: `00000000000000077b3b${'cd'.repeat(22)}`, time: new Date('2026-11-23T12:00:00Z') };
    const account = (chain: 'ethereum' | 'tron' | 'solana'): TransferToSign => {
      const base = { chain, testnet: true, from: key(chain, 0).address, to: key(chain, 1).address, amount: 1_000n, reference: 'tx_same' };
      if (chain === 'ethereum') return { ...base, assetId: 'ETH', fee: { model: 'eip1559', gasLimit: 21_000n, maxFeePerGas: 3n, maxPriorityFeePerGas: 1n }, ethereum: { chainId: 1, nonce: 4n } };
      if (chain === 'tron') return { ...base, assetId: 'TRX', fee: { model: 'flat', fee: TRON_TRANSFER_FEE_SUN }, recentBlock };
      return { ...base, assetId: 'SOL', fee: { model: 'flat', fee: 5_000n }, recentBlock: { ...recentBlock, hash: '4sGjMW1sUnHzSxGspuhpqLDx6wiyjNtZAMdL4VZHirAn' } };
    };

    it('gives the same bytes for the same transfer, on every chain (a retried build is the same transaction)', () => {
      for (const chain of ['ethereum', 'tron', 'solana'] as const) {
        const transfer = account(chain);
        assert.deepEqual(signTransfer(transfer, [key(chain, 0)]), signTransfer({ ...transfer }, [key(chain, 0)]), chain);
      }
      const spender = key('bitcoin', 0, 'p2tr');
      const transfer: TransferToSign = {
        chain: 'bitcoin',
        testnet: true,
        from: spender.address,
        to: key('bitcoin', 1).address,
        assetId: 'BTC',
        amount: 50_000n,
        fee: { model: 'per_byte', satPerVbyte: 2n },
        bitcoin: { inputs: [{ txid: 'ab'.repeat(32), vout: 1, amount: 80_000n, address: spender.address, key: 0 }], change: { address: spender.address, amount: 29_000n } },
        reference: 'tx_same',
      };
      const signed = signTransfer(transfer, [spender]);
      assert.deepEqual(signTransfer(transfer, [spender]), signed, 'taproot signatures use fixed auxiliary randomness');
      const decoded = btc.Transaction.fromRaw(hex.decode(signed.raw));
      assert.equal(decoded.id, signed.txid);
      assert.equal(decoded.getInput(0).sequence, RBF_SEQUENCE, 'replaceable (BIP-125)');
      assert.deepEqual([decoded.getOutput(0).amount, decoded.getOutput(1).amount], [50_000n, 29_000n]);
    });

    it('makes transfers with identical terms but another reference distinct where the chain has no nonce', () => {
      for (const chain of ['tron', 'solana'] as const) {
        const first = signTransfer(account(chain), [key(chain, 0)]);
        const second = signTransfer({ ...account(chain), reference: 'tx_other' }, [key(chain, 0)]);
        assert.notEqual(first.txid, second.txid, chain);
      }
    });

    it('refuses what cannot be built as given', () => {
      const ether = account('ethereum');
      assert.throws(() => signTransfer(ether, [key('ethereum', 2)]), validationError('from'), 'a key that is not the sender');
      assert.throws(() => signTransfer({ ...ether, assetId: 'SOL' }, [key('ethereum', 0)]), validationError('asset_id'));
      assert.throws(() => signTransfer({ ...ether, assetId: 'USDC_ETH' }, [key('ethereum', 0)]), validationError('token_address'));
      assert.throws(() => signTransfer({ ...ether, to: key('tron', 1).address }, [key('ethereum', 0)]), validationError('to'));
      assert.throws(() => signTransfer({ ...ether, fee: { model: 'flat', fee: 1n } }, [key('ethereum', 0)]), validationError('fee'));
      assert.throws(() => signTransfer({ ...account('tron'), recentBlock: undefined }, [key('tron', 0)]), validationError('recent_block'));
      assert.throws(() => signTransfer({ ...account('solana'), fee: { model: 'flat', fee: 4_999n } }, [key('solana', 0)]), validationError('fee'));
      const owner = key('bitcoin', 0);
      const bitcoin: TransferToSign = {
        chain: 'bitcoin',
        testnet: true,
        from: owner.address,
        to: btc.p2sh(btc.p2wpkh(owner.publicKey), btc.TEST_NETWORK).address!,
        assetId: 'BTC',
        amount: 10_000n,
        fee: { model: 'per_byte', satPerVbyte: 1n },
        bitcoin: { inputs: [{ txid: 'cd'.repeat(32), vout: 0, amount: 9_000n, address: owner.address, key: 0 }] },
        reference: 'tx_btc',
      };
      assert.throws(() => signTransfer(bitcoin, [owner]), validationError('amount'), 'outputs above the inputs');
      assert.throws(() => signTransfer({ ...bitcoin, amount: 8_000n }, [key('bitcoin', 3)]), validationError('inputs'), 'a key that does not own the input');
      assert.equal(signTransfer({ ...bitcoin, amount: 8_000n }, [owner]).txid.length, 64, 'pays a p2sh address');
      assert.throws(() => signTransfer({ ...bitcoin, testnet: false }, [owner]), validationError('to'), 'a testnet address on mainnet');
    });
  });

  describe('on the devnet', () => {
    const provider = async (chain: ChainId) => new DevnetProvider(chain, await testOrm());
    const mine = async (chain: ChainId) => mineDevnetBlocks(await em(), chain, 1);
    async function fund(chain: ChainId, to: string, amounts: Record<string, bigint>) {
      for (const [assetId, amount] of Object.entries(amounts)) await fundFromFaucet(await em(), chain, { to, assetId, amount });
      await mine(chain);
    }

    it('bitcoin: spends p2wpkh, p2tr and p2pkh outputs, with change; the recipient gets the amount, the fee is inputs minus outputs', async () => {
      const bitcoin = await provider('bitcoin');
      const owners = (['p2wpkh', 'p2tr', 'p2pkh'] as const).map((format, index) => key('bitcoin', 10 + index, format));
      const funded = [];
      for (const [index, owner] of owners.entries()) {
        const amount = 100_000n * BigInt(index + 1);
        const { txid, position } = await fundFromFaucet(await em(), 'bitcoin', { to: owner.address, assetId: 'BTC', amount });
        funded.push({ txid, vout: Number(position.slice('out:'.length)), amount, address: owner.address, key: index });
      }
      await mine('bitcoin');
      const recipient = key('bitcoin', 20, 'p2tr').address;
      const change = key('bitcoin', 21).address;
      const fee = 1_500n;
      const transfer: TransferToSign = {
        chain: 'bitcoin',
        testnet: true,
        from: owners[0]!.address,
        to: recipient,
        assetId: 'BTC',
        amount: 450_000n,
        fee: { model: 'per_byte', satPerVbyte: 3n },
        bitcoin: { inputs: funded, change: { address: change, amount: 600_000n - 450_000n - fee } },
        reference: randomUUID(),
      };
      const signed = signTransfer(transfer, owners);
      assert.deepEqual(await bitcoin.broadcast(signed.raw), { txid: signed.txid });
      await mine('bitcoin');
      assert.equal(mined(await bitcoin.transactionStatus(signed.txid)).fee, fee);
      assert.equal(await bitcoin.balance(recipient, 'BTC'), 450_000n);
      assert.equal(await bitcoin.balance(change, 'BTC'), 148_500n);
      for (const owner of owners) assert.equal(await bitcoin.balance(owner.address, 'BTC'), 0n);
    });

    it('ethereum: ether and an ERC-20 from a derived key; balances move by the amount and the exact fee; nonces before and after', async () => {
      const ethereum = await provider('ethereum');
      const sender = key('ethereum', 0);
      const recipient = key('ethereum', 1).address;
      await fund('ethereum', sender.address, { ETH: parseEther('1'), USDC_ETH: 5_000_000n });
      assert.deepEqual(await ethereum.nonces!(sender.address), { confirmed: 0n, pending: 0n });

      const base = { chain: 'ethereum' as const, testnet: true, from: sender.address, to: recipient, reference: randomUUID() };
      const ether = signTransfer({ ...base, assetId: 'ETH', amount: parseEther('0.25'), fee: eip1559Terms(await ethereum.feeMarket(), 21_000n), ethereum: { chainId: DEVNET_ETHEREUM_CHAIN_ID, nonce: 0n } }, [sender]);
      await ethereum.broadcast(ether.raw);
      const token = signTransfer(
        {
          ...base,
          assetId: 'USDC_ETH',
          amount: 1_250_000n,
          tokenAddress: ethereum.tokenAddress('USDC_ETH'),
          fee: eip1559Terms(await ethereum.feeMarket(), 100_000n),
          ethereum: { chainId: DEVNET_ETHEREUM_CHAIN_ID, nonce: 1n },
        },
        [sender],
      );
      assert.deepEqual(await ethereum.broadcast(token.raw), { txid: token.txid });
      assert.deepEqual(await ethereum.nonces!(sender.address), { confirmed: 0n, pending: 2n });
      await mine('ethereum');
      assert.deepEqual(await ethereum.nonces!(sender.address), { confirmed: 2n, pending: 2n });

      let fees = 0n;
      for (const { txid } of [ether, token]) {
        const [answer] = await ethereum.relay([{ method: 'eth_getTransactionReceipt', params: [txid] }]);
        const receipt = (answer as { result: { gasUsed: Hex; effectiveGasPrice: Hex } }).result;
        const fee = mined(await ethereum.transactionStatus(txid)).fee!;
        assert.equal(fee, BigInt(receipt.gasUsed) * BigInt(receipt.effectiveGasPrice));
        fees += fee;
      }
      assert.equal(await ethereum.balance(recipient, 'ETH'), parseEther('0.25'));
      assert.equal(await ethereum.balance(recipient, 'USDC_ETH'), 1_250_000n);
      assert.equal(await ethereum.balance(sender.address, 'ETH'), parseEther('1') - parseEther('0.25') - fees);
      assert.equal(await ethereum.balance(sender.address, 'USDC_ETH'), 3_750_000n);
    });

    const ACCOUNT_CHAINS = {
      tron: { native: 'TRX', token: 'USDT_TRX', nativeFee: TRON_TRANSFER_FEE_SUN, tokenFee: 1_000_000n, funding: 100_000_000n },
      solana: { native: 'SOL', token: 'USDC_SOL', nativeFee: 10_000n, tokenFee: 5_000n, funding: 1_000_000_000n },
    } as const;
    for (const [chain, terms] of Object.entries(ACCOUNT_CHAINS) as [keyof typeof ACCOUNT_CHAINS, (typeof ACCOUNT_CHAINS)[keyof typeof ACCOUNT_CHAINS]][]) {
      it(`${chain}: native and token transfers, and two with identical terms but another reference; balances move by the amounts and the exact fees`, async () => {
        const devnet = await provider(chain);
        const sender = key(chain, 0);
        const recipient = key(chain, 1).address;
        await fund(chain, sender.address, { [terms.native]: terms.funding, [terms.token]: 9_000_000n });
        const recentBlock = await devnet.recentBlock();
        const base = { chain, testnet: true, from: sender.address, to: recipient, recentBlock };
        const native = (reference: string) => signTransfer({ ...base, assetId: terms.native, amount: 3_000_000n, fee: { model: 'flat', fee: terms.nativeFee }, reference }, [sender]);
        const sent = [
          native('tx_a'),
          native('tx_b'),
          signTransfer(
            { ...base, assetId: terms.token, amount: 2_500_000n, tokenAddress: devnet.tokenAddress(terms.token), fee: { model: 'flat', fee: terms.tokenFee }, reference: 'tx_a' },
            [sender],
          ),
        ];
        assert.equal(new Set(sent.map((signed) => signed.txid)).size, 3);
        for (const signed of sent) assert.deepEqual(await devnet.broadcast(signed.raw), { txid: signed.txid });
        // Rebuilt with the same terms and reference: the same transaction, which the chain does not take twice.
        assert.deepEqual(native('tx_a'), sent[0]);
        assert.deepEqual(await devnet.broadcast(native('tx_a').raw), { txid: sent[0]!.txid });
        await mine(chain);

        const fees = [];
        for (const signed of sent) fees.push(mined(await devnet.transactionStatus(signed.txid)).fee);
        assert.deepEqual(fees, [terms.nativeFee, terms.nativeFee, terms.tokenFee]);
        assert.equal(await devnet.balance(recipient, terms.native), 6_000_000n);
        assert.equal(await devnet.balance(recipient, terms.token), 2_500_000n);
        assert.equal(await devnet.balance(sender.address, terms.native), terms.funding - 6_000_000n - 2n * terms.nativeFee - terms.tokenFee);
        assert.equal(await devnet.balance(sender.address, terms.token), 6_500_000n);
      });
    }
  });

  describe('on anvil (a real Ethereum node)', () => {
    /** anvil's first dev account key (its default mnemonic): public test material, funded with 10000 ETH. */
    const ANVIL_KEY: Hex = '0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80';
    let anvil: Anvil;
    let token: Hex;
    let ethereum: ChainProvider;
    const funder = privateKeyToAccount(ANVIL_KEY);
    const wallet = () =>
      createWalletClient({ account: funder, transport: http(anvil.url), chain: { id: ANVIL_CHAIN_ID, name: 'anvil', nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 }, rpcUrls: { default: { http: [anvil.url] } } } });
    const receipt = (hash: string) =>
      eventually(async () => ((await anvil.call('eth_getTransactionReceipt', [hash])) as { gasUsed: Hex; effectiveGasPrice: Hex; contractAddress: Hex | null } | null) ?? undefined, `the receipt of ${hash}`);

    before(async () => {
      anvil = await startAnvil();
      const deployed = await wallet().deployContract({
        abi: ERC20PresetFixedSupply.abi,
        bytecode: ERC20PresetFixedSupply.bytecode as Hex,
        args: ['USD Coin', 'USDC', parseUnits('1000000', 6), funder.address],
      });
      token = getAddress((await receipt(deployed)).contractAddress!);
      ethereum = new EvmRpcProvider('ethereum', anvil.url, { timeoutMs: 5_000, maxResponseBytes: 10_485_760 }, { USDC_ETH: token });
    });
    after(async () => anvil?.stop());

    it('sends ETH and an ERC-20 from a derived key: the node takes both, the fee is gas used x effective price, nonces move', async () => {
      const sender = key('ethereum', 30);
      const recipient = key('ethereum', 31).address;
      await receipt(await wallet().sendTransaction({ to: sender.address as Hex, value: parseEther('2') }));
      await receipt(await wallet().writeContract({ address: token, abi: erc20Abi, functionName: 'transfer', args: [sender.address as Hex, 100_000_000n] }));
      assert.deepEqual(await ethereum.nonces!(sender.address), { confirmed: 0n, pending: 0n });

      // Held in the mempool until mined by hand, so that pending and confirmed nonces differ.
      await anvil.call('evm_setAutomine', [false]);
      const base = { chain: 'ethereum' as const, testnet: true, from: sender.address, to: recipient, reference: randomUUID() };
      const ether = signTransfer({ ...base, assetId: 'ETH', amount: parseEther('0.5'), fee: eip1559Terms(await ethereum.feeMarket(), 21_000n), ethereum: { chainId: ANVIL_CHAIN_ID, nonce: 0n } }, [sender]);
      assert.deepEqual(await ethereum.broadcast(ether.raw), { txid: ether.txid });
      const usdc = signTransfer(
        { ...base, assetId: 'USDC_ETH', amount: 40_500_000n, tokenAddress: ethereum.tokenAddress('USDC_ETH'), fee: eip1559Terms(await ethereum.feeMarket(), 100_000n), ethereum: { chainId: ANVIL_CHAIN_ID, nonce: 1n } },
        [sender],
      );
      assert.deepEqual(await ethereum.broadcast(usdc.raw), { txid: usdc.txid });
      assert.deepEqual(await ethereum.nonces!(sender.address), { confirmed: 0n, pending: 2n });
      assert.deepEqual(await ethereum.transactionStatus(ether.txid), { state: 'pending' });
      await anvil.call('anvil_mine', ['0x1']);
      await anvil.call('evm_setAutomine', [true]);
      assert.deepEqual(await ethereum.nonces!(sender.address), { confirmed: 2n, pending: 2n });

      let fees = 0n;
      for (const { txid } of [ether, usdc]) {
        const { gasUsed, effectiveGasPrice } = await receipt(txid);
        const status = mined(await ethereum.transactionStatus(txid));
        assert.ok(status.succeeded);
        assert.equal(status.fee, BigInt(gasUsed) * BigInt(effectiveGasPrice));
        fees += status.fee!;
      }
      assert.equal(await ethereum.balance(recipient, 'ETH'), parseEther('0.5'));
      assert.equal(await ethereum.balance(recipient, 'USDC_ETH'), 40_500_000n);
      assert.equal(await ethereum.balance(sender.address, 'ETH'), parseEther('1.5') - fees);
      assert.equal(await ethereum.balance(sender.address, 'USDC_ETH'), 59_500_000n);
    });
  });

  describe('on btcd (a real Bitcoin node, regtest)', function () {
    let btcd: Btcd;
    let bitcoin: BitcoinRpcProvider;
    let coinbaseHeight = 1;

    before(async function () {
      btcd = await startBtcdOrSkip(this);
      await btcd.generate(COINBASE_MATURITY + 10);
      bitcoin = new BitcoinRpcProvider(btcd.url, { timeoutMs: 10_000, maxResponseBytes: 10_485_760 }, 'sandbox');
    });
    after(async () => btcd?.stop());

    /** Pays `amount` from a fresh miner coinbase to `owner`, mined: the output as a spend of key `index`. */
    async function paid(owner: DerivedKey, amount: bigint, index: number) {
      const payment = payFromMiner(await coinbaseOutput(btcd, coinbaseHeight++), owner.address, amount);
      await btcd.call('sendrawtransaction', [hex.encode(payment.extract())]);
      return { txid: payment.id, vout: 0, amount, address: owner.address, key: index };
    }

    /** Broadcasts, mines one block, checks the fee the node reports, and returns the transaction's outputs as the block shows them. */
    async function sendAndMine(transfer: TransferToSign, keys: DerivedKey[]) {
      const signed = signTransfer(transfer, keys);
      assert.deepEqual(await bitcoin.broadcast(signed.raw), { txid: signed.txid });
      assert.deepEqual(await bitcoin.transactionStatus(signed.txid), { state: 'pending' });
      const [blockHash] = await btcd.generate(1);
      const status = mined(await bitcoin.transactionStatus(signed.txid));
      assert.equal(status.blockHash, blockHash);
      const inputs = transfer.bitcoin!.inputs.reduce((sum, input) => sum + input.amount, 0n);
      assert.equal(status.fee, inputs - transfer.amount - (transfer.bitcoin!.change?.amount ?? 0n), 'the fee is inputs minus outputs');
      const block = (await bitcoin.block(status.blockHeight))!;
      return block.transfers.filter((transfer) => transfer.txid === signed.txid).map(({ position, to, amount }) => ({ position, to, amount }));
    }

    it('spends a p2wpkh output to a p2wsh address with change: the node takes it, the outputs are exact', async () => {
      const owner = key('bitcoin', 40, 'p2wpkh');
      const input = await paid(owner, 1_000_000n, 0);
      await btcd.generate(1);
      const recipient = btc.p2wsh(btc.p2pk(key('bitcoin', 41).publicKey), btc.TEST_NETWORK).address!;
      const change = key('bitcoin', 42).address;
      const outputs = await sendAndMine(
        {
          chain: 'bitcoin',
          testnet: true,
          from: owner.address,
          to: recipient,
          assetId: 'BTC',
          amount: 700_000n,
          fee: { model: 'per_byte', satPerVbyte: 5n },
          bitcoin: { inputs: [input], change: { address: change, amount: 299_000n } },
          reference: randomUUID(),
        },
        [owner],
      );
      assert.deepEqual(outputs, [
        { position: 'out:0', to: recipient, amount: 700_000n },
        { position: 'out:1', to: change, amount: 299_000n },
      ]);
    });

    it('spends p2tr (key path) and p2pkh outputs together to a p2tr address: the node takes it, the recipient gets the amount', async () => {
      const taproot = key('bitcoin', 50, 'p2tr');
      const legacy = key('bitcoin', 51, 'p2pkh');
      const inputs = [await paid(taproot, 400_000n, 0), await paid(legacy, 300_000n, 1)];
      await btcd.generate(1);
      const recipient = key('bitcoin', 52, 'p2tr').address;
      const outputs = await sendAndMine(
        { chain: 'bitcoin', testnet: true, from: taproot.address, to: recipient, assetId: 'BTC', amount: 695_000n, fee: { model: 'per_byte', satPerVbyte: 10n }, bitcoin: { inputs }, reference: randomUUID() },
        [taproot, legacy],
      );
      assert.deepEqual(outputs, [{ position: 'out:0', to: recipient, amount: 695_000n }]);
    });
  });
});
