import { centsToDecimalString, Money } from '../shared/money';
import { iso, isoOrNull } from '../shared/time';
import type { Card, CardTransaction, Customer, SpendLimits } from './entities';
import { cardBalanceFlow } from './flows/balance';
import { cardProvisioningFlow } from './flows/provisioning';
import { cardTerminationFlow, type CardTermination } from './flows/termination';

/** The initial funding's reference (client references are per company, so this cannot collide with a card id in it). */
export const initialFundingReference = (cardId: string) => `initial-funding:${cardId}`;

const terminationWorkflowId = (card: Card) => cardTerminationFlow.workflowId({ cardId: card.id, terminableAt: '' });

/** Fundings and withdrawals: settled by a workflow and charged the funding fee; the issuer's purchases and what follows them are neither. */
const isBalanceMove = (transaction: CardTransaction) => transaction.type === 'funding' || transaction.type === 'withdrawal';

/** The workflow that settles a transaction: the provisioning one for the initial funding; none for purchases and what the issuer moved after them. */
export function transactionWorkflowId(transaction: CardTransaction, card: Card): string | null {
  if (!isBalanceMove(transaction)) return null;
  if (transaction.reference === initialFundingReference(card.id)) return cardProvisioningFlow.workflowId({ cardId: card.id });
  return cardBalanceFlow.workflowId({ transactionId: transaction.id });
}

const presentLimits = (limits: SpendLimits) =>
  Object.fromEntries(Object.entries(limits).map(([window, cents]) => [window === 'transaction' ? 'single_transaction' : window, cents]));

export function presentCard(card: Card) {
  return {
    id: card.id,
    company_id: card.organization.id,
    customer_id: card.customer.id,
    card_type: card.cardType,
    card_brand: card.cardBrand,
    status: card.status,
    created_status: card.createdStatus,
    name: card.name,
    preferred_name: card.preferredName,
    masked_pan: card.maskedPan,
    last_four: card.lastFour ?? null,
    balance_amount: card.balance,
    balance_currency: card.currency,
    display_amount: new Money(centsToDecimalString(BigInt(card.balance))).toNumber(),
    contactless_payment: card.contactlessPayment,
    spending_limits: presentLimits(card.spendingLimits),
    reference: card.reference,
    webhook_url: card.webhookUrl ?? null,
    user_metadata: card.userMetadata,
    billing_address: card.billingAddress,
    created_by: card.createdBy ?? null,
    failure_reason: card.failureReason ?? null,
    workflow_id: cardProvisioningFlow.workflowId({ cardId: card.id }),
    termination_requested_at: isoOrNull(card.terminationRequestedAt),
    termination_workflow_id: card.terminationRequestedAt ? terminationWorkflowId(card) : null,
    terminated_at: isoOrNull(card.terminatedAt),
    created_at: iso(card.createdAt),
    updated_at: iso(card.updatedAt),
  };
}

export function presentSlimCard(card: Card) {
  const full = presentCard(card);
  return {
    id: full.id,
    status: full.status,
    masked_pan: full.masked_pan,
    balance_amount: full.balance_amount,
    card_brand: full.card_brand,
    name: full.name,
    reference: full.reference,
    display_amount: full.display_amount,
  };
}

export function presentTransaction(transaction: CardTransaction, card: Card) {
  return {
    id: transaction.id,
    card_id: card.id,
    type: transaction.type,
    status: transaction.status,
    amount: transaction.amount,
    balance_before: transaction.balanceBefore,
    balance_after: transaction.balanceAfter,
    fee_amount: transaction.feeAmount,
    fee_type: isBalanceMove(transaction) ? ('funding_fee' as const) : null,
    currency: card.currency,
    reference: transaction.reference ?? null,
    merchant_name: transaction.merchantName ?? null,
    decline_reason: transaction.failureReason ?? null,
    workflow_id: transactionWorkflowId(transaction, card),
    created_at: iso(transaction.createdAt),
    updated_at: iso(transaction.updatedAt),
  };
}

export function presentCustomer(customer: Customer) {
  return {
    id: customer.id,
    company_id: customer.organization.id,
    customer_type: customer.customerType,
    first_name: customer.firstName,
    last_name: customer.lastName,
    email: customer.email,
    phone_number: customer.phoneNumber,
    dial_code: customer.dialCode,
    date_of_birth: customer.dateOfBirth,
    id_type: customer.idType,
    ...customer.address,
    created_at: iso(customer.createdAt),
  };
}

export function presentCustomerCardEntry(card: Card) {
  return {
    id: card.id,
    customer_id: card.customer.id,
    card_type: card.cardType,
    card_brand: card.cardBrand,
    last_four: card.lastFour ?? null,
    currency: card.currency,
    status: card.status,
    balance: card.balance,
    created_at: iso(card.createdAt),
  };
}

/** A terminated card as its termination. */
export function presentTermination(card: Card): CardTermination {
  return {
    card_id: card.id,
    status: 'terminated',
    remaining_balance: card.remainingBalance ?? '0',
    balance_returned: BigInt(card.remainingBalance ?? '0') > 0n,
    terminated_at: iso(card.terminatedAt!),
    reason: card.terminationReason ?? null,
    workflow_id: terminationWorkflowId(card),
  };
}
