import assert from 'node:assert/strict';
import { ConfigError, loadConfig } from '../../src/config';

describe('Configuration', () => {
  it('applies defaults and coerces numbers', () => {
    const config = loadConfig({ DATABASE_URL: 'postgresql://localhost/db', PORT: '8080' });
    assert.equal(config.PORT, 8080);
    assert.equal(config.TEMPORAL_NAMESPACE, 'default');
    assert.equal(config.RATE_LIMIT_BURST, 100);
  });

  it('names every bad variable in one error', () => {
    assert.throws(
      () => loadConfig({ DATABASE_URL: 'mysql://x', PORT: 'eighty', LOG_LEVEL: 'loud' }),
      (error: unknown) =>
        error instanceof ConfigError &&
        /DATABASE_URL: DATABASE_URL must be a postgresql:\/\/ URL/.test(error.message) &&
        /PORT:/.test(error.message) &&
        /LOG_LEVEL:/.test(error.message),
    );
  });
});
