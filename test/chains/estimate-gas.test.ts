import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { secp256k1 } from '@noble/curves/secp256k1';
import { erc20Abi, parseEther, type Hex } from 'viem';
import { fundFromFaucet } from '../../src/chains/devnet/faucet';
import { mineDevnetBlocks } from '../../src/chains/devnet/block-production';
import { DEVNET_ETHEREUM_CHAIN_ID } from '../../src/chains/devnet/params';
import { TOKEN_TRANSFER_EXECUTION_GAS } from '../../src/chains/devnet/rules/ethereum';
import { DevnetProvider } from '../../src/chains/devnet/provider';
import { NodeUnavailableError, TransactionRejectedError, type ChainProvider, type TransactionStatus } from '../../src/chains/provider';
import { EvmRpcProvider } from '../../src/chains/providers/evm-rpc';
import { signTransfer, type SigningKey } from '../../src/chains/transfers';
import { erc20TransferData } from '../../src/chains/transfers/ethereum';
import { checkSignedTransfer, requireGasCovered, type SignedTransferContext } from '../../src/gas-stations/signed-transfers';
import { DomainError } from '../../src/shared/errors';
import { secp256k1Address } from '../../src/keys/derivation';
import { ANVIL_CHAIN_ID, anvilFunder, anvilReceipt, deployAnvilToken, startAnvil, type Anvil } from '../support/anvil';
import { testOrm } from '../support/environment';
import { freeLoopbackPort } from '../support/ports';
import { missingTool } from '../support/missing-tool';

/** A fresh random key (a test key, never kept). */
function freshKey(chain: 'ethereum' | 'tron' = 'ethereum'): SigningKey {
  const privateKey = secp256k1.utils.randomPrivateKey();
  const publicKey = secp256k1.getPublicKey(privateKey, true);
  return { privateKey, publicKey, address: secp256k1Address({ chain, testnet: true, format: chain === 'ethereum' ? 'eip55' : 'base58check' }, publicKey) };
}

const mined = (status: TransactionStatus) => {
  assert.equal(status.state, 'mined');
  return status as Extract<TransactionStatus, { state: 'mined' }>;
};

/** An ERC-20 transfer signed with the gas limit `gas` and max fee = max priority fee = `price`: it pays `price` per gas whatever the base fee below it. */
function signTokenTransfer(provider: ChainProvider, input: { sender: SigningKey; to: string; amount: bigint; gas: bigint; price: bigint; chainId: number; nonce: bigint }) {
  return signTransfer(
    {
      chain: 'ethereum',
      testnet: true,
      from: input.sender.address,
      to: input.to,
      assetId: 'USDC_ETH',
      amount: input.amount,
      tokenAddress: provider.tokenAddress('USDC_ETH'),
      fee: { model: 'eip1559', gasLimit: input.gas, maxFeePerGas: input.price, maxPriorityFeePerGas: input.price },
      ethereum: { chainId: input.chainId, nonce: input.nonce },
      reference: randomUUID(),
    },
    [input.sender],
  );
}

const gasLimitTooLow = (error: unknown) => error instanceof DomainError && error.param === 'signed_tx' && error.details.reason === 'gas_limit_too_low';

describe('ChainProvider.estimateGas (Ethereum)', () => {
  describe('on the devnet: exactly the gas the devnet charges', () => {
    const em = async () => (await testOrm()).em.fork() as EntityManager;

    it('an ERC-20 transfer signed with the estimate as its gas limit is charged the estimate x its price, which is the transaction’s max fee', async () => {
      const ethereum = new DevnetProvider('ethereum', await testOrm());
      const sender = freshKey();
      const recipient = freshKey().address;
      await fundFromFaucet(await em(), 'ethereum', { to: sender.address, assetId: 'ETH', amount: parseEther('1') });
      await fundFromFaucet(await em(), 'ethereum', { to: sender.address, assetId: 'USDC_ETH', amount: 50_000_000n });
      await mineDevnetBlocks(await em(), 'ethereum', 1);

      const amount = 12_345_678n;
      const gas = await ethereum.estimateGas!({ from: sender.address, to: ethereum.tokenAddress('USDC_ETH')!, data: erc20TransferData(recipient, amount) });
      assert.ok(gas > TOKEN_TRANSFER_EXECUTION_GAS + 21_000n, `a token transfer costs its execution and its calldata, not ${gas}`);
      const market = await ethereum.feeMarket();
      assert.equal(market.model, 'eip1559');
      const price = 2n * market.baseFeePerGas + market.priorityFeePerGas.medium;
      const { pending: nonce } = await ethereum.nonces!(sender.address);
      const terms = { sender, to: recipient, amount, price, chainId: DEVNET_ETHEREUM_CHAIN_ID, nonce };

      const context: SignedTransferContext = { environment: 'sandbox', tokens: { USDC_ETH: ethereum.tokenAddress('USDC_ETH')! }, chainId: DEVNET_ETHEREUM_CHAIN_ID };
      const check = (raw: string) => checkSignedTransfer({ from_address: sender.address, to_address: recipient, asset: 'USDC', amount: '12.345678', network: 'sepolia', signed_tx: raw }, context);
      const short = signTokenTransfer(ethereum, { ...terms, gas: gas - 1n }).raw;
      await assert.rejects(requireGasCovered(check(short), ethereum), gasLimitTooLow, 'refused before any fee is funded');
      await assert.rejects(ethereum.broadcast(short), (error) => error instanceof TransactionRejectedError && error.reason === 'gas_limit_too_low', 'as the devnet refuses it');
      const transfer = signTokenTransfer(ethereum, { ...terms, gas });
      const checked = check(transfer.raw);
      await requireGasCovered(checked, ethereum);
      assert.equal(checked.maxFee, gas * price);

      const before = await ethereum.balance(sender.address, 'ETH');
      assert.deepEqual(await ethereum.broadcast(transfer.raw), { txid: transfer.txid });
      await mineDevnetBlocks(await em(), 'ethereum', 1);
      const status = mined(await ethereum.transactionStatus(transfer.txid));
      assert.equal(status.fee, gas * price, 'charged exactly the estimate at the price');
      assert.equal(status.fee, checked.maxFee, 'a sponsor funding the max fee funds the fee exactly');
      assert.equal(await ethereum.balance(sender.address, 'ETH'), before - gas * price);
      assert.equal(await ethereum.balance(recipient, 'USDC_ETH'), amount);
    });

    it('a plain value transfer is the intrinsic 21000; a call the devnet token does not answer is refused; Tron has no gas to ask for', async () => {
      const ethereum = new DevnetProvider('ethereum', await testOrm());
      const from = freshKey().address;
      assert.equal(await ethereum.estimateGas!({ from, to: freshKey().address, value: 1n }), 21_000n);
      assert.equal(await ethereum.estimateGas!({ from, to: freshKey().address, data: '0x0001' }), 21_000n + 4n + 16n, 'calldata is priced per zero and non-zero byte');
      await assert.rejects(
        ethereum.estimateGas!({ from, to: ethereum.tokenAddress('USDC_ETH')!, data: '0x095ea7b3' }),
        (error) => error instanceof TransactionRejectedError && error.reason === 'malformed',
      );
      const tron = new DevnetProvider('tron', await testOrm());
      assert.equal(tron.estimateGas, undefined, 'Ethereum only');
      const tronSender = freshKey('tron');
      const tronRecipient = freshKey('tron').address;
      const trx = signTransfer(
        { chain: 'tron', testnet: true, from: tronSender.address, to: tronRecipient, assetId: 'TRX', amount: 1_000_000n, fee: { model: 'flat', fee: 0n }, recentBlock: await tron.recentBlock(), reference: randomUUID() },
        [tronSender],
      );
      const checked = checkSignedTransfer({ from_address: tronSender.address, to_address: tronRecipient, asset: 'TRX', amount: '1', network: 'nile', signed_tx: trx.raw }, { environment: 'sandbox', tokens: {} });
      assert.equal(checked.gas, null);
      await requireGasCovered(checked, tron);
    });
  });

  describe('on anvil (a real Ethereum node)', () => {
    /** anvil's first dev account key (its default mnemonic): public test material, funded with 10000 ETH. */
    let anvil: Anvil;
    let token: Hex;
    let ethereum: EvmRpcProvider;
    const wallet = () => anvilFunder(anvil);
    const receipt = (hash: string) => anvilReceipt(anvil, hash);

    before(async function () {
      try {
        anvil = await startAnvil();
      } catch (error) {
        missingTool(this, `anvil could not start: ${(error as Error).message}`);
      }
      token = await deployAnvilToken(anvil);
      ethereum = new EvmRpcProvider('ethereum', anvil.url, { timeoutMs: 5_000, maxResponseBytes: 10_485_760 }, { USDC_ETH: token });
    });
    after(async () => anvil?.stop());

    it('eth_estimateGas covers the gas an ERC-20 transfer uses, to a new holder and to an existing one: a sender without ether funded gas x price pays the fee from it', async () => {
      const context: SignedTransferContext = { environment: 'sandbox', tokens: { USDC_ETH: token }, chainId: ANVIL_CHAIN_ID };
      const sender = freshKey();
      const holder = freshKey().address;
      await receipt(await wallet().writeContract({ address: token, abi: erc20Abi, functionName: 'transfer', args: [sender.address as Hex, 100_000_000n] }));
      await receipt(await wallet().writeContract({ address: token, abi: erc20Abi, functionName: 'transfer', args: [holder as Hex, 1n] }));

      const market = await ethereum.feeMarket();
      assert.equal(market.model, 'eip1559');
      const price = 2n * market.baseFeePerGas + market.priorityFeePerGas.medium;
      let nonce = 0n;
      let leftover = 0n;
      for (const to of [freshKey().address, holder]) {
        const amount = 1_000_000n;
        assert.equal(await ethereum.balance(sender.address, 'ETH'), leftover, 'estimated as sponsored: the sender holds no ether but what a fee left');
        const gas = await ethereum.estimateGas({ from: sender.address, to: token, data: erc20TransferData(to, amount) });
        const terms = { sender, to, amount, price, chainId: ANVIL_CHAIN_ID, nonce: nonce++ };
        const check = (raw: string) => checkSignedTransfer({ from_address: sender.address, to_address: to, asset: 'USDC', amount: '1', network: 'sepolia', signed_tx: raw }, context);
        await assert.rejects(requireGasCovered(check(signTokenTransfer(ethereum, { ...terms, gas: gas - 1n }).raw), ethereum), gasLimitTooLow);
        const transfer = signTokenTransfer(ethereum, { ...terms, gas });
        const checked = check(transfer.raw);
        await requireGasCovered(checked, ethereum);

        // What a gas station sends: the transaction's max fee, which its price (max fee = tip) makes the fee per gas.
        await receipt(await wallet().sendTransaction({ to: sender.address as Hex, value: checked.maxFee }));
        await ethereum.broadcast(transfer.raw);
        const { status, gasUsed } = await receipt(transfer.txid);
        assert.equal(status, '0x1', 'the transfer succeeded with the estimate as its gas limit');
        assert.ok(gas >= BigInt(gasUsed), `estimate ${gas} below the gas used ${BigInt(gasUsed)}`);
        leftover += (gas - BigInt(gasUsed)) * price;
        assert.equal(await ethereum.balance(sender.address, 'ETH'), leftover, 'the fee was gas used x price, from the funding alone');
      }
    });

    it('a call that would revert is refused with the node’s reason; a node that does not answer is unavailable', async () => {
      const sender = freshKey();
      await assert.rejects(
        ethereum.estimateGas({ from: sender.address, to: token, data: erc20TransferData(freshKey().address, 1n) }),
        (error) => error instanceof TransactionRejectedError && /exceeds balance/.test(error.message) && !error.message.includes(anvil.url),
      );
      const recipient = freshKey().address;
      const unfunded = signTokenTransfer(ethereum, { sender, to: recipient, amount: 1n, gas: 100_000n, price: 10n ** 9n, chainId: ANVIL_CHAIN_ID, nonce: 0n });
      const checked = checkSignedTransfer(
        { from_address: sender.address, to_address: recipient, asset: 'USDC_ETH', amount: '0.000001', network: 'sepolia', signed_tx: unfunded.raw },
        { environment: 'sandbox', tokens: { USDC_ETH: token }, chainId: ANVIL_CHAIN_ID },
      );
      await assert.rejects(requireGasCovered(checked, ethereum), (error) => error instanceof DomainError && error.param === 'signed_tx' && /would fail.*exceeds balance/.test(error.message));
      const closed = new EvmRpcProvider('ethereum', `http://127.0.0.1:${await freeLoopbackPort()}`, { timeoutMs: 2_000, maxResponseBytes: 10_485_760 });
      await assert.rejects(closed.estimateGas({ from: sender.address, to: freshKey().address, value: 1n }), NodeUnavailableError);
    });
  });
});
