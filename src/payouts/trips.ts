import { createHash } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { canonicalAddress } from '../chains/addresses';
import type { Config } from '../config';
import type { Tenant } from '../custody/service';
import type { KeyProvider } from '../keys/provider';
import type { KeyService } from '../keys/service';
import { Organization } from '../organizations/entities';
import { canonicalJson } from '../shared/canonical-json';
import { errors } from '../shared/errors';
import { isUuid, uuid } from '../shared/ids';
import { paginate, type ListQuery } from '../shared/pagination';
import { recordStart } from '../temporal/starter';
import { identifierOf, maskBeneficiary, openBeneficiary, sealBeneficiary, validateBeneficiary } from './beneficiaries';
import { newDepositAddress } from './desk';
import { PayoutTrip, PayoutTripTransition, type Beneficiary, type TripStatus } from './entities';
import { payoutTripFlow } from './flows/trip';
import { findQuote } from './quotes';
import type { PayoutInitializeRequest } from './schemas';
import { recordTransition } from './timeline';
import { withArticle } from '../shared/articles';
import { lockingOnlyItsRow } from '../db/row-lock';

/**
 * SHA-256 of the initialize body's canonical JSON with the beneficiary's account or phone number
 * masked: a hash of a number of a few million possibilities would give it away. A repeat's number
 * is compared with the sealed one instead.
 */
export const tripRequestHash = (body: PayoutInitializeRequest): string =>
  createHash('sha256').update(canonicalJson({ ...body, beneficiary: maskBeneficiary(body.beneficiary) })).digest('hex');

/**
 * Starts a trip from a quote: a fresh deposit address of the desk on the quote's chain, the exact
 * amount to send, and `payout-trip-<id>` recorded to start once this transaction commits.
 * `reference` is the client's idempotency key: the same reference with the same body returns the
 * same trip (also under concurrent repeats: they serialize on a lock of the reference), with another
 * body it is 409. An expired quote is 400 quote_expired (rule 1); a quote is spent by one trip.
 */
export async function initializeTrip(
  em: EntityManager,
  deps: { keys: KeyService; config: Config },
  tenant: Tenant,
  body: PayoutInitializeRequest,
): Promise<PayoutTrip> {
  const requestHash = tripRequestHash(body);
  await em.execute('select pg_advisory_xact_lock(hashtext(?))', [`payout-trip:${tenant.organizationId}:${tenant.environment}:${body.reference}`]);
  const existing = await em.findOne(PayoutTrip, { organization: tenant.organizationId, environment: tenant.environment, reference: body.reference }, { populate: ['quote'] });
  if (existing) {
    const sameRequest = existing.requestHash === requestHash && identifierOf(await openBeneficiary(deps.keys.provider, existing)) === identifierOf(body.beneficiary).trim();
    if (!sameRequest) throw errors.referenceReused(`Reference '${body.reference}' started trip ${existing.id} with another request.`, 'reference');
    return existing;
  }
  const quote = await findQuote(em, tenant, body.quoteId, 'quoteId');
  if (quote.expiresAt.getTime() <= Date.now()) {
    throw errors.invalid('quote_expired', `Quote ${quote.id} expired at ${quote.expiresAt.toISOString()}: request a new quote.`, {
      param: 'quoteId',
      details: { expires_at: quote.expiresAt.toISOString() },
    });
  }
  await em.execute('select pg_advisory_xact_lock(hashtext(?))', [`payout-quote:${quote.id}`]);
  const spent = await em.findOne(PayoutTrip, { quote: quote.id });
  if (spent) throw errors.conflict('quote_already_used', `Quote ${quote.id} already started trip ${spent.id}: request a new quote for another payout.`, { trip_id: spent.id });
  const beneficiary = validateBeneficiary(body.beneficiary, quote);
  let refundAddress: string | null = null;
  if (body.refundAddress !== undefined) {
    refundAddress = canonicalAddress(quote.chain, tenant.environment, body.refundAddress);
    if (!refundAddress) throw errors.validation(`refundAddress is not ${withArticle(quote.chain)} address of this environment's network.`, 'refundAddress');
  }
  const address = await newDepositAddress(em, deps.keys, deps.config, tenant.environment, quote.chain);
  const id = uuid();
  const trip = em.create(PayoutTrip, {
    id,
    organization: em.getReference(Organization, tenant.organizationId),
    environment: tenant.environment,
    quote,
    reference: body.reference,
    requestHash,
    beneficiary: maskBeneficiary(beneficiary),
    beneficiarySealed: await sealBeneficiary(deps.keys.provider, id, beneficiary),
    refundAddress,
    chain: quote.chain,
    assetId: quote.assetId,
    depositAddressRecord: address,
    depositAddress: address.address,
    status: 'awaiting_deposit',
    expiresAt: quote.expiresAt,
  });
  await em.flush();
  await recordTransition(em, trip, 'awaiting_deposit', 'awaiting_deposit', { deposit_address: address.address, amount_to_send_raw: quote.fromAmount });
  recordStart(em, payoutTripFlow, { tripId: trip.id }, tenant.organizationId);
  return trip;
}

export async function findTrip(em: EntityManager, tenant: Tenant, tripId: string, param = 'tripId'): Promise<PayoutTrip> {
  const trip = isUuid(tripId)
    ? await em.findOne(PayoutTrip, { id: tripId, organization: tenant.organizationId, environment: tenant.environment }, { populate: ['quote'] })
    : null;
  if (!trip) throw errors.notFound('payout trip', tripId, param);
  return trip;
}

/** The trip under a row lock, read afresh, its quote loaded: every step that moves a trip's money holds it. */
export async function lockTrip(em: EntityManager, tripId: string): Promise<PayoutTrip> {
  return em.findOneOrFail(PayoutTrip, { id: tripId }, { ...lockingOnlyItsRow(em, PayoutTrip), refresh: true, populate: ['quote'] });
}

export async function findTripByReference(em: EntityManager, tenant: Tenant, reference: string): Promise<PayoutTrip> {
  const trip = await em.findOne(PayoutTrip, { reference, organization: tenant.organizationId, environment: tenant.environment }, { populate: ['quote'] });
  if (!trip) throw errors.notFound('payout', reference, 'reference');
  return trip;
}

export function tripTimeline(em: EntityManager, trip: PayoutTrip): Promise<PayoutTripTransition[]> {
  return em.find(PayoutTripTransition, { trip }, { orderBy: { occurredAt: 'asc', id: 'asc' } });
}

export interface TripListFilter extends ListQuery {
  status?: TripStatus;
  createdFrom?: Date;
  createdTo?: Date;
}

/** The environment's trips, newest first, by status and a creation window (both ends inclusive). */
export function listTrips(em: EntityManager, tenant: Tenant, filter: TripListFilter) {
  const created = { ...(filter.createdFrom ? { $gte: filter.createdFrom } : {}), ...(filter.createdTo ? { $lte: filter.createdTo } : {}) };
  return paginate(
    em,
    PayoutTrip,
    {
      organization: tenant.organizationId,
      environment: tenant.environment,
      ...(filter.status ? { status: filter.status } : {}),
      ...(Object.keys(created).length ? { createdAt: created } : {}),
    },
    filter,
    ['quote'],
  );
}

/**
 * Seals the beneficiaries of trips stored before beneficiaries were sealed, masks their stored copy
 * and rehashes their request without the number (from the stored, normalised fields: a repeat of
 * the original body that normalisation changed is then 409). A migration cannot reach the
 * KeyProvider, so `cli migrate` runs this after the migrations. Each row is updated only if still
 * unsealed. Returns the number of trips sealed.
 */
export async function sealClearBeneficiaries(em: EntityManager, keys: KeyProvider): Promise<number> {
  const connection = em.getConnection();
  const rows = await connection.execute<{ id: string; quote_id: string; reference: string; beneficiary: Beneficiary; refund_address: string | null }[]>(
    `select id, quote_id, reference, beneficiary, refund_address from payout_trips where beneficiary_sealed is null`,
    [],
    'all',
  );
  let sealed = 0;
  for (const row of rows) {
    const body = { quoteId: row.quote_id, reference: row.reference, beneficiary: row.beneficiary, ...(row.refund_address ? { refundAddress: row.refund_address } : {}) };
    const updated = await connection.execute<{ id: string }[]>(
      `update payout_trips set beneficiary_sealed = ?, beneficiary = ?::jsonb, request_hash = ? where id = ? and beneficiary_sealed is null returning id`,
      [await sealBeneficiary(keys, row.id, row.beneficiary), JSON.stringify(maskBeneficiary(row.beneficiary)), tripRequestHash(body), row.id],
      'all',
    );
    sealed += updated.length;
  }
  return sealed;
}
