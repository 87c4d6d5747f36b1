import type { Config } from '../src/config';
import type { Orm } from '../src/db/orm';
import { readOneByColumns } from '../src/db/lean';
import { Card, CardTransaction } from '../src/cards/entities';
import type { CardTermination } from '../src/cards/flows/termination';
import { IssuerDeclined, type IssuerProvider, type MintedCard, SandboxIssuer, sealCardSecrets } from '../src/cards/issuer';
import { initialFundingReference, presentCard, presentTermination } from '../src/cards/presenters';
import { activateCard, cardDestinations, failProvisioning, settleTransaction, terminateCard } from '../src/cards/service';
import { emit } from '../src/events/service';
import { createKeyProvider } from '../src/keys/provider';
import type { Logger } from '../src/logger';
import { transactionWithStarts } from './with-starts';

export interface CardActivityDeps {
  config: Config;
  orm: Orm;
  log: Logger;
  /** The sandbox issuer on the configured BIN unless a test passes another. */
  cardIssuer?: IssuerProvider;
}

export type CardProvisioningOutcome = { status: 'active' | 'failed'; initialFundingId: string | null };

export const createCardActivities = (deps: CardActivityDeps) => {
  const keys = createKeyProvider(deps.config, deps.log);
  const issuer = deps.cardIssuer ?? new SandboxIssuer(deps.config.CARD_BIN);
  const inTransaction = transactionWithStarts(deps);

  return {
    /** Mints and activates the card (or records the issuer's refusal); safe to repeat. */
    async provisionCardWithIssuer(input: { cardId: string }): Promise<CardProvisioningOutcome> {
      const card = await deps.orm.em.fork().findOneOrFail(Card, { id: input.cardId });
      if (card.createdStatus === 'processing') {
        let minted: MintedCard | null = null;
        try {
          minted = await issuer.mintCard({ cardId: card.id, name: card.name, cardType: card.cardType });
        } catch (error) {
          if (!(error instanceof IssuerDeclined)) throw error;
          await inTransaction((tx) => failProvisioning(tx, card.id, error.message));
        }
        if (minted) {
          const sealed = await sealCardSecrets(keys, card.id, { pan: minted.pan, cvv: minted.cvv, expiry: minted.expiry });
          await deps.orm.em.fork().transactional((tx) => activateCard(tx, card.id, minted, sealed));
        }
      }
      const em = deps.orm.em.fork();
      const current = await em.findOneOrFail(Card, { id: input.cardId });
      const initial = await em.findOne(CardTransaction, { card: current, reference: initialFundingReference(current.id) });
      return { status: current.status === 'failed' ? 'failed' : 'active', initialFundingId: initial?.id ?? null };
    },

    /** Moves the money with the issuer, then settles the pending transaction exactly once. */
    async settleCardTransaction(input: { transactionId: string }): Promise<{ status: string }> {
      const pending = await readOneByColumns(deps.orm.em, CardTransaction, { id: input.transactionId });
      if (!pending) throw new Error(`card transaction ${input.transactionId} not found`);
      if (pending.status !== 'pending') return { status: pending.status };
      let outcome: { ok: true } | { ok: false; reason: string } = { ok: true };
      try {
        await issuer.settle({ transactionId: pending.id, type: pending.type === 'funding' ? 'funding' : 'withdrawal', amount: BigInt(pending.amount) });
      } catch (error) {
        if (!(error instanceof IssuerDeclined)) throw error;
        outcome = { ok: false, reason: 'issuer_declined' };
      }
      const settled = await inTransaction((tx) => settleTransaction(tx, pending, outcome));
      return { status: settled.status };
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

    /** Returns the card's balance and marks it terminated, once; `terminatedAt` is workflow time. */
    async terminateCardAndReturnBalance(input: { cardId: string; terminatedAt: string }): Promise<CardTermination> {
      const card = await inTransaction((tx) => terminateCard(tx, input.cardId, new Date(input.terminatedAt)));
      return presentTermination(card);
    },
  };
};
