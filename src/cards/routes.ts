import type { AppContext, AppDeps, EntityManager } from '../http/context';
import type { RouteRegistry } from '../http/route';
import type { Caller } from '../policies/service';
import { paginate } from '../shared/pagination';
import { resultEnvelope } from '../shared/schemas';
import { authorizePurchase } from './authorization';
import { registerLegacyRoutes } from './legacy-routes';
import { registerStripeIssuingRoutes } from './stripe-routes';
import { Card, CardTransaction } from './entities';
import { openCardSecrets } from './issuer';
import { presentCard, presentCustomer, presentCustomerCardEntry, presentSlimCard, presentTermination, presentTransaction } from './presenters';
import {
  AliasBalanceBody,
  CARD_TAG,
  AuthorizationBody,
  AuthorizationResponse,
  BalanceBody,
  BalanceResponse,
  CardIdParams,
  CardListResponse,
  CardResponse,
  CreateCardBody,
  CreateCardResponse,
  CustomerCardsResponse,
  CustomerIdParams,
  CustomerResponse,
  ListCardsQuery,
  ListTransactionsQuery,
  SecureResponse,
  SpendLimitsBody,
  StatusBody,
  StatusResponse,
  TerminateBody,
  TerminationResponse,
  TransactionListResponse,
} from './schemas';
import { requestBalanceMove } from './balance-moves';
import { type CardTenant, cardListFilter, findCard, findCustomer, invalidStateTransition, pageInfo, readCard, tenantFilter } from './lookups';
import { createCard, requestTermination, updateCardStatus } from './service';
import { stripeIssuingFor } from './providers/stripe-issuer';
import { setSpendLimits } from './spend-limits';

/** How long DELETE waits for the termination workflow (outside any transaction) before answering 202. */
const TERMINATION_WAIT_MS = 5_000;

const requestId = (ctx: AppContext) => ctx.state.requestId;

/** The pending transaction (its settlement workflow recorded with it), or the original one for a known reference. */
async function moveBalance(
  em: EntityManager,
  deps: AppDeps,
  caller: Caller,
  cardId: string,
  request: { type: 'fund' | 'withdraw'; amount: number; reference: string },
) {
  const { transaction, card } = await requestBalanceMove(em, deps.config, caller, cardId, request);
  return {
    success: transaction.status === 'completed',
    message: transaction.status === 'pending' ? `Card ${transaction.type} is processing` : `Card ${transaction.type} ${transaction.status}`,
    transaction: presentTransaction(transaction, card),
  };
}

async function changeStatus(em: EntityManager, tenant: CardTenant, cardId: string, status: string) {
  const card = await updateCardStatus(em, tenant, cardId, status);
  const message = card.status === 'frozen' ? 'Card frozen successfully' : 'Card activated successfully';
  return { message, data: { success: true, message, card: presentSlimCard(card) } };
}

/**
 * Accepts (or refuses) the termination in its own transaction, then, with that committed and no
 * lock held, waits a few seconds for the workflow: 200 with the termination when it has finished,
 * else 202 with the card as it is (termination_workflow_id set; it finishes on its own).
 */
async function terminate(em: EntityManager, deps: AppDeps, ctx: AppContext, tenant: CardTenant, cardId: string, reason: string | null) {
  const requested = await deps.starter.transaction(em, (tx) => requestTermination(tx, tenant, cardId, reason));
  const workflowId = presentCard(requested).termination_workflow_id!;
  try {
    await deps.starter.result(workflowId, new Date(Date.now() + TERMINATION_WAIT_MS));
  } catch {
    // Not finished within the wait (or Temporal unreachable): the card row below says where it is.
  }
  const card = await findCard(em.fork(), tenant, cardId);
  if (card.status === 'terminated') return { body: resultEnvelope(requestId(ctx), 'Card terminated successfully', presentTermination(card)) };
  return { status: 202, body: resultEnvelope(requestId(ctx), 'Card termination in progress', { card: presentCard(card) }) };
}

const deprecatedHeaders = (cardId: string, successor: string) => ({
  Deprecation: 'true',
  Link: `</api/cards/${cardId}${successor}>; rel="successor-version"`,
});

export function registerCardRoutes(routes: RouteRegistry): void {
  routes.add({
    method: 'post',
    path: '/api/cards',
    operationId: 'createCard',
    summary: 'Create a card (and its customer); provisioning and initial funding follow asynchronously',
    tag: CARD_TAG,
    scope: 'cards:write',
    body: CreateCardBody,
    response: { status: 201, description: 'The pending card', schema: CreateCardResponse },
    handler: async ({ auth, body, em, ctx, deps }) => {
      const { card, webhookSecret } = await createCard(em, auth, body, {
        config: deps.config,
        allowInsecureLoopback: deps.config.WEBHOOK_ALLOW_INSECURE_LOOPBACK,
        keys: deps.keys.provider,
        liveIssuer: stripeIssuingFor(deps.config) !== null,
      });
      return {
        status: 201,
        body: resultEnvelope(requestId(ctx), 'Card created; provisioning in progress', {
          card: { ...presentCard(card), webhook_signing_secret: webhookSecret },
          customer: presentCustomer(card.customer),
        }),
      };
    },
  });

  routes.add({
    method: 'get',
    path: '/api/cards',
    operationId: 'listCards',
    summary: 'List cards (newest first; filter by card_type, status, search by last four or cardholder name)',
    tag: CARD_TAG,
    scope: 'cards:read',
    query: ListCardsQuery,
    response: { status: 200, description: 'A page of cards', schema: CardListResponse },
    handler: async ({ auth, query, em, ctx }) => {
      const page = await paginate(em, Card, cardListFilter(auth, query), query, ['customer']);
      return { body: resultEnvelope(requestId(ctx), 'Cards retrieved', { cards: page.items.map(presentCard), page_info: pageInfo(page, query.limit) }) };
    },
  });

  routes.add({
    method: 'get',
    path: '/api/cards/:cardId',
    operationId: 'getCard',
    summary: 'Get a card (never its full number or CVV)',
    tag: CARD_TAG,
    scope: 'cards:read',
    params: CardIdParams,
    response: { status: 200, description: 'The card', schema: CardResponse },
    handler: async ({ auth, params, ctx, deps }) => {
      const card = await readCard(deps.orm.em, auth, params.cardId);
      return { body: resultEnvelope(requestId(ctx), 'Card retrieved', { card: presentCard(card) }) };
    },
  });

  routes.add({
    method: 'post',
    path: '/api/cards/:cardId/balance',
    operationId: 'moveCardBalance',
    summary: 'Fund or withdraw (idempotent by reference); settles asynchronously',
    tag: CARD_TAG,
    scope: 'cards:write',
    params: CardIdParams,
    body: BalanceBody,
    response: { status: 200, description: 'The (pending) card transaction', schema: BalanceResponse },
    handler: async ({ auth, params, body, em, ctx, deps }) => {
      const data = await moveBalance(em, deps, auth, params.cardId, body);
      return { body: resultEnvelope(requestId(ctx), 'Request accepted', data) };
    },
  });

  routes.add({
    method: 'post',
    path: '/api/cards/:cardId/status',
    operationId: 'updateCardStatus',
    summary: 'Freeze (status frozen) or unfreeze (status active) a card',
    tag: CARD_TAG,
    scope: 'cards:write',
    params: CardIdParams,
    body: StatusBody,
    response: { status: 200, description: 'The card with its new status', schema: StatusResponse },
    handler: async ({ auth, params, body, em, ctx }) => {
      const { message, data } = await changeStatus(em, auth, params.cardId, body.status);
      return { body: resultEnvelope(requestId(ctx), message, data) };
    },
  });

  routes.add({
    method: 'delete',
    path: '/api/cards/:cardId',
    operationId: 'terminateCard',
    summary: 'Terminate a card (24 hours after creation at the earliest); the balance returns to the company balance',
    description:
      'Terminate a card (24 hours after creation at the earliest); the balance returns to the company balance. 200 with the termination, or 202 with the card when the termination workflow has not finished within a few seconds.',
    tag: CARD_TAG,
    scope: 'cards:write',
    ownTransactions: true,
    params: CardIdParams,
    body: TerminateBody,
    response: { status: 200, description: 'The termination (202: the card, still terminating)', schema: TerminationResponse },
    handler: ({ auth, params, body, em, ctx, deps }) => terminate(em, deps, ctx, auth, params.cardId, body.reason ?? null),
  });

  routes.add({
    method: 'get',
    path: '/api/cards/:cardId/secure',
    operationId: 'getCardSecureDetails',
    summary: 'Full card number, CVV and expiry (scope cards:secure)',
    tag: CARD_TAG,
    scope: 'cards:secure',
    params: CardIdParams,
    response: { status: 200, description: 'The secure details', schema: SecureResponse },
    handler: async ({ auth, params, em, ctx, deps }) => {
      const card = await findCard(em, auth, params.cardId);
      if (!card.secrets) {
        throw invalidStateTransition(
          card.issuerCardId
            ? "The issuer keeps this card's number and CVV: show them with the issuer's own means (Stripe Issuing Elements)."
            : `The card is ${card.status}; its number has not been issued.`,
        );
      }
      const secrets = await openCardSecrets(deps.keys.provider, card.id, card.secrets);
      const [month, year] = secrets.expiry.split('/') as [string, string];
      ctx.set('Cache-Control', 'no-store');
      return {
        body: resultEnvelope(requestId(ctx), 'Card details retrieved', {
          card_id: card.id,
          pan: secrets.pan,
          cvv: secrets.cvv,
          expiry: secrets.expiry,
          expiry_month: month,
          expiry_year: `20${year}`,
        }),
      };
    },
  });

  routes.add({
    method: 'put',
    path: '/api/cards/:cardId/spend-limits',
    operationId: 'setCardSpendLimits',
    summary: 'Replace the spend limits (cents): transaction, daily, weekly (rolling 7 days), monthly (calendar month), yearly, all_time',
    tag: CARD_TAG,
    scope: 'cards:write',
    params: CardIdParams,
    body: SpendLimitsBody,
    response: { status: 200, description: 'The card with its limits', schema: CardResponse },
    handler: async ({ auth, params, body, em, ctx }) => {
      const card = await setSpendLimits(em, await findCard(em, auth, params.cardId, true), body);
      return { body: resultEnvelope(requestId(ctx), 'Spend limits updated', { card: presentCard(card) }) };
    },
  });

  routes.add({
    method: 'get',
    path: '/api/cards/:cardId/transactions',
    operationId: 'listCardTransactions',
    summary: "A card's transactions, newest first (filter by type and status)",
    tag: CARD_TAG,
    scope: 'cards:read',
    params: CardIdParams,
    query: ListTransactionsQuery,
    response: { status: 200, description: 'A page of transactions', schema: TransactionListResponse },
    handler: async ({ auth, params, query, em, ctx }) => {
      const card = await findCard(em, auth, params.cardId);
      const where = { card, ...tenantFilter(auth), ...(query.type ? { type: query.type } : {}), ...(query.status ? { status: query.status } : {}) };
      const page = await paginate(em, CardTransaction, where, query);
      return {
        body: resultEnvelope(requestId(ctx), 'Card transactions retrieved', {
          transactions: page.items.map((transaction) => presentTransaction(transaction, card)),
          page_info: pageInfo(page, query.limit),
        }),
      };
    },
  });

  routes.add({
    method: 'get',
    path: '/api/customers/:customerId',
    operationId: 'getCustomer',
    summary: 'Get a cardholder',
    tag: CARD_TAG,
    scope: 'cards:read',
    params: CustomerIdParams,
    response: { status: 200, description: 'The customer', schema: CustomerResponse },
    handler: async ({ auth, params, em, ctx }) => {
      const customer = await findCustomer(em, auth, params.customerId);
      return { body: resultEnvelope(requestId(ctx), 'Customer retrieved', { customer: presentCustomer(customer) }) };
    },
  });

  routes.add({
    method: 'get',
    path: '/api/customers/:customerId/cards',
    operationId: 'listCustomerCards',
    summary: "A customer's cards (the specification's by-customer listing)",
    tag: CARD_TAG,
    scope: 'cards:read',
    params: CustomerIdParams,
    response: { status: 200, description: 'The cards', schema: CustomerCardsResponse },
    handler: async ({ auth, params, em }) => {
      const customer = await findCustomer(em, auth, params.customerId);
      const cards = await em.find(Card, { customer, ...tenantFilter(auth) }, { orderBy: { createdAt: 'desc', id: 'desc' }, populate: ['customer'] });
      return { body: { status: 'success', message: 'Cards retrieved', cards: cards.map(presentCustomerCardEntry), total: cards.length } };
    },
  });

  routes.add({
    method: 'post',
    path: '/v1/sandbox/cards/:cardId/authorizations',
    operationId: 'sandboxCardAuthorization',
    summary: 'Sandbox: a merchant authorization, approved or declined against status, balance and spend limits',
    tag: 'Sandbox',
    scope: 'cards:write',
    sandboxOnly: true,
    params: CardIdParams,
    body: AuthorizationBody,
    response: { status: 200, description: 'The decision and the purchase transaction', schema: AuthorizationResponse },
    handler: async ({ auth, params, body, em, ctx }) => {
      // The schema's pattern admits only timestamps Date reads (years 2000 to 2999).
      const at = body.occurred_at ? new Date(body.occurred_at) : new Date();
      const { transaction, declineReason } = await authorizePurchase(em, auth, params.cardId, {
        amount: body.amount,
        merchantName: body.merchant_name ?? null,
        at,
      });
      return {
        body: resultEnvelope(requestId(ctx), declineReason ? `Authorization declined: ${declineReason}` : 'Authorization approved', {
          approved: declineReason === null,
          decline_reason: declineReason,
          transaction: presentTransaction(transaction, transaction.card),
        }),
      };
    },
  });

  registerDeprecatedAliases(routes);
  registerLegacyRoutes(routes);

  registerStripeIssuingRoutes(routes);
}

/** The earlier card-scoped v2 routes, served by the consolidated ones with Deprecation and Link headers. */
function registerDeprecatedAliases(routes: RouteRegistry): void {
  for (const type of ['fund', 'withdraw'] as const) {
    routes.add({
      method: 'post',
      path: `/api/cards/:cardId/${type}`,
      operationId: `${type}CardDeprecated`,
      summary: `Deprecated: POST /api/cards/:cardId/balance with type ${type}`,
      tag: CARD_TAG,
      deprecated: true,
      scope: 'cards:write',
      params: CardIdParams,
      body: AliasBalanceBody,
      response: { status: 200, description: 'As POST /api/cards/:cardId/balance', schema: BalanceResponse },
      handler: async ({ auth, params, body, em, ctx, deps }) => {
        const data = await moveBalance(em, deps, auth, params.cardId, { ...body, type });
        return { body: resultEnvelope(requestId(ctx), 'Request accepted', data), headers: deprecatedHeaders(params.cardId, '/balance') };
      },
    });
  }
  for (const [action, status] of [
    ['freeze', 'frozen'],
    ['unfreeze', 'active'],
  ] as const) {
    routes.add({
      method: 'post',
      path: `/api/cards/:cardId/${action}`,
      operationId: `${action}CardDeprecated`,
      summary: `Deprecated: POST /api/cards/:cardId/status with status ${status}`,
      tag: CARD_TAG,
      deprecated: true,
      scope: 'cards:write',
      params: CardIdParams,
      response: { status: 200, description: 'As POST /api/cards/:cardId/status', schema: StatusResponse },
      handler: async ({ auth, params, em, ctx }) => {
        const { message, data } = await changeStatus(em, auth, params.cardId, status);
        return { body: resultEnvelope(requestId(ctx), message, data), headers: deprecatedHeaders(params.cardId, '/status') };
      },
    });
  }
  routes.add({
    method: 'post',
    path: '/api/cards/:cardId/terminate',
    operationId: 'terminateCardDeprecated',
    summary: 'Deprecated: DELETE /api/cards/:cardId',
    tag: CARD_TAG,
    deprecated: true,
    scope: 'cards:write',
    ownTransactions: true,
    params: CardIdParams,
    body: TerminateBody,
    response: { status: 200, description: 'As DELETE /api/cards/:cardId', schema: TerminationResponse },
    handler: async ({ auth, params, body, em, ctx, deps }) => ({
      ...(await terminate(em, deps, ctx, auth, params.cardId, body.reason ?? null)),
      headers: deprecatedHeaders(params.cardId, ''),
    }),
  });
}
