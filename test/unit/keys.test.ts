import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { ConfigError, loadConfig } from '../../src/config';
import { aesGcmDecrypt, aesGcmEncrypt } from '../../src/keys/aes-gcm';
import { DEVELOPMENT_MASTER_KEY, parseMasterKey } from '../../src/keys/master-key';
import { createKeyProvider, LocalKeyProvider } from '../../src/keys/provider';
import { createLogger } from '../../src/logger';

const DATABASE_URL = 'postgresql://postgres@127.0.0.1:5432/x';

describe('Master key configuration and envelope encryption', () => {
  const key = randomBytes(32);

  it('reads MASTER_KEY as 32 bytes of hex or base64, and rejects anything else', () => {
    assert.deepEqual(parseMasterKey(key.toString('hex')), key);
    assert.deepEqual(parseMasterKey(key.toString('base64')), key);
    assert.deepEqual(parseMasterKey(key.toString('base64url')), key);
    assert.equal(parseMasterKey(randomBytes(16).toString('hex')), null);
    assert.equal(parseMasterKey('not a key'), null);
    assert.throws(() => loadConfig({ DATABASE_URL, MASTER_KEY: 'short' }), (error: Error) => error instanceof ConfigError && /MASTER_KEY/.test(error.message) && !/short/.test(error.message));
  });

  it('requires MASTER_KEY in production and falls back to the development key elsewhere', () => {
    assert.throws(() => loadConfig({ DATABASE_URL, NODE_ENV: 'production' }), /MASTER_KEY is required/);
    assert.equal(loadConfig({ DATABASE_URL, NODE_ENV: 'production', MASTER_KEY: key.toString('hex') }).MASTER_KEY, key.toString('hex'));
    const lines: string[] = [];
    const log = createLogger('warn');
    log.warn = ((_: unknown, message: string) => void lines.push(message)) as typeof log.warn;
    const provider = createKeyProvider(loadConfig({ DATABASE_URL, NODE_ENV: 'development' }), log) as LocalKeyProvider;
    assert.equal(provider.masterKeyId, new LocalKeyProvider(DEVELOPMENT_MASTER_KEY).masterKeyId);
    assert.match(lines.join('\n'), /MASTER_KEY is not set/);
  });

  it('wraps data keys so that only the same master key and context unwrap them', async () => {
    const provider = new LocalKeyProvider(key);
    const dataKey = randomBytes(32);
    const wrapped = await provider.encryptDataKey(dataKey, 'org-1');
    assert.ok(!Buffer.from(wrapped.ciphertext, 'base64').includes(dataKey));
    assert.deepEqual(Buffer.from(await provider.decryptDataKey(wrapped, 'org-1')), dataKey);
    await assert.rejects(provider.decryptDataKey(wrapped, 'org-2'));
    await assert.rejects(new LocalKeyProvider(randomBytes(32)).decryptDataKey(wrapped, 'org-1'), /wrapped under/);
    const sealed = aesGcmEncrypt(dataKey, Buffer.from('secret'), 'a');
    sealed[sealed.length - 1]! ^= 1;
    assert.throws(() => aesGcmDecrypt(dataKey, sealed, 'a'));
  });
});
