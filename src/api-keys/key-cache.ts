import type { Client } from 'pg';
import { applicationName } from '../db/application-name';
import { postgresConnection } from '../db/connection';
import type { Logger } from '../logger';
import type { Environment } from './entities';

/** What authentication needs of a key: one row of api_keys, as the driver returns it. */
export interface KeyRow {
  id: string;
  organization_id: string;
  member_id: string | null;
  scopes: string[];
  environment: Environment;
  api_version: string;
  /** Minted for another member who has not confirmed it yet: it authenticates nothing. */
  pending_confirmation: boolean;
  /** The driver hands timestamps of raw queries back as strings. */
  last_used_at: string | null;
}

/** PostgreSQL channel that a trigger on api_keys notifies with the key's id on every change but last_used_at (migration 20261125081653). */
export const API_KEY_CHANGES_CHANNEL = 'api_key_changes';

/** The listener's reconnect backoff: doubling from `first` up to `max`. */
export const RECONNECT_MS = { first: 100, max: 5_000 };

/**
 * Key lookups by secret hash, cached in process memory for `ttlMs`, so an authenticated request
 * costs no round trip for its key. A revocation (or any change of a key but its last use) must take
 * effect on every API process within a second: each cache LISTENs on a channel that a trigger on
 * api_keys notifies in the changing transaction, so the notice arrives when it commits, from
 * whichever process or tool made the change, and evicts the key. The cache serves only while its
 * listener is connected: on any listener failure it empties, lookups go to the database, and it
 * reconnects; a lookup that raced a notice (or a reconnect) is not cached (`generation`).
 */
export class ApiKeyCache {
  private readonly byHash = new Map<string, { row: KeyRow; cachedAt: number }>();
  private listener: Client | undefined;
  private listening = false;
  private starting: Promise<void> | undefined;
  private stopped = false;
  private reconnectMs = RECONNECT_MS.first;
  private reconnectTimer: NodeJS.Timeout | undefined;
  /** Bumped by every notice and listener change: a lookup begun under an older generation is not cached. */
  private generation = 0;

  constructor(
    private readonly databaseUrl: string,
    private readonly ttlMs: number,
    private readonly maxEntries: number,
    private readonly log: Logger,
  ) {}

  get enabled(): boolean {
    return this.ttlMs > 0;
  }

  /** A cached row for the hash, or undefined (not cached, expired, or the listener is down). Starts the listener on first use. */
  get(secretHash: string, now = Date.now()): KeyRow | undefined {
    if (!this.enabled || this.stopped) return undefined;
    if (!this.listening) {
      // The first use starts it; after a loss the planned reconnect does, on its backoff.
      if (!this.reconnectTimer) void this.start();
      return undefined;
    }
    const entry = this.byHash.get(secretHash);
    if (!entry) return undefined;
    if (now - entry.cachedAt > this.ttlMs) {
      this.byHash.delete(secretHash);
      return undefined;
    }
    return entry.row;
  }

  /** The generation to hand back to `set` with the row a lookup begun now finds. */
  currentGeneration(): number {
    return this.generation;
  }

  /** Caches a row read from the database, unless a notice or reconnect came in since the read began. */
  set(secretHash: string, row: KeyRow, readAtGeneration: number, now = Date.now()): void {
    if (!this.listening || readAtGeneration !== this.generation) return;
    if (this.byHash.size >= this.maxEntries) this.byHash.delete(this.byHash.keys().next().value!);
    this.byHash.set(secretHash, { row, cachedAt: now });
  }

  /** Evicts a key at once in this process (its own revocation); other processes learn of it by the notice. */
  forget(keyId: string): void {
    this.generation += 1;
    for (const [hash, entry] of this.byHash) if (entry.row.id === keyId) this.byHash.delete(hash);
  }

  /** Connects the listener (idempotent); resolves once it listens, or once a failure has been logged and a reconnect planned. */
  start(): Promise<void> {
    if (!this.enabled || this.stopped || this.listening) return Promise.resolve();
    this.starting ??= this.connect().finally(() => {
      this.starting = undefined;
    });
    return this.starting;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.reconnectTimer);
    await this.starting;
    this.dropListener();
  }

  private async connect(): Promise<void> {
    // As the ORM connects (TLS from libpq's sslmode, the URL's writable host): LISTEN needs a primary, a standby refuses it.
    const { Client: WritableClient, settings } = postgresConnection(this.databaseUrl);
    const client = new WritableClient({ ...settings, application_name: applicationName('listen'), keepAlive: true });
    client.on('notification', (notice) => {
      if (notice.channel === API_KEY_CHANGES_CHANNEL && notice.payload) this.forget(notice.payload);
    });
    client.on('error', (error) => this.lost(client, error));
    client.on('end', () => this.lost(client, new Error('connection ended')));
    this.listener = client;
    try {
      await client.connect();
      await client.query(`listen ${API_KEY_CHANGES_CHANNEL}`);
      if (this.listener !== client || this.stopped) {
        void client.end().catch(() => undefined);
        return;
      }
      this.generation += 1;
      this.listening = true;
      this.reconnectMs = RECONNECT_MS.first;
    } catch (error) {
      this.lost(client, error);
    }
  }

  private lost(client: Client, error: unknown): void {
    if (this.listener !== client) return;
    this.dropListener();
    if (this.stopped) return;
    this.log.warn({ err: error instanceof Error ? error.message : String(error), retry_ms: this.reconnectMs }, 'API key cache listener lost; serving keys from the database until it is back');
    // One reconnect planned at a time: a second one left behind would connect beside a listener already back.
    clearTimeout(this.reconnectTimer);
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = undefined;
      void this.start();
    }, this.reconnectMs);
    this.reconnectTimer.unref();
    this.reconnectMs = Math.min(this.reconnectMs * 2, RECONNECT_MS.max);
  }

  private dropListener(): void {
    const client = this.listener;
    this.listener = undefined;
    this.listening = false;
    this.generation += 1;
    this.byHash.clear();
    client?.removeAllListeners('notification');
    client?.on('error', () => undefined);
    void client?.end().catch(() => undefined);
  }
}
