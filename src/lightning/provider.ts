import type { EntityManager } from '@mikro-orm/postgresql';
import type { Environment } from '../api-keys/entities';
import { networkForEnvironment, type Bolt11Network, type DecodedInvoice } from './bolt11';
import type { LndNode } from './lnd';
import { LndProvider } from './lnd-provider';
import { nodePublicKey } from './node-key';
import type { PaymentHashClaims } from './claims';
import { SLOW_NODE_DELAY_MS, UNKNOWN_QUERIES, sandboxFeeMsat, sandboxNodeFor, sandboxPreimageFor, type SandboxNode } from './sandbox-network';

/** What a provider says about one payment. `unknown` is re-queried, never treated as failed (rule 6). */
export type PaymentOutcome = { state: 'succeeded'; preimage: string; feeMsat: bigint } | { state: 'failed'; reason: string } | { state: 'unknown' };

export interface PaymentOrder {
  paymentId: string;
  organizationId: string;
  environment: Environment;
  invoice: DecodedInvoice;
  /** The BOLT11 string as accepted (a node pays the request itself). */
  request: string;
  amountMsat: bigint;
  /** The provider must not pay a higher fee than this. */
  feeLimitMsat: bigint;
}

/**
 * Where a payment goes. The internal route settles invoices of this service; the sandbox network
 * simulates remote nodes; LND (lnd.ts) pays through the Lightning network. Providers must be
 * idempotent per payment hash: `pay` of a payment already sent reports its outcome.
 */
export interface LightningProvider {
  readonly name: 'internal' | 'sandbox_network' | 'lnd';
  /** The route's fee, or no route; `request` is the BOLT11 string `invoice` was decoded from (a node reads its route hints). */
  estimate(invoice: DecodedInvoice, amountMsat: bigint, request: string): Promise<{ routeFound: boolean; feeMsat: bigint }>;
  pay(order: PaymentOrder): Promise<PaymentOutcome>;
  /** The outcome of an earlier send; `queryNumber` counts re-queries from 1. */
  query(order: PaymentOrder, queryNumber: number): Promise<PaymentOutcome>;
}

/** Settles one of our incoming invoices for a payer; supplied by the service (it moves balances and emits events). */
export type InternalSettler = (order: PaymentOrder) => Promise<PaymentOutcome>;

export class InternalRouteProvider implements LightningProvider {
  readonly name = 'internal' as const;
  constructor(private readonly settle: InternalSettler) {}
  async estimate() {
    return { routeFound: true, feeMsat: 0n };
  }
  pay(order: PaymentOrder) {
    return this.settle(order);
  }
  query(order: PaymentOrder) {
    // Settlement is idempotent per payment: asking again reports what happened.
    return this.settle(order);
  }
}

/** The sandbox network's payees: each settles an invoice once, as a real payee does; another payer's payment of it fails. */
export class SandboxNetworkProvider implements LightningProvider {
  readonly name = 'sandbox_network' as const;
  constructor(private readonly claims: PaymentHashClaims) {}
  async estimate(invoice: DecodedInvoice, amountMsat: bigint) {
    const node = sandboxNodeFor(invoice.payee);
    return { routeFound: node !== undefined && node !== 'unroutable', feeMsat: sandboxFeeMsat(amountMsat) };
  }
  async pay(order: PaymentOrder): Promise<PaymentOutcome> {
    const node = sandboxNodeFor(order.invoice.payee);
    const feeMsat = sandboxFeeMsat(order.amountMsat);
    if (!node || node === 'unroutable') return { state: 'failed', reason: 'no_route' };
    if (feeMsat > order.feeLimitMsat) return { state: 'failed', reason: 'fee_limit_exceeded' };
    if (node === 'fail') return { state: 'failed', reason: 'incorrect_or_unknown_payment_details' };
    if (node === 'unknown' || node === 'unknown_then_fail') return { state: 'unknown' };
    if (node === 'slow') await new Promise((resolve) => setTimeout(resolve, SLOW_NODE_DELAY_MS));
    return this.settle(node, order);
  }
  async query(order: PaymentOrder, queryNumber: number): Promise<PaymentOutcome> {
    const node = sandboxNodeFor(order.invoice.payee);
    if ((node === 'unknown' || node === 'unknown_then_fail') && queryNumber < UNKNOWN_QUERIES) return { state: 'unknown' };
    if (node === 'unknown_then_fail') return { state: 'failed', reason: 'incorrect_or_unknown_payment_details' };
    if (node === 'unknown') return this.settle(node, order);
    return this.pay(order);
  }
  /** The payee settles the invoice for this payment, unless it settled it for another: that payer's HTLC is refused, as a real node refuses it. */
  private async settle(node: SandboxNode, order: PaymentOrder): Promise<PaymentOutcome> {
    if (!(await this.claims(order.invoice.payee, order))) return { state: 'failed', reason: 'incorrect_or_unknown_payment_details' };
    return { state: 'succeeded', preimage: sandboxPreimageFor(node, order.invoice), feeMsat: sandboxFeeMsat(order.amountMsat) };
  }
}

/** The provider of a remote payee (not our node) from this environment, or null: no route. */
export type RemoteProviders = (environment: Environment, invoice: DecodedInvoice) => LightningProvider | null;

/**
 * The Lightning node of each environment. With none (`lnd` null) sandbox invoices are signed with the
 * environment's node key (node-key.ts) and its payments reach the sandbox network; live answers 503.
 */
export interface LightningNodes {
  lnd(environment: Environment): LndNode | null;
  /** The BOLT11 network of the environment's invoices and of those it pays. */
  network(environment: Environment): Bolt11Network;
}

export const NO_LIGHTNING_NODES: LightningNodes = { lnd: () => null, network: networkForEnvironment };

/** The sandbox network's simulated nodes, then the environment's LND for any other payee; both claim the hashes they pay or settle. */
export const remoteProvidersOf =
  (nodes: LightningNodes, claims: PaymentHashClaims): RemoteProviders =>
  (environment, invoice) => {
    if (environment === 'sandbox' && sandboxNodeFor(invoice.payee)) return new SandboxNetworkProvider(claims);
    const lnd = nodes.lnd(environment);
    return lnd ? new LndProvider(lnd, claims) : null;
  };

/** Our node's key in this environment: the payee of our invoices (its LND's identity when it has one). */
export const ourNodeKey = (em: EntityManager, environment: Environment, nodes: LightningNodes): Promise<string | null> =>
  nodes.lnd(environment)?.identityPubkey() ?? nodePublicKey(em, environment);

/** The provider that can reach `invoice`'s payee from this environment, or null: no route. */
export async function providerFor(
  em: EntityManager,
  environment: Environment,
  invoice: DecodedInvoice,
  settle: InternalSettler,
  remote: RemoteProviders,
  nodes: LightningNodes,
): Promise<LightningProvider | null> {
  if (invoice.payee === (await ourNodeKey(em, environment, nodes))) return new InternalRouteProvider(settle);
  return remote(environment, invoice);
}
