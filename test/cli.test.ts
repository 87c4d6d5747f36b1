import assert from 'node:assert/strict';
import { mkdtemp, readFile, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startTestApp, type TestApp } from './support/app';
import { cli } from './support/cli';
import { testOrm } from './support/environment';

describe('CLI', () => {
  let app: TestApp;

  before(async () => {
    app = await startTestApp();
  });
  after(() => app?.close());

  it('bootstraps an empty database once: migrations, first organization, root key in a 0600 file', async () => {
    const orm = await testOrm();
    const name = `bootstrap_${Date.now()}`;
    await orm.em.getConnection().execute(`create database ${name}`);
    const url = new URL(process.env.DATABASE_URL!);
    url.pathname = `/${name}`;
    try {
      const migrated = await cli(['migrate'], url.toString());
      assert.ok(JSON.parse(migrated.stdout).applied.length >= 1);
      const keyFile = path.join(await mkdtemp(path.join(tmpdir(), 'cli-')), 'root-api-key');
      const first = await cli(['bootstrap', '--key-file', keyFile], url.toString());
      const secret = (await readFile(keyFile, 'utf8')).trim();
      assert.match(secret, /^sk_test_[0-9A-Za-z]{32}$/);
      assert.ok(first.stdout.includes(secret), 'printed once on the first start');
      assert.equal((await stat(keyFile)).mode & 0o777, 0o600);
      const second = await cli(['bootstrap', '--key-file', keyFile], url.toString());
      assert.equal(second.stdout, '', 'nothing secret on later starts');
    } finally {
      await orm.em.getConnection().execute(`drop database ${name} with (force)`);
    }
  });

  it('creates organizations and scoped keys that the API accepts, and configures an organization', async () => {
    const org = JSON.parse((await cli(['org:create', '--name', 'CLI org'])).stdout);
    assert.match(org.api_key.secret, /^sk_test_/);
    const me = await app.request('GET', '/v1/api-keys/me', { key: org.api_key.secret });
    assert.equal(me.body.organization_id, org.organization_id);

    const member = JSON.parse(
      (await cli(['member:create', '--org', org.organization_id, '--name', 'Ops', '--email', 'ops@example.com', '--org-role', 'admin'])).stdout,
    );
    const key = JSON.parse(
      (await cli(['key:create', '--org', org.organization_id, '--name', 'Reader', '--scopes', 'cards:read,lightning:read', '--user-id', member.id]))
        .stdout,
    );
    const keyMe = await app.request('GET', '/v1/api-keys/me', { key: key.secret });
    assert.deepEqual(keyMe.body.scopes, ['cards:read', 'lightning:read']);
    assert.equal(keyMe.body.user_id, member.id);

    await assert.rejects(cli(['key:create', '--org', org.organization_id, '--name', 'x', '--scopes', 'everything']), /unknown scopes: everything/);

    const configured = JSON.parse((await cli(['org:configure', '--org', org.organization_id, '--policy-activation-approvals', '0'])).stdout);
    assert.equal(configured.policy_activation_required_approvals, 0);
    const policy = await app.request('POST', '/v1/policies', {
      key: org.api_key.secret,
      body: { name: 'At once', rules: [{ name: 'Allow all', action_type: 'allow', conditions: [{ field: 'amount', operator: 'greater_than_or_equal', value: '0' }] }] },
    });
    const activated = await app.request('POST', `/v1/policies/${policy.body.id}/activate`, { key: org.api_key.secret, body: {} });
    assert.deepEqual([activated.status, activated.body.status], [200, 'enforced'], 'no approvals configured: enforced at once');
    await assert.rejects(cli(['org:configure', '--org', org.organization_id, '--policy-activation-approvals', '21']), /whole number/);

    // New payees wait: the live cooling period unless --environment sandbox says otherwise.
    const live = JSON.parse((await cli(['org:configure', '--org', org.organization_id, '--address-book-cooling-hours', '48'])).stdout);
    assert.deepEqual(live.address_book_cooling_hours, { live: 48, sandbox: 0 });
    assert.equal(live.policy_activation_required_approvals, 0, 'other settings stay');
    const sandbox = JSON.parse((await cli(['org:configure', '--org', org.organization_id, '--address-book-cooling-hours', '6', '--environment', 'sandbox'])).stdout);
    assert.deepEqual(sandbox.address_book_cooling_hours, { live: 48, sandbox: 6 });
    const entry = await app.request('POST', '/v1/address-book', {
      key: org.api_key.secret,
      body: { chain: 'ethereum', address: '0x8617e340b3d01fa5f11f306f4090fd50e238070d', label: 'Cold storage' },
    });
    assert.equal(entry.status, 201, entry.text);
    assert.equal(Date.parse(entry.body.usable_at) - Date.parse(entry.body.created_at), 6 * 3_600_000);
    await assert.rejects(cli(['org:configure', '--org', org.organization_id, '--address-book-cooling-hours', '1.5']), /whole number/);
    await assert.rejects(cli(['org:configure', '--org', org.organization_id]), /--policy-activation-approvals or --address-book-cooling-hours is required/);
  });
});
