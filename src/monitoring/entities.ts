import { BigIntType, Embeddable, Embedded, Entity, Enum, Index, ManyToOne, PrimaryKey, Property, Unique } from '@mikro-orm/core';
import { ENVIRONMENTS, type Environment } from '../api-keys/entities';
import type { ChainId } from '../catalogue/service';
import { Address, Wallet } from '../custody/entities';
import { Organization } from '../organizations/entities';
import { prefixedId, uuid } from '../shared/ids';

/**
 * What proves a transfer a reorganisation took off the chain will never be mined again, so that
 * what it left in suspense can be resolved (src/monitoring/never-mined.ts): on an account chain with
 * nonces (Ethereum) the account that signed the transaction carrying it and its nonce (another
 * transaction of that account mined with the nonce); on Solana the recent blockhash it names (expired
 * at the finalized state); on Bitcoin the outputs it spends.
 */
@Embeddable()
export class NeverMinedProof {
  @Property({ type: 'text', nullable: true })
  payer?: string | null;

  @Property({ type: 'decimal', columnType: 'numeric(78,0)', nullable: true })
  payerNonce?: string | null;

  /** Solana: the recent blockhash the carrying transaction names (ObservedPayment.recentBlockhash). */
  @Property({ type: 'text', nullable: true })
  recentBlockhash?: string | null;

  /**
   * UTXO chains (Bitcoin), deposits: the outputs (`txid:vout`) the carrying transaction spends. Another
   * transaction mined spending one of them proves this one never will be.
   */
  @Property({ type: 'json', nullable: true })
  spends?: string[] | null;

  /** The tip at which the chain was first seen to prove it; the proof counts once it held the confirmation count of blocks. */
  @Property({ type: new BigIntType('number'), nullable: true })
  lossSeenAtHeight?: number | null;

  /** When that proof, final, resolved what the transfer held in suspense. */
  @Property({ type: 'timestamptz', nullable: true })
  lostAt?: Date | null;
}

export const INCOMING_TRANSFER_STATUSES = ['pending', 'confirmed', 'dropped'] as const;
export type IncomingTransferStatus = (typeof INCOMING_TRANSFER_STATUSES)[number];

/**
 * One transfer the chain made to an address an organization cares about: one of its own
 * addresses (a deposit: `wallet` and `address` set, the wallet's balance moves) or an address a
 * subscription watches (both null: only events). Pending from the moment it is seen, confirmed
 * once the chain's confirmation count is reached, dropped when a reorganisation removes it first.
 */
@Entity({ tableName: 'incoming_transfers' })
@Unique({ properties: ['organization', 'environment', 'chain', 'txid', 'position'] })
@Index({ properties: ['organization', 'environment', 'createdAt', 'id'] })
@Index({ properties: ['chain', 'environment', 'status', 'blockHeight'] })
export class IncomingTransfer {
  @PrimaryKey({ type: 'uuid' })
  id: string = uuid();

  @ManyToOne(() => Organization, { deleteRule: 'cascade' })
  organization!: Organization;

  @Enum({ items: () => ENVIRONMENTS, nativeEnumName: 'environment' })
  environment!: Environment;

  @ManyToOne(() => Wallet, { deleteRule: 'cascade', nullable: true })
  wallet?: Wallet | null;

  @ManyToOne(() => Address, { deleteRule: 'cascade', nullable: true })
  address?: Address | null;

  @Property({ type: 'text' })
  chain!: ChainId;

  @Property({ type: 'text' })
  network!: string;

  @Property({ type: 'text' })
  assetId!: string;

  /** Base units, numeric(78,0) read and written as a decimal string. */
  @Property({ type: 'decimal', columnType: 'numeric(78,0)' })
  amount!: string;

  @Property({ type: 'text' })
  txid!: string;

  /** Where in the transaction (`out:1`, `native`, `log:4`, `ix:0`, `ix:0.1`): a transaction may pay several times. */
  @Property({ type: 'text' })
  position!: string;

  @Property({ type: 'text' })
  toAddress!: string;

  @Property({ type: 'text', nullable: true })
  fromAddress?: string | null;

  /** Null while the transfer is only in the mempool. */
  @Property({ type: new BigIntType('number'), nullable: true })
  blockHeight?: number | null;

  @Property({ type: 'text', nullable: true })
  blockHash?: string | null;

  @Property({ type: 'integer', default: 0 })
  confirmations: number = 0;

  /** The chain's confirmation count when the transfer was seen: it confirms at this depth. */
  @Property({ type: 'integer' })
  requiredConfirmations!: number;

  @Enum({ items: () => INCOMING_TRANSFER_STATUSES, nativeEnumName: 'incoming_transfer_status' })
  status: IncomingTransferStatus = 'pending';

  @Property({ type: 'timestamptz', nullable: true })
  confirmedAt?: Date | null;

  @Property({ type: 'timestamptz', nullable: true })
  droppedAt?: Date | null;

  /**
   * The times a reorganisation took its block away (dropped, or reversed once confirmed): each later
   * sighting is a new one, with journal references and event keys of its own.
   */
  @Property({ type: 'integer', default: 0 })
  reorganisations: number = 0;

  /** Account chains with nonces: who signed the carrying transaction, and the chain's proof that it will never be mined again. */
  @Embedded(() => NeverMinedProof, { prefix: false })
  neverMined: NeverMinedProof = new NeverMinedProof();

  @Property({ type: 'timestamptz' })
  createdAt: Date = new Date();

  @Property({ type: 'timestamptz', onUpdate: () => new Date() })
  updatedAt: Date = new Date();
}

/**
 * One transfer out of a custody address the chain made, by the platform's own send (`transaction`
 * set: its settlement debits the wallet) or not (`unexpected`: debited from the ledger when scanning
 * sees it, the chain being the truth). Account chains: a value or token transfer from the address
 * (`native`, `log:<i>`, `ix:<n>`), the fee of each transaction the address paid on one row of it (its
 * native transfer, else a row at position `fee` of amount 0). Bitcoin: each custody output an input
 * spends (`in:<txid>:<vout>`), its whole amount; the change comes back as a deposit.
 */
@Entity({ tableName: 'outgoing_transfers' })
@Unique({ properties: ['organization', 'environment', 'chain', 'txid', 'position'] })
@Index({ properties: ['wallet', 'createdAt'] })
// The unexpected spends of a page of addresses, which every reconciliation page reads (ledger-check.ts): few, found without scanning the table.
@Index({ name: 'outgoing_transfers_unexpected_address_idx', expression: 'create index "outgoing_transfers_unexpected_address_idx" on "outgoing_transfers" ("address_id") where unexpected' })
export class OutgoingTransfer {
  @PrimaryKey({ type: 'uuid' })
  id: string = uuid();

  @ManyToOne(() => Organization, { deleteRule: 'cascade' })
  organization!: Organization;

  @Enum({ items: () => ENVIRONMENTS, nativeEnumName: 'environment' })
  environment!: Environment;

  @ManyToOne(() => Wallet, { deleteRule: 'cascade' })
  wallet!: Wallet;

  @ManyToOne(() => Address, { deleteRule: 'cascade' })
  address!: Address;

  @Property({ type: 'text' })
  chain!: ChainId;

  @Property({ type: 'text' })
  network!: string;

  @Property({ type: 'text' })
  assetId!: string;

  /** Base units of the asset that left the address. */
  @Property({ type: 'decimal', columnType: 'numeric(78,0)' })
  amount!: string;

  /** Native base units the address paid for the transaction; 0 on the transaction's other rows and on Bitcoin (the inputs pay it). */
  @Property({ type: 'decimal', columnType: 'numeric(78,0)' })
  fee!: string;

  @Property({ type: 'text' })
  txid!: string;

  @Property({ type: 'text' })
  position!: string;

  @Property({ type: 'text' })
  fromAddress!: string;

  /** Null where the row names no recipient (a fee, a Bitcoin input). */
  @Property({ type: 'text', nullable: true })
  toAddress?: string | null;

  /** Null while a reorganisation has taken its block away and no block of the new chain has carried it yet. */
  @Property({ type: new BigIntType('number'), nullable: true })
  blockHeight?: number | null;

  @Property({ type: 'text', nullable: true })
  blockHash?: string | null;

  /** The times a reorganisation took its block away: each is a round of its own in the ledger's suspense (src/ledger/suspense.ts). */
  @Property({ type: 'integer', default: 0 })
  reorganisations: number = 0;

  /** Account chains with nonces: who signed the carrying transaction, and the chain's proof that it will never be mined again. */
  @Embedded(() => NeverMinedProof, { prefix: false })
  neverMined: NeverMinedProof = new NeverMinedProof();

  /** The platform's send with this hash, when it made the transfer. */
  @Property({ type: 'uuid', nullable: true })
  transactionId?: string | null;

  /** The ledger did not expect it, so it was debited when seen: a spend the platform did not make, or (`transaction` set) a send of its own mined after it had failed. */
  @Property({ type: 'boolean' })
  unexpected!: boolean;

  @Property({ type: 'timestamptz' })
  createdAt: Date = new Date();
}

/**
 * The last block scanning processed on a chain in an environment, moved in the transaction that
 * records that block's transfers: a restart resumes after it, missing and doubling nothing.
 */
@Entity({ tableName: 'chain_scan_cursors' })
export class ChainScanCursor {
  @PrimaryKey({ type: 'text' })
  chain!: ChainId;

  @Enum({ items: () => ENVIRONMENTS, nativeEnumName: 'environment', primary: true })
  environment!: Environment;

  /** The provider kind and the network the node said it serves (`evm-rpc:chain-id:31337`, `bitcoin-rpc:network:regtest`): a cursor of another network is not resumed. */
  @Property({ type: 'text' })
  network!: string;

  @Property({ type: new BigIntType('number') })
  height!: number;

  @Property({ type: 'text' })
  hash!: string;

  /** The times scanning found no common block with the node within its lookback and started again from a checkpoint. */
  @Property({ type: 'integer', default: 0 })
  resyncs: number = 0;

  @Property({ type: 'timestamptz', nullable: true })
  lastResyncAt?: Date | null;

  @Property({ type: 'timestamptz', onUpdate: () => new Date() })
  updatedAt: Date = new Date();
}

/** The hashes of recently scanned blocks: where a reorganisation forked is found by comparing them with the node's. */
@Entity({ tableName: 'scanned_blocks' })
export class ScannedBlock {
  @PrimaryKey({ type: 'text' })
  chain!: ChainId;

  @Enum({ items: () => ENVIRONMENTS, nativeEnumName: 'environment', primary: true })
  environment!: Environment;

  @PrimaryKey({ type: new BigIntType('number') })
  height!: number;

  @Property({ type: 'text' })
  hash!: string;

  @Property({ type: 'timestamptz' })
  scannedAt: Date = new Date();
}

export const LEDGER_DRIFT_STATUSES = ['suspected', 'open', 'credited', 'resolved'] as const;
export type LedgerDriftStatus = (typeof LEDGER_DRIFT_STATUSES)[number];
/**
 * What a drift compares: `balance` (with the chain at the scanner's block), `locked` (with what the
 * sends in flight lock), `pending` (with the deposits the scanner recorded and has not confirmed),
 * `overdrawn` (the available balance, compared with zero: a reorganisation reversed a deposit already spent),
 * `utxo_set` (Bitcoin: the outputs the platform's UTXO table says a wallet holds unspent at the block, compared
 * with what the node holds of them there: one the node has spent, never mined or holds another amount of).
 */
export const LEDGER_FIGURES = ['balance', 'locked', 'pending', 'overdrawn', 'utxo_set'] as const;
export type LedgerFigure = (typeof LEDGER_FIGURES)[number];

/**
 * A difference between what the custody ledger says an address (a wallet, on Bitcoin) holds of an
 * asset (its balance, locked or pending amount: `figure`) and what it is compared with, found by the
 * ledger reconciliation at the scanner's block. `open` when found (`ledger.drift` raised, listed by
 * `ledger:drift`); `credited` when the chain held more on an account chain and the difference, once
 * final and netted within the wallet, was credited as an unattributed deposit; `resolved` once they agree again. `suspected` is of passes
 * before issue 48, which read at the tip and waited for a second sight.
 */
@Entity({ tableName: 'ledger_drifts' })
@Index({ properties: ['chain', 'environment', 'status'] })
@Index({ properties: ['wallet', 'assetId', 'status'] })
export class LedgerDrift {
  @PrimaryKey({ type: 'text' })
  id: string = prefixedId('drift');

  @ManyToOne(() => Organization, { deleteRule: 'cascade' })
  organization!: Organization;

  @Enum({ items: () => ENVIRONMENTS, nativeEnumName: 'environment' })
  environment!: Environment;

  @Property({ type: 'text' })
  chain!: ChainId;

  @ManyToOne(() => Wallet, { deleteRule: 'cascade' })
  wallet!: Wallet;

  /** The address compared, on account chains; null on Bitcoin, compared per wallet. */
  @ManyToOne(() => Address, { deleteRule: 'cascade', nullable: true })
  address?: Address | null;

  @Property({ type: 'text' })
  assetId!: string;

  @Enum({ items: () => LEDGER_FIGURES, nativeEnumName: 'ledger_drift_figure', default: 'balance' })
  figure: LedgerFigure = 'balance';

  /**
   * The ledger's figure (base units). Balance: what the ledger says is on chain at the block (src/monitoring/ledger-check.ts
   * ledgerViewAt); locked and pending: the row's own amount; utxo_set: the sum of the outputs the UTXO table says are unspent at the block.
   */
  @Property({ type: 'decimal', columnType: 'numeric(78,0)' })
  ledgerAmount!: string;

  /**
   * What it is compared with: the node's balance at the block (Bitcoin: what the node holds of the outputs the UTXO table counts);
   * what the sends in flight lock; the deposits not confirmed; utxo_set: what the node holds of those outputs.
   */
  @Property({ type: 'decimal', columnType: 'numeric(78,0)' })
  chainAmount!: string;

  @Enum({ items: () => LEDGER_DRIFT_STATUSES, nativeEnumName: 'ledger_drift_status' })
  status!: LedgerDriftStatus;

  @Property({ type: 'timestamptz' })
  firstSeenAt: Date = new Date();

  @Property({ type: 'timestamptz' })
  lastSeenAt: Date = new Date();

  @Property({ type: 'timestamptz', nullable: true })
  resolvedAt?: Date | null;

  /**
   * A balance surplus on an account chain waits for finality before it is credited: the block the
   * reconciliation compared at when it first saw the chain hold more (its hash, where the scanner
   * recorded one, so a reorganisation that took the block starts the wait again), and the smallest
   * surplus seen since (only what has stayed that long is credited). Null while there is no surplus.
   */
  @Property({ type: new BigIntType('number'), nullable: true })
  surplusSeenHeight?: number | null;

  @Property({ type: 'text', nullable: true })
  surplusSeenHash?: string | null;

  @Property({ type: 'decimal', columnType: 'numeric(78,0)', nullable: true })
  surplusFloor?: string | null;

  /** What was credited as an unattributed deposit (`credited`): the final surplus, netted against the wallet's other addresses' deficits. */
  @Property({ type: 'decimal', columnType: 'numeric(78,0)', nullable: true })
  creditedAmount?: string | null;
}

/**
 * The ledger reconciliation of a chain in an environment: the pass under way (its cursor, so that it
 * resumes where it stopped, whatever ended the workflow) and the last complete pass, which /metrics reports.
 */
@Entity({ tableName: 'ledger_reconciliation_passes' })
export class LedgerReconciliationPass {
  @PrimaryKey({ type: 'text' })
  chain!: ChainId;

  @Enum({ items: () => ENVIRONMENTS, nativeEnumName: 'environment', primary: true })
  environment!: Environment;

  /** Empty: every organization (the Schedule's passes); an organization's id: a test's pass over its own. */
  @PrimaryKey({ type: 'text' })
  scope!: string;

  /** The last holder the pass under way compared; null before its first page. */
  @Property({ type: 'text', nullable: true })
  cursor?: string | null;

  @Property({ type: 'timestamptz' })
  startedAt: Date = new Date();

  @Property({ type: 'integer', default: 0 })
  holdersCompared: number = 0;

  @Property({ type: 'timestamptz', nullable: true })
  lastStartedAt?: Date | null;

  @Property({ type: 'timestamptz', nullable: true })
  lastCompletedAt?: Date | null;

  @Property({ type: 'integer', nullable: true })
  lastHoldersCompared?: number | null;
}

/**
 * One payment the sandbox deposit helper made from the devnet's faucet for an organization, to any
 * address: what its daily cap sums (docs/devnet.md). Sandbox keys only, hence no environment.
 */
@Entity({ tableName: 'sandbox_deposits' })
@Index({ properties: ['organization', 'assetId', 'createdAt'] })
export class SandboxDeposit {
  @PrimaryKey({ type: 'uuid' })
  id: string = uuid();

  @ManyToOne(() => Organization, { deleteRule: 'cascade' })
  organization!: Organization;

  @Property({ type: 'text' })
  assetId!: string;

  /** Base units, numeric(78,0) read and written as a decimal string. */
  @Property({ type: 'decimal', columnType: 'numeric(78,0)' })
  amount!: string;

  @Property({ type: 'text' })
  txid!: string;

  @Property({ type: 'timestamptz' })
  createdAt: Date = new Date();
}
