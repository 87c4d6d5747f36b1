import { execFile } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import type pino from 'pino';
import { wordlist } from '@scure/bip39/wordlists/english';
import { isLuhnValid } from '../../src/cards/issuer';
import { createLogger, type Logger } from '../../src/logger';

/**
 * What the suite leaves behind, for test/zz-secret-scan.test.ts: every log line the test apps
 * and workers wrote (at info, in memory, so stdout stays quiet), and the card numbers and CVVs
 * the API handed out through /secure.
 */
export const collectedLogs: string[] = [];

const collector: pino.DestinationStream = {
  write(line: string) {
    collectedLogs.push(line);
  },
};

/** The logger of test apps and workers: info and up, into `collectedLogs`. */
export const testLogger = (name?: string): Logger => createLogger('info', name, collector);

export interface IssuedCardSecrets {
  pan: string;
  cvv: string;
}

/** PAN and CVV of every card whose /secure response a test read. */
export const issuedCardSecrets: IssuedCardSecrets[] = [];

/**
 * The suite runs in several processes and scans once, in a last process of its own: each process
 * leaves what it collected in TEST_ARTIFACTS_DIR (a directory scripts/test.sh makes and removes) as it exits.
 */
const artifactsDir = process.env.TEST_ARTIFACTS_DIR;
if (artifactsDir) {
  process.once('exit', () => {
    writeFileSync(path.join(artifactsDir, `logs-${process.pid}.log`), collectedLogs.join(''));
    writeFileSync(path.join(artifactsDir, `cards-${process.pid}.json`), JSON.stringify(issuedCardSecrets));
  });
}

/** The logs and card secrets of every process of the run, this one's included. */
export function collectedBySuite(): { logs: string; cards: IssuedCardSecrets[] } {
  const files = artifactsDir ? readdirSync(artifactsDir).map((name) => path.join(artifactsDir, name)) : [];
  return {
    logs: [collectedLogs.join(''), ...files.filter((file) => file.endsWith('.log')).map((file) => readFileSync(file, 'utf8'))].join(''),
    cards: [...issuedCardSecrets, ...files.filter((file) => file.endsWith('.json')).flatMap((file) => JSON.parse(readFileSync(file, 'utf8')) as IssuedCardSecrets[])],
  };
}

/** Called with every test-app response: remembers card secrets wherever the API returned them. */
export function rememberCardSecrets(body: unknown): void {
  const data = (body as { data?: { pan?: unknown; cvv?: unknown } } | null)?.data;
  if (data && typeof data.pan === 'string' && typeof data.cvv === 'string') issuedCardSecrets.push({ pan: data.pan, cvv: data.cvv });
}

export interface SecretHit {
  kind: 'api_secret' | 'webhook_secret' | 'pan' | 'cvv' | 'mnemonic';
  /** A few characters around the hit, the secret itself masked. */
  context: string;
}

const API_SECRET = /sk_(?:test|live)_[0-9A-Za-z]{32}(?![0-9A-Za-z])/g;
const WEBHOOK_SECRET = /whsec_[A-Za-z0-9+/]{20,}/g;
const DIGIT_RUN = /(?<!\d)\d{13,19}(?!\d)/g;
/** A CVV named as such (JSON, key=value, a log field); the lookbehind keeps base64 ciphertext out. */
const LABELLED_CVV = /(?<![A-Za-z0-9+/])cvv["'\s:=]{1,4}(\d{3,4})(?!\d)/gi;
const WORDS = new Set(wordlist);
const WORD_RUN = /(?:[a-z]+[ \t]+){11,}[a-z]+/g;

const around = (text: string, index: number, length: number) =>
  `${text.slice(Math.max(0, index - 40), index)}<${length} chars>${text.slice(index + length, index + length + 40)}`.replace(/\s+/g, ' ');

/**
 * Secrets in clear in `text`: API secrets, whsec_ secrets, Luhn-valid numbers under the card
 * BIN, CVVs (labelled, or one of the issued cards' CVVs labelled or next to its PAN) and runs of
 * 12 or more BIP-39 English words.
 */
export function scanForSecrets(text: string, options: { cardBin: string; cards: IssuedCardSecrets[] }): SecretHit[] {
  const hits: SecretHit[] = [];
  for (const match of text.matchAll(API_SECRET)) hits.push({ kind: 'api_secret', context: around(text, match.index, match[0].length) });
  for (const match of text.matchAll(WEBHOOK_SECRET)) hits.push({ kind: 'webhook_secret', context: around(text, match.index, match[0].length) });
  for (const match of text.matchAll(DIGIT_RUN)) {
    if (match[0].startsWith(options.cardBin) && isLuhnValid(match[0])) hits.push({ kind: 'pan', context: around(text, match.index, match[0].length) });
  }
  for (const match of text.matchAll(LABELLED_CVV)) hits.push({ kind: 'cvv', context: around(text, match.index, match[0].length) });
  for (const card of options.cards) {
    // The exact CVV of an issued card near its number: only where the number itself leaked, which the PAN scan reports too.
    for (let index = text.indexOf(card.pan); index >= 0; index = text.indexOf(card.pan, index + 1)) {
      const window = text.slice(Math.max(0, index - 64), index + card.pan.length + 64);
      if (new RegExp(`(?<!\\d)${card.cvv}(?!\\d)`).test(window)) hits.push({ kind: 'cvv', context: around(text, index, card.pan.length) });
    }
  }
  for (const match of text.toLowerCase().matchAll(WORD_RUN)) {
    let run = 0;
    for (const word of match[0].split(/[ \t]+/)) {
      run = WORDS.has(word) ? run + 1 : 0;
      if (run === 12) {
        hits.push({ kind: 'mnemonic', context: around(text, match.index, match[0].length) });
        break;
      }
    }
  }
  return hits;
}

/** pg_dump from PG_BIN_DIR, PATH, or the newest /usr/lib/postgresql/<version>/bin (as scripts/postgres.sh pg_bin_dir looks). */
function pgDumpPath(): string {
  const candidates = [
    ...(process.env.PG_BIN_DIR ? [process.env.PG_BIN_DIR] : []),
    ...(process.env.PATH ?? '').split(path.delimiter),
    ...(existsSync('/usr/lib/postgresql')
      ? readdirSync('/usr/lib/postgresql')
          .sort((a, b) => Number(b) - Number(a))
          .map((version) => `/usr/lib/postgresql/${version}/bin`)
      : []),
  ];
  const found = candidates.map((dir) => path.join(dir, 'pg_dump')).find((file) => existsSync(file));
  if (!found) throw new Error('pg_dump was not found (set PG_BIN_DIR)');
  return found;
}

/** The whole database as plain SQL (schema and every row). */
export async function dumpDatabase(databaseUrl: string): Promise<string> {
  const { stdout } = await promisify(execFile)(pgDumpPath(), ['--no-owner', '--no-privileges', `--dbname=${databaseUrl}`], {
    maxBuffer: 1024 * 1024 * 1024,
    encoding: 'utf8',
  });
  return stdout;
}
