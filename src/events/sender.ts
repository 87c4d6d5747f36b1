import http from 'node:http';
import https from 'node:https';
import { checkUrlShape, DestinationRefused, guardedLookup, type UrlPolicy } from './url-policy';

export const ATTEMPT_TIMEOUT_MS = 10_000;

export interface PostResult {
  /** Set once the destination answered. */
  status?: number;
  error?: string;
  durationMs: number;
}

/**
 * One POST of a signed payload. Never throws: every outcome (answer, timeout, refused or broken
 * connection) is a result, so the caller records it. The address policy is enforced at connect
 * time through the DNS lookup, so a host that re-resolves to a private address is refused too.
 */
export async function postWebhook(input: { url: string; body: string; headers: Record<string, string>; policy: UrlPolicy; timeoutMs?: number }): Promise<PostResult> {
  const started = Date.now();
  const elapsed = () => Date.now() - started;
  let url: URL;
  try {
    url = checkUrlShape(input.url, input.policy);
  } catch (error) {
    return { error: `destination refused: URL ${(error as Error).message}`, durationMs: elapsed() };
  }
  const timeoutMs = input.timeoutMs ?? ATTEMPT_TIMEOUT_MS;
  return new Promise<PostResult>((resolve) => {
    const request = (url.protocol === 'https:' ? https : http).request(url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(input.body),
        'user-agent': 'custody-platform-webhooks/1',
        ...input.headers,
      },
      lookup: guardedLookup(input.policy) as never,
      signal: AbortSignal.timeout(timeoutMs),
    });
    request.on('response', (response) => {
      // The body is not needed; draining it lets the timeout cover a slow answer too.
      response.resume();
      response.on('end', () => resolve({ status: response.statusCode, durationMs: elapsed() }));
      response.on('error', () => resolve({ status: response.statusCode, durationMs: elapsed() }));
    });
    request.on('error', (error: NodeJS.ErrnoException) => {
      const message =
        error.name === 'AbortError' || error.name === 'TimeoutError'
          ? `timed out after ${timeoutMs / 1000} s`
          : error instanceof DestinationRefused
            ? `destination refused: URL ${error.message}`
            : `connection failed: ${error.code ?? error.message}`;
      resolve({ error: message, durationMs: elapsed() });
    });
    request.end(input.body);
  });
}
