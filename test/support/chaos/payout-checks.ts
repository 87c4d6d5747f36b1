import { Operation } from './client';

/**
 * Payouts, against the load's own record of each trip (the quote it was given, the trip it opened, the deposit it made):
 * in the trips' asset (USDT on Tron, base units), what the load deposited (each trip's quoted `fromAmountRaw`) is what
 * the payout desk's wallet holds (nothing refunded or swept here), and each trip's rail paid it once, exactly the
 * quote's `toAmountRaw` in its `toCurrency`; no rail paid a trip the load did not open. Nothing is credited back (no
 * sandbox outcome is set): each organization's USDT is the model's 0, checked with the other balances. Returns the trips
 * the load opened, and of them those their rail paid as quoted.
 */
export async function checkPayouts(
  sql: <T>(query: string, params?: unknown[]) => Promise<T[]>,
  accepted: Operation[],
  violations: string[],
  report: string[],
): Promise<{ trips: number; tripsPaidAsQuoted: number }> {
  const quotes = new Map(accepted.filter((each) => each.kind === 'payout_quote').map((each) => [each.id!, each.answer!.body as { fromAmountRaw: string; toAmountRaw: string; toCurrency: string; fees: { amountRaw: string }[] }]));
  const trips = accepted.filter((each) => each.kind === 'payout');
  const quoteOfTrip = new Map(trips.map((trip) => [trip.id!, quotes.get((trip.body as { quoteId: string }).quoteId)!]));
  const deposits = accepted.filter((each) => each.kind === 'payout_deposit');
  let deposited = 0n;
  for (const deposit of deposits) {
    const tripId = /\/trips\/([^/]+)\/deposit$/.exec(deposit.route)![1]!;
    const quoted = BigInt(quoteOfTrip.get(tripId)!.fromAmountRaw);
    deposited += quoted;
    if (BigInt(deposit.answer!.body.amountRaw as string) !== quoted) violations.push(`the deposit to trip ${tripId} answered ${deposit.answer!.body.amountRaw}, the load sent its quote's ${quoted}`);
  }
  const [desk] = await sql<{ total: string }>(
    `select coalesce(sum(balance + pending), 0) as total from wallet_balances
      where asset_id = 'USDT_TRX' and wallet_id in (select a.wallet_id from addresses a join payout_trips t on t.deposit_address_record_id = a.id)`,
  );
  if (deposited !== BigInt(desk!.total)) violations.push(`money USDT: the load deposited ${deposited}, the desk's wallet holds ${desk!.total}`);
  // The sandbox rail stands for the bank or the mobile money operator: what it paid is read from its own record.
  const paid = await sql<{ trip_id: string; amount: string; currency: string }>(
    `select trip_id, amount::text, currency from sandbox_rail_instructions where paid_at is not null`,
  );
  let tripsPaidAsQuoted = 0;
  for (const [tripId, quote] of quoteOfTrip) {
    const rail = paid.find((each) => each.trip_id === tripId);
    if (!rail) violations.push(`trip ${tripId}: its rail did not pay it`);
    else if (rail.amount !== quote.toAmountRaw || rail.currency !== quote.toCurrency) violations.push(`trip ${tripId}: its rail paid ${rail.amount} ${rail.currency}, the quote said ${quote.toAmountRaw} ${quote.toCurrency}`);
    else tripsPaidAsQuoted += 1;
  }
  for (const rail of paid) if (!quoteOfTrip.has(rail.trip_id)) violations.push(`a rail paid trip ${rail.trip_id}, which the load did not open`);
  const fees = [...quoteOfTrip.values()].reduce((sum, quote) => sum + quote.fees.reduce((each, fee) => each + BigInt(fee.amountRaw), 0n), 0n);
  const fiat = new Map<string, bigint>();
  for (const quote of quoteOfTrip.values()) fiat.set(quote.toCurrency, (fiat.get(quote.toCurrency) ?? 0n) + BigInt(quote.toAmountRaw));
  report.push(
    `payouts: ${trips.length} trips opened by the load, ${tripsPaidAsQuoted} paid by their rail as quoted`,
    `money USDT (Tron, base units): the load deposited ${deposited} (fees ${fees}) = the desk's wallet ${desk!.total}; ` +
      `fiat quoted and paid (minor units): ${[...fiat].map(([currency, amount]) => `${currency} ${amount}`).join(', ') || 'none'}`,
  );
  return { trips: trips.length, tripsPaidAsQuoted };
}
