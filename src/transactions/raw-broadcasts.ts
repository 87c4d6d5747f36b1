import type { EntityManager } from '@mikro-orm/postgresql';
import type { Environment } from '../api-keys/entities';
import { findChain, networkFor, type ChainId } from '../catalogue/service';
import type { BroadcastSenders } from '../chains/broadcast-senders';
import { Address } from '../custody/entities';
import { WalletOutput } from './entities';

/**
 * The first of a raw broadcast's senders that is a custody address, for the JSON-RPC pass-through to
 * refuse: an address of the chain's network in the environment, or (Bitcoin) the address of an output
 * the platform recorded (wallet_outputs: deposits and change, whatever their status) that an input spends.
 * Deliberately across organizations: no key may broadcast a spend from any wallet the platform holds,
 * its own organization's or another's (which the answer does not name).
 */
export async function custodySenderAmong(em: EntityManager, chain: ChainId, environment: Environment, senders: BroadcastSenders): Promise<string | null> {
  if (senders.addresses.length > 0) {
    const network = networkFor(findChain(chain), environment);
    const held = await em.findOne(Address, { chain, network, address: { $in: senders.addresses }, wallet: { environment } }, { fields: ['address'] });
    if (held) return held.address;
  }
  if (senders.outpoints.length > 0) {
    const spent = await em.findOne(WalletOutput, { environment, $or: senders.outpoints.map(({ txid, vout }) => ({ txid, vout })) }, { populate: ['address'] });
    if (spent) return spent.address.address;
  }
  return null;
}
