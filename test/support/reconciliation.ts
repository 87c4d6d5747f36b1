import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { ChainId } from '../../src/catalogue/service';
import { Address } from '../../src/custody/entities';
import { keyLocation } from '../../src/custody/service';
import type { DerivedKey } from '../../src/keys/derivation';
import { ledgerReconciliationWorkflowType, type LedgerReconciliationInput } from '../../src/monitoring/flows/ledger-reconciliation';
import { localTemporal, testOrm } from './environment';
import type { ScannedService } from './scanned-service';
import type { WebhookReceiver } from './webhook-receiver';

/** A ledger drift as the chain reconciliation tests compare them. */
export interface DriftRow {
  wallet_id: string;
  asset_id: string;
  figure: string;
  status: string;
  ledger_amount: string;
  chain_amount: string;
}

/** Starts one ledger reconciliation pass of an organization's holders on `taskQueue` (a worker of the test's serves it). */
export async function startReconciliationPass(input: LedgerReconciliationInput & { organizationId: string }, taskQueue: string) {
  return (await localTemporal()).client.workflow.start(ledgerReconciliationWorkflowType, { args: [input], taskQueue, workflowId: `ledger-reconciliation-test-${randomUUID()}` });
}

/** The organization's drifts, ordered by wallet, asset and figure. */
export async function organizationDrifts(organizationId: string): Promise<DriftRow[]> {
  return (await testOrm()).em
    .fork()
    .execute<DriftRow[]>(
      `select wallet_id, asset_id, figure::text, status::text, ledger_amount::text, chain_amount::text from ledger_drifts where organization_id = ? order by wallet_id, asset_id, figure`,
      [organizationId],
    );
}

/** The `ledger.drift` events the receiver was sent. */
export const driftEventsOf = (receiver: WebhookReceiver) =>
  receiver.attempts.map((attempt) => JSON.parse(attempt.body) as { type: string; data: Record<string, string> }).filter((event) => event.type === 'ledger.drift');

/** The wallet's primary custody key (sandbox) as someone holding it outside the platform would sign with it; wiped after `use`. */
export async function signingOutside<T>(service: ScannedService, walletId: string, use: (key: DerivedKey) => Promise<T>): Promise<T> {
  const em = (await testOrm()).em.fork();
  const primary = await em.findOneOrFail(Address, { wallet: walletId, isPrimary: true }, { populate: ['wallet'] });
  const key = await service.app.deps.keys.withKeys(em, service.org.organizationId, 'sandbox', [keyLocation(primary.wallet, primary.format, primary.addressIndex)], ([derived]) => ({
    ...derived!,
    privateKey: Uint8Array.from(derived!.privateKey),
  }));
  try {
    return await use(key);
  } finally {
    key.privateKey.fill(0);
  }
}

/** A hot wallet of the service's organization on `chain`, with its primary address. */
export async function createHotWallet(service: ScannedService, name: string, chain: ChainId): Promise<{ id: string; address: string }> {
  const vault = await service.call('POST', '/v1/vaults', { name });
  const created = await service.call('POST', '/v1/wallets', { name, chain, vault_id: vault.body.id, wallet_type: 'hot' });
  assert.equal(created.status, 201, created.text);
  return { id: created.body.id as string, address: created.body.primary_address.address as string };
}

/** A wallet's ledger balances by asset, in base units, as the API shows them. */
export async function walletBalances(service: ScannedService, walletId: string): Promise<Record<string, bigint>> {
  const rows = (await service.call('GET', `/v1/wallets/${walletId}/balances`)).body.data as { asset_id: string; balance: string }[];
  return Object.fromEntries(rows.map((row) => [row.asset_id, BigInt(row.balance)]));
}
