import { requireScope } from '../api-keys/scopes';
import { findRule, readRule } from '../consolidation/rules';
import { ConsolidationRuleObject, RuleParams } from '../consolidation/schemas';
import { GasStationObject, GasStationParams } from '../gas-stations/schemas';
import { armRefill, findGasStation, presentGasStation, stationBalance } from '../gas-stations/service';
import type { RouteRegistry } from '../http/route';
import { takeOver } from './ownership';

const TAKE_OVER =
  'The calling key becomes the key the automation acts for (the actor its policies see) and the automation runs again (event `automation.resumed`). ' +
  'Only a paused automation (its key revoked, event `automation.paused`) can be taken over: 409 `automation_not_paused` otherwise. ' +
  'Its sends move funds, so the calling key needs `transactions:write` as well (403 `insufficient_scope`).';

export function registerAutomationRoutes(routes: RouteRegistry): void {
  routes.add({
    method: 'post',
    path: '/v1/gas-stations/:id/take-over',
    operationId: 'takeOverGasStation',
    summary: 'Take over a gas station whose key was revoked',
    description: `${TAKE_OVER} A station below its threshold with auto-refill on is refilled at once.`,
    tag: 'Gas stations',
    scope: 'gas_stations:write',
    params: GasStationParams,
    response: { status: 200, description: 'The gas station, running again', schema: GasStationObject },
    // The balance is read before the transaction opens: no connection or row lock waits on the node.
    prepare: async ({ auth, em, params, deps }) => stationBalance(em, deps.chains, await findGasStation(em, auth, params.id)),
    handler: async ({ auth, em, params, deps, prepared }) => {
      requireScope(auth.scopes, 'transactions:write');
      const station = await takeOver(em, auth, 'gas_station', await findGasStation(em, auth, params.id));
      await em.flush();
      if (station.autoRefillEnabled) await armRefill(em, station);
      return { body: presentGasStation(deps.config, station, prepared) };
    },
  });

  routes.add({
    method: 'post',
    path: '/v1/consolidation/rules/:id/take-over',
    operationId: 'takeOverConsolidationRule',
    summary: 'Take over a consolidation rule whose key was revoked',
    description: `${TAKE_OVER} Its scheduled and threshold triggers start runs again.`,
    tag: 'Consolidation',
    scope: 'consolidation:write',
    params: RuleParams,
    response: { status: 200, description: 'The rule, running again', schema: ConsolidationRuleObject },
    handler: async ({ auth, em, params }) => {
      requireScope(auth.scopes, 'transactions:write');
      const rule = await takeOver(em, auth, 'consolidation_rule', await findRule(em, auth, params.id));
      await em.flush();
      return { body: await readRule(em, rule) };
    },
  });
}
