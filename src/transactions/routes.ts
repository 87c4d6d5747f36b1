import { IDEMPOTENCY_KEY_HEADER, type RouteRegistry } from '../http/route';
import { listBody, paginate } from '../shared/pagination';
import { listEnvelopeSchema } from '../shared/schemas';
import { OutgoingTransaction } from './entities';
import { estimateFee } from './estimate';
import { readReplacementMarket, requestReplacement } from './replacements';
import { CancelTransactionBody, CreateTransactionBody, EstimateFeeBody, FeeEstimation, SpeedUpTransactionBody, TransactionListQuery, TransactionObject, TransactionParams } from './schemas';
import { readSendFromNode } from './node-reads';
import { readPresentedTransaction, transactionPresenter } from './presenters';
import { createTransaction } from './service';

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
    // Reads only, the node's among them: no transaction is held open while the node answers.
    ownTransactions: true,
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
      'sign, broadcast, confirm, settle. Answers at once with status `pending`; follow it with GET or the transaction.* events. ' +
      'A send held for approval opens an approval request bound to it (`details.approval_request_id`; asked again unchanged, the same one); once approved, the identical request ' +
      '(same fields and Idempotency-Key) passes once before its expires_at. See docs/transactions.md and docs/policies.md.',
    tag: TAG,
    scope: 'transactions:write',
    body: CreateTransactionBody,
    response: { status: 201, description: 'The transaction, pending', schema: TransactionObject },
    // The node's part (fee market, gas) is read before the transaction opens: no connection or lock waits on the node.
    prepare: ({ auth, em, body, deps }) => readSendFromNode(em, deps.config, deps.chains, auth, body),
    handler: async ({ auth, em, body, deps, prepared, ctx }) => ({
      status: 201,
      body: await createTransaction(em, deps.config, deps.chains, auth, body, { nodeReads: prepared, asked: { idempotencyKey: ctx.get(IDEMPOTENCY_KEY_HEADER) || null }, feeSponsor: deps.feeSponsor }),
    }),
  });

  routes.add({
    method: 'post',
    path: '/v1/transactions/:id/speed-up',
    operationId: 'speedUpTransaction',
    summary: 'Speed up a pending send',
    description:
      'Replaces a broadcast Ethereum send by the same nonce at a higher fee (fee_level, default high, raised to outbid its newest candidate by 10%; max_fee caps it: 400 `max_fee_exceeded`), ' +
      'a Bitcoin send by BIP-125 replace-by-fee: the same inputs and recipient at fee_rate or the level\'s rate, at least the replaced fee plus 1 sat/vB of its size, the extra fee taken from the change (400 `change_too_small` when the change cannot pay it). ' +
      'The fee beyond what is locked is locked (400 `insufficient_funds`), the policies judge it as `speed_up` (403 `policy_blocked`, 400 approval or delay), and the send\'s workflow broadcasts it at its next check, ' +
      'then settles on whichever candidate is mined: one debit. 409 `invalid_state_transition` once mined or final, or before it is broadcast; 409 `replacement_pending` while an earlier replacement waits; ' +
      '400 `replacement_unsupported` for other chains (Tron, Solana), 400 `sponsored_replacement` for a sponsored send. See docs/transactions.md.',
    tag: TAG,
    scope: 'transactions:write',
    params: TransactionParams,
    body: SpeedUpTransactionBody,
    response: { status: 200, description: 'The transaction, its new replacement listed as requested', schema: TransactionObject },
    prepare: ({ auth, em, params, deps }) => readReplacementMarket(em, deps.chains, auth, params.id),
    handler: async ({ auth, em, params, body, deps, prepared }) => ({ body: await requestReplacement(em, deps.config, auth, params.id, 'speed_up', body, prepared) }),
  });

  routes.add({
    method: 'post',
    path: '/v1/transactions/:id/cancel',
    operationId: 'cancelTransaction',
    summary: 'Cancel a pending send',
    description:
      'Replaces a broadcast Ethereum send by a zero-value transfer from its address back to itself with the same nonce, a Bitcoin send by a BIP-125 replacement paying its inputs back to its sending address less the fee, at a higher fee (as speed-up; judged as `cancel`). ' +
      'Once the cancel is mined the send fails with failure_reason `cancelled`: its fee is debited, nothing else; if the original is mined first it settles as sent. ' +
      'Same refusals as speed-up. See docs/transactions.md.',
    tag: TAG,
    scope: 'transactions:write',
    params: TransactionParams,
    body: CancelTransactionBody,
    response: { status: 200, description: 'The transaction, its cancel listed as requested', schema: TransactionObject },
    prepare: ({ auth, em, params, deps }) => readReplacementMarket(em, deps.chains, auth, params.id),
    handler: async ({ auth, em, params, body, deps, prepared }) => ({ body: await requestReplacement(em, deps.config, auth, params.id, 'cancel', body, prepared) }),
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
    handler: async ({ auth, deps, params }) => ({ body: await readPresentedTransaction(deps.orm.em, auth, params.id) }),
  });
}
