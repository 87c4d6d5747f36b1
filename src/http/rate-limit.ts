import type { EntityManager } from '@mikro-orm/postgresql';

/**
 * Rate limiting. Per API key the budget is shared by every API process (`SharedTokenBucket`, one
 * PostgreSQL statement per request); the pre-authentication limit on bogus keys per client
 * address stays in process memory (`TokenBucketLimiter`): it only has to keep one address from
 * making one process hash and look up keys without end.
 */
export interface RateLimitDecision {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Seconds until the bucket is full again (or, when refused, until one request is allowed). */
  resetSeconds: number;
}

interface Bucket {
  tokens: number;
  updatedAt: number;
}

export class TokenBucketLimiter {
  private readonly buckets = new Map<string, Bucket>();

  constructor(
    private readonly capacity: number,
    private readonly refillPerSecond: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** Whether `key` has a token left, without taking it. */
  hasToken(key: string): boolean {
    return this.refilled(key).tokens >= 1;
  }

  take(key: string): RateLimitDecision {
    const bucket = this.refilled(key);
    const allowed = bucket.tokens >= 1;
    if (allowed) bucket.tokens -= 1;
    this.buckets.set(key, bucket);
    const missing = allowed ? this.capacity - bucket.tokens : 1 - bucket.tokens;
    return {
      allowed,
      limit: this.capacity,
      remaining: Math.floor(bucket.tokens),
      resetSeconds: Math.ceil(missing / this.refillPerSecond),
    };
  }

  private refilled(key: string): Bucket {
    const now = this.now();
    const bucket = this.buckets.get(key) ?? { tokens: this.capacity, updatedAt: now };
    bucket.tokens = Math.min(this.capacity, bucket.tokens + ((now - bucket.updatedAt) / 1000) * this.refillPerSecond);
    bucket.updatedAt = now;
    this.buckets.set(key, bucket);
    return bucket;
  }
}

/**
 * A token bucket per API key in PostgreSQL (`api_key_rate_buckets`), so a limit of N per second is
 * N for the key across all API processes. Each request costs exactly one round trip: one upsert
 * refills the bucket by the time elapsed (the database's clock, the same for every process), takes
 * a token when there is one, and returns what it decided, under the row's lock, so concurrent
 * requests of one key through any process serialize on it and never overspend.
 */
export class SharedTokenBucket {
  constructor(
    private readonly capacity: number,
    private readonly refillPerSecond: number,
  ) {}

  async take(em: EntityManager, apiKeyId: string): Promise<RateLimitDecision> {
    const refilled = `least(?::double precision, b.tokens + extract(epoch from (clock_timestamp() - b.updated_at)) * ?::double precision)`;
    const [row] = await em.getConnection().execute<{ tokens: number; allowed: boolean }[]>(
      `insert into api_key_rate_buckets as b (api_key_id, tokens, allowed, updated_at) values (?, ?::double precision - 1, true, clock_timestamp())
       on conflict (api_key_id) do update set
         tokens = case when ${refilled} >= 1 then ${refilled} - 1 else ${refilled} end,
         allowed = ${refilled} >= 1,
         updated_at = clock_timestamp()
       returning tokens, allowed`,
      [apiKeyId, this.capacity, this.capacity, this.refillPerSecond, this.capacity, this.refillPerSecond, this.capacity, this.refillPerSecond, this.capacity, this.refillPerSecond],
    );
    const tokens = Number(row!.tokens);
    const missing = row!.allowed ? this.capacity - tokens : 1 - tokens;
    return { allowed: row!.allowed, limit: this.capacity, remaining: Math.floor(tokens), resetSeconds: Math.max(row!.allowed ? 0 : 1, Math.ceil(missing / this.refillPerSecond)) };
  }
}
