import { createHash, randomUUID } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Environment } from '../api-keys/entities';
import { openText, sealText } from '../keys/envelope';
import type { KeyProvider } from '../keys/provider';
import { envelopeColumn, type SealedColumn } from '../keys/rotation';
import { DomainError } from '../shared/errors';
import { canonicalJson } from '../shared/canonical-json';
import { prefixedId } from '../shared/ids';

export interface IdempotentRequest {
  organizationId: string;
  /** The calling key's environment: a sandbox and a live key never share a record. */
  environment: Environment;
  key: string;
  method: string;
  path: string;
  body: unknown;
}

/** A claim held by one handler: `token` fences it off from a handler whose claim was taken over. */
export interface HeldClaim {
  id: string;
  token: string;
  organizationId: string;
}

/** A response as sent: the exact body text, so a replay is the first response byte for byte. */
export interface StoredResponse {
  status: number;
  contentType: string;
  body: string;
}

export type Claim = ({ kind: 'claimed' } & HeldClaim) | ({ kind: 'replay' } & StoredResponse);

/** A JSON response serialized once: what is sent and what is stored are the same text. */
export const jsonResponse = (status: number, body: unknown): StoredResponse => ({ status, contentType: 'application/json', body: JSON.stringify(body ?? null) });

/** Stored responses may carry secrets (a new API key, a signing secret): sealed, bound to the organization and the record. */
const responseContext = (organizationId: string, recordId: string) => `custody-platform/idempotent-response/v1/${organizationId}/${recordId}`;

/** Where keys:rotate finds the stored responses' data keys (a response still in clear has none). */
export const idempotentResponseColumn: SealedColumn = envelopeColumn(
  'idempotency_records',
  'response_body',
  ['organization_id'],
  (row) => responseContext(row.organization_id as string, row.id),
  "response_format = 'sealed_v1'",
);

export const requestHash = (request: Omit<IdempotentRequest, 'organizationId' | 'environment' | 'key'>): string =>
  createHash('sha256').update(`${request.method} ${request.path}\n${canonicalJson(request.body ?? null)}`).digest('hex');

/**
 * Stripe's Idempotency-Key semantics on PostgreSQL. A key is claimed by a committed insert
 * before the handler runs, so a concurrent request with the same key sees it; the stored response
 * is written in the handler's own transaction, so a crash leaves either nothing (the claim can be
 * taken over after `lockSeconds`) or both the change and its response. A take-over gives the claim
 * a new token: the handler it was taken from can no longer complete (its transaction rolls back)
 * nor release it, so however slow it is, one handler's work and one outcome are stored.
 */
export class IdempotencyService {
  /** `keys` seals stored responses; a process that only purges (the worker) may go without. */
  constructor(
    private readonly lockSeconds: number,
    private readonly keys?: KeyProvider,
  ) {}

  private get provider(): KeyProvider {
    if (!this.keys) throw new Error('IdempotencyService needs a KeyProvider to store or replay responses');
    return this.keys;
  }

  async claim(em: EntityManager, request: IdempotentRequest): Promise<Claim> {
    const hash = requestHash(request);
    const now = new Date();
    const token = randomUUID();
    const claimed = await em.getConnection().execute<{ id: string }[]>(
      `insert into idempotency_records (id, organization_id, environment, key, request_hash, method, path, status, locked_at, claim_token, created_at)
       values (?, ?, ?, ?, ?, ?, ?, 'in_flight', ?, ?, ?)
       on conflict (organization_id, environment, key) do update set locked_at = excluded.locked_at, claim_token = excluded.claim_token
         where idempotency_records.status = 'in_flight'
           and idempotency_records.request_hash = excluded.request_hash
           and idempotency_records.locked_at < ?
       returning id`,
      [prefixedId('idem'), request.organizationId, request.environment, request.key, hash, request.method, request.path, now, token, now, new Date(now.getTime() - this.lockSeconds * 1000)],
      'all',
    );
    if (claimed[0]) return { kind: 'claimed', id: claimed[0].id, token, organizationId: request.organizationId };

    const [existing] = await em.getConnection().execute<
      {
        id: string;
        request_hash: string;
        status: string;
        response_status: number | null;
        response_body: string | null;
        response_format: string | null;
        response_content_type: string | null;
      }[]
    >(
      `select id, request_hash, status, response_status, response_body, response_format, response_content_type from idempotency_records
       where organization_id = ? and environment = ? and key = ?`,
      [request.organizationId, request.environment, request.key],
      'all',
    );
    if (!existing) return this.claim(em, request); // purged between the two statements: claim afresh
    if (existing.request_hash !== hash) {
      throw new DomainError({
        kind: 'idempotency',
        code: 'idempotency_key_reused',
        message: 'This Idempotency-Key was already used with a different request (method, path or body). Use a new key for a new request.',
        param: 'Idempotency-Key',
      });
    }
    if (existing.status === 'in_flight') {
      throw new DomainError({
        kind: 'idempotency',
        code: 'idempotency_key_in_use',
        message: 'A request with this Idempotency-Key is still being processed. Retry after it completes.',
        param: 'Idempotency-Key',
      });
    }
    const body =
      existing.response_format === 'sealed_v1'
        ? await openText(this.provider, existing.response_body!, responseContext(request.organizationId, existing.id))
        : (existing.response_body ?? 'null');
    return { kind: 'replay', status: existing.response_status ?? 200, contentType: existing.response_content_type ?? 'application/json', body };
  }

  /**
   * Stores the response while the claim is still ours; returns false when it was taken over (or
   * already completed), storing nothing.
   */
  async tryComplete(em: EntityManager, claim: HeldClaim, response: StoredResponse): Promise<boolean> {
    const sealed = await sealText(this.provider, response.body, responseContext(claim.organizationId, claim.id));
    const rows = await em.getConnection().execute<{ id: string }[]>(
      `update idempotency_records set status = 'completed', response_status = ?, response_body = ?, response_format = 'sealed_v1', response_content_type = ?
       where id = ? and claim_token = ? and status = 'in_flight' returning id`,
      [response.status, sealed, response.contentType, claim.id, claim.token],
      'all',
      em.getTransactionContext(),
    );
    return rows.length > 0;
  }

  /**
   * Stores a success's response inside the handler's transaction. A claim taken over meanwhile
   * throws, so the stale handler's transaction rolls back and only the new holder's work stands.
   */
  async complete(em: EntityManager, claim: HeldClaim, response: StoredResponse): Promise<void> {
    if (await this.tryComplete(em, claim, response)) return;
    throw new DomainError({
      kind: 'idempotency',
      code: 'idempotency_key_in_use',
      message: 'This request took too long and a retry with the same Idempotency-Key took it over; its changes were rolled back. Retry to get the outcome.',
      param: 'Idempotency-Key',
    });
  }

  /**
   * Forgets a claim whose request did not run to a storable end (5xx), so a retry executes afresh:
   * only while it is ours, in flight and without a response, so neither a claim taken over nor one
   * whose transaction committed despite a commit-phase error is lost.
   */
  async release(em: EntityManager, claim: HeldClaim): Promise<void> {
    await em.getConnection().execute(
      `delete from idempotency_records where id = ? and claim_token = ? and status = 'in_flight' and response_status is null`,
      [claim.id, claim.token],
      'run',
    );
  }

  /**
   * Seals the responses stored in clear before responses were sealed (a migration cannot reach
   * the KeyProvider: `cli migrate` runs this after the migrations). Returns the number sealed.
   */
  async sealClearResponses(em: EntityManager): Promise<number> {
    const rows = await em.getConnection().execute<{ id: string; organization_id: string; response_body: string }[]>(
      `select id, organization_id, response_body from idempotency_records where response_format = 'clear' and response_body is not null`,
      [],
      'all',
    );
    let sealed = 0;
    for (const row of rows) {
      const body = await sealText(this.provider, row.response_body, responseContext(row.organization_id, row.id));
      const updated = await em.getConnection().execute<{ id: string }[]>(
        `update idempotency_records set response_body = ?, response_format = 'sealed_v1' where id = ? and response_format = 'clear' returning id`,
        [body, row.id],
        'all',
      );
      sealed += updated.length;
    }
    return sealed;
  }

  /** Deletes records created before `cutoff`, in batches so a large purge never holds long locks. */
  async purgeCreatedBefore(em: EntityManager, cutoff: Date, batchSize = 5000): Promise<number> {
    let total = 0;
    for (;;) {
      const deleted = await em.getConnection().execute<{ id: string }[]>(
        `delete from idempotency_records where id in (select id from idempotency_records where created_at < ? limit ?) returning id`,
        [cutoff, batchSize],
        'all',
      );
      total += deleted.length;
      if (deleted.length < batchSize) return total;
    }
  }
}
