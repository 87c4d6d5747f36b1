import type { EntityManager } from '@mikro-orm/postgresql';
import { findChain, networkFor } from '../catalogue/service';
import { canonicalAddress } from '../chains/addresses';
import { Address } from '../custody/entities';
import { IncomingTransfer } from '../monitoring/entities';
import { Sponsorship } from './entities';
import type { SponsorshipDeps } from './sponsorship';

/**
 * Where the station's fuel stands for the sponsorship: `pending` until its own workflow settles or
 * releases it and, when the sender is a custody address of the organization, until scanning has
 * credited the fuel to that address (its deposit confirmed). The sponsored transaction's fee is
 * debited from the sender's ledger when it settles (or when scanning sees it, for a client's
 * transaction): started only once the fuel is on the sender's books, that fee never takes the
 * address below zero however far scanning trails the fuel send's own workflow.
 */
export async function fuelOutcome(deps: SponsorshipDeps, sponsorshipId: string): Promise<'pending' | 'confirmed' | 'failed'> {
  const em = deps.lifecycle.em();
  const sponsorship = await em.findOneOrFail(Sponsorship, { id: sponsorshipId }, { populate: ['fuelTransaction', 'sponsoredTransaction.fromAddress'] });
  const fuel = sponsorship.fuelTransaction;
  if (fuel.status === 'failed') return 'failed';
  if (fuel.status !== 'confirmed') return 'pending';
  const sender = sponsorship.sponsoredTransaction?.fromAddress ?? (await custodySender(em, sponsorship));
  if (!sender) return 'confirmed';
  const credited = await em.count(IncomingTransfer, {
    organization: sponsorship.organization.id,
    environment: sponsorship.environment,
    chain: sponsorship.chain,
    txid: fuel.minedTxHash ?? fuel.txHash!,
    address: sender.id,
    status: 'confirmed',
  });
  return credited > 0 ? 'confirmed' : 'pending';
}

/** A sponsor-broadcast's signer when it is one of the organization's custody addresses (a client's own key is none: no books to wait for). */
async function custodySender(em: EntityManager, sponsorship: Sponsorship): Promise<Address | null> {
  const address = canonicalAddress(sponsorship.chain, sponsorship.environment, sponsorship.senderAddress);
  if (!address) return null;
  return em.findOne(Address, {
    organization: sponsorship.organization.id,
    chain: sponsorship.chain,
    network: networkFor(findChain(sponsorship.chain), sponsorship.environment),
    address,
    wallet: { environment: sponsorship.environment },
  });
}
