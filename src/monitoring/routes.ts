import type { RouteRegistry } from '../http/route';
import { listBody, paginate } from '../shared/pagination';
import { listEnvelopeSchema } from '../shared/schemas';
import { IncomingTransfer } from './entities';
import { ChainParams } from '../catalogue/schemas';
import { mineSandboxBlocks, simulateDeposit } from './sandbox';
import { DepositListQuery, DepositObject, DepositParams, SandboxBlocksBody, SandboxBlocksObject, SandboxDepositBody, SandboxDepositObject } from './schemas';
import { findDeposit, presentDeposit } from './service';

const TAG = 'Deposits';

export function registerMonitoringRoutes(routes: RouteRegistry): void {
  routes.add({
    method: 'get',
    path: '/v1/deposits',
    operationId: 'listDeposits',
    summary: 'List deposits',
    description:
      "Incoming transfers to the organization's own addresses, newest first: pending from the moment they are seen, confirmed at the chain's confirmation count (when the wallet's balance grows), dropped if a reorganisation removed them first.",
    tag: TAG,
    scope: 'custody:read',
    query: DepositListQuery,
    response: { status: 200, description: 'A page of deposits', schema: listEnvelopeSchema(DepositObject) },
    handler: async ({ auth, em, query }) => {
      const where = {
        organization: auth.organizationId,
        environment: auth.environment,
        wallet: query.wallet_id ?? { $ne: null },
        ...(query.status ? { status: query.status } : {}),
      };
      const page = await paginate(em, IncomingTransfer, where, query);
      return { body: listBody(page, presentDeposit) };
    },
  });

  routes.add({
    method: 'get',
    path: '/v1/deposits/:id',
    operationId: 'getDeposit',
    summary: 'Get a deposit',
    tag: TAG,
    scope: 'custody:read',
    params: DepositParams,
    response: { status: 200, description: 'The deposit', schema: DepositObject },
    handler: async ({ auth, em, params }) => ({ body: presentDeposit(await findDeposit(em, auth, params.id)) }),
  });

  routes.add({
    method: 'post',
    path: '/v1/sandbox/deposits',
    operationId: 'sandboxDeposit',
    summary: 'Sandbox: an incoming transfer from a simulated outside address',
    description:
      "Sends `amount` (display units) of `asset` from the devnet's faucet to `address`: a real signed transaction in the devnet's mempool, mined by the next block. " +
      "It shows at once as a pending deposit when the address is one of the caller's own (and reaches every subscription watching the address); it is confirmed at the chain's confirmation count. " +
      'Devnet chains only: a chain served by a configured node answers 400 `devnet_only`. ' +
      'Capped per asset (docs/devnet.md): above the per-request maximum 400 `amount_too_large`; past what the organization may deposit of the asset in any 24 hours 429 `sandbox_deposit_limit` (details: `remaining`, `available_at`).',
    tag: 'Sandbox',
    scope: 'custody:write',
    sandboxOnly: true,
    body: SandboxDepositBody,
    response: { status: 201, description: 'The transfer, and the deposit it made', schema: SandboxDepositObject },
    handler: async ({ auth, em, body, deps }) => ({ status: 201, body: await simulateDeposit(em, deps.config, deps.chains, auth, body) }),
  });

  routes.add({
    method: 'post',
    path: '/v1/sandbox/chains/:chain/blocks',
    operationId: 'sandboxMineBlocks',
    summary: 'Sandbox: mine blocks on a devnet chain',
    description:
      "Mines `count` (1 to 100) blocks at once through the chain's block producer (workflow `devnet-blocks-<chain>`), then waits up to 10 s for block scanning to process them (`scanned`). " +
      'Devnet chains only: a chain served by a configured node answers 400 `devnet_only`.',
    tag: 'Sandbox',
    scope: 'custody:write',
    sandboxOnly: true,
    params: ChainParams,
    body: SandboxBlocksBody,
    // Waits on Temporal: no database transaction is held open meanwhile.
    ownTransactions: true,
    response: { status: 200, description: 'The new tip', schema: SandboxBlocksObject },
    handler: async ({ params, body, deps }) => ({ body: await mineSandboxBlocks(deps.config, deps.starter, params.chain, body.count) }),
  });
}
