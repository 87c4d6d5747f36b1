import assert from 'node:assert/strict';
import { secp256k1 } from '@noble/curves/secp256k1';
import { hexToBytes, keccak256, parseTransaction, serializeTransaction, type Hex, type TransactionSerializableEIP1559 } from 'viem';
import { DEVNET_ETHEREUM_CHAIN_ID, DEVNET_TOKENS } from '../../src/chains/devnet/params';
import { TRON_TRANSFER_FEE_SUN } from '../../src/chains/devnet/rules/tron';
import type { RecentBlock } from '../../src/chains/provider';
import { signTransfer, type SigningKey, type TransferToSign } from '../../src/chains/transfers';
import { erc20TransferData } from '../../src/chains/transfers/ethereum';
import { checkSignedTransfer, requireFeeWithinNeed, sponsorableChainOf, type SignedTransferContext, type SponsorBroadcastClaim } from '../../src/gas-stations/signed-transfers';
import { secp256k1Address } from '../../src/keys/derivation';
import { DomainError } from '../../src/shared/errors';

/** A fresh random key of the chain (a test key, never kept). */
function freshKey(chain: 'ethereum' | 'tron'): SigningKey {
  const privateKey = secp256k1.utils.randomPrivateKey();
  const publicKey = secp256k1.getPublicKey(privateKey, true);
  return { privateKey, publicKey, address: secp256k1Address({ chain, testnet: true, format: chain === 'ethereum' ? 'eip55' : 'base58check' }, publicKey) };
}

const ethereumContext: SignedTransferContext = { environment: 'sandbox', tokens: DEVNET_TOKENS.ethereum, chainId: DEVNET_ETHEREUM_CHAIN_ID };
const tronContext: SignedTransferContext = { environment: 'sandbox', tokens: DEVNET_TOKENS.tron };
const recentBlock: RecentBlock = { height: 42, hash: `000000000000002a${'ab'.repeat(24)}`, time: new Date('2026-11-23T12:00:00Z') };
const EIP1559 = { model: 'eip1559', gasLimit: 100_000n, maxFeePerGas: 3_000_000_000n, maxPriorityFeePerGas: 1_000_000_000n } as const;

/** Signs `assetId` `amount` from `signer` to `to` as a client would. */
function signed(chain: 'ethereum' | 'tron', signer: SigningKey, to: string, assetId: string, amount: bigint, overrides: Partial<TransferToSign> = {}) {
  const tokenAddress = DEVNET_TOKENS[chain][assetId];
  const base = { chain, testnet: true, from: signer.address, to, assetId, amount, reference: 'sponsored', ...(tokenAddress ? { tokenAddress } : {}) };
  const transfer: TransferToSign =
    chain === 'ethereum'
      ? { ...base, fee: EIP1559, ethereum: { chainId: DEVNET_ETHEREUM_CHAIN_ID, nonce: 7n } }
      : { ...base, fee: { model: 'flat', fee: tokenAddress ? 15_000_000n : 0n }, recentBlock };
  return signTransfer({ ...transfer, ...overrides }, [signer]);
}

/** Ethereum: the gas limit and max fee per gas the transfer was signed with, and its call as eth_estimateGas takes it. */
function gasOf(chain: 'ethereum' | 'tron', sender: SigningKey, recipient: string, assetId: string, amount: bigint) {
  if (chain === 'tron') return null;
  const token = DEVNET_TOKENS.ethereum[assetId];
  const call = token ? { from: sender.address, to: token, data: erc20TransferData(recipient, amount) } : { from: sender.address, to: recipient, value: amount };
  return { limit: EIP1559.gasLimit, maxFeePerGas: EIP1559.maxFeePerGas, call };
}

const refused = (param: string, code?: string) => (error: unknown) => {
  assert.ok(error instanceof DomainError, String(error));
  assert.equal(error.kind, 'invalid');
  assert.equal(error.param, param, `${error.code}: ${error.message}`);
  if (code) assert.equal(error.code, code, error.message);
  return true;
};

describe('Sponsor broadcast: checkSignedTransfer against the client-signed transaction', () => {
  const cases = [
    { chain: 'ethereum', assetId: 'ETH', symbol: 'ETH', amount: 1_250_000_000_000_000n, display: '0.00125', network: 'sepolia', maxFee: EIP1559.gasLimit * EIP1559.maxFeePerGas, nonce: 7n },
    { chain: 'ethereum', assetId: 'USDC_ETH', symbol: 'USDC', amount: 12_340_000n, display: '12.34', network: 'sepolia', maxFee: EIP1559.gasLimit * EIP1559.maxFeePerGas, nonce: 7n },
    { chain: 'tron', assetId: 'TRX', symbol: 'TRX', amount: 3_500_000n, display: '3.5', network: 'nile', maxFee: TRON_TRANSFER_FEE_SUN, nonce: null },
    { chain: 'tron', assetId: 'USDT_TRX', symbol: 'USDT', amount: 99_000_001n, display: '99.000001', network: 'nile', maxFee: 15_000_000n, nonce: null },
  ] as const;

  for (const { chain, assetId, symbol, amount, display, network, maxFee, nonce } of cases) {
    describe(`${chain} ${assetId}`, () => {
      const context = chain === 'ethereum' ? ethereumContext : tronContext;
      const sender = freshKey(chain);
      const recipient = freshKey(chain).address;
      const transfer = signed(chain, sender, recipient, assetId, amount);
      const claim: SponsorBroadcastClaim = { from_address: sender.address, to_address: recipient, asset: symbol, amount: display, network, signed_tx: transfer.raw, tx_hash: transfer.txid };
      const check = (changes: Partial<SponsorBroadcastClaim>) => () => checkSignedTransfer({ ...claim, ...changes }, context);

      it('accepts the transaction the claim describes, by symbol or asset id, and reads its fee cap, nonce and hash', () => {
        const checked = checkSignedTransfer(claim, context);
        assert.deepEqual(
          { ...checked, asset: checked.asset.id },
          { chain, asset: assetId, from: sender.address, to: recipient, amount, txHash: transfer.txid, raw: transfer.raw, maxFee, nonce, gas: gasOf(chain, sender, recipient, assetId, amount) },
        );
        assert.equal(checkSignedTransfer({ ...claim, asset: assetId, tx_hash: undefined }, context).txHash, transfer.txid);
        const otherCase = chain === 'ethereum' ? { from_address: sender.address.toLowerCase(), to_address: recipient.toUpperCase().replace('0X', '0x'), tx_hash: transfer.txid.toUpperCase().replace('0X', '0x') } : { tx_hash: `0x${transfer.txid.toUpperCase()}` };
        assert.equal(checkSignedTransfer({ ...claim, ...otherCase }, context).from, sender.address, 'addresses and hashes compare in their canonical forms');
      });

      it('refuses a transaction signed by another key than from_address', () => {
        const other = freshKey(chain);
        const byOther = signed(chain, other, recipient, assetId, amount);
        assert.throws(check({ signed_tx: byOther.raw, tx_hash: byOther.txid }), refused('from_address', 'signed_transaction_mismatch'));
      });

      it('refuses a transaction paying another address, another amount or another asset than claimed', () => {
        assert.throws(check({ to_address: freshKey(chain).address }), refused('to_address', 'signed_transaction_mismatch'));
        assert.throws(check({ amount: chain === 'tron' && assetId === 'USDT_TRX' ? '99.000002' : `${display}1` }), refused('amount', 'signed_transaction_mismatch'));
        assert.throws(check({ asset: chain === 'ethereum' ? (assetId === 'ETH' ? 'USDC' : 'USDT_ETH') : assetId === 'TRX' ? 'USDT' : 'TRX' }), refused('asset', 'signed_transaction_mismatch'));
        assert.throws(check({ asset: 'SOL' }), refused('asset'), 'an asset of another chain');
        assert.throws(check({ amount: '1.1234567890123456789' }), refused('amount'), 'more decimals than the asset has');
        assert.throws(check({ to_address: 'not-an-address' }), refused('to_address'));
      });

      it('refuses a claim on another network, and a tx_hash that is not the transaction', () => {
        assert.throws(check({ network: 'mainnet' }), refused('network'));
        assert.throws(() => checkSignedTransfer(claim, { ...context, environment: 'live' }), refused('network'), 'a sandbox network for a live key');
        assert.throws(check({ tx_hash: chain === 'ethereum' ? `0x${'ab'.repeat(32)}` : 'ab'.repeat(32) }), refused('tx_hash', 'signed_transaction_mismatch'));
      });

      it('refuses bytes that are not a transaction, and truncated ones', () => {
        assert.throws(check({ signed_tx: 'hello' }), refused('signed_tx', 'invalid_signed_transaction'));
        assert.throws(check({ signed_tx: transfer.raw.slice(0, -10) }), refused('signed_tx', 'invalid_signed_transaction'));
      });
    });
  }

  describe('tampering and forging', () => {
    it('ethereum: a high-s signature is refused as signed_tx; changed terms recover another signer (from_address)', () => {
      const sender = freshKey('ethereum');
      const recipient = freshKey('ethereum').address;
      const transfer = signed('ethereum', sender, recipient, 'ETH', 10n ** 15n);
      const { unsigned, signature: { r, s, yParity } } = split(transfer.raw);
      const claim: SponsorBroadcastClaim = { from_address: sender.address, to_address: recipient, asset: 'ETH', amount: '0.001', network: 'sepolia', signed_tx: transfer.raw };

      const highS = serializeTransaction(unsigned, { r, s: `0x${(secp256k1.CURVE.n - BigInt(s)).toString(16).padStart(64, '0')}`, yParity: 1 - yParity });
      assert.throws(() => checkSignedTransfer({ ...claim, signed_tx: highS }, ethereumContext), refused('signed_tx', 'invalid_signed_transaction'));
      const zeroR = serializeTransaction(unsigned, { r: `0x${'0'.repeat(64)}`, s, yParity });
      assert.throws(() => checkSignedTransfer({ ...claim, signed_tx: zeroR }, ethereumContext), refused('signed_tx', 'invalid_signed_transaction'));

      // Ethereum carries no sender: a signature over other terms recovers some other key.
      const moreValue = serializeTransaction({ ...unsigned, value: 10n ** 18n }, { r, s, yParity });
      assert.throws(() => checkSignedTransfer({ ...claim, signed_tx: moreValue, amount: '1' }, ethereumContext), refused('from_address', 'signed_transaction_mismatch'));
      const forged = signed('ethereum', freshKey('ethereum'), recipient, 'ETH', 10n ** 15n);
      const withForgedSignature = serializeTransaction(unsigned, split(forged.raw).signature);
      assert.throws(() => checkSignedTransfer({ ...claim, signed_tx: withForgedSignature }, ethereumContext), refused('from_address', 'signed_transaction_mismatch'));
    });

    it('tron: changed bytes or a signature by another key over the owner’s transaction are refused as signed_tx', () => {
      const sender = freshKey('tron');
      const recipient = freshKey('tron').address;
      const transfer = signed('tron', sender, recipient, 'TRX', 5_000_000n);
      const claim: SponsorBroadcastClaim = { from_address: sender.address, to_address: recipient, asset: 'TRX', amount: '5', network: 'nile', signed_tx: transfer.raw };
      // The signature is the last field: tag 0x12, length 0x41, 65 bytes.
      const signatureAt = transfer.raw.length - 2 * 65;
      assert.equal(transfer.raw.slice(signatureAt - 4, signatureAt), '1241');
      const rawData = transfer.raw.slice(0, signatureAt - 4);

      const forged = signed('tron', freshKey('tron'), recipient, 'TRX', 5_000_000n);
      const forgedSignature = forged.raw.slice(-2 * 65);
      assert.throws(() => checkSignedTransfer({ ...claim, signed_tx: `${rawData}1241${forgedSignature}` }, tronContext), refused('signed_tx', 'invalid_signed_transaction'));

      // The amount 5,000,000 sun is the varint c0 96 b1 02; one more sun is c1 96 b1 02.
      assert.equal(rawData.split('c096b102').length, 2, 'the amount appears once');
      const tampered = transfer.raw.replace('c096b102', 'c196b102');
      assert.throws(() => checkSignedTransfer({ ...claim, signed_tx: tampered, amount: '5.000001' }, tronContext), refused('signed_tx', 'invalid_signed_transaction'));
      const flipped = `${transfer.raw.slice(0, signatureAt)}${(parseInt(transfer.raw.slice(signatureAt, signatureAt + 2), 16) ^ 1).toString(16).padStart(2, '0')}${transfer.raw.slice(signatureAt + 2)}`;
      assert.throws(() => checkSignedTransfer({ ...claim, signed_tx: flipped }, tronContext), refused('signed_tx', 'invalid_signed_transaction'));
      assert.equal(checkSignedTransfer({ ...claim, signed_tx: `0x${transfer.raw}` }, tronContext).raw, transfer.raw, 'hex with 0x is the same transaction');
    });
  });

  describe('chains and chain ids', () => {
    const sender = freshKey('ethereum');
    const recipient = freshKey('ethereum').address;

    it('refuses an Ethereum transaction signed for another chain id, naming the one expected', () => {
      const mainnet = signed('ethereum', sender, recipient, 'ETH', 10n ** 15n, { ethereum: { chainId: 1, nonce: 0n } });
      const claim: SponsorBroadcastClaim = { from_address: sender.address, to_address: recipient, asset: 'ETH', amount: '0.001', network: 'sepolia', signed_tx: mainnet.raw };
      assert.throws(
        () => checkSignedTransfer(claim, ethereumContext),
        (error) => refused('signed_tx', 'invalid_signed_transaction')(error) && (error as DomainError).message.includes(String(DEVNET_ETHEREUM_CHAIN_ID)) && (error as DomainError).details.reason === 'wrong_chain',
      );
    });

    it('refuses a transaction that moves two things (ether along with a token transfer) or nothing', () => {
      const token = signed('ethereum', sender, recipient, 'USDC_ETH', 1_000_000n);
      const { unsigned } = split(token.raw);
      const resign = (tx: TransactionSerializableEIP1559) => {
        const signature = secp256k1.sign(hexToBytes(keccak256(serializeTransaction(tx))), sender.privateKey, { lowS: true });
        const word = (value: bigint): Hex => `0x${value.toString(16).padStart(64, '0')}`;
        return serializeTransaction(tx, { r: word(signature.r), s: word(signature.s), yParity: signature.recovery });
      };
      const claim: SponsorBroadcastClaim = { from_address: sender.address, to_address: recipient, asset: 'USDC', amount: '1', network: 'sepolia', signed_tx: resign({ ...unsigned, value: 1n }) };
      assert.throws(() => checkSignedTransfer(claim, ethereumContext), refused('signed_tx', 'invalid_signed_transaction'), 'ether and a token');
      const nothing = resign({ ...unsigned, to: recipient as Hex, data: undefined, value: 0n });
      assert.throws(() => checkSignedTransfer({ ...claim, asset: 'ETH', signed_tx: nothing }, ethereumContext), refused('signed_tx', 'invalid_signed_transaction'), 'nothing');
    });

    it('refuses Bitcoin, Solana and unknown sender addresses as unsupported, naming the chains that are', () => {
      for (const from of ['tb1qw508d6qejxtdg4y5r3zarvary0c5xw7kxpjzsx', '4sGjMW1sUnHzSxGspuhpqLDx6wiyjNtZAMdL4VZHirAn', 'nobody']) {
        assert.throws(
          () => sponsorableChainOf({ from_address: from }),
          (error) => refused('from_address', 'sponsorship_unsupported')(error) && /ethereum and tron/.test((error as DomainError).message),
        );
      }
      assert.equal(sponsorableChainOf({ from_address: sender.address }), 'ethereum');
      assert.equal(sponsorableChainOf({ from_address: freshKey('tron').address }), 'tron');
    });

    it('refuses a token that has no contract on the network, and a malformed from_address', () => {
      const transfer = signed('ethereum', sender, recipient, 'USDC_ETH', 1_000_000n);
      const claim: SponsorBroadcastClaim = { from_address: sender.address, to_address: recipient, asset: 'USDC', amount: '1', network: 'sepolia', signed_tx: transfer.raw };
      assert.throws(() => checkSignedTransfer(claim, { ...ethereumContext, tokens: {} }), refused('asset'));
      assert.throws(() => checkSignedTransfer({ ...claim, from_address: '0x1234' }, ethereumContext), refused('from_address'));
    });
  });
});

describe('Sponsor broadcast: requireFeeWithinNeed bounds the fuel by need plus the margin', () => {
  const sender = freshKey('ethereum');
  const recipient = freshKey('ethereum').address;
  const ethereum = checkSignedTransfer(
    { from_address: sender.address, to_address: recipient, asset: 'ETH', amount: '1', network: 'sepolia', signed_tx: signed('ethereum', sender, recipient, 'ETH', 10n ** 18n).raw },
    ethereumContext,
  );
  // Signed with 100,000 gas at 3 gwei, a fee cap of 300,000 gwei: at a 20% margin, a need of 100,000 gas at 2.5 gwei allows exactly that.
  const need = (gas: bigint, maxFeePerGas: bigint) => ({ model: 'eip1559', gasLimit: gas.toString(), maxFeePerGas: maxFeePerGas.toString(), maxPriorityFeePerGas: '0' }) as const;
  const aboveNeed = (details: Record<string, string | number>) => (error: unknown) =>
    refused('signed_tx', 'sponsored_fee_above_need')(error) && (assert.deepEqual((error as DomainError).details, details), true);

  it('Ethereum: accepts a fee cap (gas limit x max fee per gas) within need plus the margin, to the unit', () => {
    assert.equal(ethereum.maxFee, 300_000_000_000_000n);
    requireFeeWithinNeed(ethereum, need(100_000n, 2_500_000_000n), 20);
    requireFeeWithinNeed(ethereum, need(100_000n, 3_000_000_000n), 0);
  });

  // What every Ethereum refusal here says of the transaction signed: 100,000 gas at 3 gwei.
  const signedFigures = { gas_limit: '100000', max_fee_per_gas: '3000000000', fee: '300000000000000' };

  it('Ethereum: applies the margin once to the fee, not to the gas and the price each (need x 1.2, never x 1.44)', () => {
    // 83,334 gas at 2.5 gwei: the gas limit and the price are each within 20% of it, the fee cap is 44% above it.
    const figures = { gas_needed: '83334', gas_limit_allowed: '100000', max_fee_per_gas_needed: '2500000000', fee_needed: '208335000000000', fee_allowed: '250002000000000' };
    assert.throws(() => requireFeeWithinNeed(ethereum, need(83_334n, 2_500_000_000n), 20), aboveNeed({ ...signedFigures, ...figures, margin_percent: 20 }));
  });

  it('Ethereum: refuses a fee cap one wei-per-gas above, and a gas limit one gas above, with the figures', () => {
    const priceAbove = { gas_needed: '100000', gas_limit_allowed: '100000', max_fee_per_gas_needed: '2999999999', fee_needed: '299999999900000', fee_allowed: '299999999900000' };
    assert.throws(() => requireFeeWithinNeed(ethereum, need(100_000n, 2_999_999_999n), 0), aboveNeed({ ...signedFigures, ...priceAbove, margin_percent: 0 }));
    // The fee is well within (3.6 gwei needed), the gas limit is not.
    const gasAbove = { gas_needed: '83333', gas_limit_allowed: '99999', max_fee_per_gas_needed: '3600000000', fee_needed: '299998800000000', fee_allowed: '359998560000000' };
    assert.throws(() => requireFeeWithinNeed(ethereum, need(83_333n, 3_600_000_000n), 20), aboveNeed({ ...signedFigures, ...gasAbove, margin_percent: 20 }));
  });

  it("Tron: bounds the fee_limit by the flat market's high fee plus the margin", () => {
    const tronSender = freshKey('tron');
    const tronRecipient = freshKey('tron').address;
    const tron = checkSignedTransfer(
      { from_address: tronSender.address, to_address: tronRecipient, asset: 'USDT', amount: '1', network: 'nile', signed_tx: signed('tron', tronSender, tronRecipient, 'USDT_TRX', 1_000_000n).raw },
      tronContext,
    );
    assert.equal(tron.maxFee, 15_000_000n);
    requireFeeWithinNeed(tron, { model: 'flat', fee: '12500000' }, 20);
    assert.throws(
      () => requireFeeWithinNeed(tron, { model: 'flat', fee: '12499999' }, 20),
      aboveNeed({ fee_limit: '15000000', fee_needed: '12499999', fee_limit_allowed: '14999998', margin_percent: 20 }),
    );
  });
});

/** The terms and the signature of a signed EIP-1559 transaction, to serialize again with changes. */
function split(raw: string) {
  const tx = parseTransaction(raw as Hex) as TransactionSerializableEIP1559 & { r: Hex; s: Hex; yParity: number };
  const { type, chainId, nonce, to, value, data, gas, maxFeePerGas, maxPriorityFeePerGas } = tx;
  const unsigned: TransactionSerializableEIP1559 = { type, chainId, nonce, to, value, data, gas, maxFeePerGas, maxPriorityFeePerGas };
  return { unsigned, signature: { r: tx.r, s: tx.s, yParity: tx.yParity } };
}
