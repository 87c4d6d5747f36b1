import type { Orm } from '../src/db/orm';
import type { IdempotencyService } from '../src/idempotency/service';

export interface IdempotencyActivityDeps {
  orm: Orm;
  idempotency: IdempotencyService;
}

export const createIdempotencyActivities = (deps: IdempotencyActivityDeps) => ({
  /** Deletes Idempotency-Key records created before `cutoff` (ISO timestamp); returns how many. */
  async purgeIdempotencyRecords(input: { cutoff: string }): Promise<number> {
    return deps.idempotency.purgeCreatedBefore(deps.orm.em.fork(), new Date(input.cutoff));
  },
});
