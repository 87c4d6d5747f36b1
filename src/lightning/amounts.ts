import { unixSeconds } from '../shared/time';
import type { DecodedInvoice } from './bolt11';

/** Whole sats in `msat` (a sub-sat remainder is dropped: what an invoice shows). */
export const msatToSat = (msat: bigint) => msat / 1000n;
/** Whole sats a payment of `msat` takes from a sat balance (a sub-sat remainder rounds up). */
export const satsToDebit = (msat: bigint) => (msat + 999n) / 1000n;

export const isExpired = (invoice: DecodedInvoice, now = new Date()) => unixSeconds(now) >= invoice.expiresAt;
