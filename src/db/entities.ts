import { AddressBookEntry } from '../address-book/entities';
import { ApiKey, ApiKeyRateBucket } from '../api-keys/entities';
import { CompanyBalance } from '../balances/entities';
import { Card, CardDailyPurchases, CardTransaction, Customer } from '../cards/entities';
import { CardIssuerDrift } from '../cards/issuer-drifts';
import { StripeIssuingKeyRefusal } from '../cards/issuer-key-refusals';
import { ConsolidationRule, ConsolidationRun, ConsolidationSweep } from '../consolidation/entities';
import { DevnetBalance, DevnetBlock, DevnetNonce, DevnetOutput, DevnetTransaction } from '../chains/devnet/entities';
import { AccountCounter, Address, AddressBalance, SigningActivity, Vault, Wallet, WalletBalance } from '../custody/entities';
import { Delivery, DeliveryAttempt, Event, SigningSecrets, Subscription, WebhookEndpoint } from '../events/entities';
import { GasStation, Sponsorship } from '../gas-stations/entities';
import { WorkflowStart } from '../temporal/entities';
import { IdempotencyRecord } from '../idempotency/entities';
import { OrganizationSeed, SeedPublicKey } from '../keys/entities';
import { LedgerAccount, LedgerInvariantCheck, LedgerLine, LedgerPosting } from '../ledger/entities';
import { LightningInvoice, LightningInvoiceCursor, LightningNodeKey, LightningPaymentClaim } from '../lightning/entities';
import { ChainScanCursor, IncomingTransfer, LedgerDrift, LedgerReconciliationPass, OutgoingTransfer, SandboxDeposit, ScannedBlock } from '../monitoring/entities';
import { Member, Organization, Role } from '../organizations/entities';
import { PayoutDeposit, PayoutQuote, PayoutRefund, PayoutTrip, PayoutTripTransition, SandboxRailInstruction } from '../payouts/entities';
import { ApprovalRequest, ApprovalVote, GovernanceChange, Policy, PolicyAuditLog, PolicyRule } from '../policies/entities';
import { OutgoingTransaction, TransactionReplacement, WalletOutput } from '../transactions/entities';

/** Every entity of every domain; a new domain adds its entities here. */
export const entities = [
  CompanyBalance,
  LedgerAccount,
  LedgerPosting,
  LedgerLine,
  LedgerInvariantCheck,
  Customer,
  Card,
  CardTransaction,
  CardIssuerDrift,
  StripeIssuingKeyRefusal,
  CardDailyPurchases,
  Organization,
  Member,
  Role,
  ApiKey,
  ApiKeyRateBucket,
  IdempotencyRecord,
  OrganizationSeed,
  SeedPublicKey,
  Vault,
  AccountCounter,
  Wallet,
  Address,
  WalletBalance,
  AddressBalance,
  SigningActivity,
  IncomingTransfer,
  OutgoingTransfer,
  ChainScanCursor,
  LedgerDrift,
  LedgerReconciliationPass,
  ScannedBlock,
  SandboxDeposit,
  OutgoingTransaction,
  TransactionReplacement,
  WalletOutput,
  GasStation,
  Sponsorship,
  AddressBookEntry,
  ConsolidationRule,
  ConsolidationRun,
  ConsolidationSweep,
  SigningSecrets,
  WebhookEndpoint,
  Subscription,
  Event,
  Delivery,
  DeliveryAttempt,
  Policy,
  PolicyRule,
  ApprovalRequest,
  ApprovalVote,
  PolicyAuditLog,
  GovernanceChange,
  LightningNodeKey,
  LightningInvoiceCursor,
  PayoutQuote,
  PayoutTrip,
  PayoutTripTransition,
  PayoutDeposit,
  PayoutRefund,
  SandboxRailInstruction,
  LightningInvoice,
  LightningPaymentClaim,
  WorkflowStart,
  DevnetBlock,
  DevnetTransaction,
  DevnetOutput,
  DevnetBalance,
  DevnetNonce,
];
