import { MikroORM } from '@mikro-orm/postgresql';
import { ormConfig } from './mikro-orm.config';

export type Orm = MikroORM;

export async function createOrm(databaseUrl: string, poolMax?: number): Promise<Orm> {
  return MikroORM.init(ormConfig(databaseUrl, poolMax));
}

/** Applies the committed migrations; never `schema.update()`. */
export async function migrate(orm: Orm): Promise<string[]> {
  const applied = await orm.getMigrator().up();
  return applied.map((m) => m.name);
}
