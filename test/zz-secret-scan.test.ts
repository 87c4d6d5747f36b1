import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { generateMnemonic } from '@scure/bip39';
import { wordlist } from '@scure/bip39/wordlists/english';
import { generateSecret } from '../src/api-keys/service';
import { SandboxIssuer } from '../src/cards/issuer';
import { generateSigningSecret } from '../src/events/secrets';
import { suiteDatabaseUrls, testConfig, testOrm } from './support/environment';
import { collectedBySuite, dumpDatabase, scanForSecrets } from './support/secret-scan';

/**
 * Runs last (scripts/test.sh runs it alone after the others; mocha also runs files in path order, and
 * `zz-` sorts after test/workflows/): whatever the suite stored or logged, no secret is in clear. Every
 * test process's database is dumped with pg_dump and scanned with every log line the test apps and
 * workers wrote.
 */
describe('Secret scan after the suite', () => {
  const cardBin = testConfig().CARD_BIN;

  it('finds each kind of secret when it is there (the scanner works)', async () => {
    const { pan, cvv } = (await new SandboxIssuer(cardBin).mintCard({ name: 'Scanner check' })).secrets!;
    const planted = [
      `key ${generateSecret('sandbox')} and ${generateSecret('live')}`,
      `secret ${generateSigningSecret()}`,
      `number ${pan}, "cvv": "${cvv}"`,
      `seed: ${generateMnemonic(wordlist, 128)}`,
      `sealed ${randomBytes(600).toString('base64')}`,
    ].join('\n');
    const kinds = scanForSecrets(planted, { cardBin, cards: [{ pan, cvv }] }).map((hit) => hit.kind);
    assert.deepEqual([...new Set(kinds)].sort(), ['api_secret', 'cvv', 'mnemonic', 'pan', 'webhook_secret']);
    assert.equal(kinds.filter((kind) => kind === 'api_secret').length, 2);
  });

  it('finds no API secret, signing secret, card number, CVV or mnemonic in the database dump or the logs', async function () {
    this.timeout(120_000);
    await testOrm(); // migrated even when this file runs alone
    const { logs, cards } = collectedBySuite();
    const options = { cardBin, cards };
    const hits = scanForSecrets(logs, options).map((hit) => ({ where: 'logs', ...hit }));
    for (const url of await suiteDatabaseUrls()) {
      const dump = await dumpDatabase(url);
      assert.ok(dump.includes('CREATE TABLE public.idempotency_records'), `the dump of ${new URL(url).pathname} holds the schema`);
      hits.push(...scanForSecrets(dump, options).map((hit) => ({ where: `database ${new URL(url).pathname.slice(1)}`, ...hit })));
    }
    assert.deepEqual(hits, [], `secrets in clear:\n${hits.map((hit) => `${hit.where} ${hit.kind}: ${hit.context}`).join('\n')}`);
  });
});
