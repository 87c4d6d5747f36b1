import type { EntityManager } from '@mikro-orm/postgresql';

type Scalar = string | number | boolean | null;
type Constructor<T> = new (...args: never[]) => T;
/** Equality filters on the entity's own columns: a scalar property, or a ManyToOne by the id it holds. */
export type ColumnFilter<T> = Partial<Record<keyof T & string, Scalar>>;

/**
 * Lookups for the hot path of reads. `em.findOne` spends about half a millisecond of CPU per call
 * building its query and hydrating the result, several times what the round trip itself costs
 * (bench/README.md); these build each statement once per entity and filter shape from the entity's
 * metadata, run it, and hydrate with `em.map`, so what they return is the same managed entity, its
 * relations as references. Only conjunctions of equalities are expressed; anything richer (locks,
 * populate, operators) stays with `em.find`.
 */
const statements = new Map<string, string>();

function selectStatement<T extends object>(em: EntityManager, entity: Constructor<T>, where: ColumnFilter<T>, limit: number | null): { sql: string; params: Scalar[] } {
  const keys = Object.keys(where) as (keyof T & string)[];
  const params = keys.map((key) => where[key]!).filter((value) => value !== null);
  const shape = `${entity.name}|${keys.map((key) => `${key}${where[key] === null ? ':null' : ''}`).join(',')}|${limit}`;
  let sql = statements.get(shape);
  if (!sql) {
    const meta = em.getMetadata().get(entity.name);
    const conditions = keys.map((key) => {
      const property = meta.properties[key];
      if (!property || property.fieldNames.length !== 1) throw new Error(`${entity.name}.${key} is not a single column`);
      return `"${property.fieldNames[0]}" ${where[key] === null ? 'is null' : '= ?'}`;
    });
    sql = `select * from "${meta.tableName}" where ${conditions.join(' and ')}${limit === null ? '' : ` limit ${limit}`}`;
    statements.set(shape, sql);
  }
  return { sql, params };
}

export async function findOneByColumns<T extends object>(em: EntityManager, entity: Constructor<T>, where: ColumnFilter<T>): Promise<T | null> {
  const { sql, params } = selectStatement(em, entity, where, 1);
  const [row] = await em.execute<Record<string, unknown>[]>(sql, params);
  return row ? em.map(entity, row) : null;
}

export async function findByColumns<T extends object>(em: EntityManager, entity: Constructor<T>, where: ColumnFilter<T>): Promise<T[]> {
  const { sql, params } = selectStatement(em, entity, where, null);
  const rows = await em.execute<Record<string, unknown>[]>(sql, params);
  return rows.map((row) => em.map(entity, row));
}
