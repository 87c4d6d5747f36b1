import type { EntityManager } from '@mikro-orm/postgresql';
import { readFeeMarket } from '../chains/fees';
import type { RouteRegistry } from '../http/route';
import { requireScope } from '../api-keys/scopes';
import { listBody, paginate } from '../shared/pagination';
import { listEnvelopeSchema } from '../shared/schemas';
import { TransactionObject } from '../transactions/schemas';
import { GasStation } from './entities';
import {
  CreateGasStationBody,
  GasStationListQuery,
  GasStationObject,
  PendingStationLimitsObject,
  GasStationParams,
  RefillGasStationBody,
  SponsorBroadcastBody,
  SponsorBroadcastObject,
  SponsorBroadcastParams,
  UpdateGasStationBody,
} from './schemas';
import { findSponsorBroadcast, presentSponsorBroadcast, sponsorBroadcast } from './sponsorship';
import { changeStationLimits } from './limit-changes';
import { presentChangeRequest } from '../policies/change-requests';
import { resolveActor } from '../policies/service';
import { createGasStation, findGasStation, presentGasStation, readGasStation, refillGasStation, stationBalance, updateGasStation } from './service';

const TAG = 'Gas stations';

export function registerGasStationRoutes(routes: RouteRegistry): void {
  routes.add({
    method: 'post',
    path: '/v1/gas-stations',
    operationId: 'createGasStation',
    summary: 'Create the gas station of a chain',
    description:
      'One station per chain and environment (409 `gas_station_exists`). Its funds are a new operational wallet in the "Gas stations" vault; its address is that wallet\'s. ' +
      'refill_from_wallet_id must be a wallet of the same organization, environment and chain (400). With auto_refill_enabled (which needs refill_amount and refill_from_wallet_id) ' +
      'a station created below its threshold is refilled at once by workflow `gas-station-refill-<id>`. ' +
      'A refill source moves funds out of that wallet, so setting refill_from_wallet_id needs `transactions:write` as well (403 `insufficient_scope`). See docs/gas-stations.md.',
    tag: TAG,
    scope: 'gas_stations:write',
    body: CreateGasStationBody,
    response: { status: 201, description: 'The gas station', schema: GasStationObject },
    handler: async ({ auth, em, body, deps }) => {
      if (body.refill_from_wallet_id !== undefined) requireScope(auth.scopes, 'transactions:write');
      // Its address is new: the node is not asked (inside this transaction); its ledger holds nothing yet.
      return { status: 201, body: presentGasStation(deps.config, await createGasStation(em, deps.keys, auth, body), { balance: 0n, source: 'ledger' }) };
    },
  });

  routes.add({
    method: 'get',
    path: '/v1/gas-stations',
    operationId: 'listGasStations',
    summary: 'List gas stations',
    description: "The environment's stations, newest first, each with its balance read from the chain.",
    tag: TAG,
    scope: 'gas_stations:read',
    query: GasStationListQuery,
    response: { status: 200, description: 'A page of gas stations', schema: listEnvelopeSchema(GasStationObject) },
    handler: async ({ auth, em, query, deps }) => {
      const page = await paginate(em, GasStation, { organization: auth.organizationId, environment: auth.environment }, query);
      const reads = new Map<string, Awaited<ReturnType<typeof stationBalance>>>();
      for (const station of page.items) reads.set(station.id, await stationBalance(em, deps.chains, station));
      return { body: listBody(page, (station) => presentGasStation(deps.config, station, reads.get(station.id)!)) };
    },
  });

  routes.add({
    method: 'get',
    path: '/v1/gas-stations/:id',
    operationId: 'getGasStation',
    summary: 'Get a gas station',
    tag: TAG,
    scope: 'gas_stations:read',
    params: GasStationParams,
    response: { status: 200, description: 'The gas station', schema: GasStationObject },
    handler: async ({ auth, em, params, deps }) => ({ body: await readGasStation(em, deps.config, deps.chains, await findGasStation(em, auth, params.id)) }),
  });

  routes.add({
    method: 'patch',
    path: '/v1/gas-stations/:id',
    operationId: 'updateGasStation',
    summary: 'Update a gas station; omitted fields are unchanged, null clears refill_amount or refill_from_wallet_id',
    description:
      'name, threshold, auto_refill_enabled, gas_strategy, max_gas_price, daily_sponsorship_budget, refill_amount, refill_from_wallet_id. ' +
      'max_gas_price and daily_sponsorship_budget take a number, never null: no station sponsors without limits. Lowering either applies at once; raising either above what applies now ' +
      "is a change request under the organization's activation quorum: 202 with its approval_request_id, the limit unchanged until approved (docs/policies.md, Governance). " +
      'With auto-refill on, a station below threshold is refilled. ' +
      'Setting refill_from_wallet_id to a wallet needs `transactions:write` as well; clearing it (null) does not.',
    tag: TAG,
    scope: 'gas_stations:write',
    params: GasStationParams,
    body: UpdateGasStationBody,
    response: { status: 200, description: 'The updated gas station', schema: GasStationObject },
    otherResponses: [{ status: 202, description: 'A raised limit waits for approvals (the other fields are applied)', schema: PendingStationLimitsObject }],
    // The balance is read before the transaction opens: no connection or row lock waits on the node.
    prepare: async ({ auth, em, params, deps }) => stationBalance(em, deps.chains, await findGasStation(em, auth, params.id)),
    handler: async ({ auth, em, params, body, deps, prepared }) => {
      if (body.refill_from_wallet_id != null) requireScope(auth.scopes, 'transactions:write');
      const { max_gas_price, daily_sponsorship_budget, ...fields } = body;
      const station = await findGasStation(em, auth, params.id);
      const expiryHours = deps.config.POLICY_ACTIVATION_EXPIRY_HOURS;
      const pending = await changeStationLimits(em, deps.config, await resolveActor(em, auth), station, { max_gas_price, daily_sponsorship_budget }, { expiryHours });
      const updated = presentGasStation(deps.config, await updateGasStation(em, auth, station, fields), prepared);
      if (!pending) return { body: updated };
      return { status: 202, body: { ...presentChangeRequest(pending, "Raising the station's limits"), gas_station_id: station.id, gas_station: updated } };
    },
  });

  routes.add({
    method: 'post',
    path: '/v1/gas-stations/:id/refill',
    operationId: 'refillGasStation',
    summary: 'Refill a gas station from a wallet',
    description:
      "Sends amount of the native coin from source_wallet_id (same organization, environment and chain; 400 otherwise) to the station's address as a transaction: " +
      'the checks, locks and policies of POST /v1/transactions, then workflow `transaction-<id>`. Answers that transaction, pending.',
    tag: TAG,
    scope: 'gas_stations:write',
    params: GasStationParams,
    body: RefillGasStationBody,
    response: { status: 201, description: 'The refill transaction, pending', schema: TransactionObject },
    // The fee market is read before the transaction opens: no connection or lock waits on the node.
    prepare: async ({ auth, em, params, deps }) => {
      const station = await findGasStation(em, auth, params.id);
      return readFeeMarket(deps.chains, station.chain, auth.environment, em);
    },
    handler: async ({ auth, em, params, body, deps, prepared }) => ({
      status: 201,
      body: await refillGasStation(em, deps.config, deps.chains, auth, await findGasStation(em, auth, params.id), body, prepared),
    }),
  });

  routes.add({
    method: 'post',
    path: '/v1/gas-stations/sponsor-broadcast',
    operationId: 'sponsorBroadcast',
    summary: "Broadcast a client-signed transaction with its fee paid by a gas station",
    description:
      'Decodes signed_tx and checks it is signed by from_address and pays to_address exactly amount of asset on network (a mismatch is 400 naming the field; nothing is sent). ' +
      "The organization's gas station on the chain (else the platform's sponsorship when configured) sends from_address the transaction's fee limit, " +
      "which must carry the sender's next nonce and be within its need (gas by the node's estimate at the fee market's high level) plus SPONSORSHIP_FEE_MARGIN_PERCENT; " +
      'then workflow `sponsorship-<id>` broadcasts the signed bytes once that fuel is confirmed and follows them to the confirmation count. Answers 202 with status funding; ' +
      'the same signed transaction again answers the same sponsorship. Ethereum and Tron. See docs/gas-stations.md.',
    tag: TAG,
    scope: 'gas_stations:write',
    body: SponsorBroadcastBody,
    // The node is asked outside any transaction; the reservation is its own short one.
    ownTransactions: true,
    response: { status: 202, description: 'The sponsorship, funding', schema: SponsorBroadcastObject },
    handler: async ({ auth, em, body, deps }) => {
      const transaction = <T>(work: (tx: EntityManager) => Promise<T>) => deps.starter.transaction(em, work);
      const { sponsorship } = await sponsorBroadcast(em, transaction, deps.config, deps.chains, auth, body);
      return { status: 202, body: presentSponsorBroadcast(sponsorship) };
    },
  });

  routes.add({
    method: 'get',
    path: '/v1/gas-stations/sponsor-broadcasts/:id',
    operationId: 'getSponsorBroadcast',
    summary: 'Get a sponsored broadcast',
    description: 'Where a sponsor-broadcast stands: funding, broadcasting, confirmed or failed (with failure_reason).',
    tag: TAG,
    scope: 'gas_stations:read',
    params: SponsorBroadcastParams,
    response: { status: 200, description: 'The sponsored broadcast', schema: SponsorBroadcastObject },
    handler: async ({ auth, em, params }) => ({ body: presentSponsorBroadcast(await findSponsorBroadcast(em, auth, params.id)) }),
  });
}
