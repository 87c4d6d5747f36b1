import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { secretRedactor } from '../../src/cli/doctor/check';
import { testConfig } from '../support/environment';

describe('Doctor: what its output never holds', () => {
  it('hides secret values, secrets held in files, node URLs beyond their host and passwords; leaves a database name and a user name', () => {
    const file = path.join(mkdtempSync(path.join(tmpdir(), 'doctor-')), 'event-secret');
    writeFileSync(file, 'whsec_held-in-a-file-0123456789abcdef\n');
    const redact = secretRedactor(
      testConfig({
        DATABASE_URL: 'postgresql://postgres:db-password-1@db.internal:5432/custody',
        CHAIN_NODE_ETHEREUM_LIVE: 'https://mainnet.example/v3/0123456789abcdef0123456789abcdef',
        CHAIN_NODE_BITCOIN_LIVE: 'http://rpcuser:rpc-password-2@127.0.0.1:8332/',
        STRIPE_ISSUING_SECRET_KEY: 'sk_live_0123456789abcdef',
        STRIPE_ISSUING_AUTHORIZATION_SECRET: 'whsec_authorization-0123456789abcdef',
        STRIPE_ISSUING_WEBHOOK_SECRET_FILE: file,
      }),
    );
    const text = [
      'postgresql at postgresql://postgres:db-password-1@db.internal:5432/custody (password db-password-1), see docs/custody.md',
      'node https://mainnet.example/v3/0123456789abcdef0123456789abcdef, key 0123456789abcdef0123456789abcdef',
      'bitcoin rpc-password-2',
      'sk_live_0123456789abcdef whsec_authorization-0123456789abcdef whsec_held-in-a-file-0123456789abcdef',
      `master key ${process.env.MASTER_KEY}`,
    ].join('\n');
    assert.equal(
      redact(text),
      [
        'postgresql at postgresql://db.internal:5432 (password [redacted]), see docs/custody.md',
        'node https://mainnet.example, key [redacted]',
        'bitcoin [redacted]',
        '[redacted] [redacted] [redacted]',
        'master key [redacted]',
      ].join('\n'),
    );
  });
});
