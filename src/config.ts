import path from 'node:path';
import { z } from 'zod';

const bool = z.enum(['true', 'false', '1', '0']).transform((v) => v === 'true' || v === '1');

/** Every environment variable the service reads; `.env.example` mirrors this list. */
export const ConfigSchema = z.object({
  NODE_ENV: z.enum(['development', 'test', 'production']).default('development'),
  HOST: z.string().min(1).default('127.0.0.1'),
  PORT: z.coerce.number().int().min(0).max(65535).default(3000),
  PUBLIC_BASE_URL: z.string().url().optional(),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  DATA_DIR: z.string().min(1).default('.data'),
  DATABASE_URL: z
    .string({ error: 'DATABASE_URL is required (npm start sets it for the embedded PostgreSQL)' })
    .regex(/^postgres(ql)?:\/\//, 'DATABASE_URL must be a postgresql:// URL'),
  DATABASE_POOL_MAX: z.coerce.number().int().min(1).max(200).default(10),
  TEMPORAL_ADDRESS: z.string().min(1).default('127.0.0.1:7233'),
  TEMPORAL_NAMESPACE: z.string().min(1).default('default'),
  TEMPORAL_TASK_QUEUE: z.string().min(1).default('custody-platform'),
  RATE_LIMIT_PER_SECOND: z.coerce.number().positive().default(50),
  RATE_LIMIT_BURST: z.coerce.number().int().positive().default(100),
  IDEMPOTENCY_RETENTION_HOURS: z.coerce.number().int().positive().default(24),
  IDEMPOTENCY_LOCK_SECONDS: z.coerce.number().int().positive().default(60),
  API_KEY_LAST_USED_RESOLUTION_SECONDS: z.coerce.number().int().min(0).default(60),
  BODY_LIMIT_BYTES: z.coerce.number().int().positive().default(1024 * 1024),
  METRICS_ENABLED: bool.default(true),
  /** Default lifetime of a policy activation request when the request names none. */
  POLICY_ACTIVATION_EXPIRY_HOURS: z.coerce.number().int().min(1).max(720).default(72),
});

export type Config = z.infer<typeof ConfigSchema>;

export class ConfigError extends Error {
  override name = 'ConfigError';
}

/** Parses the environment once; every bad variable is named in the error, one per line. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const parsed = ConfigSchema.safeParse(env);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((issue) => `  ${issue.path.join('.')}: ${issue.message}`);
    throw new ConfigError(`Invalid configuration:\n${lines.join('\n')}`);
  }
  return { ...parsed.data, DATA_DIR: path.resolve(parsed.data.DATA_DIR) };
}
