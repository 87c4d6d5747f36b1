import { ApplicationFailure, proxyActivities } from '@temporalio/workflow';
import type { createCardActivities } from '../activities/cards';

/** Domain refusals that no retry can change. */
export const CARD_COOLING_PERIOD_ERROR = 'CardTerminationCoolingPeriod';
const COOLING_PERIOD_MS = 24 * 60 * 60 * 1000;

const { provisionCardWithIssuer, settleCardTransaction, announceCardReady, terminateCardAndReturnBalance } = proxyActivities<
  ReturnType<typeof createCardActivities>
>({
  startToCloseTimeout: '1 minute',
  // Infrastructure failures only: each activity is idempotent (row locks, status checks, journal references).
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute', nonRetryableErrorTypes: ['IssuerDeclined'] },
});

export interface CardProvisioningInput {
  cardId: string;
}

/** `card-provisioning-<cardId>`: mint, activate, fund the initial amount, announce card.ready. */
export async function cardProvisioningWorkflow(input: CardProvisioningInput): Promise<{ status: 'active' | 'failed' }> {
  const provisioned = await provisionCardWithIssuer({ cardId: input.cardId });
  if (provisioned.status === 'failed') return { status: 'failed' };
  if (provisioned.initialFundingId) await settleCardTransaction({ transactionId: provisioned.initialFundingId });
  await announceCardReady({ cardId: input.cardId });
  return { status: 'active' };
}

/** `card-balance-<transactionId>`: settles one pending funding or withdrawal. */
export async function cardBalanceWorkflow(input: { transactionId: string }): Promise<{ status: string }> {
  return settleCardTransaction({ transactionId: input.transactionId });
}

export interface CardTerminationInput {
  cardId: string;
  /** ISO creation time of the card. */
  createdAt: string;
  reason: string | null;
}

/**
 * `card-termination-<cardId>`: the cooling period (rule 2) is measured on workflow time, so the
 * time-skipping test server can move it; a refusal fails the run, which lets a later run start.
 */
export async function cardTerminationWorkflow(input: CardTerminationInput) {
  const terminableAt = new Date(Date.parse(input.createdAt) + COOLING_PERIOD_MS);
  if (Date.now() < terminableAt.getTime()) {
    throw ApplicationFailure.create({
      type: CARD_COOLING_PERIOD_ERROR,
      nonRetryable: true,
      message: 'A card can be terminated 24 hours after creation; freeze it in the meantime.',
      details: [{ terminable_at: terminableAt.toISOString() }],
    });
  }
  return terminateCardAndReturnBalance({ cardId: input.cardId, reason: input.reason, terminatedAt: new Date().toISOString() });
}
