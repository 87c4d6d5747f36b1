import type { EntityManager } from '@mikro-orm/postgresql';

/**
 * Rate limiting. Per API key the budget is shared by every API process (`SharedTokenBucket`, one
 * PostgreSQL statement per request); the limit on bogus keys per client address stays in process
 * memory (`TokenBucketLimiter`, bounded in size): it only has to keep one address from making one
 * process look up keys without end.
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

/**
 * Token buckets per key in process memory, at most `maxKeys` of them: a key is stored only once it
 * takes a token (a full bucket is the same as none), and the least recently used one is dropped past
 * the bound (a Map iterates in insertion order; every take moves its key to the end).
 */
export class TokenBucketLimiter {
  private readonly buckets = new Map<string, Bucket>();

  constructor(
    private readonly capacity: number,
    private readonly refillPerSecond: number,
    private readonly maxKeys: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** Keys held now (never more than `maxKeys`). */
  get size(): number {
    return this.buckets.size;
  }

  /** Whether `key` has a token left, without taking it. */
  hasToken(key: string): boolean {
    const bucket = this.buckets.get(key);
    return !bucket || this.refill(bucket).tokens >= 1;
  }

  take(key: string): RateLimitDecision {
    const bucket = this.refill(this.buckets.get(key) ?? { tokens: this.capacity, updatedAt: this.now() });
    const allowed = bucket.tokens >= 1;
    if (allowed) bucket.tokens -= 1;
    this.buckets.delete(key);
    this.buckets.set(key, bucket);
    if (this.buckets.size > this.maxKeys) this.buckets.delete(this.buckets.keys().next().value!);
    const missing = allowed ? this.capacity - bucket.tokens : 1 - bucket.tokens;
    return {
      allowed,
      limit: this.capacity,
      remaining: Math.floor(bucket.tokens),
      resetSeconds: Math.ceil(missing / this.refillPerSecond),
    };
  }

  private refill(bucket: Bucket): Bucket {
    const now = this.now();
    bucket.tokens = Math.min(this.capacity, bucket.tokens + ((now - bucket.updatedAt) / 1000) * this.refillPerSecond);
    bucket.updatedAt = now;
    return bucket;
  }
}

/** Runs work one at a time per key; a key with nothing queued holds no memory. */
export class KeyedSerialQueue {
  private readonly tails = new Map<string, Promise<unknown>>();

  run<T>(key: string, work: () => Promise<T>): Promise<T> {
    const result = (this.tails.get(key) ?? Promise.resolve()).then(work);
    const tail = result.then(
      () => undefined,
      () => undefined,
    );
    this.tails.set(key, tail);
    void tail.then(() => {
      if (this.tails.get(key) === tail) this.tails.delete(key);
    });
    return result;
  }
}

/**
 * At most `limit` pieces of work in flight per key in this process; past it `run` refuses at once
 * (answers undefined) rather than queueing, so a caller is told to retry instead of being held. A key
 * with nothing in flight holds no memory.
 */
export class KeyedConcurrencyLimit {
  private readonly inFlight = new Map<string, number>();

  constructor(readonly limit: number) {}

  async run<T>(key: string, work: () => Promise<T>): Promise<{ ran: true; result: T } | { ran: false }> {
    const running = this.inFlight.get(key) ?? 0;
    if (running >= this.limit) return { ran: false };
    this.inFlight.set(key, running + 1);
    try {
      return { ran: true, result: await work() };
    } finally {
      const left = this.inFlight.get(key)! - 1;
      if (left === 0) this.inFlight.delete(key);
      else this.inFlight.set(key, left);
    }
  }
}

/** How long tokens taken in a batch may be spent locally; what is left then is dropped (never handed back, never overspent). */
const LEASE_MS = 50;

interface Lease {
  /** Tokens this process took from the shared bucket and has not spent. */
  tokens: number;
  expiresAt: number;
  /** The size of the last batch asked for; a quarter of it left starts the next take ahead of need. */
  batch: number;
  /** What the shared bucket held after the last take, for RateLimit-Remaining. */
  sharedRemaining: number;
  /** The take in flight, shared by every request of the key that waits for tokens meanwhile; resolves to a refusal when the bucket was empty. */
  taking?: Promise<RateLimitDecision | undefined>;
  /** Requests of this key in this process since `countedSince`: the demand a batch is sized by. */
  requests: number;
  /** Requests of this key waiting for a take now: a batch is at least as large, whatever the round trip's length. */
  waiting: number;
  countedSince: number;
}

/**
 * A token bucket per API key in PostgreSQL (`api_key_rate_buckets`), so a limit of N per second is
 * N for the key across all API processes: every token is taken from the one shared row, under its
 * lock, by one upsert that refills the bucket by the time elapsed on the database's clock.
 *
 * At most one round trip per request, and far fewer under load: a process takes tokens in a batch
 * sized by its own demand for the key (about LEASE_MS of it, at most a tenth of the burst), spends
 * them locally for up to LEASE_MS, and takes the next batch while a quarter of the last is still
 * left, so a busy key's requests do not wait for the database at all. A key used a few times a
 * second takes one token per request, exactly as a single shared counter would. Tokens a process
 * took and did not spend in time are dropped, so batching can make the limit stricter, never looser.
 */
export class SharedTokenBucket {
  private readonly leases = new Map<string, Lease>();
  private readonly maxBatch: number;

  constructor(
    private readonly capacity: number,
    private readonly refillPerSecond: number,
    private readonly now: () => number = Date.now,
  ) {
    this.maxBatch = Math.max(1, Math.floor(capacity / 10));
  }

  async take(em: EntityManager, apiKeyId: string): Promise<RateLimitDecision> {
    const lease = this.leaseOf(apiKeyId);
    lease.requests += 1;
    for (;;) {
      if (this.now() >= lease.expiresAt) lease.tokens = 0;
      if (lease.tokens >= 1) {
        lease.tokens -= 1;
        // Ahead of need: the next batch arrives before this one runs out (a failure is met by the next request's own take).
        if (lease.batch > 1 && lease.tokens < lease.batch / 4 && !lease.taking) this.startTake(em, apiKeyId, lease).catch(() => undefined);
        const remaining = Math.floor(lease.sharedRemaining + lease.tokens);
        return { allowed: true, limit: this.capacity, remaining, resetSeconds: Math.ceil((this.capacity - remaining) / this.refillPerSecond) };
      }
      lease.waiting += 1;
      let refused: RateLimitDecision | undefined;
      try {
        refused = await (lease.taking ?? this.startTake(em, apiKeyId, lease));
      } finally {
        lease.waiting -= 1;
      }
      if (refused && lease.tokens < 1) return refused;
    }
  }

  private leaseOf(apiKeyId: string): Lease {
    let lease = this.leases.get(apiKeyId);
    if (!lease) {
      // A key first seen counts as quiet (one request in the last second): its first take is one token.
      lease = { tokens: 0, expiresAt: 0, batch: 1, sharedRemaining: this.capacity, requests: 0, waiting: 0, countedSince: this.now() - 1_000 };
      this.leases.set(apiKeyId, lease);
    }
    return lease;
  }

  private startTake(em: EntityManager, apiKeyId: string, lease: Lease): Promise<RateLimitDecision | undefined> {
    const taking = this.takeBatch(em, apiKeyId, lease).finally(() => {
      if (lease.taking === taking) lease.taking = undefined;
    });
    lease.taking = taking;
    return taking;
  }

  /** One upsert: refills the shared bucket and takes up to a batch of whole tokens from it; a refusal when it had none. */
  private async takeBatch(em: EntityManager, apiKeyId: string, lease: Lease): Promise<RateLimitDecision | undefined> {
    const now = this.now();
    // Demand since the last take, scaled to a lease period; 1 for a key that is not busy. At least the requests waiting
    // now: a round trip longer than a lease (slow commits) would otherwise shrink each batch below the last, down to one
    // token per round trip, every request of the key then waiting its turn for a commit.
    const demand = Math.ceil((lease.requests * LEASE_MS) / Math.max(now - lease.countedSince, 1));
    const batch = Math.min(this.maxBatch, Math.max(1, lease.waiting, demand));
    lease.requests = 0;
    lease.countedSince = now;
    lease.batch = batch;
    const refilled = `least(?::double precision, b.tokens + extract(epoch from (clock_timestamp() - b.updated_at)) * ?::double precision)`;
    const [row] = await em.getConnection().execute<{ tokens: number; taken: number }[]>(
      `insert into api_key_rate_buckets as b (api_key_id, tokens, taken, updated_at)
       values (?, ?::double precision - least(?, ?), least(?, ?), clock_timestamp())
       on conflict (api_key_id) do update set
         tokens = ${refilled} - least(?, floor(${refilled})),
         taken = least(?, floor(${refilled})),
         updated_at = clock_timestamp()
       returning tokens, taken`,
      [
        apiKeyId, this.capacity, batch, this.capacity, batch, this.capacity,
        this.capacity, this.refillPerSecond, batch, this.capacity, this.refillPerSecond,
        batch, this.capacity, this.refillPerSecond,
      ],
    );
    const tokens = Number(row!.tokens);
    const taken = Number(row!.taken);
    if (this.now() >= lease.expiresAt) lease.tokens = 0;
    lease.tokens += taken;
    lease.sharedRemaining = tokens;
    lease.expiresAt = this.now() + LEASE_MS;
    if (taken >= 1) return undefined;
    return { allowed: false, limit: this.capacity, remaining: 0, resetSeconds: Math.max(1, Math.ceil((1 - tokens) / this.refillPerSecond)) };
  }
}
