/**
 * The ledger's chart of accounts. A holder's funds sit in one account per state; everything a
 * holder's balance moves against is one of its organization's counterparty accounts, per asset and
 * environment. Keys are deterministic, so a posting names its accounts without reading them first.
 */
import type { Environment } from '../shared/environments';

/** A custody holder's states: spendable, held for a send in flight, seen on chain but not yet confirmed. */
export const CUSTODY_STATES = ['available', 'locked', 'pending'] as const;
export type CustodyState = (typeof CUSTODY_STATES)[number];

/** A company balance's states: spendable, held for money in flight (a card funding, a Lightning payment). */
export const COMPANY_STATES = ['available', 'reserved'] as const;
export type CompanyState = (typeof COMPANY_STATES)[number];

/** A card's states: spendable, and held for its withdrawals in flight. The card row's `balance` is available + held. */
export const CARD_STATES = ['available', 'held'] as const;
export type CardState = (typeof CARD_STATES)[number];

/** A card's currency: cards are USD only, in cents, the asset of the USD company balance that funds them. */
export const CARD_ASSET = 'usd';

/**
 * What a holder's or a company balance moves against. `world`: anyone outside (a depositor, a
 * recipient, a spender the platform did not authorize); `network_fees`: what the chain's validators
 * earned; `opening_balances`: what a ledger held when it began to be journaled; `suspense`: what
 * waits for proof at finality; `card_fees`: what the platform charged for card fundings and
 * withdrawals; the rest the rails a company balance or a card moves through (`card_issuer`: the
 * merchants a card paid, through its issuer).
 */
export const COUNTERPARTIES = ['world', 'network_fees', 'opening_balances', 'suspense', 'card_issuer', 'card_fees', 'lightning_network', 'payout_desk', 'sandbox_faucet'] as const;
export type Counterparty = (typeof COUNTERPARTIES)[number];

export interface AccountRef {
  key: string;
  type: string;
  asset: string;
  holderId: string | null;
}

export interface OrganizationScope {
  organizationId: string;
  environment: Environment;
}

/** A custody address's (or on Bitcoin a wallet's) account for one asset in one state. Holder ids are unique across organizations. */
export const custodyAccount = (holderId: string, asset: string, state: CustodyState): AccountRef => ({
  key: `custody:${holderId}:${asset}:${state}`,
  type: `custody_${state}`,
  asset,
  holderId,
});

export const companyAccount = (scope: OrganizationScope, currency: string, state: CompanyState): AccountRef => ({
  key: `company:${scope.organizationId}:${scope.environment}:${currency}:${state}`,
  type: `company_${state}`,
  asset: currency,
  holderId: null,
});

/** A card's account in one state. Card ids are unique across organizations. */
export const cardAccount = (cardId: string, state: CardState): AccountRef => ({
  key: `card:${cardId}:${CARD_ASSET}:${state}`,
  type: `card_${state}`,
  asset: CARD_ASSET,
  holderId: cardId,
});

export const counterpartyAccount = (scope: OrganizationScope, counterparty: Counterparty, asset: string): AccountRef => ({
  key: `${counterparty}:${scope.organizationId}:${scope.environment}:${asset}`,
  type: counterparty,
  asset,
  holderId: null,
});
