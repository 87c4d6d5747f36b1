import type { EntityManager, FilterQuery } from '@mikro-orm/postgresql';
import { errors } from './errors';
import { isUuid } from './ids';
import { text, z } from './schemas';

/** `?limit=` (1..100, default 20) and `?cursor=` (opaque), shared by every cursor list. */
export const ListQuery = z.object({
  limit: z.coerce.number().int().min(1).max(100).default(20),
  cursor: text(1, 512).optional(),
});
export type ListQuery = z.infer<typeof ListQuery>;

interface CursorPosition {
  createdAt: string;
  id: string;
}

export function encodeCursor(position: CursorPosition): string {
  return Buffer.from(JSON.stringify([position.createdAt, position.id])).toString('base64url');
}

/** Cursors name instants this service wrote: anything outside these years is forged. */
const CURSOR_YEARS = { min: 2000, max: 9999 };
const CURSOR_ID = /^[A-Za-z0-9_-]{1,64}$/;

/** `idIsUuid`: the listed entity's key is a uuid column, so any other id is refused before it reaches SQL. */
export function decodeCursor(cursor: string, idIsUuid = false): CursorPosition {
  try {
    const [createdAt, id] = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as unknown[];
    const year = typeof createdAt === 'string' ? new Date(createdAt).getUTCFullYear() : NaN;
    if (
      typeof createdAt === 'string' &&
      typeof id === 'string' &&
      year >= CURSOR_YEARS.min &&
      year <= CURSOR_YEARS.max &&
      (idIsUuid ? isUuid(id) : CURSOR_ID.test(id))
    ) {
      return { createdAt, id };
    }
  } catch {
    // fall through to the validation error below
  }
  throw errors.validation('Invalid cursor: pass next_cursor from the previous page unchanged.', 'cursor');
}

export interface Page<T> {
  items: T[];
  hasMore: boolean;
  nextCursor: string | null;
}

/**
 * Keyset pagination, newest first, over (created_at, id): stable under concurrent inserts and
 * constant-cost at any depth, unlike OFFSET.
 */
export async function paginate<T extends { id: string; createdAt: Date }>(
  em: EntityManager,
  entity: new (...args: never[]) => T,
  where: FilterQuery<T>,
  query: ListQuery,
  populate: readonly string[] = [],
): Promise<Page<T>> {
  const conditions: unknown[] = [where];
  if (query.cursor) {
    const { createdAt, id } = decodeCursor(query.cursor, em.getMetadata().get(entity.name).properties.id?.columnTypes[0] === 'uuid');
    const at = new Date(createdAt);
    conditions.push({ $or: [{ createdAt: { $lt: at } }, { createdAt: at, id: { $lt: id } }] });
  }
  const rows = await em.find(entity, { $and: conditions } as FilterQuery<T>, {
    orderBy: { createdAt: 'desc', id: 'desc' } as never,
    limit: query.limit + 1,
    populate: populate as never,
  });
  const hasMore = rows.length > query.limit;
  const items = hasMore ? rows.slice(0, query.limit) : rows;
  const last = items[items.length - 1];
  return {
    items,
    hasMore,
    nextCursor: hasMore && last ? encodeCursor({ createdAt: last.createdAt.toISOString(), id: last.id }) : null,
  };
}

/** The `/v1` list body. */
export function listBody<T, R>(page: Page<T>, present: (item: T) => R) {
  return { object: 'list' as const, data: page.items.map(present), has_more: page.hasMore, next_cursor: page.nextCursor };
}
