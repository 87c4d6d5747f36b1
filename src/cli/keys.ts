import { loadConfig } from '../config';
import type { Orm } from '../db/orm';
import { rotateSealedColumns } from '../keys/rotation';
import { keyProviderFor, seedKeyProviderFor } from '../keys/provider';
import { keyServiceFor } from '../keys/service';
import { separateLiveSeed, sharedLiveSeeds } from '../keys/seeds';
import { sealedColumns } from '../registries';
import { organization, required, text, UsageError, wholeNumber, type Options } from './options';

/** The operator CLI's key custody commands (docs/custody.md, "Key custody"). */
export const keyCommands: Record<string, (orm: Orm, options: Options) => Promise<unknown>> = {
  async 'keys:rotate'(orm, options) {
    const config = loadConfig();
    const dryRun = options['dry-run'] === true;
    const batchSize = text(options, 'batch-size') === undefined ? undefined : Math.max(1, wholeNumber(text(options, 'batch-size')!, 'batch-size', 10_000));
    // Each column under the provider of its role: seeds under the seed key, which only a signer host holds.
    const seed = seedKeyProviderFor(config);
    if (!seed) throw new UsageError('this process holds no seed key: run keys:rotate on a signer host (SEED_MASTER_KEY or PKCS11_SEED_KEY_LABEL set)');
    const providers = { data: keyProviderFor(config), seed };
    const columns = [];
    for (const role of ['data', 'seed'] as const) {
      const ofRole = sealedColumns.filter((column) => column.role === role);
      columns.push(...(await rotateSealedColumns(orm.em.fork(), providers[role], ofRole, { dryRun, batchSize })));
    }
    const sum = (counts: number[]) => counts.reduce((total, count) => total + count, 0);
    const tables: Record<string, number> = {};
    for (const column of columns) tables[column.table] = (tables[column.table] ?? 0) + sum(Object.values(column.left));
    return {
      master_key_id: providers.data.masterKeyId,
      seed_master_key_id: providers.seed.masterKeyId,
      dry_run: dryRun,
      rows_left: sum(Object.values(tables)),
      rows_left_per_table: tables,
      columns: columns.map((column) => ({ column: column.column, rewrapped: column.rewrapped, left_per_master_key: column.left })),
    };
  },

  // One seed per environment (docs/custody.md, "One seed per environment").
  async 'keys:seeds'(orm) {
    const organizations = await sharedLiveSeeds(orm.em.fork());
    return { count: organizations.length, organizations };
  },

  async 'keys:separate-live-seed'(orm, options) {
    const em = orm.em.fork();
    const org = await organization(em, required(options, 'org'));
    const config = loadConfig();
    return separateLiveSeed(em, keyServiceFor(config), org.id);
  },
};
