import type { RouteRegistry } from '../http/route';
import { listBody, paginate } from '../shared/pagination';
import { listEnvelopeSchema } from '../shared/schemas';
import { IncomingTransfer } from './entities';
import { DepositListQuery, DepositObject, DepositParams } from './schemas';
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
}
