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

/**
 * What a holder's or a company balance moves against. `world`: anyone outside (a depositor, a
 * recipient, a spender the platform did not authorize); `network_fees`: what the chain's validators
 * earned; `opening_balances`: what a ledger held when it began to be journaled; `suspense`: what
 * waits for proof at finality; the rest the rails a company balance moves through.
 */
export const COUNTERPARTIES = ['world', 'network_fees', 'opening_balances', 'suspense', 'card_issuer', 'lightning_network', 'payout_desk', 'sandbox_faucet'] as const;
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

export const counterpartyAccount = (scope: OrganizationScope, counterparty: Counterparty, asset: string): AccountRef => ({
  key: `${counterparty}:${scope.organizationId}:${scope.environment}:${asset}`,
  type: counterparty,
  asset,
  holderId: null,
});
