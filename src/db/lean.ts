import { ReferenceKind, type EntityData, type EntityMetadata, type EntityProperty, type FilterQuery, type Platform } from '@mikro-orm/core';
import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import pg from 'pg';
import { applicationName } from './application-name';

/*
 * Lookups for the hot path of reads. `em.findOne` spends about half a millisecond of CPU per call
 * building its query and hydrating the result, several times what the round trip itself costs
 * (bench/HISTORY.md); these build each statement once per entity and filter shape from the entity's
 * metadata, run it, and hydrate with `em.map`, so what they return is the same managed entity, its
 * relations as references (`lockOneByColumns` also locks the row). Only conjunctions of equalities are
 * expressed; anything richer (populate, operators) stays with `em.find`.
 *
 * Reads that only present what they find (a GET's resource) skip the entity manager altogether:
 * `readOneByColumns` and `readByColumns` return detached copies built from the row by the entity's
 * metadata, as `em.map` would hydrate them, without its identity map, snapshot and validation (most of
 * a hot read's CPU). Never persist, flush or reference them: the entity manager does not know them.
 * They touch no unit of work, so the process's own EntityManager (`deps.orm.em`) serves them: a GET
 * that reads only these forks none (src/http/route.ts forks on first use).
 * PostgreSQL hands each of their rows over as one JSON text (`row_to_json`), which one JSON.parse reads:
 * the driver's reading of a wide row column by column (a string and a type lookup per field) cost a card
 * read about a fifth of its CPU (bench/HISTORY.md).
 */

type Scalar = string | number | boolean | null;
type Constructor<T> = new (...args: never[]) => T;
/** Equality filters on the entity's own columns: a scalar property, or a ManyToOne by the id it holds. */
export type ColumnFilter<T> = Partial<Record<keyof T & string, Scalar>>;

interface Statement {
  /** Name of the prepared statement: PostgreSQL parses and plans it once per pooled connection. */
  name: string;
  /** With `$n` placeholders. */
  text: string;
}

const statements = new Map<string, Statement>();

/** Rows of `entity` that point at the row read (by `parentKey`), read in the same statement. */
interface Children<C> {
  entity: Constructor<C>;
  parentKey: keyof C & string;
}
/** The same, once the children's type no longer matters (building the statement). */
type AnyChildren = { entity: Constructor<object>; parentKey: string };

/** The column that carries the children, aggregated as JSON. */
const CHILDREN = '__children';
/** The column that carries a detached read's whole row as JSON text. */
const ROW = '__row';

/** How a statement hands its rows over: as the driver reads columns (for `em.map`), or each row as one JSON text (detached reads). */
type RowFormat = 'columns' | 'json';

function selectStatement<T extends object>(
  em: EntityManager,
  entity: Constructor<T>,
  where: ColumnFilter<T>,
  limit: number | null,
  children?: AnyChildren,
  omit: readonly string[] = [],
  forUpdate = false,
  format: RowFormat = 'columns',
): { statement: Statement; params: Scalar[] } {
  const keys = Object.keys(where) as (keyof T & string)[];
  const params = keys.map((key) => where[key]!).filter((value) => value !== null);
  const shape = `${entity.name}|${keys.map((key) => `${key}${where[key] === null ? ':null' : ''}`).join(',')}|${limit}|${children ? `${children.entity.name}.${children.parentKey}` : ''}|${omit.join(',')}|${forUpdate}|${format}`;
  let statement = statements.get(shape);
  if (!statement) {
    const meta = em.getMetadata().get(entity.name);
    let placeholder = 0;
    const conditions = keys.map((key) => `p."${singleColumn(meta, key)}" ${where[key] === null ? 'is null' : `= $${++placeholder}`}`);
    const childColumn = children ? `, ${childrenAggregate(em, meta, children)} as "${CHILDREN}"` : '';
    const columns =
      format === 'json'
        ? tableColumns(meta, omit).map(({ field, type }) => `${jsonSafeColumn('p', field, type)} as "${field}"`).join(', ')
        : omit.length === 0 ? 'p.*' : tableColumns(meta, omit).map(({ field }) => `p."${field}"`).join(', ');
    const select = `select ${columns}${childColumn} from "${meta.tableName}" p where ${conditions.join(' and ')}${limit === null ? '' : ` limit ${limit}`}${forUpdate ? ' for update of p' : ''}`;
    const text = format === 'json' ? `select row_to_json(r)::text as "${ROW}" from (${select}) r` : select;
    statement = { name: `lean_${statements.size + 1}`, text };
    statements.set(shape, statement);
  }
  return { statement, params };
}

/** Every column of the entity's table, with its type, but those of the `omit` properties (an embeddable's, flattened, included). */
function tableColumns(meta: EntityMetadata, omit: readonly string[] = []): { field: string; type: string }[] {
  const omitted = (prop: EntityProperty) => omit.includes(prop.name) || (prop.embedded !== undefined && omit.includes(prop.embedded[0]));
  for (const name of omit) if (!meta.properties[name]) throw new Error(`${meta.className}.${name} is not a property`);
  const columns = new Map<string, string>();
  for (const prop of meta.props) {
    if (prop.persist === false || omitted(prop)) continue;
    if (prop.kind === ReferenceKind.EMBEDDED && !prop.object) continue;
    if (prop.kind === ReferenceKind.ONE_TO_MANY || prop.kind === ReferenceKind.MANY_TO_MANY || (prop.kind === ReferenceKind.ONE_TO_ONE && !prop.owner)) continue;
    prop.fieldNames.forEach((field, index) => columns.set(field, prop.columnTypes[index] ?? ''));
  }
  return [...columns].map(([field, type]) => ({ field, type }));
}

function singleColumn(meta: EntityMetadata, key: string): string {
  const property = meta.properties[key];
  if (!property || property.fieldNames.length !== 1) throw new Error(`${meta.className}.${key} is not a single column`);
  return property.fieldNames[0]!;
}

/** A column as it goes into JSON: numbers that JSON would round (numeric, bigint) as text, as the driver gives them. */
const jsonSafeColumn = (alias: string, field: string, type: string) => `${alias}."${field}"${/^(numeric|decimal|bigint|int8)/i.test(type) ? '::text' : ''}`;

/**
 * The children's rows as a JSON array of objects keyed by column, so that the row reader reads them as
 * it reads a row.
 */
function childrenAggregate(em: EntityManager, parent: EntityMetadata, children: AnyChildren): string {
  const meta = em.getMetadata().get(children.entity.name);
  const object = tableColumns(meta).map(({ field, type }) => `'${field}', ${jsonSafeColumn('c', field, type)}`).join(', ');
  const primaryKey = singleColumn(parent, parent.primaryKeys[0]!);
  return `coalesce((select json_agg(json_build_object(${object})) from "${meta.tableName}" c where c."${singleColumn(meta, children.parentKey)}" = p."${primaryKey}"), '[]'::json)`;
}

/** The pg client that knex pools; only the calls made here. */
interface PooledClient {
  query(config: { name: string; text: string; values: unknown[] }): Promise<{ rows: Record<string, unknown>[] }>;
}

/** The knex client of an ORM: its connection settings, pool size and driver (whose Client finds the writable host, src/db/connection.ts). */
interface KnexClient {
  connectionSettings: pg.ClientConfig;
  config: { pool?: { max?: number } };
  driver: { Client: typeof pg.Client };
}

/** The plain `pg` pool of an ORM (by its knex client) for statements outside a transaction; see attachStatementPool. */
const statementPools = new WeakMap<KnexClient, pg.Pool>();

/** How long a statement outside a transaction waits for a connection, as knex's pool waits by default. */
const CONNECTION_WAIT_MS = 60_000;
/** How long a connection of the statement pool stays open unused. */
const IDLE_MS = 10_000;

/**
 * Gives the ORM a plain `pg` pool, made from knex's own connection settings (TLS and type parsers
 * included) and Client class (to the URL's writable host), as large as knex's pool, for the statements
 * of this file that run outside a transaction (a GET's reads). Acquiring and releasing through knex's
 * pool (tarn) cost such a read about thirty promises and a timer, each promise dearer while MikroORM's
 * AsyncLocalStorage is on: about 8 µs of CPU per read, a tenth of a card read's (bench/HISTORY.md).
 * `orm.close()` ends it. Connections: up to twice `DATABASE_POOL_MAX` per process, idle ones closed
 * after IDLE_MS.
 */
export function attachStatementPool(orm: MikroORM): void {
  const knex = orm.em.getKnex().client as unknown as KnexClient;
  const pool = new pg.Pool({
    ...knex.connectionSettings,
    application_name: applicationName('statements'),
    Client: knex.driver.Client,
    max: knex.config.pool?.max ?? 10,
    idleTimeoutMillis: IDLE_MS,
    connectionTimeoutMillis: CONNECTION_WAIT_MS,
  });
  // An idle client whose connection fails (the server restarted) leaves the pool, which makes another on
  // demand; the next statement's own failure is what a request answers (503 while the database is down).
  pool.on('error', () => undefined);
  statementPools.set(knex, pool);
  const close = orm.close.bind(orm);
  let ended: Promise<void> | undefined;
  orm.close = async (force?: boolean) => {
    await (ended ??= pool.end());
    await close(force);
  };
}

/**
 * Runs a statement of `em` as a named prepared statement (which spares knex's query building and
 * PostgreSQL's parsing and planning) on the connection it belongs on: inside a transaction its own
 * (knex's transaction client hands it out), otherwise one of the ORM's statement pool.
 */
async function run(em: EntityManager, statement: Statement, params: readonly unknown[]): Promise<Record<string, unknown>[]> {
  const query = { name: statement.name, text: statement.text, values: [...params] };
  const transaction = em.getTransactionContext<{ client: { acquireConnection(): Promise<PooledClient> } }>();
  if (transaction) return (await (await transaction.client.acquireConnection()).query(query)).rows;
  const pool = statementPools.get(em.getKnex().client as unknown as KnexClient);
  if (!pool) throw new Error('this ORM has no statement pool: make it with createOrm (src/db/orm.ts) or attachStatementPool');
  return (await pool.query(query)).rows;
}

/** The rows of a statement built with the `json` format, each parsed from its JSON text: keyed by column, as the driver keys them. */
async function runJson(em: EntityManager, statement: Statement, params: readonly unknown[]): Promise<Record<string, unknown>[]> {
  return (await run(em, statement, params)).map((row) => JSON.parse(row[ROW] as string) as Record<string, unknown>);
}

/** The prepared statements of `sql`, by their text. */
const sqlStatements = new Map<string, Statement>();

/**
 * A fixed statement (`$n` placeholders) of the hot path, run as `run` runs a lookup: in `em`'s
 * transaction when it has one. Rows come back as the driver gives them (numeric and bigint as text);
 * errors are the driver's (`code`, `constraint`). Pass strings for numeric values and JSON text for
 * jsonb (`$n::jsonb`).
 */
export async function sql<R = Record<string, unknown>>(em: EntityManager, text: string, params: unknown[]): Promise<R[]> {
  let statement = sqlStatements.get(text);
  if (!statement) sqlStatements.set(text, (statement = { name: `lean_sql_${sqlStatements.size + 1}`, text }));
  return (await run(em, statement, params)) as R[];
}

export async function findOneByColumns<T extends object>(em: EntityManager, entity: Constructor<T>, where: ColumnFilter<T>): Promise<T | null> {
  const { statement, params } = selectStatement(em, entity, where, 1);
  const [row] = await run(em, statement, params);
  return row ? em.map(entity, row) : null;
}

/** One row locked (`for update`) until the caller's transaction ends, `omit`ted columns not read. */
async function lockedRow<T extends object>(em: EntityManager, entity: Constructor<T>, where: ColumnFilter<T>, omit: readonly string[], format: RowFormat): Promise<Record<string, unknown> | undefined> {
  if (!em.getTransactionContext()) throw new Error(`a locked read of ${entity.name} must run inside a transaction`);
  const { statement, params } = selectStatement(em, entity, where, 1, undefined, omit, true, format);
  return (await (format === 'json' ? runJson : run)(em, statement, params))[0];
}

/** The same, the row locked (`for update`) until the caller's transaction ends. */
export async function lockOneByColumns<T extends object>(em: EntityManager, entity: Constructor<T>, where: ColumnFilter<T>): Promise<T | null> {
  const row = await lockedRow(em, entity, where, [], 'columns');
  return row ? em.map(entity, row) : null;
}

export async function findByColumns<T extends object>(em: EntityManager, entity: Constructor<T>, where: ColumnFilter<T>): Promise<T[]> {
  const { statement, params } = selectStatement(em, entity, where, null);
  const rows = await run(em, statement, params);
  return rows.map((row) => em.map(entity, row));
}

/** A detached copy of one row; unloaded collections stay undefined. */
type RowReader = (row: Record<string, unknown>) => Record<string, unknown>;

const rowReaders = new Map<string, RowReader>();

function rowReader<T extends object>(em: EntityManager, entity: Constructor<T>, omit: readonly string[] = []): RowReader {
  const key = `${entity.name}|${omit.join(',')}`;
  let reader = rowReaders.get(key);
  if (!reader) {
    const meta = em.getMetadata().get(entity.name);
    reader = objectReader(meta.props.filter((prop) => !prop.embedded && !omit.includes(prop.name)).map((prop) => [prop.name, prop]), em, meta);
    rowReaders.set(key, reader);
  }
  return reader;
}

/**
 * The properties' values (by the name each has in its object: an embeddable's own names, not the
 * flattened ones), converted as MikroORM's hydrator converts them (ObjectHydrator.hydrateScalar).
 */
function objectReader(props: [string, EntityProperty][], em: EntityManager, meta: EntityMetadata): RowReader {
  const readers = props.flatMap(([name, prop]): [string, (row: Record<string, unknown>) => unknown][] => {
    if (prop.persist === false) return [];
    if (prop.kind === ReferenceKind.SCALAR) return [[name, scalarReader(prop, em.getPlatform())]];
    if (prop.kind === ReferenceKind.EMBEDDED && !prop.object) {
      const read = objectReader(Object.entries(prop.embeddedProps), em, meta);
      return [[name, (row) => {
        const value = read(row);
        return prop.nullable && Object.values(value).every((part) => part === null) ? null : value;
      }]];
    }
    if ((prop.kind === ReferenceKind.MANY_TO_ONE || (prop.kind === ReferenceKind.ONE_TO_ONE && prop.owner)) && prop.fieldNames.length === 1) {
      const field = prop.fieldNames[0]!;
      const primaryKey = em.getMetadata().get(prop.type).primaryKeys[0]!;
      return [[name, (row) => (row[field] === null ? null : { [primaryKey]: row[field] })]];
    }
    if (prop.kind === ReferenceKind.ONE_TO_MANY || prop.kind === ReferenceKind.MANY_TO_MANY || prop.kind === ReferenceKind.ONE_TO_ONE) return [];
    throw new Error(`${meta.className}.${prop.name} cannot be read from a row`);
  });
  return (row) => {
    const object: Record<string, unknown> = {};
    for (const [name, read] of readers) object[name] = read(row);
    return object;
  };
}

function scalarReader(prop: EntityProperty, platform: Platform): (row: Record<string, unknown>) => unknown {
  if (prop.fieldNames.length !== 1) throw new Error(`${prop.name} is not a single column`);
  const field = prop.fieldNames[0]!;
  const convert = (value: unknown): unknown => {
    if (prop.customType) return prop.customType.convertToJSValue(value, platform, { mode: 'serialization' });
    if (prop.runtimeType === 'boolean') return !!value;
    // The driver hands timestamps back as text with their offset (PostgreSqlConnection's type parsers).
    if (prop.runtimeType === 'Date') return value instanceof Date ? value : new Date(value as string);
    return value;
  };
  return (row) => {
    const value = row[field];
    return value === null || value === undefined ? null : convert(value);
  };
}

/**
 * One row as a detached copy of the entity (see above), or null. `omit`: properties neither read nor
 * set (undefined in the copy), for a read that has no use for them (a card's sealed secrets).
 */
export async function readOneByColumns<T extends object>(em: EntityManager, entity: Constructor<T>, where: ColumnFilter<T>, omit: readonly (keyof T & string)[] = []): Promise<T | null> {
  const { statement, params } = selectStatement(em, entity, where, 1, undefined, omit, false, 'json');
  const [row] = await runJson(em, statement, params);
  return row ? (rowReader(em, entity, omit)(row) as T) : null;
}

/** A row as `sql` returns it (`returning *` of an insert), as a detached copy of the entity (see above). */
export function detachedRow<T extends object>(em: EntityManager, entity: Constructor<T>, row: Record<string, unknown>): T {
  return rowReader(em, entity)(row) as T;
}

/** The same, the row locked (`for update`) until the caller's transaction ends: for a change written back by a statement of its own. */
export async function readOneLocked<T extends object>(em: EntityManager, entity: Constructor<T>, where: ColumnFilter<T>, omit: readonly (keyof T & string)[] = []): Promise<T | null> {
  const row = await lockedRow(em, entity, where, omit, 'json');
  return row ? (rowReader(em, entity, omit)(row) as T) : null;
}

/** Every row, each a detached copy of the entity (see above). */
export async function readByColumns<T extends object>(em: EntityManager, entity: Constructor<T>, where: ColumnFilter<T>): Promise<T[]> {
  const { statement, params } = selectStatement(em, entity, where, null, undefined, [], false, 'json');
  const read = rowReader(em, entity);
  return (await runJson(em, statement, params)).map((row) => read(row) as T);
}

/**
 * One row and the rows of `children.entity` that point at it (by `children.parentKey`), in one statement,
 * each a detached copy (see above); the children in no particular order.
 */
export async function readOneWithChildren<T extends object, C extends object>(
  em: EntityManager,
  entity: Constructor<T>,
  where: ColumnFilter<T>,
  children: Children<C>,
): Promise<{ row: T; children: C[] } | null> {
  const { statement, params } = selectStatement(em, entity, where, 1, children, [], false, 'json');
  const [row] = await runJson(em, statement, params);
  if (!row) return null;
  const readChild = rowReader(em, children.entity);
  return { row: rowReader(em, entity)(row) as T, children: (row[CHILDREN] as Record<string, unknown>[]).map((child) => readChild(child) as C) };
}

/**
 * `update … where … returning *`: the rows it changed, merged into the entity manager as they now are,
 * so a conditional update (a state transition) needs no read before it nor a refresh after it.
 */
export async function updateReturning<T extends object>(em: EntityManager, entity: Constructor<T>, where: FilterQuery<T>, changes: EntityData<T>): Promise<T[]> {
  const rows = await em.createQueryBuilder(entity).update(changes).where(where).returning('*').execute<Record<string, unknown>[]>('all', false);
  return rows.map((row) => em.map(entity, row));
}
