import assert from 'node:assert/strict';
import { secp256k1 } from '@noble/curves/secp256k1';
import { ed25519 } from '@noble/curves/ed25519';
import { sha256 } from '@noble/hashes/sha256';
import { keccak_256 } from '@noble/hashes/sha3';
import { bytesToHex, hexToBytes } from '@noble/hashes/utils';
import { base58, base58check } from '@scure/base';
import { Address as BitcoinAddress, NETWORK, TEST_NETWORK, p2pkh, p2tr, p2wpkh } from '@scure/btc-signer';
import { isAddress, keccak256, recoverAddress, toHex } from 'viem';
import { Wallet } from '../../src/custody/entities';
import { OrganizationSeed } from '../../src/keys/entities';
import { createTestOrganization, startTestApp, type TestApp, type TestOrganization } from '../support/app';
import { testOrm } from '../support/environment';
import { creditCustodyWallet } from '../support/ledger';

/** The public key a recoverable secp256k1 signature was made with, recovered by @noble/curves. */
function recoverPublicKey(signature: { r: string; s: string; recovery_id: number }, digest: Uint8Array): Uint8Array {
  return secp256k1.Signature.fromCompact(signature.r + signature.s)
    .addRecoveryBit(signature.recovery_id)
    .recoverPublicKey(digest)
    .toRawBytes(true);
}

function tronAddress(compressedPublicKey: Uint8Array): string {
  const uncompressed = secp256k1.ProjectivePoint.fromHex(compressedPublicKey).toRawBytes(false);
  return base58check(sha256).encode(Uint8Array.from([0x41, ...keccak_256(uncompressed.slice(1)).slice(12)]));
}

describe('Custody: vaults, wallets, addresses, balances and signing', () => {
  let app: TestApp;
  let org: TestOrganization;
  let vaultId: string;
  /** Every response body this suite received, to prove no secret ever left the service. */
  const received: string[] = [];

  const call = async (method: string, path: string, body?: unknown, key = org.secret, headers?: Record<string, string>) => {
    const response = await app.request(method, path, { key, body, headers });
    received.push(response.text);
    return response;
  };
  const createWallet = async (chain: string, extra: Record<string, unknown> = {}, key = org.secret) => {
    const response = await call('POST', '/v1/wallets', { name: `${chain} wallet`, chain, vault_id: vaultId, ...extra }, key);
    assert.equal(response.status, 201, response.text);
    return response.body;
  };

  before(async () => {
    app = await startTestApp();
    org = await createTestOrganization('Custody org');
    const vault = await call('POST', '/v1/vaults', { name: 'Treasury', customer_ref_id: 'cust-1', metadata: { desk: 'ops', tier: 2 } });
    assert.equal(vault.status, 201, vault.text);
    vaultId = vault.body.id;
  });
  after(() => app?.close());

  it('creates, lists and reads vaults, and hides malformed or unknown ids', async () => {
    const vault = await call('GET', `/v1/vaults/${vaultId}`);
    assert.equal(vault.status, 200);
    assert.equal(vault.body.object, 'vault');
    assert.equal(vault.body.name, 'Treasury');
    assert.equal(vault.body.customer_ref_id, 'cust-1');
    assert.deepEqual(vault.body.metadata, { desk: 'ops', tier: 2 });
    const list = await call('GET', '/v1/vaults');
    assert.equal(list.body.object, 'list');
    assert.ok(list.body.data.some((v: { id: string }) => v.id === vaultId));
    assert.equal((await call('GET', '/v1/vaults/not-a-uuid')).status, 404);
    const missing = await call('GET', `/v1/vaults/${crypto.randomUUID()}`);
    assert.equal(missing.status, 404);
    assert.equal(missing.body.error.code, 'resource_missing');
    assert.equal((await call('POST', '/v1/vaults', {})).body.error.param, 'name');
  });

  it('creates a wallet on each chain with a valid primary address for the sandbox network', async () => {
    const bitcoin = await createWallet('bitcoin', { wallet_type: 'cold', customer_ref_id: 'c-9', metadata: { team: 'a' } });
    assert.equal(bitcoin.object, 'wallet');
    assert.equal(bitcoin.vault_id, vaultId);
    assert.equal(bitcoin.network, 'testnet');
    assert.equal(bitcoin.wallet_type, 'cold');
    assert.equal(bitcoin.customer_ref_id, 'c-9');
    assert.deepEqual(bitcoin.metadata, { team: 'a' });
    const primary = bitcoin.primary_address;
    assert.equal(primary.object, 'address');
    assert.equal(primary.is_primary, true);
    assert.equal(primary.format, 'p2wpkh');
    assert.equal(primary.wallet_id, bitcoin.id);
    assert.match(primary.derivation_path, /^m\/84'\/1'\/\d+'\/0\/0$/);
    assert.deepEqual(BitcoinAddress(TEST_NETWORK).decode(primary.address).type, 'wpkh');

    const ethereum = await createWallet('ethereum');
    assert.equal(ethereum.network, 'sepolia');
    assert.equal(ethereum.wallet_type, 'hot');
    assert.ok(isAddress(ethereum.primary_address.address, { strict: true }));
    assert.notEqual(ethereum.primary_address.address, ethereum.primary_address.address.toLowerCase(), 'EIP-55 mixed case');
    assert.equal(ethereum.primary_address.format, 'eip55');

    const tron = await createWallet('tron');
    assert.equal(tron.network, 'nile');
    const tronBytes = base58check(sha256).decode(tron.primary_address.address);
    assert.equal(tronBytes.length, 21);
    assert.equal(tronBytes[0], 0x41);
    assert.match(tron.primary_address.address, /^T/);

    const solana = await createWallet('solana');
    assert.equal(solana.network, 'devnet');
    assert.equal(base58.decode(solana.primary_address.address).length, 32);
    // Every sandbox wallet derives under the test networks' coin type 1 (BIP-44), whatever its chain.
    assert.match(solana.primary_address.derivation_path, /^m\/44'\/1'\/\d+'\/0'$/);
    assert.match(ethereum.primary_address.derivation_path, /^m\/44'\/1'\/\d+'\/0\/0$/);
    assert.match(tron.primary_address.derivation_path, /^m\/44'\/1'\/\d+'\/0\/0$/);

    const fetched = await call('GET', `/v1/wallets/${bitcoin.id}`);
    assert.deepEqual(fetched.body, bitcoin);
  });

  it("derives sandbox keys under coin type 1, never on the seed's mainnet path; a wallet made before that keeps deriving its own", async () => {
    const em = (await testOrm()).em.fork();
    const derive = (chain: 'ethereum' | 'tron' | 'solana', coinType: number, account: number, index: number) =>
      app.deps.keys.withKeys(em, org.organizationId, 'sandbox', [{ chain, testnet: true, coinType, format: ({ ethereum: 'eip55', tron: 'base58check', solana: 'base58' } as const)[chain], account, index }], ([key]) => key!.address);
    for (const chain of ['ethereum', 'tron', 'solana'] as const) {
      const wallet = await createWallet(chain);
      const row = await em.findOneOrFail(Wallet, { id: wallet.id });
      assert.equal(row.coinType, 1, chain);
      assert.equal(await derive(chain, 1, row.accountIndex, 0), wallet.primary_address.address, chain);
      assert.notEqual(await derive(chain, { ethereum: 60, tron: 195, solana: 501 }[chain], row.accountIndex, 0), wallet.primary_address.address, `${chain}: not the mainnet path's key`);
    }

    // A sandbox Ethereum wallet from before coin type 1: the migration recorded 60, and its new addresses and signatures stay on 60.
    const older = await createWallet('ethereum');
    await em.nativeUpdate(Wallet, { id: older.id }, { coinType: 60 });
    const account = (await em.findOneOrFail(Wallet, { id: older.id })).accountIndex;
    const next = await call('POST', `/v1/wallets/${older.id}/addresses`, {});
    assert.equal(next.status, 201, next.text);
    assert.equal(next.body.derivation_path, `m/44'/60'/${account}'/0/1`);
    assert.equal(next.body.address, await derive('ethereum', 60, account, 1));
    const digest = bytesToHex(sha256(new TextEncoder().encode('older wallet')));
    const signed = await call('POST', `/v1/wallets/${older.id}/sign`, { payload: digest, hash_function: 'no_op', address_id: next.body.id });
    assert.equal(signed.status, 200, signed.text);
    assert.equal(await recoverAddress({ hash: `0x${digest}`, signature: `0x${signed.body.signature}` }), next.body.address);
  });

  it('ignores a deprecated network that contradicts the environment, and uses mainnet for live keys', async () => {
    const sandbox = await createWallet('bitcoin', { network: 'mainnet' });
    assert.equal(sandbox.network, 'testnet');
    assert.match(sandbox.primary_address.address, /^tb1q/);

    const live = await createTestOrganization('Live custody', 'live');
    const liveVault = await call('POST', '/v1/vaults', { name: 'Live' }, live.secret);
    const wallet = await call('POST', '/v1/wallets', { name: 'Live BTC', chain: 'bitcoin', vault_id: liveVault.body.id, network: 'testnet' }, live.secret);
    assert.equal(wallet.status, 201, wallet.text);
    assert.equal(wallet.body.network, 'mainnet');
    assert.match(wallet.body.primary_address.derivation_path, /^m\/84'\/0'\//);
    assert.ok(BitcoinAddress(NETWORK).decode(wallet.body.primary_address.address));
    const liveEthereum = await call('POST', '/v1/wallets', { name: 'Live ETH', chain: 'ethereum', vault_id: liveVault.body.id }, live.secret);
    assert.match(liveEthereum.body.primary_address.derivation_path, /^m\/44'\/60'\//, 'live wallets keep their chain\'s coin type');

    // A sandbox key of the same organization does not see live records, and the reverse.
    const liveSandboxKey = await live.key(['*'], 'sandbox');
    assert.equal((await call('GET', `/v1/wallets/${wallet.body.id}`, undefined, liveSandboxKey.secret)).status, 404);
    assert.equal((await call('GET', `/v1/vaults/${vaultId}`, undefined, live.secret)).status, 404);
  });

  it('lists wallets filtered by vault and chain, with cursor pagination', async () => {
    const otherVault = (await call('POST', '/v1/vaults', { name: 'Other' })).body.id;
    const other = await createWallet('solana', { vault_id: otherVault });
    const inOther = await call('GET', `/v1/wallets?vault_id=${otherVault}`);
    assert.deepEqual(inOther.body.data.map((w: { id: string }) => w.id), [other.id]);
    const tron = await call('GET', '/v1/wallets?chain=tron');
    assert.ok(tron.body.data.length >= 1);
    assert.ok(tron.body.data.every((w: { chain: string }) => w.chain === 'tron'));
    const first = await call('GET', '/v1/wallets?limit=1');
    assert.equal(first.body.has_more, true);
    const second = await call('GET', `/v1/wallets?limit=1&cursor=${first.body.next_cursor}`);
    assert.notEqual(second.body.data[0].id, first.body.data[0].id);
    assert.equal((await call('GET', '/v1/wallets?chain=dogecoin')).body.error.param, 'chain');
    assert.equal((await call('POST', '/v1/wallets', { name: 'x', chain: 'bitcoin', vault_id: crypto.randomUUID() })).body.error.param, 'vault_id');
  });

  it('creates addresses in each Bitcoin format with labels, and ignores the format on account chains', async () => {
    const wallet = await createWallet('bitcoin');
    const account = wallet.primary_address.derivation_path.split('/')[3];
    const taproot = await call('POST', `/v1/wallets/${wallet.id}/addresses`, { address_format: 'p2tr', label: 'Customer 42' });
    assert.equal(taproot.status, 201, taproot.text);
    assert.equal(taproot.body.format, 'p2tr');
    assert.equal(taproot.body.label, 'Customer 42');
    assert.equal(taproot.body.is_primary, false);
    assert.equal(taproot.body.derivation_path, `m/86'/1'/${account}/0/1`);
    assert.equal(BitcoinAddress(TEST_NETWORK).decode(taproot.body.address).type, 'tr');

    const legacy = await call('POST', `/v1/wallets/${wallet.id}/addresses`, { address_format: 'p2pkh' });
    assert.equal(legacy.body.derivation_path, `m/44'/1'/${account}/0/2`);
    assert.equal(BitcoinAddress(TEST_NETWORK).decode(legacy.body.address).type, 'pkh');
    assert.equal(legacy.body.label, '');

    const segwit = await call('POST', `/v1/wallets/${wallet.id}/addresses`, {});
    assert.equal(segwit.body.format, 'p2wpkh');
    assert.equal(segwit.body.derivation_path, `m/84'/1'/${account}/0/3`);

    const list = await call('GET', `/v1/wallets/${wallet.id}/addresses`);
    assert.deepEqual(
      list.body.data.map((a: { id: string }) => a.id),
      [segwit.body.id, legacy.body.id, taproot.body.id, wallet.primary_address.id],
    );
    assert.deepEqual((await call('GET', `/v1/addresses/${taproot.body.id}`)).body, taproot.body);
    assert.equal((await call('POST', `/v1/wallets/${wallet.id}/addresses`, { address_format: 'p2sh' })).body.error.param, 'address_format');

    const ethereum = await createWallet('ethereum');
    const ethAddress = await call('POST', `/v1/wallets/${ethereum.id}/addresses`, { address_format: 'p2tr', label: 'deposits', network: 'mainnet' });
    assert.equal(ethAddress.status, 201, ethAddress.text);
    assert.equal(ethAddress.body.format, 'eip55');
    assert.equal(ethAddress.body.network, 'sepolia');
    assert.ok(isAddress(ethAddress.body.address, { strict: true }));
    assert.notEqual(ethAddress.body.address, ethereum.primary_address.address);
  });

  it('never gives two concurrent address requests the same index', async () => {
    const wallet = await createWallet('ethereum');
    const created = await Promise.all(Array.from({ length: 8 }, (_, i) => call('POST', `/v1/wallets/${wallet.id}/addresses`, { label: `c${i}` })));
    for (const response of created) assert.equal(response.status, 201, response.text);
    const indexes = created.map((r) => Number(r.body.derivation_path.split('/').pop())).sort((a, b) => a - b);
    assert.deepEqual(indexes, [1, 2, 3, 4, 5, 6, 7, 8]);
    assert.equal(new Set(created.map((r) => r.body.address)).size, 8);
  });

  it("creates one seed and distinct accounts when an organization's first wallets arrive together", async () => {
    const fresh = await createTestOrganization('Concurrent org');
    const vault = (await call('POST', '/v1/vaults', { name: 'V' }, fresh.secret)).body.id;
    const wallets = await Promise.all(
      Array.from({ length: 5 }, () => call('POST', '/v1/wallets', { name: 'w', chain: 'tron', vault_id: vault }, fresh.secret)),
    );
    for (const response of wallets) assert.equal(response.status, 201, response.text);
    const accounts = wallets.map((r) => Number(r.body.primary_address.derivation_path.split('/')[3].replace("'", ''))).sort();
    assert.deepEqual(accounts, [0, 1, 2, 3, 4]);
    const em = (await testOrm()).em.fork();
    assert.equal(await em.count(OrganizationSeed, { organization: fresh.organizationId }), 1);
  });

  it("returns every asset of the wallet's chain, zero until funds arrive, from the ledger", async () => {
    const wallet = await createWallet('ethereum');
    const empty = await call('GET', `/v1/wallets/${wallet.id}/balances`);
    assert.equal(empty.status, 200);
    assert.equal(empty.body.object, 'list');
    assert.deepEqual(
      empty.body.data.map((b: { asset_id: string; asset: string; asset_decimals: number }) => [b.asset_id, b.asset, b.asset_decimals]),
      [['ETH', 'ETH', 18], ['USDC_ETH', 'USDC', 6], ['USDT_ETH', 'USDT', 6]],
    );
    for (const balance of empty.body.data) {
      assert.equal(balance.object, 'balance');
      assert.equal(balance.chain, 'ethereum');
      assert.equal(balance.network, 'sepolia');
      assert.deepEqual([balance.balance, balance.available, balance.locked], ['0', '0', '0']);
    }

    // A ledger row (as the chains issue will write) shows exactly, beyond 2^64, with available = balance - locked.
    await creditCustodyWallet((await testOrm()).em.fork(), wallet.id, 'ETH', 123456789012345678901234567n, { locked: 10n ** 18n });
    const funded = await call('GET', `/v1/wallets/${wallet.id}/balances`);
    const eth = funded.body.data.find((b: { asset_id: string }) => b.asset_id === 'ETH');
    assert.deepEqual([eth.balance, eth.locked, eth.available], ['123456789012345678901234567', '1000000000000000000', '123456788012345678901234567']);
    // Beside the specification's base-unit fields, each amount as `_raw` (the same base units) and `_display` (a decimal).
    assert.deepEqual([eth.balance_raw, eth.locked_raw, eth.available_raw, eth.pending_raw], [eth.balance, eth.locked, eth.available, '0']);
    assert.deepEqual([eth.balance_display, eth.locked_display, eth.available_display, eth.pending_display], ['123456789.012345678901234567', '1', '123456788.012345678901234567', '0']);
    await creditCustodyWallet((await testOrm()).em.fork(), wallet.id, 'USDC_ETH', 1_500_000n);
    const usdc = (await call('GET', `/v1/wallets/${wallet.id}/balances`)).body.data.find((b: { asset_id: string }) => b.asset_id === 'USDC_ETH');
    assert.deepEqual([usdc.balance, usdc.balance_raw, usdc.balance_display, usdc.available_display], ['1500000', '1500000', '1.5', '1.5']);
  });

  describe('signing', () => {
    it('signs for Ethereum with keccak256, and viem recovers the address', async () => {
      const wallet = await createWallet('ethereum');
      const response = await call('POST', `/v1/wallets/${wallet.id}/sign`, { payload: 'hello custody', payload_encoding: 'text_utf8', hash_function: 'keccak256' });
      assert.equal(response.status, 200, response.text);
      const signature = response.body;
      const expectedDigest = keccak256(toHex('hello custody'));
      assert.equal(`0x${signature.signed_payload}`, expectedDigest);
      assert.deepEqual(
        {
          object: signature.object,
          address: signature.address,
          address_id: signature.address_id,
          wallet_id: signature.wallet_id,
          chain: signature.chain,
          network: signature.network,
          algorithm: signature.algorithm,
          curve: signature.curve,
          hash_function: signature.hash_function,
          payload: signature.payload,
          payload_encoding: signature.payload_encoding,
          signed_payload_encoding: signature.signed_payload_encoding,
          signature_encoding: signature.signature_encoding,
          signature_format: signature.signature_format,
        },
        {
          object: 'signature',
          address: wallet.primary_address.address,
          address_id: wallet.primary_address.id,
          wallet_id: wallet.id,
          chain: 'ethereum',
          network: 'sepolia',
          algorithm: 'ecdsa',
          curve: 'secp256k1',
          hash_function: 'keccak256',
          payload: 'hello custody',
          payload_encoding: 'text_utf8',
          signed_payload_encoding: 'hexadecimal',
          signature_encoding: 'hexadecimal',
          signature_format: 'secp256k1_recoverable_65',
        },
      );
      assert.match(signature.activity_id, /^[0-9a-f-]{36}$/);
      assert.ok(!Number.isNaN(Date.parse(signature.signed_at)));
      assert.equal(signature.signature.length, 130);
      assert.equal(signature.signature, `${signature.r}${signature.s}${signature.v.toString(16)}`);
      assert.equal(signature.v, 27 + signature.recovery_id);
      assert.ok(BigInt(`0x${signature.s}`) <= secp256k1.CURVE.n / 2n, 'low S');
      const recovered = await recoverAddress({ hash: expectedDigest, signature: `0x${signature.signature}` });
      assert.equal(recovered, wallet.primary_address.address);

      // no_op signs a 32-byte digest as given.
      const digest = bytesToHex(sha256(new TextEncoder().encode('tx')));
      const raw = await call('POST', `/v1/wallets/${wallet.id}/sign`, { payload: digest, hash_function: 'no_op' });
      assert.equal(raw.body.signed_payload, digest);
      assert.equal(await recoverAddress({ hash: `0x${digest}`, signature: `0x${raw.body.signature}` }), wallet.primary_address.address);
    });

    it("signs for Bitcoin with sha256 by default with the chosen address's key, verified by @noble/curves", async () => {
      const wallet = await createWallet('bitcoin');
      const taproot = (await call('POST', `/v1/wallets/${wallet.id}/addresses`, { address_format: 'p2tr' })).body;
      const legacy = (await call('POST', `/v1/wallets/${wallet.id}/addresses`, { address_format: 'p2pkh' })).body;
      const payload = 'deadbeef00';
      const digest = sha256(hexToBytes(payload));
      const toAddress = {
        p2wpkh: (key: Uint8Array) => p2wpkh(key, TEST_NETWORK).address,
        p2tr: (key: Uint8Array) => p2tr(key.slice(1), undefined, TEST_NETWORK).address,
        p2pkh: (key: Uint8Array) => p2pkh(key, TEST_NETWORK).address,
      } as const;
      for (const address of [wallet.primary_address, taproot, legacy]) {
        const body = address.is_primary ? { payload } : { payload, address_id: address.id };
        const response = await call('POST', `/v1/wallets/${wallet.id}/sign`, body);
        assert.equal(response.status, 200, response.text);
        assert.equal(response.body.hash_function, 'sha256');
        assert.equal(response.body.address_id, address.id);
        assert.equal(response.body.signed_payload, bytesToHex(digest));
        const publicKey = recoverPublicKey(response.body, digest);
        assert.equal(toAddress[address.format as keyof typeof toAddress](publicKey), address.address);
        assert.equal(response.body.public_key, bytesToHex(publicKey));
        assert.ok(secp256k1.verify(response.body.r + response.body.s, digest, publicKey));
      }
    });

    it('signs for Tron, and the recovered key gives the Tron address', async () => {
      const wallet = await createWallet('tron');
      const response = await call('POST', `/v1/wallets/${wallet.id}/sign`, { payload: '0x0102030405' });
      assert.equal(response.status, 200, response.text);
      assert.equal(response.body.hash_function, 'keccak256');
      const digest = keccak_256(hexToBytes('0102030405'));
      assert.equal(tronAddress(recoverPublicKey(response.body, digest)), wallet.primary_address.address);
    });

    it('signs for Solana with ed25519 over the raw message', async () => {
      const wallet = await createWallet('solana');
      const message = new TextEncoder().encode('solana message ✓');
      const response = await call('POST', `/v1/wallets/${wallet.id}/sign`, { payload: 'solana message ✓', payload_encoding: 'text_utf8' });
      assert.equal(response.status, 200, response.text);
      const signature = response.body;
      assert.deepEqual(
        [signature.algorithm, signature.curve, signature.hash_function, signature.signature_format, signature.v, signature.recovery_id],
        ['eddsa', 'ed25519', 'not_applicable', 'ed25519_64', 0, 0],
      );
      assert.equal(signature.signed_payload, bytesToHex(message));
      assert.equal(signature.signature, signature.r + signature.s);
      assert.ok(ed25519.verify(signature.signature, message, base58.decode(wallet.primary_address.address)));
      const noOp = await call('POST', `/v1/wallets/${wallet.id}/sign`, { payload: 'abcd', hash_function: 'no_op' });
      assert.ok(ed25519.verify(noOp.body.signature, hexToBytes('abcd'), base58.decode(wallet.primary_address.address)));
    });

    it('records each signature in the audit table without key material', async () => {
      const wallet = await createWallet('ethereum');
      const response = await call('POST', `/v1/wallets/${wallet.id}/sign`, { payload: 'cafe' });
      const em = (await testOrm()).em.fork();
      const [row] = await em.execute(`select * from signing_activities where id = ?`, [response.body.activity_id]);
      assert.equal(row.organization_id, org.organizationId);
      assert.equal(row.wallet_id, wallet.id);
      assert.equal(row.address_id, wallet.primary_address.id);
      assert.equal(row.api_key_id, org.apiKeyId);
      assert.equal(row.hash_function, 'keccak256');
      assert.equal(row.curve, 'secp256k1');
      assert.equal(row.derivation_path, wallet.primary_address.derivation_path);
      assert.equal(row.payload_sha256, bytesToHex(sha256(hexToBytes('cafe'))));
      const seed = await em.findOneOrFail(OrganizationSeed, { organization: org.organizationId, environment: 'sandbox' });
      assert.equal(row.seed_id, seed.id);
    });

    it('rejects bad encodings, oversized payloads, unknown or unfit hash functions with validation_failed', async () => {
      const ethereum = await createWallet('ethereum');
      const sign = (body: unknown, walletId = ethereum.id) => call('POST', `/v1/wallets/${walletId}/sign`, body);
      const expectInvalid = async (body: unknown, param: string, message?: RegExp) => {
        const response = await sign(body);
        assert.equal(response.status, 400, response.text);
        assert.equal(response.body.error.code, 'validation_failed');
        assert.equal(response.body.error.type, 'invalid_request_error');
        assert.equal(response.body.error.param, param);
        if (message) assert.match(response.body.error.message, message);
      };
      await expectInvalid({ payload: 'xyz1' }, 'payload', /hexadecimal/);
      await expectInvalid({ payload: 'abc' }, 'payload', /even number/);
      await expectInvalid({ payload: 'aa', payload_encoding: 'base64' }, 'payload_encoding');
      await expectInvalid({ payload: 'a'.repeat(65_538) }, 'payload');
      await expectInvalid({ payload: '' }, 'payload');
      await expectInvalid({ payload: 'aa', hash_function: 'md5' }, 'hash_function');
      await expectInvalid({ payload: 'aabb', hash_function: 'no_op' }, 'payload', /32 bytes.*2 bytes/);
      await expectInvalid({ payload: 'aabb', hash_function: 'not_applicable' }, 'hash_function', /ed25519/);
      // At the limit it signs: 65,536 hex characters are 32,768 bytes.
      assert.equal((await sign({ payload: 'ab'.repeat(32_768) })).status, 200);
    });

    it("answers 404 for another organization's wallet or address, and for an address of another wallet", async () => {
      const mine = await createWallet('ethereum');
      const sibling = await createWallet('ethereum');
      const other = await createTestOrganization('Other custody org');
      const otherVault = (await call('POST', '/v1/vaults', { name: 'Theirs' }, other.secret)).body.id;
      const theirs = (await call('POST', '/v1/wallets', { name: 'Theirs', chain: 'ethereum', vault_id: otherVault }, other.secret)).body;

      for (const path of [`/v1/wallets/${theirs.id}`, `/v1/wallets/${theirs.id}/balances`, `/v1/wallets/${theirs.id}/addresses`, `/v1/addresses/${theirs.primary_address.id}`, `/v1/vaults/${otherVault}`]) {
        const response = await call('GET', path);
        assert.equal(response.status, 404, path);
        assert.equal(response.body.error.code, 'resource_missing');
      }
      assert.equal((await call('POST', `/v1/wallets/${theirs.id}/sign`, { payload: 'aa' })).status, 404);
      assert.equal((await call('POST', `/v1/wallets/${theirs.id}/addresses`, {})).status, 404);
      assert.equal((await call('POST', '/v1/wallets', { name: 'x', chain: 'ethereum', vault_id: otherVault })).status, 404);
      for (const addressId of [theirs.primary_address.id, sibling.primary_address.id]) {
        const response = await call('POST', `/v1/wallets/${mine.id}/sign`, { payload: 'aa', address_id: addressId });
        assert.equal(response.status, 404);
        assert.equal(response.body.error.param, 'address_id');
      }
      assert.equal((await call('POST', '/v1/wallets/not-a-uuid/sign', { payload: 'aa' })).status, 404);
    });
  });

  it('enforces custody:read, custody:write and signing:write', async () => {
    const wallet = await createWallet('solana');
    const reader = (await org.key(['custody:read'])).secret;
    const writer = (await org.key(['custody:write'])).secret;
    const signer = (await org.key(['signing:write'])).secret;
    const expectScope = async (response: Awaited<ReturnType<typeof call>>, scope: string) => {
      assert.equal(response.status, 403, response.text);
      assert.equal(response.body.error.code, 'insufficient_scope');
      assert.equal(response.body.error.details.required_scope, scope);
    };
    assert.equal((await call('GET', `/v1/wallets/${wallet.id}/balances`, undefined, reader)).status, 200);
    await expectScope(await call('POST', '/v1/vaults', { name: 'no' }, reader), 'custody:write');
    await expectScope(await call('POST', `/v1/wallets/${wallet.id}/addresses`, {}, reader), 'custody:write');
    await expectScope(await call('POST', `/v1/wallets/${wallet.id}/sign`, { payload: 'aa' }, writer), 'signing:write');
    await expectScope(await call('GET', '/v1/wallets', undefined, signer), 'custody:read');
    assert.equal((await call('POST', `/v1/wallets/${wallet.id}/addresses`, {}, writer)).status, 201);
    assert.equal((await call('GET', `/v1/wallets/${wallet.id}`, undefined, writer)).status, 200);
    assert.equal((await call('POST', `/v1/wallets/${wallet.id}/sign`, { payload: 'aa' }, signer)).status, 200);
  });

  it('replays a wallet creation sent again with the same Idempotency-Key', async () => {
    const body = { name: 'Idempotent', chain: 'bitcoin', vault_id: vaultId };
    const headers = { 'idempotency-key': `wallet-${crypto.randomUUID()}` };
    const first = await call('POST', '/v1/wallets', body, org.secret, headers);
    const again = await call('POST', '/v1/wallets', body, org.secret, headers);
    assert.equal(again.headers.get('idempotent-replayed'), 'true');
    assert.deepEqual(again.body, first.body);
  });

  // Last: mocha runs nested suites after their parent's tests, so this sees every response above.
  describe('secrecy', () => {
    it('keeps the seed encrypted at rest and out of every response', async () => {
      const em = (await testOrm()).em.fork();
      const seed = await em.findOneOrFail(OrganizationSeed, { organization: org.organizationId, environment: 'sandbox' });
      const mnemonic = (await app.deps.keys['openMnemonic'](seed)).toString('utf8');
      assert.equal(mnemonic.split(' ').length, 24);
      assert.equal(seed.keyProvider, 'local');
      assert.match(seed.masterKeyId, /^local:[0-9a-f]{16}$/);
      const [row] = await em.execute(`select * from organization_seeds where id = ?`, [seed.id]);
      const stored = JSON.stringify(row);
      assert.ok(!stored.includes(mnemonic) && !stored.includes(mnemonic.split(' ').slice(0, 3).join(' ')));
      assert.ok(!Buffer.from(row.mnemonic_ciphertext, 'base64').includes(Buffer.from(mnemonic)));

      // The seed is the one that signs: it derives the stored address of a wallet.
      const wallet = await createWallet('ethereum');
      const walletRow = await em.findOneOrFail(Wallet, { id: wallet.id });
      const location = { chain: 'ethereum' as const, testnet: true, coinType: walletRow.coinType, format: 'eip55' as const, account: walletRow.accountIndex, index: 0 };
      const privateKeys: string[] = [];
      const derived = await app.deps.keys.withKeys(em, org.organizationId, 'sandbox', [location], ([key]) => {
        privateKeys.push(bytesToHex(key!.privateKey));
        return key!.address;
      });
      assert.equal(derived, wallet.primary_address.address);

      const everything = received.join('\n');
      assert.ok(received.length > 50);
      assert.ok(!everything.includes(mnemonic));
      assert.ok(!everything.includes(mnemonic.split(' ').slice(0, 4).join(' ')));
      for (const key of privateKeys) assert.ok(!everything.toLowerCase().includes(key));
      assert.ok(!/mnemonic|private_key|seed/i.test(everything.replace(/"seed_id"/g, '')));
    });
  });
});
