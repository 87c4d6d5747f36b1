import type { EntityManager } from '@mikro-orm/postgresql';
import { SandboxRailInstruction, type RailOutcome } from '../entities';
import { RailOutcomeUnknownError, type PayoutInstruction, type RailAnswer } from '../rails';

/**
 * The sandbox rails' shared book: one row per trip holding the outcome a sandbox key asked for
 * (`POST /v1/sandbox/payouts/trips/:tripId/outcome`, success when never set) and what the rail
 * received. The rail pays at most once per trip (`paid_at` is set once), however often asked.
 */
export class SandboxRailBook {
  constructor(
    /** What the rail says when a failure has no reason of the sandbox key's. */
    private readonly defaultFailure: string,
    private readonly defaultBlock: string,
  ) {}

  async submit(em: EntityManager, instruction: PayoutInstruction): Promise<RailAnswer> {
    await em.execute(
      `insert into sandbox_rail_instructions (trip_id, organization_id, environment, outcome, submissions, amount, currency, created_at, updated_at)
       values (?, ?, ?, 'success', 1, ?, ?, now(), now())
       on conflict (trip_id) do update set submissions = sandbox_rail_instructions.submissions + 1,
         amount = coalesce(sandbox_rail_instructions.amount, excluded.amount), currency = coalesce(sandbox_rail_instructions.currency, excluded.currency), updated_at = now()`,
      [instruction.tripId, instruction.organizationId, instruction.environment, instruction.amount.toString(), instruction.currency],
    );
    return this.answer(em, instruction.tripId);
  }

  async status(em: EntityManager, tripId: string): Promise<RailAnswer | null> {
    const row = await em.findOne(SandboxRailInstruction, { tripId }, { refresh: true });
    if (!row?.amount) return null;
    return this.answer(em, tripId);
  }

  /** The outcome asked for, applied: a success pays once (the first time it is read). */
  private async answer(em: EntityManager, tripId: string): Promise<RailAnswer> {
    const [row] = await em.execute<{ outcome: RailOutcome; failure_reason: string | null }[]>(
      `update sandbox_rail_instructions set paid_at = case when outcome = 'success' then coalesce(paid_at, now()) else paid_at end, updated_at = now()
        where trip_id = ? returning outcome, failure_reason`,
      [tripId],
    );
    switch (row!.outcome) {
      case 'success':
        return { state: 'paid' };
      case 'failed':
        return { state: 'failed', reason: row!.failure_reason ?? this.defaultFailure };
      case 'blocked':
        return { state: 'blocked', reason: row!.failure_reason ?? this.defaultBlock };
      case 'unknown':
        throw new RailOutcomeUnknownError(`the sandbox rail's answer for trip ${tripId} is unknown`);
    }
  }
}

/** Sets what the sandbox rails answer for a trip from now on. */
export async function setSandboxRailOutcome(
  em: EntityManager,
  trip: { id: string; organizationId: string; environment: 'sandbox' },
  outcome: RailOutcome,
  failureReason: string | null,
): Promise<SandboxRailInstruction> {
  await em.execute(
    `insert into sandbox_rail_instructions (trip_id, organization_id, environment, outcome, failure_reason, submissions, created_at, updated_at)
     values (?, ?, ?, ?, ?, 0, now(), now())
     on conflict (trip_id) do update set outcome = excluded.outcome, failure_reason = excluded.failure_reason, updated_at = now()`,
    [trip.id, trip.organizationId, trip.environment, outcome, failureReason],
  );
  return em.findOneOrFail(SandboxRailInstruction, { tripId: trip.id }, { refresh: true });
}
