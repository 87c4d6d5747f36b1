import type { IncomingMessage } from 'node:http';
import https from 'node:https';
import type { Environment } from '../api-keys/entities';
import type { Config } from '../config';
import { DomainError } from '../shared/errors';
import type { Bolt11Network } from './bolt11';
import { excessPermissions, lndFileCredentials, type LndCredentials } from './lnd-macaroon';
import type { LightningNodes } from './provider';

/**
 * Where an environment's LND answers REST: its URL, its macaroon (a secret) and the TLS certificate it
 * serves as they are now (lndFileCredentials reads the files again when they change), the network its
 * environment pays on (checked against the node's own), and whether a macaroon granting more than the
 * service uses is refused (live).
 */
export interface LndConnection {
  restUrl: string;
  credentials: () => LndCredentials;
  network: Bolt11Network;
  leastPrivilege?: boolean;
}

/**
 * LND cannot be used: it does not answer, it runs on another network than its environment pays on (a
 * mismatch is remembered, like a chain node's; an outage is not), or (live) its macaroon grants more
 * than the service uses, an admin macaroon say (until the file is replaced). Activities retry it; the
 * API answers it 503 lightning_node_unavailable (`answeredByNode`).
 */
export class LndUnavailableError extends Error {
  override name = 'LndUnavailableError';
  constructor(
    readonly reason: 'unreachable' | 'network_mismatch' | 'macaroon_too_broad',
    message: string,
  ) {
    super(message);
  }
}

/** An LND REST error answer: grpc-gateway's `{code, message}`, the message being the node's reason. */
export class LndError extends Error {
  constructor(
    readonly status: number,
    readonly grpcCode: number | undefined,
    message: string,
  ) {
    super(message);
  }
}

/** LND's Invoice message, the fields read here. */
export interface LndInvoice {
  payment_request: string;
  r_hash: string;
  state: 'OPEN' | 'SETTLED' | 'CANCELED' | 'ACCEPTED';
  amt_paid_msat?: string;
  settle_index?: string;
  add_index?: string;
}

/** How long the node's answer to "does it need route hints" is trusted: channels open and close rarely. */
const ROUTE_HINTS_DECISION_MS = 60_000;

type HttpMethod = 'GET' | 'POST' | 'DELETE';

/** How long one REST call may take; the payment stream has its own budget (PAY_WAIT_MS, lnd-provider.ts). */
export const CALL_TIMEOUT_MS = 10_000;
/** bytes fields travel base64 in JSON bodies (in a path, base64url: lnd-provider.ts). */
const base64ToHex = (value: string | undefined) => Buffer.from(value ?? '', 'base64').toString('hex');
export const hexToBase64 = (value: string) => Buffer.from(value, 'hex').toString('base64');

/** One LND node over its REST API: its macaroon in a header, its own certificate as the only CA trusted. */
export class LndNode {
  private inUse: { credentials: LndCredentials; macaroonHex: string; agent: https.Agent; excess: string[] | null } | undefined;
  private identity: Promise<string> | undefined;
  private routeHints: { private: Promise<boolean>; decidedAt: number } | undefined;

  constructor(private readonly connection: LndConnection) {}

  /**
   * The macaroon and connection pool of the credentials as they are now: a new certificate gets a new
   * pool (open streams finish on the old one), a new macaroon is checked again.
   */
  private current() {
    const credentials = this.connection.credentials();
    if (credentials !== this.inUse?.credentials) {
      const sameCert = this.inUse?.credentials.tlsCert.equals(credentials.tlsCert);
      this.inUse = {
        credentials,
        macaroonHex: credentials.macaroon.toString('hex'),
        agent: sameCert && this.inUse ? this.inUse.agent : new https.Agent({ ca: credentials.tlsCert, keepAlive: true }),
        excess: this.connection.leastPrivilege ? excessPermissions(credentials.macaroon) : [],
      };
    }
    const { excess } = this.inUse;
    if (excess === null || excess.length > 0) {
      throw new LndUnavailableError(
        'macaroon_too_broad',
        `The LND macaroon at ${new URL(this.connection.restUrl).host} grants ${excess ? excess.join(', ') : 'permissions it does not name'} beyond what the service uses; live refuses it: bake one with npm run cli -- lnd:bake-macaroon (docs/lightning.md).`,
      );
    }
    return this.inUse;
  }

  /** A request that never reached an answer: the node is down, refused the connection, or fell silent. */
  private unreachable(error: Error) {
    return new LndUnavailableError('unreachable', `LND at ${new URL(this.connection.restUrl).host} did not answer: ${error.message}`);
  }

  private open(method: HttpMethod, path: string, body: unknown, timeoutMs: number, onResponse: (response: IncomingMessage) => void) {
    const url = new URL(path, this.connection.restUrl);
    const { agent, macaroonHex } = this.current();
    const request = https.request(url, {
      method,
      agent,
      headers: { 'Grpc-Metadata-macaroon': macaroonHex, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      timeout: timeoutMs,
    });
    request.on('response', onResponse);
    request.on('timeout', () => request.destroy(new Error(`LND ${method} ${url.pathname} took longer than ${timeoutMs} ms`)));
    request.end(body === undefined ? undefined : JSON.stringify(body));
    return request;
  }

  /** One REST call to a node on its environment's network; an error answer throws LndError with the node's message. */
  async call<T>(method: HttpMethod, path: string, body?: unknown): Promise<T> {
    await this.identityPubkey();
    return this.send<T>(method, path, body);
  }

  private send<T>(method: HttpMethod, path: string, body?: unknown): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const request = this.open(method, path, body, CALL_TIMEOUT_MS, (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('error', reject);
        response.on('end', () => {
          try {
            const parsed = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}') as T & { code?: number; message?: string };
            if ((response.statusCode ?? 500) >= 400) reject(new LndError(response.statusCode ?? 500, parsed.code, parsed.message ?? `HTTP ${response.statusCode}`));
            else resolve(parsed);
          } catch (error) {
            reject(error);
          }
        });
      });
      request.on('error', (error) => reject(this.unreachable(error)));
    });
  }

  /**
   * A server-streaming call (newline-delimited `{"result": ...}` / `{"error": ...}`): each result goes
   * to `onMessage` until it returns a value, which ends the stream and is the answer. The stream
   * ending first (or `timeoutMs` without a byte, or `signal` aborting) answers `ended`; an error
   * message throws LndError.
   */
  async stream<M, R>(method: 'GET' | 'POST', path: string, body: unknown, timeoutMs: number, onMessage: (message: M) => R | undefined, signal?: AbortSignal): Promise<R | 'ended'> {
    await this.identityPubkey();
    return new Promise((resolve, reject) => {
      let buffered = '';
      let settled = false;
      const finish = (answer: R | 'ended' | Error) => {
        if (settled) return;
        settled = true;
        request.destroy();
        if (answer instanceof Error) reject(answer);
        else resolve(answer);
      };
      const request = this.open(method, path, body, timeoutMs, (response) => {
        const failed = (response.statusCode ?? 500) >= 400;
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => {
          buffered += chunk;
          // An error answer is one JSON document, read at its end.
          if (failed) return;
          let newline: number;
          while ((newline = buffered.indexOf('\n')) >= 0) {
            const line = buffered.slice(0, newline).trim();
            buffered = buffered.slice(newline + 1);
            if (!line) continue;
            let parsed: { result?: M; error?: { code?: number; message?: string } };
            try {
              parsed = JSON.parse(line) as typeof parsed;
            } catch (error) {
              return finish(error as Error);
            }
            if (parsed.error) return finish(new LndError(response.statusCode ?? 500, parsed.error.code, parsed.error.message ?? 'stream error'));
            if (parsed.result === undefined) continue;
            const answer = onMessage(parsed.result);
            if (answer !== undefined) return finish(answer);
          }
        });
        response.on('end', () => {
          if (!failed) return finish('ended');
          try {
            const parsed = JSON.parse(buffered.trim() || '{}') as { code?: number; message?: string; error?: { code?: number; message?: string } };
            const error = parsed.error ?? parsed;
            finish(new LndError(response.statusCode ?? 500, error.code, error.message ?? `HTTP ${response.statusCode}`));
          } catch {
            finish(new LndError(response.statusCode ?? 500, undefined, `HTTP ${response.statusCode}`));
          }
        });
        response.on('error', finish);
      });
      request.on('error', (error) => (error.message.includes('took longer than') ? finish('ended') : finish(this.unreachable(error))));
      signal?.addEventListener('abort', () => finish('ended'), { once: true });
    });
  }

  /**
   * The node's identity key (hex): the payee of the invoices it issues. Asked once, with the node's
   * network, before any other call: a node on another network than its environment's is never used
   * (a live key must not pay or issue regtest invoices against real balances).
   */
  identityPubkey(): Promise<string> {
    this.identity ??= this.send<{ identity_pubkey: string; chains?: { network?: string }[] }>('GET', '/v1/getinfo').then(
      (info) => {
        const network = info.chains?.[0]?.network;
        if (network !== this.connection.network) {
          throw new LndUnavailableError('network_mismatch', `LND at ${new URL(this.connection.restUrl).host} runs on ${network ?? 'an unnamed network'}; this environment pays ${this.connection.network} invoices.`);
        }
        return info.identity_pubkey;
      },
      (error: unknown) => {
        this.identity = undefined;
        throw error;
      },
    );
    return this.identity;
  }

  /**
   * An invoice for `preimage` (ours, so the internal route can settle it too), issued and signed by the
   * node, with route hints to its private channels when it has no public one (else no payer finds it).
   */
  async addInvoice(input: { preimage: string; amountMsat: bigint; description: string; expirySeconds: number }) {
    const added = await this.call<{ r_hash: string; payment_request: string }>('POST', '/v1/invoices', {
      r_preimage: hexToBase64(input.preimage),
      value_msat: input.amountMsat.toString(),
      memo: input.description,
      expiry: String(input.expirySeconds),
      private: await this.needsRouteHints(),
    });
    return { request: added.payment_request, paymentHash: base64ToHex(added.r_hash) };
  }

  /**
   * Whether invoices need hints to the node's private channels: it has no public channel, so the graph
   * a payer sees has no path to it. Asked at most once a ROUTE_HINTS_DECISION_MS (an invoice spends no
   * round trip on it); a node with public channels keeps its private ones to itself.
   */
  private needsRouteHints(): Promise<boolean> {
    if (!this.routeHints || Date.now() - this.routeHints.decidedAt > ROUTE_HINTS_DECISION_MS) {
      const decision = this.call<{ channels?: unknown[] }>('GET', '/v1/channels?public_only=true').then((found) => !found.channels?.length);
      // An unanswered question is asked again by the next invoice.
      decision.catch(() => (this.routeHints = undefined));
      this.routeHints = { private: decision, decidedAt: Date.now() };
    }
    return this.routeHints.private;
  }

  /**
   * Cancels the node's open invoice of this payment hash, so no outside payer can pay it any more:
   * `canceled` (also when it was already), `settled` (someone paid it on the node first), or `missing`
   * (the node never issued it: an invoice signed before the node was configured).
   */
  async cancelInvoice(paymentHash: string): Promise<'canceled' | 'settled' | 'missing'> {
    try {
      await this.call('POST', '/v2/invoices/cancel', { payment_hash: hexToBase64(paymentHash) });
      return 'canceled';
    } catch (error) {
      if (error instanceof LndError && /already settled/i.test(error.message)) return 'settled';
      if (error instanceof LndError && /unable to locate invoice|no invoices|not found/i.test(error.message)) return 'missing';
      throw error;
    }
  }

  /** The node's invoice of this payment hash, or null when it has none (one issued before the node was configured). */
  async lookupInvoice(paymentHash: string): Promise<LndInvoice | null> {
    try {
      return await this.call<LndInvoice>('GET', `/v1/invoice/${paymentHash}`);
    } catch (error) {
      if (error instanceof LndError && (error.status === 404 || /unable to locate invoice|no invoices/i.test(error.message))) return null;
      throw error;
    }
  }

  /**
   * Follows the node's invoice updates: first those settled after `settleIndex` (none when 0), in
   * settlement order, then live ones, until the stream ends, `timeoutMs` passes without a byte, or
   * `signal` aborts. No add_index: the node would send that backlog first, settled invoices of it
   * out of settlement order.
   */
  subscribeInvoices(settleIndex: bigint, onInvoice: (invoice: LndInvoice) => void, timeoutMs: number, signal: AbortSignal) {
    const handle = (invoice: LndInvoice) => {
      onInvoice(invoice);
      return undefined;
    };
    return this.stream<LndInvoice, never>('GET', `/v1/invoices/subscribe?settle_index=${settleIndex}`, undefined, timeoutMs, handle, signal);
  }
}

/** The Bolt11 network of each environment: live mainnet unless a staging deployment says otherwise; sandbox testnet unless its LND runs on another. */
export const lightningNetwork = (config: Config, environment: Environment): Bolt11Network =>
  environment === 'live' ? config.LIGHTNING_LND_LIVE_NETWORK : config.LIGHTNING_LND_SANDBOX_NETWORK;

const nodesByConfig = new WeakMap<Config, Map<Environment, LndNode | null>>();

/** The environment's LND settings (REST URL, macaroon and certificate files), or null when they are not all set. */
export function lndSettings(config: Config, environment: Environment): { restUrl: string; macaroonPath: string; tlsCertPath: string } | null {
  const [restUrl, macaroonPath, tlsCertPath] =
    environment === 'live'
      ? [config.LIGHTNING_LND_LIVE_REST_URL, config.LIGHTNING_LND_LIVE_MACAROON_PATH, config.LIGHTNING_LND_LIVE_TLS_CERT_PATH]
      : [config.LIGHTNING_LND_SANDBOX_REST_URL, config.LIGHTNING_LND_SANDBOX_MACAROON_PATH, config.LIGHTNING_LND_SANDBOX_TLS_CERT_PATH];
  return restUrl && macaroonPath && tlsCertPath ? { restUrl, macaroonPath, tlsCertPath } : null;
}

/** The environment's configured LND (its macaroon and certificate read again when their files change), or null when none is. */
function lndNodeFor(config: Config, environment: Environment): LndNode | null {
  let nodes = nodesByConfig.get(config);
  if (!nodes) nodesByConfig.set(config, (nodes = new Map()));
  if (!nodes.has(environment)) {
    const settings = lndSettings(config, environment);
    nodes.set(
      environment,
      settings
        ? new LndNode({
            restUrl: settings.restUrl,
            credentials: lndFileCredentials(settings.macaroonPath, settings.tlsCertPath),
            network: lightningNetwork(config, environment),
            leastPrivilege: environment === 'live',
          })
        : null,
    );
  }
  return nodes.get(environment) ?? null;
}

/** Each environment's LND as the configuration names it (docs/lightning.md). */
export const configuredLightningNodes = (config: Config): LightningNodes => ({
  lnd: (environment) => lndNodeFor(config, environment),
  network: (environment) => lightningNetwork(config, environment),
});

/**
 * 503 lightning_node_unavailable: a live Lightning request with no node configured (never the
 * sandbox's stand-in), or the environment's node unreachable or on another network (details.reason).
 * Only an unreachable node is worth asking again soon (`retry_after_seconds`, and Retry-After): the
 * others last until an operator changes the configuration and restarts the service.
 */
export const lightningNodeUnavailable = (
  reason: 'not_configured' | LndUnavailableError['reason'] = 'not_configured',
  message = 'No Lightning node is configured for live: set LIGHTNING_LND_LIVE_REST_URL, LIGHTNING_LND_LIVE_MACAROON_PATH and LIGHTNING_LND_LIVE_TLS_CERT_PATH (docs/lightning.md).',
) =>
  new DomainError({ kind: 'unavailable', code: 'lightning_node_unavailable', message, details: reason === 'unreachable' ? { reason, retry_after_seconds: 60 } : { reason } });

/** A request's node calls, their LndUnavailableError answered as 503 lightning_node_unavailable rather than a 500. */
export async function answeredByNode<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (error instanceof LndUnavailableError) throw lightningNodeUnavailable(error.reason, error.message);
    throw error;
  }
}
