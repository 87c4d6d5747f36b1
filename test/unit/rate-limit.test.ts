import assert from 'node:assert/strict';
import { TokenBucketLimiter } from '../../src/http/rate-limit';

describe('Token bucket limiter', () => {
  it('spends a burst, refuses, and refills at the configured rate', () => {
    let now = 0;
    const limiter = new TokenBucketLimiter(2, 1, () => now);
    assert.equal(limiter.take('k').remaining, 1);
    assert.equal(limiter.take('k').remaining, 0);
    const refused = limiter.take('k');
    assert.equal(refused.allowed, false);
    assert.equal(refused.resetSeconds, 1);
    now += 1000;
    assert.equal(limiter.take('k').allowed, true);
    assert.equal(limiter.take('other').allowed, true, 'buckets are per key');
  });
});
