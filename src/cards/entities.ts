import { Embedded, Entity, Enum, Index, ManyToOne, OptionalProps, PrimaryKey, Property, Unique } from '@mikro-orm/core';
import { ENVIRONMENTS, type Environment } from '../api-keys/entities';
import { SigningSecrets } from '../events/entities';
import { Organization } from '../organizations/entities';
import { uuid } from '../shared/ids';

export const CARD_TYPES = ['virtual', 'physical'] as const;
export type CardType = (typeof CARD_TYPES)[number];

/** `failed`: the issuer refused to mint the card (created_status failed); nothing can be done with it. */
export const CARD_STATUSES = ['pending', 'active', 'frozen', 'terminated', 'failed'] as const;
export type CardStatus = (typeof CARD_STATUSES)[number];

export const CARD_CREATED_STATUSES = ['processing', 'completed', 'failed'] as const;
export type CardCreatedStatus = (typeof CARD_CREATED_STATUSES)[number];

/**
 * `reversal`, `capture_adjustment` and `refund`: a live card's money following the issuer after its
 * purchase was authorized (src/cards/issuer-settlement.ts).
 */
export const CARD_TRANSACTION_TYPES = ['funding', 'withdrawal', 'purchase', 'reversal', 'capture_adjustment', 'refund'] as const;
export type CardTransactionType = (typeof CARD_TRANSACTION_TYPES)[number];

export const CARD_TRANSACTION_STATUSES = ['pending', 'completed', 'failed', 'declined'] as const;
export type CardTransactionStatus = (typeof CARD_TRANSACTION_STATUSES)[number];

export const SPEND_LIMIT_WINDOWS = ['transaction', 'daily', 'weekly', 'monthly', 'yearly', 'all_time'] as const;
export type SpendLimitWindow = (typeof SPEND_LIMIT_WINDOWS)[number];
/** Cents as decimal strings per window; a missing window has no limit. */
export type SpendLimits = Partial<Record<SpendLimitWindow, string>>;

/** When, from where and with which browser a customer accepted the card program's user terms (RFC 3339, an IP address). */
export interface TermsAcceptance {
  accepted_at: string;
  ip: string;
  user_agent: string | null;
}

export interface BillingAddress {
  line1: string;
  line2: string | null;
  city: string;
  state: string;
  postal_code: string;
  country: string;
}

/** A cardholder, created from the customer object of a create-card request and reusable by id. */
@Entity({ tableName: 'card_customers' })
@Index({ properties: ['organization', 'environment', 'createdAt', 'id'] })
@Unique({ properties: ['organization', 'environment', 'idType', 'idNumber', 'country'] })
export class Customer {
  [OptionalProps]?: 'createdAt' | 'updatedAt';

  @PrimaryKey({ type: 'uuid' })
  id: string = uuid();

  @ManyToOne(() => Organization, { deleteRule: 'cascade' })
  organization!: Organization;

  /** The creating key's environment: a customer is reused, read and listed within it only. */
  @Enum({ items: () => ENVIRONMENTS, nativeEnumName: 'environment' })
  environment!: Environment;

  @Property({ type: 'text' })
  customerType!: string;

  @Property({ type: 'text' })
  firstName!: string;

  @Property({ type: 'text' })
  lastName!: string;

  @Property({ type: 'text' })
  email!: string;

  @Property({ type: 'text' })
  phoneNumber!: string;

  @Property({ type: 'text' })
  dialCode!: string;

  @Property({ type: 'text' })
  dateOfBirth!: string;

  @Property({ type: 'text' })
  idType!: string;

  @Property({ type: 'text' })
  idNumber!: string;

  @Property({ type: 'json' })
  address!: BillingAddress;

  /** ISO 3166-1 alpha-3, copied out of the address for the uniqueness of (id_type, id_number, country). */
  @Property({ type: 'text' })
  country!: string;

  /** The live issuer's cardholder made for this customer (Stripe `ich_...`), once its first live card is minted. */
  @Property({ type: 'text', nullable: true })
  issuerCardholderId?: string | null;

  /** The customer's acceptance of the card program's user terms (Celtic's, where the live program needs it: STRIPE_ISSUING_CELTIC_TERMS). */
  @Property({ type: 'json', nullable: true })
  termsAcceptance?: TermsAcceptance | null;

  @Property({ type: 'timestamptz' })
  createdAt: Date = new Date();

  @Property({ type: 'timestamptz', onUpdate: () => new Date() })
  updatedAt: Date = new Date();
}

/** PAN and CVV sealed with AES-256-GCM under a per-card data key that the KeyProvider wraps. */
export interface SealedCardSecrets {
  masterKeyId: string;
  wrappedDataKey: string;
  /** base64 of `iv || ciphertext || tag` of `{"pan","cvv"}` */
  ciphertext: string;
}

@Entity({ tableName: 'cards' })
@Index({ properties: ['organization', 'environment', 'createdAt', 'id'] })
@Index({ properties: ['issuerCardId'] })
@Index({ properties: ['customer', 'createdAt', 'id'] })
export class Card {
  [OptionalProps]?: 'createdAt' | 'updatedAt' | 'status' | 'createdStatus' | 'balance' | 'held' | 'spentAllTime' | 'spendingLimits' | 'maskedPan';

  @PrimaryKey({ type: 'uuid' })
  id: string = uuid();

  @ManyToOne(() => Organization, { deleteRule: 'cascade' })
  organization!: Organization;

  @ManyToOne(() => Customer, { deleteRule: 'cascade' })
  customer!: Customer;

  /** The creating key's environment: only keys of it see or touch the card; also the URL policy of its webhook_url. */
  @Enum({ items: () => ENVIRONMENTS, nativeEnumName: 'environment' })
  environment!: Environment;

  @Enum({ items: () => CARD_TYPES, nativeEnumName: 'card_type' })
  cardType!: CardType;

  @Enum({ items: () => CARD_STATUSES, nativeEnumName: 'card_status' })
  status: CardStatus = 'pending';

  @Enum({ items: () => CARD_CREATED_STATUSES, nativeEnumName: 'card_created_status' })
  createdStatus: CardCreatedStatus = 'processing';

  @Property({ type: 'text' })
  name!: string;

  @Property({ type: 'text' })
  preferredName!: string;

  @Property({ type: 'text' })
  currency!: string;

  @Property({ type: 'text' })
  cardBrand!: string;

  /** Empty until the issuer has minted the number. */
  @Property({ type: 'text' })
  maskedPan: string = '';

  @Property({ type: 'text', nullable: true })
  lastFour?: string | null;

  @Property({ type: 'json', nullable: true })
  secrets?: SealedCardSecrets | null;

  /** The live issuer's copy of the card (Stripe `ic_...`); null for sandbox cards. Its authorization requests name it. */
  @Property({ type: 'text', nullable: true })
  issuerCardId?: string | null;

  /**
   * Why the live issuer last refused to take the card's status or spending controls (its own message), and when: the
   * sync ends there (announced as card.issuer_sync_failed), it is not retried. Cleared by the next sync it takes.
   */
  @Property({ type: 'text', nullable: true })
  issuerSyncFailure?: string | null;

  @Property({ type: 'timestamptz', nullable: true })
  issuerSyncFailedAt?: Date | null;

  /** Settled balance in cents. */
  @Property({ type: 'decimal', precision: 38, scale: 0 })
  balance: string = '0';

  /** Cents held for pending withdrawals: not spendable, not yet gone. */
  @Property({ type: 'decimal', precision: 38, scale: 0 })
  held: string = '0';

  /** Initial funding asked at creation (cents). */
  @Property({ type: 'decimal', precision: 38, scale: 0 })
  initialAmount!: string;

  @Property({ type: 'boolean' })
  contactlessPayment!: boolean;

  @Property({ type: 'json' })
  spendingLimits: SpendLimits = {};

  /** Cents of every approved purchase, kept with each approval: the all-time limit without summing the card's history. */
  @Property({ type: 'decimal', precision: 38, scale: 0 })
  spentAllTime: string = '0';

  @Property({ type: 'text' })
  reference!: string;

  @Property({ type: 'text', nullable: true })
  webhookUrl?: string | null;

  /** Signs deliveries to webhook_url (Standard Webhooks), shown once at creation. */
  @Embedded(() => SigningSecrets, { prefix: 'webhook_secret_' })
  webhookSecrets!: SigningSecrets;

  /** Payload version of webhook_url deliveries: the creating request's effective API version. */
  @Property({ type: 'text' })
  apiVersion!: string;

  @Property({ type: 'text' })
  userMetadata!: string;

  @Property({ type: 'json' })
  billingAddress!: BillingAddress;

  @Property({ type: 'uuid', nullable: true })
  createdBy?: string | null;

  @Property({ type: 'text', nullable: true })
  failureReason?: string | null;

  /**
   * Set under the card lock when a termination is accepted: from then on the card takes no
   * fundings, withdrawals or purchases, and the termination workflow carries it to `terminated`.
   */
  @Property({ type: 'timestamptz', nullable: true })
  terminationRequestedAt?: Date | null;

  @Property({ type: 'timestamptz', nullable: true })
  terminatedAt?: Date | null;

  @Property({ type: 'text', nullable: true })
  terminationReason?: string | null;

  /** The balance (cents) returned to the company balance at termination. */
  @Property({ type: 'decimal', precision: 38, scale: 0, nullable: true })
  remainingBalance?: string | null;

  @Property({ type: 'timestamptz' })
  createdAt: Date = new Date();

  @Property({ type: 'timestamptz', onUpdate: () => new Date() })
  updatedAt: Date = new Date();
}

const COMPLETED_PURCHASES_INDEX = 'card_transactions_completed_purchases_index';

/** Fundings, withdrawals (settled by workflow), purchases (authorizations) and what the live issuer moved after them. */
@Entity({ tableName: 'card_transactions' })
@Index({ properties: ['card', 'createdAt', 'id'] })
// The spend-limit windows (src/cards/spend-limits.ts): a range of a card's approved purchases by time, summed from the index alone.
@Index({
  name: COMPLETED_PURCHASES_INDEX,
  expression: `create index "${COMPLETED_PURCHASES_INDEX}" on "card_transactions" ("card_id", "created_at") include ("amount") where type = 'purchase' and status = 'completed'`,
})
@Unique({ properties: ['organization', 'environment', 'reference'] })
export class CardTransaction {
  [OptionalProps]?: 'createdAt' | 'updatedAt' | 'feeAmount';

  @PrimaryKey({ type: 'uuid' })
  id: string = uuid();

  @ManyToOne(() => Organization, { deleteRule: 'cascade' })
  organization!: Organization;

  /** Always its card's environment. */
  @Enum({ items: () => ENVIRONMENTS, nativeEnumName: 'environment' })
  environment!: Environment;

  @ManyToOne(() => Card, { deleteRule: 'cascade' })
  card!: Card;

  @Enum({ items: () => CARD_TRANSACTION_TYPES, nativeEnumName: 'card_transaction_type' })
  type!: CardTransactionType;

  @Enum({ items: () => CARD_TRANSACTION_STATUSES, nativeEnumName: 'card_transaction_status' })
  status!: CardTransactionStatus;

  @Property({ type: 'decimal', precision: 38, scale: 0 })
  amount!: string;

  @Property({ type: 'decimal', precision: 38, scale: 0 })
  balanceBefore!: string;

  @Property({ type: 'decimal', precision: 38, scale: 0 })
  balanceAfter!: string;

  @Property({ type: 'decimal', precision: 38, scale: 0 })
  feeAmount: string = '0';

  /** The client's idempotency key (fund/withdraw), unique per company and environment; for a live purchase the issuer's authorization (issuerAuthorizationReference), and for what followed it the issuer's object (issuer-settlement.ts); null for sandbox purchases. */
  @Property({ type: 'text', nullable: true })
  reference?: string | null;

  @Property({ type: 'text', nullable: true })
  merchantName?: string | null;

  /** Why an authorization was declined or a settlement failed. */
  @Property({ type: 'text', nullable: true })
  failureReason?: string | null;

  @Property({ type: 'timestamptz' })
  createdAt: Date = new Date();

  @Property({ type: 'timestamptz', onUpdate: () => new Date() })
  updatedAt: Date = new Date();
}

/**
 * A card's approved purchases summed per UTC day of their `created_at`, kept by a trigger on
 * card_transactions (migration Migration20261125214042), so that every writer keeps it, bulk inserts
 * included. The spend-limit windows sum whole days from here and read only their edge days from
 * the transactions (src/cards/spend-limits.ts). Never written by the application.
 */
@Entity({ tableName: 'card_daily_purchases' })
export class CardDailyPurchases {
  @ManyToOne(() => Card, { primary: true, deleteRule: 'cascade' })
  card!: Card;

  @PrimaryKey({ type: 'date' })
  day!: string;

  @Property({ type: 'decimal', precision: 38, scale: 0 })
  amount!: string;
}
