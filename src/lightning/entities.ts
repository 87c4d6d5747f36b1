import { BigIntType, Entity, Enum, Index, ManyToOne, PrimaryKey, PrimaryKeyProp, Property, Unique } from '@mikro-orm/core';
import { ENVIRONMENTS, type Environment } from '../api-keys/entities';
import { Organization } from '../organizations/entities';
import { prefixedId, uuid } from '../shared/ids';

export const INVOICE_DIRECTIONS = ['incoming', 'outgoing'] as const;
export type InvoiceDirection = (typeof INVOICE_DIRECTIONS)[number];

export const INVOICE_STATUSES = ['pending', 'paid', 'expired', 'failed'] as const;
export type InvoiceStatus = (typeof INVOICE_STATUSES)[number];

/**
 * Why a payment is held, as its API shows it (docs/lightning.md, "Held payments"): the node did not answer
 * (`unreachable`), runs on another network (`network_mismatch`), was given a macaroon live refuses
 * (`macaroon_too_broad`), answered an error not known to be final (`node_error`), or our own side failed
 * (`internal_error`). The node's own words stay in held_reason, for the operator.
 */
export const HELD_REASONS = ['unreachable', 'network_mismatch', 'macaroon_too_broad', 'node_error', 'internal_error'] as const;
export type HeldReason = (typeof HELD_REASONS)[number];

/**
 * The service's Lightning node key, one per environment (lnbc for live, lntb for sandbox),
 * generated on first use: the private key is envelope-encrypted under the key provider.
 */
@Entity({ tableName: 'lightning_node_keys' })
@Unique({ properties: ['environment'] })
export class LightningNodeKey {
  @PrimaryKey({ type: 'text' })
  id: string = prefixedId('lnk');

  @Enum({ items: () => ENVIRONMENTS, nativeEnumName: 'environment' })
  environment!: Environment;

  /** 33-byte compressed public key, hex: the `destination` of our invoices. */
  @Property({ type: 'text' })
  publicKey!: string;

  @Property({ type: 'text' })
  keyProvider!: string;

  @Property({ type: 'text' })
  masterKeyId!: string;

  @Property({ type: 'text' })
  wrappedDataKey!: string;

  /** base64 of `iv || AES-256-GCM(private key) || tag`. */
  @Property({ type: 'text' })
  privateKeyCiphertext!: string;

  @Property({ type: 'timestamptz' })
  createdAt: Date = new Date();
}

export const ACTIVE_PAYMENT_INDEX = 'lightning_invoices_active_payment_unique';
const PENDING_EXPIRY_INDEX = 'lightning_invoices_pending_expiry_index';

/**
 * One Lightning record of an organization, in the specification's invoice shape: `incoming` is an
 * invoice it issued, `outgoing` a payment it made (of someone's invoice). The reference is the
 * idempotency key of each direction.
 */
@Entity({ tableName: 'lightning_invoices' })
// A reference is an idempotency key within one environment: sandbox and live are two worlds.
@Unique({ properties: ['organization', 'environment', 'direction', 'reference'] })
@Index({ properties: ['organization', 'environment', 'createdAt', 'id'] })
@Index({ properties: ['paymentHash'] })
// At most one active (pending or paid) payment of an invoice per organization and environment: concurrent payments under different references cannot both reserve.
@Unique({
  name: ACTIVE_PAYMENT_INDEX,
  expression: `create unique index "${ACTIVE_PAYMENT_INDEX}" on "lightning_invoices" ("organization_id", "environment", "payment_hash") where direction = 'outgoing' and status in ('pending', 'paid')`,
})
// The expiry sweep's scan: pending incoming invoices by deadline, nothing else (paid, expired and payments stay out of it).
@Index({
  name: PENDING_EXPIRY_INDEX,
  expression: `create index "${PENDING_EXPIRY_INDEX}" on "lightning_invoices" ("expires_at") where status = 'pending' and direction = 'incoming'`,
})
export class LightningInvoice {
  @PrimaryKey({ type: 'uuid' })
  id: string = uuid();

  @ManyToOne(() => Organization, { deleteRule: 'cascade' })
  organization!: Organization;

  @Enum({ items: () => ENVIRONMENTS, nativeEnumName: 'environment' })
  environment!: Environment;

  @Enum({ items: () => INVOICE_DIRECTIONS, nativeEnumName: 'lightning_direction' })
  direction!: InvoiceDirection;

  @Enum({ items: () => INVOICE_STATUSES, nativeEnumName: 'lightning_status' })
  status: InvoiceStatus = 'pending';

  @Property({ type: 'text' })
  reference!: string;

  @Property({ type: 'uuid', nullable: true })
  customerId?: string | null;

  @Property({ type: 'text' })
  paymentHash!: string;

  /** The BOLT11 string. */
  @Property({ type: 'text' })
  request!: string;

  /** 33-byte node key (hex) the request pays: ours for incoming. */
  @Property({ type: 'text' })
  destination!: string;

  /**
   * Incoming: the preimage we hold from creation, revealed (presented) only once paid.
   * Outgoing: the proof the payee revealed; empty until paid.
   */
  @Property({ type: 'text' })
  preimage: string = '';

  @Property({ type: 'decimal', precision: 20, scale: 0 })
  amountMsat!: string;

  @Property({ type: 'decimal', precision: 20, scale: 0, default: 0 })
  feeMsat: string = '0';

  /** Outgoing: the max_fee the caller gave (null: none, or 0), kept to tell a repeated reference from a reused one. */
  @Property({ type: 'decimal', precision: 20, scale: 0, nullable: true })
  maxFeeMsat?: string | null;

  /** Outgoing: the most fee it may pay (max_fee, else the estimate); amount plus this is reserved. */
  @Property({ type: 'decimal', precision: 20, scale: 0, nullable: true })
  feeLimitMsat?: string | null;

  @Property({ type: 'text' })
  description!: string;

  @Property({ type: 'timestamptz' })
  expiresAt!: Date;

  /** Outgoing: when the provider was first asked to pay (a retried send queries instead). */
  @Property({ type: 'timestamptz', nullable: true })
  sentAt?: Date | null;

  /** Outgoing: why it failed. */
  @Property({ type: 'text', nullable: true })
  failureReason?: string | null;

  /**
   * Outgoing: when the send stopped being retried (LIGHTNING_LND_SEND_ATTEMPTS transient failures); the payment
   * stays pending, re-queried, until its outcome is known or an operator resolves it (`lightning:held`).
   */
  @Property({ type: 'timestamptz', nullable: true })
  heldAt?: Date | null;

  /** Outgoing: the last transient failure of a held payment's send, as the node or the connection gave it (operators only: it names the node's address). */
  @Property({ type: 'text', nullable: true })
  heldReason?: string | null;

  /** Outgoing: that failure's kind (HELD_REASONS), what the payment's API shows. */
  @Property({ type: 'text', nullable: true })
  heldReasonCode?: HeldReason | null;

  /** Incoming paid over the internal route: the outgoing record that paid it. */
  @Property({ type: 'uuid', nullable: true })
  paidByPaymentId?: string | null;

  @Property({ type: 'timestamptz' })
  createdAt: Date = new Date();

  @Property({ type: 'timestamptz', nullable: true })
  updatedAt?: Date | null;
}

/**
 * A payment hash paid through a node every organization shares, and the payment that holds it: LND keeps
 * one payment per hash (a second send is answered with the first one's result) and a payee settles an
 * invoice once, so at most one payment of any organization holds (node, hash). See claims.ts.
 */
@Entity({ tableName: 'lightning_payment_claims' })
export class LightningPaymentClaim {
  [PrimaryKeyProp]?: ['nodeKey', 'paymentHash'];

  /** The node that pays or settles the hash once: our LND's identity key, or a simulated payee's. */
  @PrimaryKey({ type: 'text' })
  nodeKey!: string;

  @PrimaryKey({ type: 'text' })
  paymentHash!: string;

  @ManyToOne(() => LightningInvoice, { deleteRule: 'cascade', index: true })
  payment!: LightningInvoice;

  @Property({ type: 'timestamptz' })
  createdAt: Date = new Date();
}

/**
 * How far an environment's LND node's invoice history has been recorded: the node's settle_index and
 * add_index of the last invoices settled into the ledger, moved in the transaction that records them.
 * A watch starting again subscribes from them, so what settled while none watched is credited once.
 */
@Entity({ tableName: 'lightning_invoice_cursors' })
export class LightningInvoiceCursor {
  @Enum({ items: () => ENVIRONMENTS, nativeEnumName: 'environment', primary: true })
  environment!: Environment;

  /** The node's identity key (hex): another node behind the same URL starts from its own history. */
  @PrimaryKey({ type: 'text' })
  nodePubkey!: string;

  @Property({ type: new BigIntType('string') })
  settleIndex!: string;

  @Property({ type: new BigIntType('string') })
  addIndex!: string;

  @Property({ type: 'timestamptz' })
  updatedAt: Date = new Date();
}
