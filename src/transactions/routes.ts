import type { RouteRegistry } from '../http/route';
import { listBody, paginate } from '../shared/pagination';
import { listEnvelopeSchema } from '../shared/schemas';
import { OutgoingTransaction } from './entities';
import { estimateFee } from './estimate';
import { CreateTransactionBody, EstimateFeeBody, FeeEstimation, TransactionListQuery, TransactionObject, TransactionParams } from './schemas';
import { createTransaction, findTransaction, presentTransaction, transactionPresenter } from './service';

const TAG = 'Transactions';

export function registerTransactionRoutes(routes: RouteRegistry): void {
  routes.add({
    method: 'post',
    path: '/v1/transactions/estimate-fee',
    operationId: 'estimateTransactionFee',
    summary: 'Estimate transaction fee',
    description:
      "The fee of a send at low, medium and high from the chain's fee market, in the chain's native asset, with what the recipient gets and the wallet gives (net, or gross with treat_as_gross_amount). " +
      'Validates like a send: 404 for a wallet not of the key, 400 with param for an asset, address or amount that does not fit the chain; ' +
      '503 `chain_node_unavailable` when no usable node serves the chain. See docs/transactions.md.',
    tag: TAG,
    scope: 'custody:read',
    body: EstimateFeeBody,
    response: { status: 200, description: 'The fee estimation', schema: FeeEstimation },
    handler: async ({ auth, em, body, deps }) => ({ body: await estimateFee(em, deps.config, deps.chains, auth, body) }),
  });

  routes.add({
    method: 'post',
    path: '/v1/transactions',
    operationId: 'createTransaction',
    summary: 'Send from a wallet',
    description:
      'Checks everything first (wallet, asset, address on the key\'s network, amount, Bitcoin coin control), locks amount and fee limit on the wallet (400 `insufficient_funds`), ' +
      'asks the enforced policies (rule 3: approval or delay 400 `policy_approval_required` / `policy_delay_required`, block 403 `policy_blocked`), then starts workflow `transaction-<id>`: ' +
      'sign, broadcast, confirm, settle. Answers at once with status `pending`; follow it with GET or the transaction.* events. See docs/transactions.md.',
    tag: TAG,
    scope: 'transactions:write',
    body: CreateTransactionBody,
    response: { status: 201, description: 'The transaction, pending', schema: TransactionObject },
    handler: async ({ auth, em, body, deps }) => ({ status: 201, body: await createTransaction(em, deps.config, deps.chains, auth, body) }),
  });

  routes.add({
    method: 'get',
    path: '/v1/transactions',
    operationId: 'listTransactions',
    summary: 'List transactions',
    description: 'Sends of the key\'s organization and environment, newest first; filters wallet_id and status.',
    tag: TAG,
    scope: 'custody:read',
    query: TransactionListQuery,
    response: { status: 200, description: 'A page of transactions', schema: listEnvelopeSchema(TransactionObject) },
    handler: async ({ auth, em, query }) => {
      const where = {
        organization: auth.organizationId,
        environment: auth.environment,
        ...(query.wallet_id ? { wallet: query.wallet_id } : {}),
        ...(query.status ? { status: query.status } : {}),
      };
      const page = await paginate(em, OutgoingTransaction, where, query, ['fromAddress']);
      return { body: listBody(page, await transactionPresenter(em, page.items)) };
    },
  });

  routes.add({
    method: 'get',
    path: '/v1/transactions/:id',
    operationId: 'getTransaction',
    summary: 'Get a transaction',
    tag: TAG,
    scope: 'custody:read',
    params: TransactionParams,
    response: { status: 200, description: 'The transaction', schema: TransactionObject },
    handler: async ({ auth, em, params }) => ({ body: await presentTransaction(em, await findTransaction(em, auth, params.id)) }),
  });
}
