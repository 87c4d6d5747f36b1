import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';

export interface ReceivedAttempt {
  headers: Record<string, string>;
  body: string;
  /** For each secret the receiver knows, whether the signature verifies with it. */
  verifiedWith: boolean[];
  status: number;
}

/**
 * A real HTTP receiver on 127.0.0.1: verifies each request with the `standardwebhooks` package
 * against the secrets it is given, records it, and answers with the next queued status
 * (then `fallbackStatus`).
 */
export class WebhookReceiver {
  readonly attempts: ReceivedAttempt[] = [];
  secrets: string[] = [];
  private readonly statuses: number[] = [];
  private server?: http.Server;

  constructor(public fallbackStatus = 200) {}

  get url(): string {
    return `http://127.0.0.1:${(this.server!.address() as AddressInfo).port}/hooks`;
  }

  /** The next responses, in order. */
  respondWith(...statuses: number[]): this {
    this.statuses.push(...statuses);
    return this;
  }

  async start(): Promise<this> {
    this.server = http.createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on('data', (chunk: Buffer) => chunks.push(chunk));
      request.on('end', () => {
        const body = Buffer.concat(chunks).toString('utf8');
        const headers = Object.fromEntries(Object.entries(request.headers).map(([name, value]) => [name, String(value)]));
        const verifiedWith = this.secrets.map((secret) => {
          try {
            new Webhook(secret).verify(body, headers);
            return true;
          } catch {
            return false;
          }
        });
        const status = this.statuses.shift() ?? this.fallbackStatus;
        this.attempts.push({ headers, body, verifiedWith, status });
        response.writeHead(status, { 'content-type': 'application/json' }).end('{}');
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    return this;
  }

  close(): Promise<void> {
    return new Promise((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}
