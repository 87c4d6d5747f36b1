import { IsolationLevel } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { IDEMPOTENCY_KEY_HEADER, type RouteRegistry } from '../http/route';
import { mineSandboxBlocks } from '../monitoring/sandbox';
import { listBody } from '../shared/pagination';
import { listEnvelopeSchema } from '../shared/schemas';
import { isoOrNull } from '../shared/time';
import { presentTripResource, presentTripWithTimeline } from './presenters';
import { setSandboxRailOutcome } from './providers/sandbox-rail-book';
import {
  PayoutInitializeRequest,
  PayoutQuoteObject,
  PayoutQuoteRequest,
  PayoutTripObject,
  PayoutTripWithTimeline,
  ReferenceParams,
  SandboxPayoutDepositBody,
  SandboxPayoutDepositObject,
  SandboxPayoutOutcomeBody,
  SandboxPayoutOutcomeObject,
  TripListQuery,
  TripParams,
} from './schemas';
import { createQuote, presentQuote } from './quotes';
import { fundTripOnce } from './sandbox-deposit';
import { tripRefunds } from './refunds';
import { findTrip, findTripByReference, initializeTrip, listTrips, tripTimeline } from './trips';
import type { PayoutTrip } from './entities';

/**
 * A trip, its timeline and its refunds read in one snapshot (a read-only repeatable-read transaction):
 * read apart, a step committing between them showed a refund `refunded` whose timeline entry was missing.
 */
function presentedAsOfOneMoment(em: EntityManager, find: (em: EntityManager) => Promise<PayoutTrip>, lateWatchHours: number) {
  return em.transactional(
    async (tx) => {
      const trip = await find(tx);
      return presentTripWithTimeline(trip, await tripTimeline(tx, trip), await tripRefunds(tx, trip), lateWatchHours);
    },
    { isolationLevel: IsolationLevel.REPEATABLE_READ, readOnly: true },
  );
}

export function registerPayoutRoutes(routes: RouteRegistry): void {
  const tag = 'Payouts';

  routes.add({
    method: 'post',
    path: '/payouts/quotes',
    operationId: 'createPayoutQuote',
    summary: 'Quote a payout: an asset on a chain to a currency by bank or mobile money in a country',
    description:
      'Answers the rate (after the spread), the named fees in the asset, fromAmount (what to send, fees included), toAmount (what the beneficiary receives), ' +
      "the corridor's limits and expiresAt. An unsupported corridor is 400 `unsupported_corridor` (or `unsupported_asset`); an amount outside the limits 400 `amount_below_minimum` / `amount_above_maximum`; " +
      'a live key 503 `payout_rail_unavailable` (no live rail in this build).',
    tag,
    scope: 'payouts:write',
    body: PayoutQuoteRequest,
    response: { status: 201, description: 'The quote', schema: PayoutQuoteObject },
    handler: async ({ auth, em, body, deps }) => ({ status: 201, body: presentQuote(await createQuote(em, deps.config, auth, body)) }),
  });

  routes.add({
    method: 'post',
    path: '/payouts/initialize',
    operationId: 'initializePayout',
    summary: 'Start a payout trip from a quote',
    description:
      "Answers the trip: a fresh deposit address of the payout desk on the quote's chain and the exact amount to send before expiresAt; workflow `payout-trip-<tripId>` follows it. " +
      '`reference` is your idempotency key: the same reference with the same body returns the same trip, with another body 409 `idempotency_key_reused`. ' +
      'An expired quote is 400 `quote_expired`; a quote already used by another trip is 409 `quote_already_used`.',
    tag,
    scope: 'payouts:write',
    body: PayoutInitializeRequest,
    response: { status: 201, description: 'The trip, with its timeline', schema: PayoutTripWithTimeline },
    handler: async ({ auth, em, body, deps }) => {
      const trip = await initializeTrip(em, { keys: deps.keys, config: deps.config }, auth, body);
      return { status: 201, body: presentTripWithTimeline(trip, await tripTimeline(em, trip), await tripRefunds(em, trip), deps.config.PAYOUT_LATE_PAYMENT_WATCH_HOURS) };
    },
  });

  routes.add({
    method: 'get',
    path: '/payouts',
    operationId: 'listPayouts',
    summary: 'List payout trips',
    description: "The environment's trips, newest first; filters status, createdFrom and createdTo (inclusive).",
    tag,
    scope: 'payouts:read',
    query: TripListQuery,
    response: { status: 200, description: 'A page of trips', schema: listEnvelopeSchema(PayoutTripObject) },
    handler: async ({ auth, em, query, deps }) => {
      const page = await listTrips(em, auth, {
        ...query,
        createdFrom: query.createdFrom ? new Date(query.createdFrom) : undefined,
        createdTo: query.createdTo ? new Date(query.createdTo) : undefined,
      });
      return { body: listBody(page, (trip) => presentTripResource(trip, deps.config.PAYOUT_LATE_PAYMENT_WATCH_HOURS)) };
    },
  });

  routes.add({
    method: 'get',
    path: '/payouts/fetch/:reference',
    operationId: 'fetchPayoutByReference',
    summary: 'Fetch a payout trip by your reference (manual reconciliation)',
    tag,
    scope: 'payouts:read',
    params: ReferenceParams,
    response: { status: 200, description: 'The trip, with its timeline', schema: PayoutTripWithTimeline },
    handler: async ({ auth, em, params, deps }) => ({ body: await presentedAsOfOneMoment(em, (tx) => findTripByReference(tx, auth, params.reference), deps.config.PAYOUT_LATE_PAYMENT_WATCH_HOURS) }),
  });

  routes.add({
    method: 'get',
    path: '/payouts/trips/:tripId',
    operationId: 'getPayoutTrip',
    summary: 'Fetch a payout trip and its status timeline',
    tag,
    scope: 'payouts:read',
    params: TripParams,
    response: { status: 200, description: 'The trip, with its timeline', schema: PayoutTripWithTimeline },
    handler: async ({ auth, em, params, deps }) => ({ body: await presentedAsOfOneMoment(em, (tx) => findTrip(tx, auth, params.tripId), deps.config.PAYOUT_LATE_PAYMENT_WATCH_HOURS) }),
  });

  routes.add({
    method: 'post',
    path: '/v1/sandbox/payouts/trips/:tripId/deposit',
    operationId: 'sandboxFundPayoutTrip',
    summary: "Sandbox: send an amount to a trip's deposit address on the devnet",
    description:
      "A real transfer from the devnet's faucet to the trip's deposit address; with `confirmations`, that many blocks are mined at once (and scanned), so the deposit is confirmed when the chain's threshold is reached. " +
      'The transfer is committed before the blocks are mined: a retry with the same Idempotency-Key after a 5xx or a lost connection answers the same transfer (no second one is sent) and mines again.',
    tag: 'Sandbox',
    scope: 'payouts:write',
    sandboxOnly: true,
    params: TripParams,
    body: SandboxPayoutDepositBody,
    // Mining waits on Temporal: no database transaction is held open meanwhile. The transfer is committed first,
    // recorded under the Idempotency-Key, so a retry reuses it and mines again (fundTripOnce).
    ownTransactions: true,
    response: { status: 201, description: 'The transfer', schema: SandboxPayoutDepositObject },
    handler: async ({ auth, params, body, ctx, deps }) => {
      const em = deps.orm.em.fork();
      const trip = await findTrip(em, auth, params.tripId);
      const sent = await fundTripOnce(em, deps, auth, trip, body.amount, ctx.get(IDEMPOTENCY_KEY_HEADER) || undefined);
      if (body.confirmations) await mineSandboxBlocks(deps.config, deps.starter, trip.chain, body.confirmations);
      return {
        status: 201,
        body: {
          object: 'sandbox_payout_deposit',
          tripId: trip.id,
          depositAddress: trip.depositAddress,
          assetId: trip.assetId,
          amount: sent.amount,
          amountRaw: sent.amountRaw,
          txHash: sent.txHash,
          blocksMined: body.confirmations ?? 0,
        },
      };
    },
  });

  routes.add({
    method: 'post',
    path: '/v1/sandbox/payouts/trips/:tripId/outcome',
    operationId: 'sandboxSetPayoutOutcome',
    summary: "Sandbox: set what the payout rail answers for a trip",
    tag: 'Sandbox',
    scope: 'payouts:write',
    sandboxOnly: true,
    params: TripParams,
    body: SandboxPayoutOutcomeBody,
    response: { status: 200, description: 'The outcome the rail will answer', schema: SandboxPayoutOutcomeObject },
    handler: async ({ auth, em, params, body }) => {
      const trip = await findTrip(em, auth, params.tripId);
      const row = await setSandboxRailOutcome(em, { id: trip.id, organizationId: auth.organizationId, environment: 'sandbox' }, body.outcome, body.failureReason ?? null);
      return {
        body: { object: 'sandbox_payout_outcome', tripId: trip.id, outcome: row.outcome, failureReason: row.failureReason ?? null, submissions: row.submissions, paidAt: isoOrNull(row.paidAt) },
      };
    },
  });
}
