import type { EntityManager } from '@mikro-orm/postgresql';
import { ApplicationFailure } from '@temporalio/activity';
import type { Config } from '../src/config';
import type { Orm } from '../src/db/orm';
import { readOneByColumns } from '../src/db/lean';
import { Card, CardTransaction } from '../src/cards/entities';
import type { CardTermination } from '../src/cards/flows/termination';
import type { Environment } from '../src/api-keys/entities';
import { IssuerDeclined, IssuerKeyRefused, issuerControlsOf, type IssuerProvider, type MintedCard, SandboxIssuer, sealCardSecrets } from '../src/cards/issuer';
import { keyRefusalOf, StripeIssuer, stripeIssuingFor } from '../src/cards/providers/stripe-issuer';
import { initialFundingReference, presentCard, presentTermination } from '../src/cards/presenters';
import { settleTransaction } from '../src/cards/balance-moves';
import { cardDestinations } from '../src/cards/lookups';
import { activateCard, failProvisioning, terminateCard } from '../src/cards/service';
import { clearIssuerSyncRefusal, recordIssuerSyncRefusal } from '../src/cards/issuer-sync';
import { recordIssuerKeyRefusal } from '../src/cards/issuer-key-refusals';
import type { StripeIssuingReconciliationInput, StripeIssuingReconciliationResult } from '../src/cards/flows/issuer-reconciliation';
import { reconcileStripeIssuing } from '../src/cards/stripe-reconciliation';
import { emit } from '../src/events/service';
import { createKeyProvider } from '../src/keys/provider';
import type { Logger } from '../src/logger';
import { transactionWithStarts } from './with-starts';

export interface CardActivityDeps {
  config: Config;
  orm: Orm;
  log: Logger;
  /** The sandbox cards' issuer: the sandbox issuer on the configured BIN unless a test passes another. */
  cardIssuer?: IssuerProvider;
}

export type CardProvisioningOutcome = { status: 'active' | 'failed'; initialFundingId: string | null };

export const createCardActivities = (deps: CardActivityDeps) => {
  const keys = createKeyProvider(deps.config, deps.log);
  const sandboxIssuer = deps.cardIssuer ?? new SandboxIssuer(deps.config.CARD_BIN);
  const stripe = stripeIssuingFor(deps.config);
  const liveIssuer = stripe ? new StripeIssuer(stripe.client) : null;
  /** Each card's issuer by its environment: live cards only ever reach the live issuer, never the sandbox one. */
  const issuerFor = (environment: Environment): IssuerProvider => {
    if (environment === 'sandbox') return sandboxIssuer;
    // Live cards are refused at creation without it; one created before it was unset waits (retried) until it is back.
    if (!liveIssuer) throw new Error('No live card issuer is configured (STRIPE_ISSUING_SECRET_KEY, STRIPE_ISSUING_AUTHORIZATION_SECRET and STRIPE_ISSUING_WEBHOOK_SECRET)');
    return liveIssuer;
  };
  const inTransaction = transactionWithStarts(deps);
  /** A refusal of our key (not of the card) is also the operator's: counted by permission and logged, in the card's transaction. */
  const countedIfKeyRefused = async (tx: EntityManager, refusal: IssuerDeclined, cardId: string) => {
    if (refusal instanceof IssuerKeyRefused) await recordIssuerKeyRefusal(tx, deps.log, refusal, cardId);
  };

  /**
   * Sends the card's status and controls to the issuer's copy of it, when there is one; as the card is
   * now, so safe to repeat. Sandbox cards have none: no read for them.
   */
  const syncWithIssuer = async (cardId: string, environment: Environment) => {
    if (environment === 'sandbox') return;
    const card = await readOneByColumns(deps.orm.em, Card, { id: cardId }, ['secrets', 'webhookSecrets']);
    if (!card?.issuerCardId) return;
    try {
      await issuerFor(card.environment).syncCard(card.issuerCardId, issuerControlsOf(card));
    } catch (error) {
      // A refusal ends the sync with a state on the card: retrying would be refused again, and would hold up a settlement or termination.
      if (!(error instanceof IssuerDeclined)) throw error;
      deps.log.warn({ card_id: card.id, err: error.message }, 'the card issuer refused a card sync');
      await inTransaction(async (tx) => {
        await recordIssuerSyncRefusal(tx, card.id, error.message);
        await countedIfKeyRefused(tx, error, card.id);
      });
      return;
    }
    if (card.issuerSyncFailedAt) await clearIssuerSyncRefusal(deps.orm.em.fork(), card.id);
  };

  return {
    /** Mints and activates the card (or records the issuer's refusal); safe to repeat. */
    async provisionCardWithIssuer(input: { cardId: string }): Promise<CardProvisioningOutcome> {
      const card = await deps.orm.em.fork().findOneOrFail(Card, { id: input.cardId }, { populate: ['customer'] });
      if (card.createdStatus === 'processing') {
        let minted: MintedCard | null = null;
        try {
          minted = await issuerFor(card.environment).mintCard({
            cardId: card.id,
            organizationId: card.organization.id,
            name: card.name,
            cardType: card.cardType,
            cardholder: {
              customerId: card.customer.id,
              issuerCardholderId: card.customer.issuerCardholderId ?? null,
              firstName: card.customer.firstName,
              lastName: card.customer.lastName,
              email: card.customer.email,
              phoneNumber: `${card.customer.dialCode}${card.customer.phoneNumber}`,
              dateOfBirth: card.customer.dateOfBirth,
              address: card.customer.address,
              termsAcceptance: card.customer.termsAcceptance ?? null,
            },
          });
        } catch (error) {
          if (!(error instanceof IssuerDeclined)) throw error;
          await inTransaction(async (tx) => {
            await failProvisioning(tx, card.id, error.message);
            await countedIfKeyRefused(tx, error, card.id);
          });
        }
        if (minted) {
          const sealed = minted.secrets ? await sealCardSecrets(keys, card.id, minted.secrets) : null;
          await deps.orm.em.fork().transactional((tx) => activateCard(tx, card.id, minted, sealed));
        }
      }
      // The limits as they are now (they may have changed while it was pending); the initial funding follows when it settles.
      await syncWithIssuer(card.id, card.environment);
      const em = deps.orm.em.fork();
      const current = await em.findOneOrFail(Card, { id: input.cardId });
      const initial = await em.findOne(CardTransaction, { card: current, reference: initialFundingReference(current.id) });
      return { status: current.status === 'failed' ? 'failed' : 'active', initialFundingId: initial?.id ?? null };
    },

    /** Moves the money with the issuer, then settles the pending transaction exactly once, and gives the issuer's copy of the card its new balance. */
    async settleCardTransaction(input: { transactionId: string }): Promise<{ status: string }> {
      const pending = await readOneByColumns(deps.orm.em, CardTransaction, { id: input.transactionId });
      if (!pending) throw new Error(`card transaction ${input.transactionId} not found`);
      let status = pending.status;
      if (status === 'pending') {
        let outcome: { ok: true } | { ok: false; reason: string } = { ok: true };
        try {
          await issuerFor(pending.environment).settle({ transactionId: pending.id, type: pending.type === 'funding' ? 'funding' : 'withdrawal', amount: BigInt(pending.amount) });
        } catch (error) {
          if (!(error instanceof IssuerDeclined)) throw error;
          outcome = { ok: false, reason: 'issuer_declined' };
        }
        status = (await inTransaction((tx) => settleTransaction(tx, pending, outcome))).status;
      }
      // Also when a retry finds it settled: the sync may be what failed.
      await syncWithIssuer(pending.card.id, pending.environment);
      return { status };
    },

    /** The card-ready event, to the card's webhook_url and the organization's endpoints; emitted once. */
    async announceCardReady(input: { cardId: string }): Promise<void> {
      await inTransaction(async (tx) => {
        const card = await tx.findOneOrFail(Card, { id: input.cardId }, { populate: ['customer'] });
        await emit(tx, {
          organizationId: card.organization.id, environment: card.environment,
          type: 'card.ready',
          data: presentCard(card),
          destinations: cardDestinations(card),
          dedupeKey: `card.ready:${card.id}`,
        });
      });
    },

    /** Returns the card's balance and marks it terminated, once, then cancels the issuer's copy; `terminatedAt` is workflow time. */
    async terminateCardAndReturnBalance(input: { cardId: string; terminatedAt: string }): Promise<CardTermination> {
      const card = await inTransaction((tx) => terminateCard(tx, input.cardId, new Date(input.terminatedAt)));
      await syncWithIssuer(card.id, card.environment);
      return presentTermination(card);
    },

    /** Compares Stripe Issuing's open authorizations and balance with our live cards (src/cards/stripe-reconciliation.ts). */
    async reconcileStripeIssuing(input: StripeIssuingReconciliationInput): Promise<StripeIssuingReconciliationResult> {
      // Scheduled only when Stripe Issuing is configured; one unset since then fails here until it is back.
      if (!stripe) throw new Error('No live card issuer is configured: nothing to reconcile with');
      try {
        return await reconcileStripeIssuing({ em: () => deps.orm.em.fork(), log: deps.log, stripe: stripe.client }, input);
      } catch (error) {
        const refusal = keyRefusalOf(error, 'reconciliation');
        if (!refusal) throw error;
        // Refused again until the operator grants the permission: this pass ends, counted; the Schedule's next tick asks again.
        await deps.orm.em.fork().transactional((tx) => recordIssuerKeyRefusal(tx, deps.log, refusal, null));
        throw ApplicationFailure.nonRetryable(refusal.message, 'IssuerKeyRefused');
      }
    },

    /** Sends a live card's status and spending controls to the issuer (after a freeze, an unfreeze, new limits). */
    async syncCardWithIssuer(input: { cardId: string }): Promise<void> {
      // Recorded only for cards the issuer keeps a copy of: live ones.
      await syncWithIssuer(input.cardId, 'live');
    },
  };
};
