import { createHash, randomUUID } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { DomainError } from '../shared/errors';
import { canonicalJson } from '../shared/canonical-json';
import { prefixedId } from '../shared/ids';

export interface IdempotentRequest {
  organizationId: string;
  key: string;
  method: string;
  path: string;
  body: unknown;
}

/** A claim held by one handler: `token` fences it off from a handler whose claim was taken over. */
export interface HeldClaim {
  id: string;
  token: string;
}

export type Claim = ({ kind: 'claimed' } & HeldClaim) | { kind: 'replay'; status: number; body: unknown };

export const requestHash = (request: Omit<IdempotentRequest, 'organizationId' | 'key'>): string =>
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
  constructor(private readonly lockSeconds: number) {}

  async claim(em: EntityManager, request: IdempotentRequest): Promise<Claim> {
    const hash = requestHash(request);
    const now = new Date();
    const token = randomUUID();
    const claimed = await em.getConnection().execute<{ id: string }[]>(
      `insert into idempotency_records (id, organization_id, key, request_hash, method, path, status, locked_at, claim_token, created_at)
       values (?, ?, ?, ?, ?, ?, 'in_flight', ?, ?, ?)
       on conflict (organization_id, key) do update set locked_at = excluded.locked_at, claim_token = excluded.claim_token
         where idempotency_records.status = 'in_flight'
           and idempotency_records.request_hash = excluded.request_hash
           and idempotency_records.locked_at < ?
       returning id`,
      [prefixedId('idem'), request.organizationId, request.key, hash, request.method, request.path, now, token, now, new Date(now.getTime() - this.lockSeconds * 1000)],
      'all',
    );
    if (claimed[0]) return { kind: 'claimed', id: claimed[0].id, token };

    const [existing] = await em.getConnection().execute<
      { request_hash: string; status: string; response_status: number | null; response_body: unknown }[]
    >(
      `select request_hash, status, response_status, response_body from idempotency_records where organization_id = ? and key = ?`,
      [request.organizationId, request.key],
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
    return { kind: 'replay', status: existing.response_status ?? 200, body: existing.response_body };
  }

  /**
   * Stores the response while the claim is still ours; returns false when it was taken over (or
   * already completed), storing nothing.
   */
  async tryComplete(em: EntityManager, claim: HeldClaim, status: number, body: unknown): Promise<boolean> {
    const rows = await em.getConnection().execute<{ id: string }[]>(
      `update idempotency_records set status = 'completed', response_status = ?, response_body = ?
       where id = ? and claim_token = ? and status = 'in_flight' returning id`,
      [status, JSON.stringify(body ?? null), claim.id, claim.token],
      'all',
      em.getTransactionContext(),
    );
    return rows.length > 0;
  }

  /**
   * Stores a success's response inside the handler's transaction. A claim taken over meanwhile
   * throws, so the stale handler's transaction rolls back and only the new holder's work stands.
   */
  async complete(em: EntityManager, claim: HeldClaim, status: number, body: unknown): Promise<void> {
    if (await this.tryComplete(em, claim, status, body)) return;
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
