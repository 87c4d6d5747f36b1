import assert from 'node:assert/strict';
import {
  encodeFunctionData,
  erc20Abi,
  getAddress,
  parseEther,
  recoverTransactionAddress,
  serializeTransaction,
  toRlp,
  numberToHex,
  verifyTypedData,
  type TransactionSerializable,
  type TypedDataDefinition,
} from 'viem';
import { recoverAuthorizationAddress } from 'viem/utils';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { ed25519 } from '@noble/curves/ed25519';
import { base58, base64 } from '@scure/base';
import { mnemonicToSeedSync } from '@scure/bip39';
import { signTransfer } from '../../src/chains/transfers';
import { LAMPORTS_PER_SIGNATURE } from '../../src/chains/transfers/solana';
import { deriveKey, TESTNET_COIN_TYPE } from '../../src/keys/derivation';
import { DEVNET_TOKENS } from '../../src/chains/devnet/params';
import type { Environment } from '../../src/api-keys/entities';
import { Organization } from '../../src/organizations/entities';
import { PolicyAuditLog } from '../../src/policies/entities';
import { SigningActivity } from '../../src/custody/entities';
import { createTestOrganization, startTestApp, type TestApp } from '../support/app';
import { PERMIT_TYPES } from '../support/eip712';
import { testOrm } from '../support/environment';

const someone = () => privateKeyToAccount(generatePrivateKey()).address;
const USDC = getAddress(DEVNET_TOKENS.ethereum.USDC_ETH!);

/**
 * A signature is judged by what it authorizes: transactions and typed data are decoded before the
 * key signs, and the enforced policies see their destination, amount, asset and spender; what does
 * not decode is of unknown destination and value, which block rules take to match. Every signature
 * let through verifies with viem for the wallet's address.
 */
describe('Signing decoded payloads under enforced policies', () => {
  let app: TestApp;

  before(async () => {
    app = await startTestApp();
  });
  after(() => app?.close());

  async function organization(environment: Environment = 'sandbox') {
    const org = await createTestOrganization(`Decoded signing ${environment}`, environment);
    await (await testOrm()).em.fork().nativeUpdate(Organization, { id: org.organizationId }, { policyActivationRequiredApprovals: 0 });
    const call = (method: string, path: string, body?: unknown) => app.request(method, path, { key: org.secret, body });
    const vault = await call('POST', '/v1/vaults', { name: 'Treasury' });
    const wallet = await call('POST', '/v1/wallets', { name: 'Hot', chain: 'ethereum', vault_id: vault.body.id });
    assert.equal(wallet.status, 201, wallet.text);
    const enforce = async (rules: unknown[]) => {
      const policy = await call('POST', '/v1/policies', { name: 'Signing', rules });
      assert.equal(policy.status, 201, policy.text);
      const activated = await call('POST', `/v1/policies/${policy.body.id}/activate`, {});
      assert.equal(activated.status, 200, activated.text);
      return policy.body.rules.map((rule: { id: string }) => rule.id) as string[];
    };
    const sign = (body: Record<string, unknown>) => call('POST', `/v1/wallets/${wallet.body.id}/sign`, body);
    /** The request the gate judged for the organization's last decision. */
    const lastRequest = async () => {
      const [decision] = await (await testOrm()).em.fork().find(PolicyAuditLog, { organization: org.organizationId, action: 'decision' }, { orderBy: { createdAt: 'desc' }, limit: 1 });
      return (decision!.metadata as { request: Record<string, unknown> }).request;
    };
    return { org, call, enforce, sign, lastRequest, address: getAddress(wallet.body.primary_address.address as string) };
  }

  const refusedBy = (response: { status: number; text: string; body: any }, status: number, code: string, ruleId: string | null) => {
    assert.equal(response.status, status, response.text);
    assert.equal(response.body.error.code, code);
    assert.equal(response.body.error.details.rule_id, ruleId);
  };

  /** The response's signature as viem serializes it into a transaction (legacy reads v, typed transactions yParity). */
  const signature = (body: { r: string; s: string; v: number; recovery_id: number }) => ({ r: `0x${body.r}` as const, s: `0x${body.s}` as const, v: BigInt(body.v), yParity: body.recovery_id });
  const signTransaction = (sign: (body: Record<string, unknown>) => ReturnType<TestApp['request']>, transaction: TransactionSerializable) =>
    sign({ payload: serializeTransaction(transaction), hash_function: 'keccak256' });

  const fees = { chainId: 11155111, nonce: 0, gas: 90_000n, maxFeePerGas: 3n, maxPriorityFeePerGas: 1n } as const;
  const permit = (owner: `0x${string}`, spender: `0x${string}`, value: bigint) => ({
    domain: { name: 'USD Coin', version: '2', chainId: 11155111, verifyingContract: USDC },
    types: {
      EIP712Domain: [
        { name: 'name', type: 'string' },
        { name: 'version', type: 'string' },
        { name: 'chainId', type: 'uint256' },
        { name: 'verifyingContract', type: 'address' },
      ],
      ...PERMIT_TYPES,
    },
    primaryType: 'Permit' as const,
    message: { owner, spender, value: value.toString(), nonce: '0', deadline: '99999999999' },
  });

  it('judges an EIP-2612 permit by its spender, token and value: blocked by spender, allowed by address book, and the signature verifies with viem', async () => {
    const { call, enforce, sign, lastRequest, address } = await organization();
    const drainer = someone();
    const exchange = someone();
    const entry = await call('POST', '/v1/address-book', { chain: 'ethereum', address: exchange, label: 'Exchange' });
    assert.equal(entry.status, 201, entry.text);
    const [blockDrainer, , catchAll] = await enforce([
      { name: 'No drainer', action_type: 'block', conditions: [{ field: 'spender', operator: 'equal', value: drainer }] },
      { name: 'Known payees', action_type: 'allow', conditions: [{ field: 'to_address', operator: 'in_address_book' }] },
      { name: 'Everything else', action_type: 'block', conditions: [{ field: 'amount', operator: 'greater_than_or_equal', value: '0' }] },
    ]);

    const signPermit = (spender: `0x${string}`) => sign({ payload: JSON.stringify(permit(address, spender, 5_000_000n)), payload_encoding: 'text_utf8', hash_function: 'eip712' });
    refusedBy(await signPermit(drainer), 403, 'policy_blocked', blockDrainer!);
    const judged = await lastRequest();
    assert.deepEqual(
      [judged.operation_type, judged.tx_type, judged.spender, judged.to_address, judged.token_address, judged.asset_symbol, judged.amount, judged.amount_usd],
      ['sign', 'typed_data_signature', drainer, drainer, USDC, 'USDC', '5', '5'],
    );
    refusedBy(await signPermit(someone()), 403, 'policy_blocked', catchAll!);

    const signed = await signPermit(exchange);
    assert.equal(signed.status, 200, signed.text);
    assert.equal(signed.body.hash_function, 'eip712');
    assert.equal((await lastRequest()).destination_type, 'address_book');
    const typedData = permit(address, exchange, 5_000_000n);
    assert.equal(await verifyTypedData({ ...(typedData as unknown as TypedDataDefinition), address, signature: `0x${signed.body.signature}` }), true);
  });

  it('judges an EIP-7702 delegation (a type-4 transaction or an authorization) by its delegate, of unknown amount', async () => {
    const { call, enforce, sign, lastRequest, address } = await organization();
    const drainer = someone();
    const wallet = someone();
    assert.equal((await call('POST', '/v1/address-book', { chain: 'ethereum', address: wallet, label: 'Smart wallet' })).status, 201);
    const [blockDrainer, , catchAll] = await enforce([
      { name: 'No drainer', action_type: 'block', conditions: [{ field: 'spender', operator: 'in', values: [drainer] }] },
      { name: 'Known delegates', action_type: 'allow', conditions: [{ field: 'to_address', operator: 'in_address_book' }] },
      { name: 'Big', action_type: 'block', conditions: [{ field: 'amount_usd', operator: 'greater_than', value: '1000' }] },
    ]);
    // The authorization list is signed by other keys too: this one, by a stranger, delegates to the contract named.
    const authorizer = privateKeyToAccount(generatePrivateKey());
    const delegateTo = async (contract: `0x${string}`) => ({ ...fees, to: address, authorizationList: [await authorizer.signAuthorization({ chainId: 11155111, contractAddress: contract, nonce: 0 })] });

    refusedBy(await signTransaction(sign, await delegateTo(drainer)), 403, 'policy_blocked', blockDrainer!);
    const judged = await lastRequest();
    assert.deepEqual([judged.tx_type, judged.spender, judged.to_address, judged.amount, judged.price_unavailable], ['transaction_signature', drainer, drainer, undefined, true]);
    // Of unknown amount, a delegation to anyone else meets the USD threshold of the block rule.
    refusedBy(await signTransaction(sign, await delegateTo(someone())), 403, 'policy_blocked', catchAll!);

    const transaction = await delegateTo(wallet);
    const signed = await signTransaction(sign, transaction);
    assert.equal(signed.status, 200, signed.text);
    assert.equal(await recoverTransactionAddress({ serializedTransaction: serializeTransaction(transaction, signature(signed.body)) }), address);

    const authorization = { chainId: 11155111, address: drainer, nonce: 0 };
    const authorizationPayload = `0x05${toRlp([numberToHex(authorization.chainId), authorization.address, '0x']).slice(2)}`;
    refusedBy(await sign({ payload: authorizationPayload }), 403, 'policy_blocked', blockDrainer!);
    assert.equal((await lastRequest()).tx_type, 'authorization_signature');
    const own = { ...authorization, address: wallet };
    const allowed = await sign({ payload: `0x05${toRlp([numberToHex(own.chainId), own.address, '0x']).slice(2)}` });
    assert.equal(allowed.status, 200, allowed.text);
    assert.equal(await recoverAuthorizationAddress({ authorization: own, signature: `0x${allowed.body.signature}` }), address);
  });

  it('judges legacy and EIP-1559 transactions by recipient, amount and asset, ERC-20 transfers by their real recipient', async () => {
    const { enforce, sign, lastRequest, address } = await organization();
    const watched = someone();
    const [tooMuch, watchedPayee, bigToken] = await enforce([
      { name: 'Over 0.5 ETH', action_type: 'block', conditions: [{ field: 'asset_symbol', operator: 'equal', value: 'ETH' }, { field: 'amount', operator: 'greater_than', value: '0.5' }] },
      {
        name: 'Watched payee',
        action_type: 'delay',
        action_config: { delay_minutes: 60 },
        conditions: [{ field: 'to_address', operator: 'equal', value: watched }],
      },
      { name: 'Over 100 USDC', action_type: 'block', conditions: [{ field: 'token_address', operator: 'equal', value: USDC }, { field: 'amount', operator: 'greater_than', value: '100' }] },
      { name: 'The rest', action_type: 'allow', conditions: [{ field: 'amount', operator: 'greater_than_or_equal', value: '0' }] },
    ]);
    const legacy = { chainId: 11155111, nonce: 1, gasPrice: 2n, gas: 21_000n, to: someone(), value: parseEther('1') } as const;
    refusedBy(await signTransaction(sign, legacy), 403, 'policy_blocked', tooMuch!);
    assert.deepEqual([(await lastRequest()).amount, (await lastRequest()).tx_type], ['1', 'transaction_signature']);
    refusedBy(await signTransaction(sign, { ...fees, to: watched, value: parseEther('0.1') }), 400, 'policy_delay_required', watchedPayee!);
    const usdc = (to: `0x${string}`, amount: bigint) => ({ ...fees, to: USDC, data: encodeFunctionData({ abi: erc20Abi, functionName: 'transfer', args: [to, amount] }) });
    refusedBy(await signTransaction(sign, usdc(someone(), 150_000_000n)), 403, 'policy_blocked', bigToken!);
    refusedBy(await signTransaction(sign, usdc(watched, 1_000_000n)), 400, 'policy_delay_required', watchedPayee!);

    const payee = someone();
    for (const transaction of [{ ...legacy, value: parseEther('0.2') }, { ...fees, to: someone(), value: parseEther('0.3') }, usdc(payee, 20_000_000n)]) {
      const signed = await signTransaction(sign, transaction);
      assert.equal(signed.status, 200, signed.text);
      assert.equal((await lastRequest()).tx_type, 'transaction_signature');
      assert.equal(await recoverTransactionAddress({ serializedTransaction: serializeTransaction(transaction, signature(signed.body)) }), address);
    }
    const { to_address, amount, asset_symbol, amount_usd, token_address } = await lastRequest();
    assert.deepEqual({ to_address, amount, asset_symbol, amount_usd, token_address }, { to_address: payee, amount: '20', asset_symbol: 'USDC', amount_usd: '20', token_address: USDC });
  });

  it('blocks a payload that decodes to nothing by a catch-all amount rule, while an allow rule does not match its missing fields', async () => {
    const { enforce, sign, lastRequest } = await organization();
    const [, catchAll] = await enforce([
      { name: 'Small sends', action_type: 'allow', conditions: [{ field: 'amount', operator: 'less_than', value: '1' }] },
      { name: 'Catch-all', action_type: 'block', conditions: [{ field: 'amount', operator: 'greater_than_or_equal', value: '0' }] },
    ]);
    refusedBy(await sign({ payload: 'aa'.repeat(32) }), 403, 'policy_blocked', catchAll!);
    const judged = await lastRequest();
    assert.deepEqual([judged.operation_type, judged.tx_type, judged.destination_type, judged.to_address, judged.amount], ['sign', 'message_signature', 'unknown', undefined, undefined]);
    refusedBy(await sign({ payload: 'hello', payload_encoding: 'text_utf8' }), 403, 'policy_blocked', catchAll!);
    // The same catch-all lets nothing decoded slip either: a small transfer is allowed by the rule above it.
    assert.equal((await signTransaction(sign, { ...fees, to: someone(), value: parseEther('0.01') })).status, 200);
  });

  it('refuses a raw digest in live unless an enforced rule allows sign_raw by name; the sandbox signs it as before', async () => {
    const digest = { payload: 'ab'.repeat(32), hash_function: 'no_op' };
    const sandbox = await organization();
    assert.equal((await sandbox.sign(digest)).status, 200);

    const live = await organization('live');
    refusedBy(await live.sign(digest), 403, 'policy_blocked', null);
    assert.match((await live.sign(digest)).body.error.message, /sign_raw/);
    // A hashed payload is not raw: with no policy it is signed in live too.
    assert.equal((await live.sign({ payload: 'ab'.repeat(32) })).status, 200);

    await live.enforce([{ name: 'Everything on Ethereum', action_type: 'allow', conditions: [{ field: 'chain', operator: 'equal', value: 'ethereum' }] }]);
    refusedBy(await live.sign(digest), 403, 'policy_blocked', null);
    await live.enforce([
      { name: 'Raw signing', action_type: 'allow', conditions: [{ field: 'operation_type', operator: 'in', values: ['sign', 'sign_raw'] }] },
    ]);
    const signed = await live.sign(digest);
    assert.equal(signed.status, 200, signed.text);
    assert.equal((await live.lastRequest()).operation_type, 'sign_raw');
  });

  it('judges a Solana message by its recipient and amount; bytes that are no message, of unknown destination, meet the block rule on the payee', async () => {
    const { call, enforce } = await organization();
    const vaultId = (await call('GET', '/v1/vaults')).body.data[0].id;
    const wallet = await call('POST', '/v1/wallets', { name: 'Solana', chain: 'solana', vault_id: vaultId });
    assert.equal(wallet.status, 201, wallet.text);
    const key = (index: number) => deriveKey(mnemonicToSeedSync('abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about'), { chain: 'solana', testnet: true, coinType: TESTNET_COIN_TYPE, format: 'base58', account: 0, index });
    const [payer, blocked, payee] = [key(0), key(1), key(2)];
    const [blockPayee] = await enforce([
      { name: 'Not this payee', action_type: 'block', conditions: [{ field: 'to_address', operator: 'equal', value: blocked.address }] },
      { name: 'Small SOL', action_type: 'allow', conditions: [{ field: 'amount', operator: 'less_than', value: '1' }] },
    ]);
    const recentBlock = { height: 1, hash: base58.encode(new Uint8Array(32).fill(7)), time: new Date() };
    /** The message (after the signature count and the signature) of a SOL transfer. */
    const message = (to: string) =>
      base64.decode(signTransfer({ chain: 'solana', testnet: true, from: payer.address, to, assetId: 'SOL', amount: 500_000_000n, fee: { model: 'flat', fee: LAMPORTS_PER_SIGNATURE }, recentBlock, reference: 'r' }, [payer]).raw).subarray(65);
    const sign = (payload: Uint8Array) => call('POST', `/v1/wallets/${wallet.body.id}/sign`, { payload: Buffer.from(payload).toString('hex') });

    refusedBy(await sign(message(blocked.address)), 403, 'policy_blocked', blockPayee!);
    const allowed = message(payee.address);
    const signed = await sign(allowed);
    assert.equal(signed.status, 200, signed.text);
    assert.equal(ed25519.verify(signed.body.signature, allowed, signed.body.public_key), true);
    // Bytes that are no message could pay anyone: the block rule on the payee takes its unknown destination to match.
    refusedBy(await sign(new TextEncoder().encode('any bytes at all')), 403, 'policy_blocked', blockPayee!);
  });

  it('refuses typed data on a wallet of another chain, and typed data that is not valid, with 400', async () => {
    const { call, sign, address } = await organization();
    const typedData = (primaryType: string) => JSON.stringify({ ...permit(address, someone(), 1n), primaryType });
    const broken = await sign({ payload: typedData('Missing'), payload_encoding: 'text_utf8', hash_function: 'eip712' });
    assert.equal(broken.status, 400, broken.text);
    assert.equal(broken.body.error.param, 'payload');

    const vaultId = (await call('GET', '/v1/vaults')).body.data[0].id;
    const bitcoin = await call('POST', '/v1/wallets', { name: 'Bitcoin', chain: 'bitcoin', vault_id: vaultId });
    const elsewhere = await call('POST', `/v1/wallets/${bitcoin.body.id}/sign`, { payload: typedData('Permit'), payload_encoding: 'text_utf8', hash_function: 'eip712' });
    assert.equal(elsewhere.status, 400, elsewhere.text);
    assert.equal(elsewhere.body.error.param, 'hash_function');
  });

  it('signs an EVM payload only for the wallet\'s network: another chain id, or none, is 400 on payload and nothing is signed', async () => {
    const { org, enforce, sign } = await organization();
    await enforce([{ name: 'Everything', action_type: 'allow', conditions: [{ field: 'amount', operator: 'greater_than_or_equal', value: '0' }] }]);
    const payee = someone();
    const refusedFor = async (response: { status: number; text: string; body: any }, payloadChainId: string) => {
      assert.equal(response.status, 400, response.text);
      assert.deepEqual([response.body.error.param, response.body.error.details.payload_chain_id, response.body.error.details.network_chain_id], ['payload', payloadChainId, 11155111]);
    };
    // The same key holds the same address on mainnet: a mainnet transaction, a pre-EIP-155 one (every chain), a 7702 authorization for chain 0, a mainnet permit.
    await refusedFor(await signTransaction(sign, { ...fees, chainId: 1, to: payee, value: parseEther('0.1') }), '1');
    await refusedFor(await sign({ payload: serializeTransaction({ nonce: 0, gasPrice: 2n, gas: 21_000n, to: payee, value: 1n }), hash_function: 'keccak256' }), '0');
    await refusedFor(await sign({ payload: `0x05${toRlp(['0x', payee, '0x']).slice(2)}` }), '0');
    const mainnetPermit = permit(payee, someone(), 1n);
    await refusedFor(await sign({ payload: JSON.stringify({ ...mainnetPermit, domain: { ...mainnetPermit.domain, chainId: 1 } }), payload_encoding: 'text_utf8', hash_function: 'eip712' }), '1');
    const em = (await testOrm()).em.fork();
    assert.equal(await em.count(SigningActivity, { organization: org.organizationId }), 0);
    const signed = await signTransaction(sign, { ...fees, to: payee, value: parseEther('0.1') });
    assert.equal(signed.status, 200, signed.text);
    assert.equal(await em.count(SigningActivity, { organization: org.organizationId }), 1);
  });
});
