import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { ConfigError, loadConfig } from '../../src/config';
import { aesGcmDecrypt, aesGcmEncrypt } from '../../src/keys/aes-gcm';
import { DEVELOPMENT_MASTER_KEY, parseMasterKey } from '../../src/keys/master-key';
import { openText, sealText } from '../../src/keys/envelope';
import { createKeyProvider, keyProviderFor, LocalKeyProvider } from '../../src/keys/provider';
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

  it('reads MASTER_KEY_PREVIOUS as older keys that only unwrap, and rejects a malformed one without echoing it', async () => {
    const old = randomBytes(32);
    assert.throws(
      () => loadConfig({ DATABASE_URL, MASTER_KEY_PREVIOUS: `${old.toString('hex')},short` }),
      (error: Error) => error instanceof ConfigError && /MASTER_KEY_PREVIOUS/.test(error.message) && !error.message.includes(old.toString('hex')),
    );
    const sealedByOld = await sealText(new LocalKeyProvider(old), 'old secret', 'ctx');
    const ring = keyProviderFor(loadConfig({ DATABASE_URL, MASTER_KEY: key.toString('hex'), MASTER_KEY_PREVIOUS: old.toString('base64') }));
    assert.equal(ring.masterKeyId, new LocalKeyProvider(key).masterKeyId, 'the current key wraps');
    assert.equal(await openText(ring, sealedByOld, 'ctx'), 'old secret', 'the previous key unwraps what it wrapped');
    assert.equal(JSON.parse(await sealText(ring, 'new secret', 'ctx')).k, ring.masterKeyId);
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
