import assert from 'node:assert/strict';
import { encodeFunctionData, erc20Abi, getAddress, hashTypedData, hexToBytes, parseAbi, serializeTransaction, toRlp, numberToHex, type TypedDataDefinition } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { base58, base64 } from '@scure/base';
import { mnemonicToSeedSync } from '@scure/bip39';
import { readMessage, single } from '../../src/chains/protobuf';
import { signTransfer } from '../../src/chains/transfers';
import { LAMPORTS_PER_SIGNATURE, TOKEN_PROGRAM, associatedTokenAccount } from '../../src/chains/transfers/solana';
import { decodeSignedPayload, readTypedData } from '../../src/custody/signed-payloads';
import { deriveKey, TESTNET_COIN_TYPE } from '../../src/keys/derivation';
import { DomainError } from '../../src/shared/errors';
import { PERMIT_TYPES } from '../support/eip712';

const account = privateKeyToAccount(generatePrivateKey());
const recipient = getAddress('0x70997970c51812dc3a010c7d01b50e8d4c79c8c8');
const token = getAddress('0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48');
const delegate = getAddress('0x63c0c19a282a1b52b07dd5a65b58948a07dae32b');
const fees = { chainId: 1, nonce: 3, gas: 60_000n, maxFeePerGas: 2n, maxPriorityFeePerGas: 1n } as const;

const evm = (serialized: `0x${string}`) => decodeSignedPayload('ethereum', 'keccak256', hexToBytes(serialized));
const typed = (definition: TypedDataDefinition) => readTypedData(JSON.stringify(definition, (_key, value: unknown) => (typeof value === 'bigint' ? value.toString() : value)));

/** Each format's payloads as viem writes them, decoded to what they authorize. */
describe('Signed payload decoders', () => {
  describe('EVM transactions (keccak256 of the serialized unsigned transaction)', () => {
    it('reads a legacy and an EIP-2930 native transfer: recipient and ETH amount', () => {
      const legacy = serializeTransaction({ chainId: 1, nonce: 0, gasPrice: 1n, gas: 21_000n, to: recipient.toLowerCase() as `0x${string}`, value: 10n ** 18n });
      assert.deepEqual(evm(legacy), { kind: 'evm_transaction', destination: recipient, asset: { native: true }, amount: 10n ** 18n, chainId: 1n });
      const accessList = serializeTransaction({ chainId: 1, nonce: 0, gasPrice: 1n, gas: 21_000n, to: recipient, value: 5n, accessList: [] , type: 'eip2930' });
      assert.deepEqual(evm(accessList), { kind: 'evm_transaction', destination: recipient, asset: { native: true }, amount: 5n, chainId: 1n });
    });

    it('reads an EIP-1559 ERC-20 transfer, transferFrom and approve: the token, the real recipient or spender, the amount', () => {
      const call = (data: `0x${string}`) => evm(serializeTransaction({ ...fees, to: token, data }));
      assert.deepEqual(call(encodeFunctionData({ abi: erc20Abi, functionName: 'transfer', args: [recipient, 250n] })), {
        kind: 'evm_transaction', destination: recipient, asset: { contract: token }, amount: 250n, chainId: 1n,
      });
      assert.deepEqual(call(encodeFunctionData({ abi: erc20Abi, functionName: 'transferFrom', args: [account.address, recipient, 7n] })), {
        kind: 'evm_transaction', destination: recipient, asset: { contract: token }, amount: 7n, chainId: 1n,
      });
      assert.deepEqual(call(encodeFunctionData({ abi: erc20Abi, functionName: 'approve', args: [delegate, 2n ** 256n - 1n] })), {
        kind: 'evm_transaction', destination: delegate, spender: delegate, asset: { contract: token }, amount: 2n ** 256n - 1n, chainId: 1n,
      });
      const operator = call(encodeFunctionData({ abi: parseAbi(['function setApprovalForAll(address operator, bool approved)']), functionName: 'setApprovalForAll', args: [delegate, true] }));
      assert.deepEqual(operator, { kind: 'evm_transaction', destination: delegate, spender: delegate, chainId: 1n });
    });

    it('reads any other contract call as a call to its contract of unknown value, and a creation as its value alone', () => {
      const swap = evm(serializeTransaction({ ...fees, to: token, data: '0x12345678', value: 9n }));
      assert.deepEqual(swap, { kind: 'evm_transaction', destination: token, chainId: 1n });
      const creation = evm(serializeTransaction({ ...fees, data: '0x6000', value: 4n }));
      assert.deepEqual(creation, { kind: 'evm_transaction', asset: { native: true }, amount: 4n, chainId: 1n });
    });

    it('reads an EIP-7702 transaction as a delegation: the delegate is destination and spender, of no bounded amount', async () => {
      const authorization = await account.signAuthorization({ chainId: 1, contractAddress: delegate, nonce: 0 });
      const delegation = evm(serializeTransaction({ ...fees, to: account.address, authorizationList: [authorization] }));
      assert.deepEqual(delegation, { kind: 'evm_transaction', destination: delegate, spender: delegate, chainId: 1n });

      const other = await account.signAuthorization({ chainId: 1, contractAddress: recipient, nonce: 1 });
      assert.throws(() => evm(serializeTransaction({ ...fees, to: account.address, authorizationList: [authorization, other] })), (error: unknown) => error instanceof DomainError);
    });

    it('reads an EIP-7702 authorization (0x05 || rlp([chain_id, address, nonce])) as a delegation', () => {
      const payload = `0x05${toRlp([numberToHex(1), delegate, '0x']).slice(2)}` as const;
      assert.deepEqual(evm(payload), { kind: 'eip7702_authorization', destination: delegate, spender: delegate, chainId: 1n });
    });

    it('decodes nothing from bytes that are no transaction, nor from a transaction given under another hash', () => {
      assert.deepEqual(evm(`0x${'aa'.repeat(32)}`), { kind: 'unknown' });
      assert.deepEqual(evm('0x1901'), { kind: 'unknown' });
      const transfer = serializeTransaction({ ...fees, to: recipient, value: 1n });
      assert.deepEqual(decodeSignedPayload('ethereum', 'sha256', hexToBytes(transfer)), { kind: 'unknown' });
      assert.deepEqual(decodeSignedPayload('tron', 'keccak256', hexToBytes(transfer)), { kind: 'unknown' });
    });
  });

  describe('EIP-712 typed data', () => {
    const permit = {
      domain: { name: 'USD Coin', version: '2', chainId: 1, verifyingContract: token },
      types: PERMIT_TYPES,
      primaryType: 'Permit',
      message: { owner: account.address, spender: delegate, value: 1_000_000n, nonce: 0n, deadline: 2n ** 255n },
    } as const;

    it("signs viem's digest of an EIP-2612 permit and reads its spender, token and value", () => {
      const { digest, decoded } = typed(permit);
      assert.deepEqual(digest, hexToBytes(hashTypedData(permit)));
      assert.deepEqual(decoded, { kind: 'eip712_typed_data', destination: delegate, spender: delegate, asset: { contract: token }, amount: 1_000_000n, chainId: 1n });
    });

    it('reads Permit2 PermitSingle and PermitTransferFrom: spender, token, amount', () => {
      const domain = { name: 'Permit2', chainId: 1, verifyingContract: '0x000000000022D473030F116dDEE9F6B43aC78BA3' } as const;
      const single = typed({
        domain,
        primaryType: 'PermitSingle',
        types: {
          PermitSingle: [{ name: 'details', type: 'PermitDetails' }, { name: 'spender', type: 'address' }, { name: 'sigDeadline', type: 'uint256' }],
          PermitDetails: [{ name: 'token', type: 'address' }, { name: 'amount', type: 'uint160' }, { name: 'expiration', type: 'uint48' }, { name: 'nonce', type: 'uint48' }],
        },
        message: { details: { token, amount: 5n, expiration: 1n, nonce: 0n }, spender: delegate, sigDeadline: 1n },
      });
      assert.deepEqual(single.decoded, { kind: 'eip712_typed_data', destination: delegate, spender: delegate, asset: { contract: token }, amount: 5n, chainId: 1n });
      const transfer = typed({
        domain,
        primaryType: 'PermitTransferFrom',
        types: {
          PermitTransferFrom: [{ name: 'permitted', type: 'TokenPermissions' }, { name: 'spender', type: 'address' }, { name: 'nonce', type: 'uint256' }, { name: 'deadline', type: 'uint256' }],
          TokenPermissions: [{ name: 'token', type: 'address' }, { name: 'amount', type: 'uint256' }],
        },
        message: { permitted: { token, amount: 9n }, spender: recipient, nonce: 0n, deadline: 1n },
      });
      assert.deepEqual(transfer.decoded, { kind: 'eip712_typed_data', destination: recipient, spender: recipient, asset: { contract: token }, amount: 9n, chainId: 1n });
    });

    it('reads other typed data as naming no destination, and refuses what is not typed data with 400', () => {
      const mail = typed({
        domain: { name: 'Ether Mail', version: '1', chainId: 1 },
        primaryType: 'Mail',
        types: { Mail: [{ name: 'contents', type: 'string' }] },
        message: { contents: 'Hello' },
      });
      assert.deepEqual(mail.decoded, { kind: 'eip712_typed_data', chainId: 1n });
      const refused = (text: string) => assert.throws(() => readTypedData(text), (error: unknown) => error instanceof DomainError && error.param === 'payload');
      refused('not json');
      refused(JSON.stringify({ primaryType: 'Mail', message: {} }));
      refused(JSON.stringify({ ...permit, message: { ...permit.message, value: 1e30, nonce: 0, deadline: 1 } }));
      refused(JSON.stringify({ ...permit, message: { ...permit.message, spender: 'nobody', value: '1', nonce: '0', deadline: '1' } }));
      // JSON nested past any stack is walked, not recursed into (a field the types do not declare is not hashed).
      const deep = `${'['.repeat(50_000)}1e30${']'.repeat(50_000)}`;
      refused(`{"types":{"Mail":[{"name":"contents","type":"string"}]},"primaryType":"Mail","domain":{},"message":{"contents":"Hi","extra":${deep}}}`);
    });
  });

  describe('Solana messages (signed as they are)', () => {
    const seed = mnemonicToSeedSync('abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about');
    const key = (index: number) => deriveKey(seed, { chain: 'solana', testnet: true, coinType: TESTNET_COIN_TYPE, format: 'base58', account: 0, index });
    const [payer, payee] = [key(0), key(1)];
    const mint = 'EPjFWdd5AufqSSqeM2qA1xQuy1ZbVjxFGYvvNu2GTYkA';
    const recentBlock = { height: 1, hash: base58.encode(new Uint8Array(32).fill(7)), time: new Date('2026-11-23T12:00:00Z') };
    /** The message of a transaction the platform writes: what follows the signature count and the signature. */
    const message = (amount: bigint, tokenAddress?: string, fee = LAMPORTS_PER_SIGNATURE) =>
      base64.decode(
        signTransfer(
          { chain: 'solana', testnet: true, from: payer.address, to: payee.address, assetId: tokenAddress ? 'USDC_SOL' : 'SOL', amount, tokenAddress, fee: { model: 'flat', fee }, recentBlock, reference: 'r' },
          [payer],
        ).raw,
      ).subarray(65);
    const solana = (bytes: Uint8Array) => decodeSignedPayload('solana', 'not_applicable', bytes);

    it('reads a System transfer (with Compute Budget instructions beside it): recipient and lamports', () => {
      assert.deepEqual(solana(message(42n)), { kind: 'solana_message', destination: payee.address, asset: { native: true }, amount: 42n });
      assert.deepEqual(solana(message(42n, undefined, 9000n)), { kind: 'solana_message', destination: payee.address, asset: { native: true }, amount: 42n });
    });

    it("reads an SPL TransferChecked after its account creation: the recipient wallet (not its token account), the mint, the amount", () => {
      assert.deepEqual(solana(message(1_500_000n, mint)), { kind: 'solana_message', destination: payee.address, asset: { contract: mint }, amount: 1_500_000n });
    });

    /** A legacy message of one instruction, written by hand (every count under 128: one compact-u16 byte). */
    const legacy = (keys: Uint8Array[], program: number, accounts: number[], data: number[]) =>
      Uint8Array.from([1, 0, 1, keys.length, ...keys.flatMap((k) => [...k]), ...new Uint8Array(32), 1, program, accounts.length, ...accounts, data.length, ...data]);

    it('reads an SPL Approve: the delegate is spender and destination', () => {
      const delegate = key(2).address;
      const source = base58.decode(associatedTokenAccount(payer.address, mint));
      // Approve { amount: 1_000_000 } over [source, delegate, owner].
      const approve = legacy([payer.publicKey, source, base58.decode(delegate), TOKEN_PROGRAM], 3, [1, 2, 0], [4, 0x40, 0x42, 0x0f, 0, 0, 0, 0, 0]);
      assert.deepEqual(solana(approve), { kind: 'solana_message', destination: delegate, spender: delegate, amount: 1_000_000n });
    });

    it('leaves a message that calls another program of unknown destination and value, and bytes that are no message undecoded', () => {
      const other = legacy([payer.publicKey, base58.decode(mint)], 1, [0], [0xab]);
      assert.deepEqual(solana(other), { kind: 'solana_message' });
      const transfer = message(42n);
      assert.deepEqual(solana(new TextEncoder().encode('Sign in to example.com')), { kind: 'unknown' });
      assert.deepEqual(solana(transfer.subarray(0, transfer.length - 1)), { kind: 'unknown' });
      assert.deepEqual(decodeSignedPayload('solana', 'sha256', transfer), { kind: 'unknown' });
    });
  });

  describe('Tron transactions (sha256 of raw_data, the txid)', () => {
    const seed = mnemonicToSeedSync('abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about');
    const key = (index: number) => deriveKey(seed, { chain: 'tron', testnet: true, coinType: TESTNET_COIN_TYPE, format: 'base58check', account: 0, index });
    const [owner, payee] = [key(0), key(1)];
    const usdt = 'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t';
    const recentBlock = { height: 3_111_739, hash: `00000000002f7b3bb21ace8d6ac20e7e${'ab'.repeat(16)}`, time: new Date('2026-11-23T12:00:00Z') };
    /** The raw_data of a transaction the platform writes: field 1 of the signed Transaction. */
    const rawData = (amount: bigint, tokenAddress?: string) => {
      const { raw } = signTransfer(
        { chain: 'tron', testnet: true, from: owner.address, to: payee.address, assetId: tokenAddress ? 'USDT_TRX' : 'TRX', amount, tokenAddress, fee: { model: 'flat', fee: 15_000_000n }, recentBlock, reference: 'r' },
        [owner],
      );
      return single(readMessage(hexToBytes(`0x${raw}`), 'Transaction'), 1, 'raw_data', 'bytes')!;
    };
    const tron = (bytes: Uint8Array) => decodeSignedPayload('tron', 'sha256', bytes);

    it('reads a TransferContract: recipient and sun', () => {
      assert.deepEqual(tron(rawData(1_000_000n)), { kind: 'tron_transaction', destination: payee.address, asset: { native: true }, amount: 1_000_000n });
    });

    it('reads a TRC-20 transfer and approve: the token, the recipient or spender, the amount', () => {
      const transfer = rawData(5_000_000n, usdt);
      assert.deepEqual(tron(transfer), { kind: 'tron_transaction', destination: payee.address, asset: { contract: usdt }, amount: 5_000_000n });
      const approve = Uint8Array.from(transfer);
      const selectorAt = Buffer.from(approve).indexOf(Buffer.from('a9059cbb', 'hex'));
      approve.set(hexToBytes('0x095ea7b3'), selectorAt);
      assert.deepEqual(tron(approve), { kind: 'tron_transaction', destination: payee.address, spender: payee.address, asset: { contract: usdt }, amount: 5_000_000n });
    });

    it('decodes nothing from bytes that are no raw_data, nor from raw_data given under keccak256', () => {
      assert.deepEqual(tron(new TextEncoder().encode('hello')), { kind: 'unknown' });
      assert.deepEqual(tron(hexToBytes(`0x${'aa'.repeat(32)}`)), { kind: 'unknown' });
      assert.deepEqual(decodeSignedPayload('tron', 'keccak256', rawData(1n)), { kind: 'unknown' });
    });
  });
});
