import assert from 'node:assert/strict';
import { TokenBucketLimiter } from '../../src/http/rate-limit';

describe('Token bucket limiter', () => {
  it('spends a burst, refuses, and refills at the configured rate', () => {
    let now = 0;
    const limiter = new TokenBucketLimiter(2, 1, 10, () => now);
    assert.equal(limiter.take('k').remaining, 1);
    assert.equal(limiter.take('k').remaining, 0);
    const refused = limiter.take('k');
    assert.equal(refused.allowed, false);
    assert.equal(refused.resetSeconds, 1);
    now += 1000;
    assert.equal(limiter.take('k').allowed, true);
    assert.equal(limiter.take('other').allowed, true, 'buckets are per key');
  });

  it('holds at most its bound of keys, forgetting the least recently used, and none for keys that took nothing', () => {
    const limiter = new TokenBucketLimiter(1, 0.001, 3);
    assert.equal(limiter.hasToken('quiet'), true);
    assert.equal(limiter.size, 0, 'asking stores nothing');
    limiter.take('a');
    limiter.take('b');
    limiter.take('c');
    limiter.take('a');
    limiter.take('d');
    assert.equal(limiter.size, 3);
    assert.equal(limiter.hasToken('a'), false, 'a was used last but one: kept');
    assert.equal(limiter.hasToken('b'), true, 'b was the least recently used: forgotten');
    for (let i = 0; i < 1000; i += 1) limiter.take(`address:${i}`);
    assert.equal(limiter.size, 3);
  });
});
