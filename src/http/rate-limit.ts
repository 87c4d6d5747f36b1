/**
 * Token bucket per API key, in process memory. One API process is the deployment unit here; a
 * horizontally scaled deployment would move the buckets to a shared store behind this interface.
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
