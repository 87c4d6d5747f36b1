import type { RouteRegistry } from '../http/route';
import { requireScope } from '../api-keys/scopes';
import type { Tenant } from '../custody/service';
import type { EntityManager } from '@mikro-orm/postgresql';
import { errors } from '../shared/errors';
import { isUuid } from '../shared/ids';
import { listBody, paginate } from '../shared/pagination';
import { listEnvelopeSchema } from '../shared/schemas';
import { ConsolidationRule, ConsolidationRun, ConsolidationSweep } from './entities';
import { presentRule, readRule, createRule, deleteRule, findRule, inFlightSweeps, triggerManualRun, updateRule } from './rules';
import { SWEEP_POPULATE, presentSweep, readRun } from './presenters';
import {
  ConsolidationRuleObject,
  ConsolidationRunObject,
  ConsolidationSweepObject,
  CreateConsolidationRuleBody,
  RuleListQuery,
  RuleParams,
  RunListQuery,
  SweepListQuery,
  UpdateConsolidationRuleBody,
} from './schemas';

const TAG = 'Consolidation';
const tenantOf = (tenant: Tenant) => ({ organization: tenant.organizationId, environment: tenant.environment });

async function findRun(em: EntityManager, tenant: Tenant, id: string): Promise<ConsolidationRun> {
  const run = isUuid(id) ? await em.findOne(ConsolidationRun, { id, ...tenantOf(tenant) }) : null;
  if (!run) throw errors.notFound('consolidation_run', id);
  return run;
}

export function registerConsolidationRoutes(routes: RouteRegistry): void {
  routes.add({
    method: 'post',
    path: '/v1/consolidation/rules',
    operationId: 'createConsolidationRule',
    summary: 'Create a consolidation rule',
    description:
      'Sweeps assets from the addresses of a vault\'s wallets on one account chain (Bitcoin: 400 `consolidation_unsupported_chain`) to an address book entry or another vault. ' +
      'Each combination is checked: destination_type address_book needs destination_address_book_id (same chain), vault needs destination_vault_id (another vault with a wallet on the chain), ' +
      'gas_source customer_gas_station needs gas_station_id (same chain), trigger_type scheduled needs schedule_cron (UTC), threshold needs threshold_basis, threshold_currency and threshold_value. ' +
      'assets omitted: the native coin and every token of the chain, with zero minimums. ' +
      'A rule moves funds out of the vault, so the key needs `transactions:write` as well (403 `insufficient_scope` otherwise). ' +
      'An environment holds at most MAX_CONSOLIDATION_RULES rules, MAX_SCHEDULED_CONSOLIDATION_RULES of them scheduled (one more: 409 `limit_reached`); ' +
      'a schedule_cron ticking more often than every CONSOLIDATION_SCHEDULE_MIN_INTERVAL_MINUTES: 400 `schedule_too_frequent`. See docs/consolidation.md and docs/limits.md.',
    tag: TAG,
    scope: 'consolidation:write',
    body: CreateConsolidationRuleBody,
    response: { status: 201, description: 'The rule', schema: ConsolidationRuleObject },
    handler: async ({ auth, em, body, deps }) => {
      requireScope(auth.scopes, 'transactions:write');
      return { status: 201, body: presentRule(await createRule(em, deps.chains, deps.config, auth, body), 0) };
    },
  });

  routes.add({
    method: 'get',
    path: '/v1/consolidation/rules',
    operationId: 'listConsolidationRules',
    summary: 'List consolidation rules',
    description: "The environment's rules (deleted ones left out), newest first; filters vault_id and chain.",
    tag: TAG,
    scope: 'consolidation:read',
    query: RuleListQuery,
    response: { status: 200, description: 'A page of rules', schema: listEnvelopeSchema(ConsolidationRuleObject) },
    handler: async ({ auth, em, query }) => {
      const page = await paginate(em, ConsolidationRule, { ...tenantOf(auth), deletedAt: null, ...(query.vault_id ? { vault: query.vault_id } : {}), ...(query.chain ? { chain: query.chain } : {}) }, query);
      const inFlight = await inFlightSweeps(em, page.items.map((rule) => rule.id));
      return { body: listBody(page, (rule) => presentRule(rule, inFlight.get(rule.id) ?? 0)) };
    },
  });

  routes.add({
    method: 'get',
    path: '/v1/consolidation/rules/:id',
    operationId: 'getConsolidationRule',
    summary: 'Get a consolidation rule',
    tag: TAG,
    scope: 'consolidation:read',
    params: RuleParams,
    response: { status: 200, description: 'The rule', schema: ConsolidationRuleObject },
    handler: async ({ auth, em, params }) => ({ body: await readRule(em, await findRule(em, auth, params.id)) }),
  });

  routes.add({
    method: 'patch',
    path: '/v1/consolidation/rules/:id',
    operationId: 'updateConsolidationRule',
    summary: 'Update a consolidation rule; omitted fields are unchanged, null clears an optional one',
    description:
      'Every field of the create request but vault_id, chain and network. The combination checks apply to the rule as updated; a field that no longer applies ' +
      '(schedule_cron once trigger_type is manual...) is cleared. enabled: false stops every trigger at once; the Schedule of a scheduled rule follows after commit. ' +
      'Changing the destination (destination_type, destination_address_book_id, destination_vault_id) needs `transactions:write` as well.',
    tag: TAG,
    scope: 'consolidation:write',
    params: RuleParams,
    body: UpdateConsolidationRuleBody,
    response: { status: 200, description: 'The updated rule', schema: ConsolidationRuleObject },
    handler: async ({ auth, em, params, body, deps }) => {
      const destinationChange = body.destination_type !== undefined || body.destination_address_book_id !== undefined || body.destination_vault_id !== undefined;
      if (destinationChange) requireScope(auth.scopes, 'transactions:write');
      return { body: await readRule(em, await updateRule(em, deps.chains, deps.config, auth, await findRule(em, auth, params.id), body)) };
    },
  });

  routes.add({
    method: 'delete',
    path: '/v1/consolidation/rules/:id',
    operationId: 'deleteConsolidationRule',
    summary: 'Delete a consolidation rule',
    description: 'No trigger starts a run of it from then on and its Schedule is removed; a run in progress finishes. Its runs and sweeps stay readable. Answers the rule as it was.',
    tag: TAG,
    scope: 'consolidation:write',
    params: RuleParams,
    response: { status: 200, description: 'The deleted rule', schema: ConsolidationRuleObject },
    handler: async ({ auth, em, params }) => {
      const rule = await findRule(em, auth, params.id);
      await deleteRule(em, rule);
      return { body: await readRule(em, rule) };
    },
  });

  routes.add({
    method: 'post',
    path: '/v1/consolidation/rules/:id/runs',
    operationId: 'triggerConsolidationRun',
    summary: 'Run a consolidation rule now',
    description:
      'One run at a time per rule: answers 202 with a new run (pending; workflow `consolidation-run-<id>` starts after commit), or 200 with the run in progress, ' +
      'on which this trigger is counted (recorded_trigger_count, last_recorded_trigger). A disabled rule: 409 `consolidation_rule_disabled`. An address-book destination still in its cooling period: ' +
      '409 `destination_not_usable` with details.address_book_entry_id and details.usable_at (nothing starts).',
    tag: TAG,
    scope: 'consolidation:write',
    params: RuleParams,
    response: { status: 202, description: 'The new run (202) or the run in progress (200)', schema: ConsolidationRunObject },
    handler: async ({ auth, em, params, deps }) => {
      const { run, started } = await triggerManualRun(em, auth, await findRule(em, auth, params.id));
      return { status: started ? 202 : 200, body: await readRun(em, deps.config, run) };
    },
  });

  routes.add({
    method: 'get',
    path: '/v1/consolidation/runs',
    operationId: 'listConsolidationRuns',
    summary: 'List consolidation runs',
    description: "The environment's runs, newest first; filters rule_id and status.",
    tag: TAG,
    scope: 'consolidation:read',
    query: RunListQuery,
    response: { status: 200, description: 'A page of runs', schema: listEnvelopeSchema(ConsolidationRunObject) },
    handler: async ({ auth, em, query, deps }) => {
      const page = await paginate(em, ConsolidationRun, { ...tenantOf(auth), ...(query.rule_id ? { rule: query.rule_id } : {}), ...(query.status ? { status: query.status } : {}) }, query);
      const runs = [];
      for (const run of page.items) runs.push(await readRun(em, deps.config, run));
      return { body: listBody({ ...page, items: runs }, (run) => run) };
    },
  });

  routes.add({
    method: 'get',
    path: '/v1/consolidation/runs/:id',
    operationId: 'getConsolidationRun',
    summary: 'Get a consolidation run',
    tag: TAG,
    scope: 'consolidation:read',
    params: RuleParams,
    response: { status: 200, description: 'The run', schema: ConsolidationRunObject },
    handler: async ({ auth, em, params, deps }) => ({ body: await readRun(em, deps.config, await findRun(em, auth, params.id)) }),
  });

  routes.add({
    method: 'get',
    path: '/v1/consolidation/runs/:id/sweeps',
    operationId: 'listConsolidationRunSweeps',
    summary: "List a run's sweeps",
    description: 'Newest first.',
    tag: TAG,
    scope: 'consolidation:read',
    params: RuleParams,
    query: SweepListQuery,
    response: { status: 200, description: 'A page of sweeps', schema: listEnvelopeSchema(ConsolidationSweepObject) },
    handler: async ({ auth, em, params, query }) => {
      const run = await findRun(em, auth, params.id);
      const page = await paginate(em, ConsolidationSweep, { run }, query, SWEEP_POPULATE);
      return { body: listBody(page, presentSweep) };
    },
  });

  routes.add({
    method: 'get',
    path: '/v1/consolidation/sweeps/:id',
    operationId: 'getConsolidationSweep',
    summary: 'Get a consolidation sweep',
    tag: TAG,
    scope: 'consolidation:read',
    params: RuleParams,
    response: { status: 200, description: 'The sweep', schema: ConsolidationSweepObject },
    handler: async ({ auth, em, params }) => {
      const sweep = isUuid(params.id) ? await em.findOne(ConsolidationSweep, { id: params.id, ...tenantOf(auth) }, { populate: SWEEP_POPULATE }) : null;
      if (!sweep) throw errors.notFound('consolidation_sweep', params.id);
      return { body: presentSweep(sweep) };
    },
  });
}
