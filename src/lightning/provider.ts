import type { EntityManager } from '@mikro-orm/postgresql';
import type { Environment } from '../api-keys/entities';
import type { DecodedInvoice } from './bolt11';
import { nodePublicKey } from './node-key';
import { SLOW_NODE_DELAY_MS, UNKNOWN_QUERIES, sandboxFeeMsat, sandboxNodeFor, sandboxPreimageFor } from './sandbox-network';

/** What a provider says about one payment. `unknown` is re-queried, never treated as failed (rule 6). */
export type PaymentOutcome = { state: 'succeeded'; preimage: string; feeMsat: bigint } | { state: 'failed'; reason: string } | { state: 'unknown' };

export interface PaymentOrder {
  paymentId: string;
  organizationId: string;
  environment: Environment;
  invoice: DecodedInvoice;
  amountMsat: bigint;
  /** The provider must not pay a higher fee than this. */
  feeLimitMsat: bigint;
}

/**
 * Where a payment goes. The internal route settles invoices of this service; the sandbox network
 * simulates remote nodes; an LND REST provider would implement the same three calls. Providers
 * must be idempotent per payment hash: `pay` of a payment already sent reports its outcome.
 */
export interface LightningProvider {
  readonly name: 'internal' | 'sandbox_network';
  estimate(invoice: DecodedInvoice, amountMsat: bigint): { routeFound: boolean; feeMsat: bigint };
  pay(order: PaymentOrder): Promise<PaymentOutcome>;
  /** The outcome of an earlier send; `queryNumber` counts re-queries from 1. */
  query(order: PaymentOrder, queryNumber: number): Promise<PaymentOutcome>;
}

/** Settles one of our incoming invoices for a payer; supplied by the service (it moves balances and emits events). */
export type InternalSettler = (order: PaymentOrder) => Promise<PaymentOutcome>;

export class InternalRouteProvider implements LightningProvider {
  readonly name = 'internal' as const;
  constructor(private readonly settle: InternalSettler) {}
  estimate() {
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

export class SandboxNetworkProvider implements LightningProvider {
  readonly name = 'sandbox_network' as const;
  estimate(invoice: DecodedInvoice, amountMsat: bigint) {
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
    return { state: 'succeeded', preimage: sandboxPreimageFor(node, order.invoice), feeMsat };
  }
  async query(order: PaymentOrder, queryNumber: number): Promise<PaymentOutcome> {
    const node = sandboxNodeFor(order.invoice.payee);
    if ((node === 'unknown' || node === 'unknown_then_fail') && queryNumber < UNKNOWN_QUERIES) return { state: 'unknown' };
    if (node === 'unknown_then_fail') return { state: 'failed', reason: 'incorrect_or_unknown_payment_details' };
    if (node === 'unknown') return { state: 'succeeded', preimage: sandboxPreimageFor(node, order.invoice), feeMsat: sandboxFeeMsat(order.amountMsat) };
    return this.pay(order);
  }
}

/** The provider of a remote payee (not our node) from this environment, or null: no route. */
export type RemoteProviders = (environment: Environment, invoice: DecodedInvoice) => LightningProvider | null;

/** Live remote payments need a real node (an LND REST provider): none is configured yet. */
export const sandboxRemoteProviders: RemoteProviders = (environment, invoice) =>
  environment === 'sandbox' && sandboxNodeFor(invoice.payee) ? new SandboxNetworkProvider() : null;

/** The provider that can reach `invoice`'s payee from this environment, or null: no route. */
export async function providerFor(
  em: EntityManager,
  environment: Environment,
  invoice: DecodedInvoice,
  settle: InternalSettler,
  remote: RemoteProviders = sandboxRemoteProviders,
): Promise<LightningProvider | null> {
  if (invoice.payee === (await nodePublicKey(em, environment))) return new InternalRouteProvider(settle);
  return remote(environment, invoice);
}
