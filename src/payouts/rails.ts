import type { EntityManager } from '@mikro-orm/postgresql';
import type { Environment } from '../api-keys/entities';
import { DomainError } from '../shared/errors';
import type { Beneficiary, PaymentMethod } from './entities';
import { SandboxBankRail } from './providers/sandbox-bank-rail';
import { SandboxMobileMoneyRail } from './providers/sandbox-mobile-money-rail';

/** What the desk asks a rail to pay: `amount` minor units of `currency` to the beneficiary. */
export interface PayoutInstruction {
  /** The trip's id: the rail's idempotency key, so an instruction sent twice pays once. */
  tripId: string;
  organizationId: string;
  environment: Environment;
  country: string;
  currency: string;
  amount: bigint;
  beneficiary: Beneficiary;
}

/**
 * Where an instruction stands at the rail. paid and failed are final; blocked is the rail's
 * compliance or risk refusal (final too); pending means the rail works on it.
 */
export type RailAnswer = { state: 'paid' } | { state: 'pending' } | { state: 'failed'; reason: string } | { state: 'blocked'; reason: string };

/** The rail received something, but what it did is not known (a timeout, a lost answer): ask again, never send again. */
export class RailOutcomeUnknownError extends Error {
  override name = 'RailOutcomeUnknownError';
}

/**
 * A bank or mobile-money payout network. Adding one (a real bank API, an M-Pesa B2C adapter) is one
 * file behind this interface, chosen in `railFor`.
 */
export interface PayoutRail {
  /** Recorded on the trip, for operators. */
  readonly name: string;
  /** Sends the instruction, idempotently by trip id; throws RailOutcomeUnknownError when the answer is lost. */
  submit(em: EntityManager, instruction: PayoutInstruction): Promise<RailAnswer>;
  /** The instruction's state by trip id; null when the rail never received it (a send may then be made). */
  status(em: EntityManager, tripId: string): Promise<RailAnswer | null>;
}

/** Whether the environment's payouts have rails: the sandbox its two simulated ones; live none in this build. */
export const hasPayoutRails = (environment: Environment): boolean => environment === 'sandbox';

/** A live payout with no rail configured: 503, never a sandbox stand-in (retrying does not help, so no Retry-After). */
export const payoutRailUnavailable = (environment: Environment) =>
  new DomainError({ kind: 'unavailable', code: 'payout_rail_unavailable', message: `No payout rail is configured for ${environment} keys: payouts are refused.`, details: { environment } });

/**
 * The rail that pays a method in an environment. Live has none in this build, so live quotes are
 * refused (503 payout_rail_unavailable) before a trip can exist (docs/payouts.md).
 */
export function railFor(environment: Environment, method: PaymentMethod): PayoutRail {
  if (!hasPayoutRails(environment)) throw payoutRailUnavailable(environment);
  return method === 'bank' ? new SandboxBankRail() : new SandboxMobileMoneyRail();
}
