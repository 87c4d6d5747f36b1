import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const CLI = path.resolve(__dirname, '../../src/cli.js');

/** Runs the operator CLI (`npm run cli -- ...`) in a process of its own against the test database; an `env` value of undefined unsets that variable. */
export async function cli(args: string[], databaseUrl = process.env.DATABASE_URL!, env: Record<string, string | undefined> = {}) {
  return run(process.execPath, [CLI, ...args], { env: { ...process.env, DATABASE_URL: databaseUrl, LOG_LEVEL: 'silent', ...env } });
}
