import assert from 'node:assert/strict';
import { createTestOrganization, startTestApp, type TestApp, type TestOrganization } from '../support/app';

/** EIP-55's own test vector, and the same address with one letter's case flipped: a broken checksum. */
const CHECKSUMMED = '0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed';
const WRONG_CHECKSUM = '0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAeD';

describe('Ethereum addresses: a mixed-case address must carry a right EIP-55 checksum', () => {
  let app: TestApp;
  let org: TestOrganization;
  let walletId: string;

  before(async () => {
    app = await startTestApp();
    org = await createTestOrganization('EIP-55');
    const vault = await call('POST', '/v1/vaults', { name: 'EIP-55' });
    const wallet = await call('POST', '/v1/wallets', { name: 'Sender', chain: 'ethereum', vault_id: vault.body.id });
    assert.equal(wallet.status, 201, wallet.text);
    walletId = wallet.body.id;
  });
  after(() => app?.close());

  function call(method: string, path: string, body?: unknown) {
    return app.request(method, path, { key: org.secret, body });
  }

  /** Every input that takes an Ethereum address, with that address. */
  const inputs = (address: string): [string, string, Record<string, unknown>][] => [
    ['/v1/address-book', 'address', { chain: 'ethereum', address, label: 'Payee' }],
    ['/v1/subscriptions', 'address', { chain: 'ethereum', address, webhook_url: 'http://127.0.0.1:9/eip55' }],
    ['/v1/sandbox/deposits', 'address', { chain: 'ethereum', address, asset: 'ETH', amount: '0.001' }],
    ['/v1/transactions/estimate-fee', 'to_address', { wallet_id: walletId, to_address: address, asset: 'ETH', amount: '0.001' }],
    ['/v1/transactions', 'to_address', { wallet_id: walletId, to_address: address, asset: 'ETH', amount: '0.001' }],
  ];

  it('refuses a wrong checksum with 400 on every input that takes an address, and changes nothing', async () => {
    for (const [path, param, body] of inputs(WRONG_CHECKSUM)) {
      const refused = await call('POST', path, body);
      assert.equal(refused.status, 400, `${path}: ${refused.text}`);
      assert.equal(refused.body.error.code, 'validation_failed', path);
      assert.equal(refused.body.error.param, param, path);
    }
    assert.equal((await call('GET', '/v1/address-book')).body.data.length, 0);
    assert.equal((await call('GET', '/v1/subscriptions')).body.data.length, 0);
    assert.equal((await call('GET', '/v1/transactions')).body.data.length, 0);
  });

  it('takes the right checksum, and all lower or all upper case hex digits (no checksum), as one address stored checksummed', async () => {
    const spellings = [CHECKSUMMED, CHECKSUMMED.toLowerCase(), `0x${CHECKSUMMED.slice(2).toUpperCase()}`];
    for (const [index, address] of spellings.entries()) {
      const entry = await call('POST', '/v1/address-book', { chain: 'ethereum', address, label: `Spelling ${index}` });
      if (index === 0) {
        assert.equal(entry.status, 201, `${address}: ${entry.text}`);
        assert.equal(entry.body.address, CHECKSUMMED);
      } else {
        // The same address however it is spelled: the entry already exists.
        assert.equal(entry.status, 409, `${address}: ${entry.text}`);
        assert.equal(entry.body.error.code, 'address_book_entry_exists');
      }
      const fee = await call('POST', '/v1/transactions/estimate-fee', { wallet_id: walletId, to_address: address, asset: 'ETH', amount: '0.001' });
      assert.equal(fee.status, 200, `${address}: ${fee.text}`);
    }
  });
});
