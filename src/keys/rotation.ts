import type { EntityManager } from '@mikro-orm/postgresql';
import { envelopeDataKey, withDataKey } from './envelope';
import type { KeyProvider, WrappedDataKey } from './provider';

/** A row as the rotation reads it: its id, and the columns its sealed column names. */
export type SealedRow = { id: string } & Record<string, unknown>;

/**
 * A column (or group of columns) holding data keys wrapped under a master key, one per row, and how to
 * read and replace the wrapped key. Each domain declares its own beside the context it seals with;
 * src/modules.ts lists them all for `keys:rotate`.
 */
export interface SealedColumn {
  /** `table.column`, as keys:rotate reports it. */
  readonly name: string;
  /** The key role whose master key wraps it: `seed` (organization seeds, only signers hold it) or `data` (everything else). */
  readonly role: KeyRole;
  readonly table: string;
  /** SQL: the master key id the row names, null where the row holds nothing sealed. */
  readonly masterKeyIdSql: string;
  /** The columns read besides id: the sealed value and what its context is made of. */
  readonly columns: readonly string[];
  /** The data key's context (GCM associated data) for the row, as it was sealed. */
  context(row: SealedRow): string;
  read(row: SealedRow): WrappedDataKey;
  /** The column values that store `wrapped`, made by provider `providerName`; the ciphertext under the data key is left as it is. */
  write(row: SealedRow, providerName: string, wrapped: WrappedDataKey): Record<string, unknown>;
}

export type KeyRole = 'data' | 'seed';

const quoted = (column: string) => `"${column}"`;

/** A text column holding sealText envelopes (src/keys/envelope.ts); `filter`, SQL, narrows it to the rows that are sealed. */
export function envelopeColumn(table: string, column: string, contextColumns: readonly string[], context: (row: SealedRow) => string, filter?: string): SealedColumn {
  const envelope = `case when left(${quoted(column)}, 7) = '{"v":1,' then ${quoted(column)}::jsonb ->> 'k' end`;
  return {
    name: `${table}.${column}`,
    role: 'data',
    table,
    masterKeyIdSql: filter ? `case when ${filter} then ${envelope} end` : envelope,
    columns: [column, ...contextColumns],
    context,
    read: (row) => envelopeDataKey(row[column] as string),
    write: (row, providerName, wrapped) => ({ [column]: withDataKey(row[column] as string, providerName, wrapped) }),
  };
}

/** A jsonb column holding `{ masterKeyId, wrappedDataKey, ciphertext }` (a card's PAN and CVV). */
export function jsonKeyColumn(table: string, column: string, context: (row: SealedRow) => string): SealedColumn {
  type Sealed = { masterKeyId: string; wrappedDataKey: string };
  return {
    name: `${table}.${column}`,
    role: 'data',
    table,
    masterKeyIdSql: `${quoted(column)} ->> 'masterKeyId'`,
    columns: [column],
    context,
    read: (row) => ({ masterKeyId: (row[column] as Sealed).masterKeyId, ciphertext: (row[column] as Sealed).wrappedDataKey }),
    write: (row, _providerName, wrapped) => ({ [column]: JSON.stringify({ ...(row[column] as Sealed), masterKeyId: wrapped.masterKeyId, wrappedDataKey: wrapped.ciphertext }) }),
  };
}

/** The columns key_provider, master_key_id and wrapped_data_key of a table of sealed keys (seeds, node keys). */
export function keyColumns(table: string, contextColumns: readonly string[], context: (row: SealedRow) => string, role: KeyRole = 'data'): SealedColumn {
  return {
    name: `${table}.wrapped_data_key`,
    role,
    table,
    masterKeyIdSql: quoted('master_key_id'),
    columns: ['master_key_id', 'wrapped_data_key', ...contextColumns],
    context,
    read: (row) => ({ masterKeyId: row.master_key_id as string, ciphertext: row.wrapped_data_key as string }),
    write: (_row, providerName, wrapped) => ({ key_provider: providerName, master_key_id: wrapped.masterKeyId, wrapped_data_key: wrapped.ciphertext }),
  };
}

export interface ColumnRotation {
  table: string;
  column: string;
  /** Rows whose data key this run wrapped under the current master key. */
  rewrapped: number;
  /** Rows still under another master key once the run ended, per master key id. */
  left: Record<string, number>;
}

/**
 * `npm run cli -- keys:rotate`: wraps every data key that a row holds under another master key anew,
 * under the provider's current one. Batches of `batchSize` rows in id order (keyset), each in its own
 * transaction with the rows locked, so a crash loses at most the batch it was in and a second run
 * takes up what is left; a row already under the current key is never touched, nor is any ciphertext
 * under a data key. The counts of rows left are taken after the walk (a process still configured with
 * an old current key may have sealed more meanwhile: run it again once every process has the new key).
 * It never moves rows to the public development key: a configuration that lost its MASTER_KEY is refused.
 */
export async function rotateSealedColumns(
  em: EntityManager,
  provider: KeyProvider,
  columns: readonly SealedColumn[],
  options: { dryRun?: boolean; batchSize?: number } = {},
): Promise<ColumnRotation[]> {
  if (provider.development && !options.dryRun) {
    throw new Error('the current master key is the public development key: set MASTER_KEY or KEY_PROVIDER=pkcs11 before keys:rotate wraps anything under it');
  }
  const results: ColumnRotation[] = [];
  for (const column of columns) {
    let rewrapped = 0;
    if (!options.dryRun) {
      let after: string | null = null;
      do {
        const batch = await em.fork().transactional((tx) => rewrapBatch(tx, provider, column, after, options.batchSize ?? 100));
        rewrapped += batch.rewrapped;
        after = batch.last;
      } while (after !== null);
    }
    results.push({ table: column.table, column: column.name, rewrapped, left: await rowsLeft(em, column, provider.masterKeyId) });
  }
  return results;
}

async function rewrapBatch(em: EntityManager, provider: KeyProvider, column: SealedColumn, after: string | null, size: number) {
  const rows = await em.execute<SealedRow[]>(
    `select id, ${column.columns.map(quoted).join(', ')} from ${quoted(column.table)}
     where ${column.masterKeyIdSql} is not null and ${column.masterKeyIdSql} <> ?${after === null ? '' : ' and id > ?'}
     order by id limit ? for update`,
    after === null ? [provider.masterKeyId, size] : [provider.masterKeyId, after, size],
  );
  for (const row of rows) {
    const context = column.context(row);
    const dataKey = await provider.decryptDataKey(column.read(row), context);
    let wrapped: WrappedDataKey;
    try {
      wrapped = await provider.encryptDataKey(dataKey, context);
    } finally {
      dataKey.fill(0);
    }
    const values = column.write(row, provider.name, wrapped);
    await em.execute(`update ${quoted(column.table)} set ${Object.keys(values).map((name) => `${quoted(name)} = ?`).join(', ')} where id = ?`, [...Object.values(values), row.id]);
  }
  return { rewrapped: rows.length, last: rows.length < size ? null : rows[rows.length - 1]!.id };
}

async function rowsLeft(em: EntityManager, column: SealedColumn, currentMasterKeyId: string): Promise<Record<string, number>> {
  const rows = await em.execute<{ master_key_id: string; count: string }[]>(
    `select ${column.masterKeyIdSql} as master_key_id, count(*) as count from ${quoted(column.table)}
     where ${column.masterKeyIdSql} is not null and ${column.masterKeyIdSql} <> ? group by 1 order by 1`,
    [currentMasterKeyId],
  );
  return Object.fromEntries(rows.map((row) => [row.master_key_id, Number(row.count)]));
}

/** Of a sealed column, the master keys its rows name: how many rows each, and the first row of each (its id and sealed columns). */
export async function rowsPerMasterKey(em: EntityManager, column: SealedColumn): Promise<{ masterKeyId: string; rows: number; first: SealedRow }[]> {
  const rows = await em.execute<(SealedRow & { __master_key_id: string; __rows: string })[]>(
    `select distinct on (__master_key_id) *, count(*) over (partition by __master_key_id) as __rows
     from (select id, ${column.columns.map(quoted).join(', ')}, ${column.masterKeyIdSql} as __master_key_id from ${quoted(column.table)}) sealed
     where __master_key_id is not null order by __master_key_id, id`,
  );
  return rows.map((row) => ({ masterKeyId: row.__master_key_id, rows: Number(row.__rows), first: row }));
}
