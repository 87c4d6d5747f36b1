import { randomUUID } from 'node:crypto';
import { presentCreatedInvoice } from '../../src/lightning/presenters';
import { NO_LIGHTNING_NODES } from '../../src/lightning/provider';
import { createInvoice, signWithNodeKey, type NewInvoice } from '../../src/lightning/invoices';
import type { TestApp } from './app';
import { testOrm } from './environment';

/**
 * A live incoming invoice on record, as the API presents it on creation. The API answers 503 to live
 * invoices when no live LND is configured (the tests' case), so tests of what may reach a live record
 * make one with the live node key, through the service's own insert.
 */
export async function recordLiveInvoice(app: TestApp, organizationId: string, input: Partial<NewInvoice> = {}) {
  const em = (await testOrm()).em.fork();
  const invoice: NewInvoice = { amountSat: 1_000, description: 'live', expirySeconds: 86_400, reference: randomUUID(), ...input };
  const issued = await signWithNodeKey(em, app.deps.keys, 'live', invoice);
  return presentCreatedInvoice(await createInvoice(em, app.deps.keys, { organizationId, environment: 'live' }, invoice, NO_LIGHTNING_NODES, issued));
}
