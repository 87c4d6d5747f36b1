/**
 * Verdicts on the ledger's figures: a drift opened, updated or resolved as a figure differs from
 * what it is compared with, announced with `ledger.drift`; and a balance surplus on an account
 * chain credited as an unattributed deposit once it is final and the wallet as a whole holds it.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import { assetById } from '../catalogue/service';
import { Address, Wallet } from '../custody/entities';
import { postCustodyEntry } from '../custody/journal';
import { emit } from '../events/service';
import type { Logger } from '../logger';
import { toDisplay } from '../shared/money';
import { iso } from '../shared/time';
import { LedgerDrift, type LedgerFigure } from './entities';
import type { PinnedPosition } from './ledger-check';

export interface JudgedPosition {
  em: EntityManager;
  log: Logger;
  wallet: Wallet;
  position: Pick<PinnedPosition, 'walletId' | 'addressId' | 'assetId'>;
}

/** The block a figure was compared at; its hash where the scanner recorded one. */
export interface ComparedAt {
  height: number;
  hash: string | null;
}

/** The figure an `overdrawn` drift compares with zero: the available balance where it is below zero, else zero (nothing to report). */
export const overdrawnFigure = (available: bigint) => (available < 0n ? available : 0n);

/**
 * One figure of one position against what it is compared with (`drift`: its unresolved drift): a
 * drift opened (`ledger.drift`, once), its figures updated, or resolved. Returns the drift when the
 * figures differ.
 */
export async function judgeFigure({ em, log, wallet, position }: JudgedPosition, figure: LedgerFigure, ledger: bigint, compared: bigint, drift: LedgerDrift | null): Promise<LedgerDrift | null> {
  const now = new Date();
  if (ledger === compared) {
    if (drift) Object.assign(drift, { status: 'resolved', resolvedAt: now, lastSeenAt: now });
    return null;
  }
  const figures = { ledgerAmount: ledger.toString(), chainAmount: compared.toString(), lastSeenAt: now };
  if (drift?.status === 'open') return Object.assign(drift, figures);
  // A drift suspected by a pass before pinned reads is judged now, as a new one would be.
  const found =
    drift ??
    em.create(LedgerDrift, {
      organization: wallet.organization,
      environment: wallet.environment,
      chain: wallet.chain,
      wallet,
      address: position.addressId,
      assetId: position.assetId,
      figure,
      ...figures,
      status: 'open',
      firstSeenAt: now,
    });
  Object.assign(found, figures, { status: 'open' });
  await em.flush();
  log.warn(
    { drift_id: found.id, chain: wallet.chain, environment: wallet.environment, wallet_id: wallet.id, asset_id: found.assetId, figure, ledger: found.ledgerAmount, compared: found.chainAmount },
    `ledger drift: the ledger's ${figure} differs`,
  );
  await announce(em, wallet, found, `ledger.drift:${found.id}`);
  return found;
}

/**
 * A balance drift where the chain holds more than the ledger (an account chain: a deposit no
 * transaction the scanner reads explains, a contract wallet's or a batched transfer's) is credited
 * as an `unattributed_deposit` only on proof:
 * - final: the surplus has been there since a block now `confirmations` deep that the chain still
 *   has (its hash is still the scanned one), and only the smallest surplus seen since is credited;
 * - the wallet's: less what its other addresses' open balance drifts lack of the asset (the ledger
 *   ahead of the chain there), so value the ledger put on the wrong address is not credited twice.
 * Credited: the drift is `credited` with what it credited, announced again; a rest waits as a new drift.
 */
export async function creditFinalSurplus(
  judged: JudgedPosition,
  drift: LedgerDrift,
  at: ComparedAt,
  confirmations: number,
  walletDrifts: LedgerDrift[],
): Promise<void> {
  const { em, log, wallet } = judged;
  const surplus = BigInt(drift.chainAmount) - BigInt(drift.ledgerAmount);
  if (surplus <= 0n) {
    Object.assign(drift, { surplusSeenHeight: null, surplusSeenHash: null, surplusFloor: null });
    return;
  }
  if (drift.surplusSeenHeight == null || !(await stillScanned(em, wallet, drift))) {
    Object.assign(drift, { surplusSeenHeight: at.height, surplusSeenHash: at.hash, surplusFloor: surplus.toString() });
  } else if (surplus < BigInt(drift.surplusFloor!)) {
    drift.surplusFloor = surplus.toString();
  }
  if (at.height - drift.surplusSeenHeight! + 1 < confirmations) return;
  const walletSurplus = walletDrifts
    .filter((other) => other.wallet.id === wallet.id && other.assetId === drift.assetId && other.figure === 'balance' && other.status === 'open')
    .reduce((total, other) => total + BigInt(other.chainAmount) - BigInt(other.ledgerAmount), 0n);
  const credit = [BigInt(drift.surplusFloor!), walletSurplus].reduce((least, amount) => (amount < least ? amount : least));
  if (credit <= 0n) return;
  await postCustodyEntry(em, {
    walletId: wallet.id,
    addressId: drift.address?.id ?? null,
    assetId: drift.assetId,
    kind: 'unattributed_deposit',
    reference: { type: 'ledger_drift', id: drift.id },
    balance: credit,
  });
  Object.assign(drift, { status: 'credited', creditedAmount: credit.toString(), resolvedAt: new Date() });
  await em.flush();
  log.warn(
    { drift_id: drift.id, chain: wallet.chain, environment: wallet.environment, wallet_id: wallet.id, asset_id: drift.assetId, surplus: surplus.toString(), credited: drift.creditedAmount, since_height: drift.surplusSeenHeight },
    'ledger drift: a final unattributed deposit credited',
  );
  await announce(em, wallet, drift, `ledger.drift:${drift.id}:credited`);
}

/** Whether the block the surplus was first seen at is still the scanned chain's (no recorded hash: a slot the scanner has none for). */
async function stillScanned(em: EntityManager, wallet: Wallet, drift: LedgerDrift): Promise<boolean> {
  if (!drift.surplusSeenHash) return true;
  const rows = await em.execute(`select 1 from scanned_blocks where chain = ? and environment = ? and height = ? and hash = ?`, [
    wallet.chain,
    wallet.environment,
    drift.surplusSeenHeight,
    drift.surplusSeenHash,
  ]);
  return rows.length > 0;
}

const announce = async (em: EntityManager, wallet: Wallet, drift: LedgerDrift, dedupeKey: string) =>
  emit(em, { organizationId: wallet.organization.id, environment: wallet.environment, type: 'ledger.drift', data: await presentDrift(em, drift), dedupeKey });

export async function presentDrift(em: EntityManager, drift: LedgerDrift) {
  const asset = assetById(drift.assetId);
  const address = drift.address ? await em.findOneOrFail(Address, { id: drift.address.id }) : null;
  const ledger = BigInt(drift.ledgerAmount);
  const chain = BigInt(drift.chainAmount);
  const credited = drift.creditedAmount != null ? BigInt(drift.creditedAmount) : null;
  return {
    id: drift.id,
    object: 'ledger_drift',
    chain: drift.chain,
    wallet_id: drift.wallet.id,
    address: address?.address ?? null,
    asset_id: asset.id,
    figure: drift.figure,
    ledger_amount: toDisplay(ledger, asset.decimals),
    ledger_amount_raw: ledger.toString(),
    chain_amount: toDisplay(chain, asset.decimals),
    chain_amount_raw: chain.toString(),
    difference_raw: (chain - ledger).toString(),
    credited_amount: credited === null ? null : toDisplay(credited, asset.decimals),
    credited_amount_raw: credited?.toString() ?? null,
    status: drift.status,
    first_seen_at: iso(drift.firstSeenAt),
    resolved_at: drift.resolvedAt ? iso(drift.resolvedAt) : null,
  };
}
