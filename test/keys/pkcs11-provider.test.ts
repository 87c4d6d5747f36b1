import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { ConfigError, loadConfig } from '../../src/config';
import { openText, sealText } from '../../src/keys/envelope';
import { Pkcs11KeyProvider } from '../../src/keys/pkcs11-provider';
import { pkcs11Module, Pkcs11Token } from '../../src/keys/pkcs11-token';
import { keyProviderFor, LocalKeyProvider } from '../../src/keys/provider';
import { cli } from '../support/cli';
import { testConfig, testOrm } from '../support/environment';
import { softHsmToken, type SoftHsmToken } from '../support/softhsm';

const DATABASE_URL = 'postgresql://postgres@127.0.0.1:5432/x';

/** The PKCS#11 provider against a real token (SoftHSM2): the master key is the token's, and never leaves it. */
describe('PKCS#11 key provider (SoftHSM2)', () => {
  let hsm: SoftHsmToken;
  const newKey = (options?: { extractable?: boolean }) => {
    const label = `kek-${randomUUID().slice(0, 8)}`;
    hsm.createKey(label, options);
    return label;
  };
  const providerOf = (label: string, overrides: Record<string, string> = {}) => keyProviderFor(testConfig({ ...hsm.config(label), ...overrides }));

  before(async function () {
    hsm = await softHsmToken(this);
  });

  it('wraps data keys inside the token with AES-GCM: only the same key and context unwrap them', async () => {
    const label = newKey();
    const provider = providerOf(label);
    assert.equal(provider.name, 'pkcs11');
    assert.equal(provider.development, false);
    assert.match(provider.masterKeyId, new RegExp(`^pkcs11:${hsm.tokenLabel}/${label}#[0-9a-f]{6}$`), 'names the token, the key and its check value');
    const dataKey = randomBytes(32);
    const wrapped = await provider.encryptDataKey(dataKey, 'org-1');
    assert.equal(wrapped.masterKeyId, provider.masterKeyId);
    assert.ok(!Buffer.from(wrapped.ciphertext, 'base64').includes(dataKey), 'the data key is not in its wrapping');
    assert.deepEqual(Buffer.from(await provider.decryptDataKey(wrapped, 'org-1')), dataKey);
    await assert.rejects(provider.decryptDataKey(wrapped, 'org-2'), /could not unwrap a data key/, 'the context is bound');
    const tampered = Buffer.from(wrapped.ciphertext, 'base64');
    tampered[20]! ^= 1;
    await assert.rejects(provider.decryptDataKey({ ...wrapped, ciphertext: tampered.toString('base64') }, 'org-1'), /could not unwrap a data key/);
    const other = providerOf(newKey());
    await assert.rejects(other.decryptDataKey(wrapped, 'org-1'), /wrapped under pkcs11:/, 'another key of the token opens nothing of this one');
  });

  it('opens one session and reuses it; a session the HSM lost is opened and logged in again', async () => {
    const provider = providerOf(newKey());
    const wrapped = await provider.encryptDataKey(randomBytes(32), 'ctx');
    const module = pkcs11Module(hsm.library);
    const openSession = module.C_OpenSession.bind(module);
    let opened = 0;
    module.C_OpenSession = (...args: Parameters<typeof openSession>) => (opened++, openSession(...args));
    try {
      await Promise.all(Array.from({ length: 20 }, (_, index) => provider.encryptDataKey(randomBytes(32), `ctx-${index}`)));
      assert.equal(opened, 0, 'twenty concurrent wraps on the session already open');
      hsm.dropSessions();
      assert.equal((await provider.decryptDataKey(wrapped, 'ctx')).length, 32, 'unwraps after the HSM closed every session (and logged out)');
      assert.equal(opened, 1, 'one new session, logged in again');
    } finally {
      module.C_OpenSession = openSession;
    }
  });

  it('tells a key from another of the same label: the replaced key is refused, and the new one opens nothing the old one wrapped', async () => {
    const label = newKey();
    const provider = providerOf(label);
    const wrapped = await provider.encryptDataKey(randomBytes(32), 'ctx');
    hsm.destroyKey(label);
    hsm.createKey(label);
    await assert.rejects(provider.encryptDataKey(randomBytes(32), 'ctx'), /is not the key it was/, 'never wraps under a key that changed under its label');
    // As a process started after the swap sees it.
    const replaced = new Pkcs11KeyProvider(new Pkcs11Token(pkcs11Module(hsm.library), { library: hsm.library, tokenLabel: hsm.tokenLabel, pin: hsm.pin }), label);
    assert.notEqual(replaced.masterKeyId, provider.masterKeyId);
    await assert.rejects(replaced.decryptDataKey(wrapped, 'ctx'), /wrapped under/);
  });

  it('refuses a key that can leave the token, a missing key and an unknown token, saying what to fix', () => {
    assert.throws(() => providerOf(newKey({ extractable: true })), /can leave the token: make it with CKA_SENSITIVE true and CKA_EXTRACTABLE false/);
    assert.throws(() => providerOf('no-such-key'), new RegExp(`no secret key "no-such-key" of token "${hsm.tokenLabel}"`));
    assert.throws(() => providerOf(newKey(), { PKCS11_TOKEN_LABEL: 'no-such-token' }), /no token labelled "no-such-token"/);
    assert.throws(() => providerOf(newKey(), { PKCS11_PREVIOUS_KEY_LABELS: 'no-such-old-key' }), /no secret key "no-such-old-key"/, 'a previous key is checked at start too');
  });

  it('refuses to start without library, token, PIN or key label, or with a wrong PIN, and never says the PIN', async () => {
    const pin = `pin-${randomUUID()}`;
    assert.throws(
      () => loadConfig({ DATABASE_URL, KEY_PROVIDER: 'pkcs11', PKCS11_PIN: pin }),
      (error: Error) =>
        error instanceof ConfigError &&
        ['PKCS11_LIBRARY', 'PKCS11_TOKEN_LABEL', 'PKCS11_KEY_LABEL'].every((name) => error.message.includes(`${name} is required`)) &&
        !error.message.includes(pin),
    );
    assert.throws(() => loadConfig({ DATABASE_URL, KEY_PROVIDER: 'pkcs11', ...hsm.config('k'), PKCS11_PIN: '' }), /PKCS11_PIN must not be empty/);
    assert.throws(() => loadConfig({ DATABASE_URL, ...hsm.config('k'), MASTER_KEY: randomBytes(32).toString('hex') }), /move it to MASTER_KEY_PREVIOUS/);
    assert.equal(loadConfig({ DATABASE_URL, NODE_ENV: 'production', ...hsm.config('k') }).KEY_PROVIDER, 'pkcs11', 'production needs no MASTER_KEY with an HSM');

    await testOrm();
    const started = await cli(['keys:rotate', '--dry-run'], undefined, { ...hsm.config(newKey()), PKCS11_PIN: pin }).then(
      () => assert.fail('started with a wrong PIN'),
      (error: { code: number; stdout: string; stderr: string }) => error,
    );
    assert.equal(started.code, 1);
    assert.match(started.stderr, /refused the login with PKCS11_PIN \(CKR_PIN_INCORRECT\)/);
    assert.ok(!`${started.stdout}${started.stderr}`.includes(pin), 'the PIN is in no output');
  });

  it('moves from MASTER_KEY to the HSM: the local key, kept as previous, opens what it sealed; new values are sealed in the HSM', async () => {
    const localKey = randomBytes(32);
    const sealed = await sealText(new LocalKeyProvider(localKey), 'whsec_old', 'ctx');
    const label = newKey();
    const during = providerOf(label, { MASTER_KEY_PREVIOUS: localKey.toString('hex') });
    assert.equal(await openText(during, sealed, 'ctx'), 'whsec_old');
    const resealed = await sealText(during, 'whsec_new', 'ctx');
    assert.equal(JSON.parse(resealed).k, during.masterKeyId);
    assert.match(during.masterKeyId, /^pkcs11:/);
    const after = providerOf(label);
    assert.equal(await openText(after, resealed, 'ctx'), 'whsec_new');
    await assert.rejects(openText(after, sealed, 'ctx'), /wrapped under local:/, 'without the previous key the old value stays shut');
  });
});
