import { createHash } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { AuthContext } from '../api-keys/auth-context';
import { chainAsset } from '../catalogue/service';
import type { ChainNodes } from '../chains/nodes';
import type { Config } from '../config';
import { SandboxDeposit } from '../monitoring/entities';
import { simulateDeposit } from '../monitoring/sandbox';
import { toDisplay } from '../shared/money';
import type { WorkflowStarter } from '../temporal/starter';
import type { PayoutTrip } from './entities';

export interface TripDepositTransfer {
  /** Display units. */
  amount: string;
  amountRaw: string;
  txHash: string;
}

/**
 * The id of the transfer a request with this Idempotency-Key makes to this trip: a name-based UUID
 * (SHA-256 of the tenant, the key, the trip and the amount, with the version and variant bits set),
 * so a retry of the request finds the transfer its first attempt committed.
 */
export function tripDepositId(auth: Pick<AuthContext, 'organizationId' | 'environment'>, idempotencyKey: string, tripId: string, amount: string): string {
  const digest = createHash('sha256').update(['sandbox-payout-deposit', auth.organizationId, auth.environment, idempotencyKey, tripId, amount].join('\n')).digest();
  digest[6] = (digest[6]! & 0x0f) | 0x80;
  digest[8] = (digest[8]! & 0x3f) | 0x80;
  const hex = digest.subarray(0, 16).toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/**
 * The faucet's transfer to a trip's deposit address, committed before the helper mines (mining
 * waits on Temporal, outside any database transaction). Under an Idempotency-Key the transfer is
 * recorded under tripDepositId in the same commit, so a retry after a 5xx or a killed API (the
 * claim released or taken over) reuses it instead of sending a second one, then mines again;
 * concurrent attempts queue on a lock on that id. Without a key every call is a new transfer.
 */
export async function fundTripOnce(
  em: EntityManager,
  deps: { config: Config; chains: ChainNodes; starter: WorkflowStarter },
  auth: AuthContext,
  trip: PayoutTrip,
  amount: string,
  idempotencyKey: string | undefined,
): Promise<TripDepositTransfer> {
  const depositId = idempotencyKey ? tripDepositId(auth, idempotencyKey, trip.id, amount) : undefined;
  return deps.starter.transaction(em, async (tx) => {
    if (depositId) {
      await tx.execute('select pg_advisory_xact_lock(hashtext(?))', [`sandbox-payout-deposit:${depositId}`]);
      const earlier = await tx.findOne(SandboxDeposit, { id: depositId, organization: auth.organizationId });
      if (earlier) return { amount: toDisplay(BigInt(earlier.amount), chainAsset(trip.chain, trip.assetId).decimals), amountRaw: earlier.amount, txHash: earlier.txid };
    }
    const sent = await simulateDeposit(tx, deps.config, deps.chains, auth, { chain: trip.chain, address: trip.depositAddress, asset: trip.assetId, amount, depositId });
    return { amount: sent.amount, amountRaw: sent.amount_raw, txHash: sent.tx_hash };
  });
}
