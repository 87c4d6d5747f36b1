import assert from 'node:assert/strict';
import type { EntityManager } from '@mikro-orm/postgresql';
import { ConsolidationRule } from '../../src/consolidation/entities';
import { triggerRun } from '../../src/consolidation/runs';
import { Event } from '../../src/events/entities';
import { refillFlow } from '../../src/gas-stations/flows/refill';
import { GasStation } from '../../src/gas-stations/entities';
import { armLowStations, assessStation, submitRefill, type RefillDeps } from '../../src/gas-stations/service';
import { PolicyAuditLog } from '../../src/policies/entities';
import { createTestOrganization, operatorMember, startTestApp, type TestApp } from '../support/app';
import { localTemporal, testOrm } from '../support/environment';
import { creditCustodyWallet } from '../support/ledger';
import { terminateWorkflows } from '../support/scanning';

/**
 * Automations follow their owner (issue 47, item 6): revoking the key a gas station or a
 * consolidation rule acts for pauses it (event automation.paused) and it moves nothing, until a
 * key with the scopes takes it over (event automation.resumed) and it runs again, acting for that key.
 */
describe('Automations follow their owner', () => {
  let app: TestApp;
  const workflows: string[] = [];

  before(async () => {
    app = await startTestApp();
  });
  after(async () => {
    await terminateWorkflows((await localTemporal()).client, workflows);
    await app?.close();
  });

  const call = (method: string, path: string, key: string, body?: unknown) => app.request(method, path, { key, body });
  const ok = async (method: string, path: string, key: string, body?: unknown) => {
    const response = await call(method, path, key, body);
    assert.ok(response.status >= 200 && response.status < 300, `${method} ${path}: ${response.status} ${response.text}`);
    return response.body;
  };

  it('revoking the owner key pauses its station and rule: no refill, no scheduled run; a key that takes them over runs them again, as itself', async () => {
    const o = await createTestOrganization('Automations');
    const owner = await operatorMember(o.organizationId);
    const mint = async (scopes: string[]) => (await ok('POST', '/v1/api-keys', owner.secret, { name: `Automation key ${scopes.join(' ')}`, scopes })) as { id: string; secret: string };
    const setter = await mint(['*']);

    const vault = await ok('POST', '/v1/vaults', setter.secret, { name: 'Treasury' });
    const wallet = await ok('POST', '/v1/wallets', setter.secret, { name: 'Treasury ETH', chain: 'ethereum', vault_id: vault.id, wallet_type: 'hot' });
    await creditCustodyWallet((await testOrm()).em.fork(), wallet.id, 'ETH', 10n ** 18n);
    const station = await ok('POST', '/v1/gas-stations', setter.secret, { name: 'Gas', chain: 'ethereum', threshold: '1', refill_amount: '0.01', refill_from_wallet_id: wallet.id, auto_refill_enabled: true });
    workflows.push(refillFlow.workflowId({ stationId: station.id }));
    const cold = await ok('POST', '/v1/vaults', setter.secret, { name: 'Cold' });
    await ok('POST', '/v1/wallets', setter.secret, { name: 'Cold ETH', chain: 'ethereum', vault_id: cold.id, wallet_type: 'cold' });
    const rule = await ok('POST', '/v1/consolidation/rules', setter.secret, {
      vault_id: vault.id,
      chain: 'ethereum',
      trigger_type: 'manual',
      destination_type: 'vault',
      destination_vault_id: cold.id,
      gas_source: 'wallet',
      assets: [{ is_native: true }],
    });

    const orm = await testOrm();
    const deps: RefillDeps = { config: app.deps.config, chains: app.deps.chains, em: () => orm.em.fork(), transaction: (work) => orm.em.fork().transactional(work) };
    const scheduledRun = () => orm.em.fork().transactional((em: EntityManager) => triggerRun(em, rule.id, { source: 'scheduled' }));
    const eventsOf = async (type: string) =>
      (await orm.em.fork().find(Event, { organization: o.organizationId, type }, { orderBy: { createdAt: 'asc' } })).map((event) => event.data as Record<string, unknown>);

    const revoked = await call('DELETE', `/v1/api-keys/${setter.id}`, owner.secret);
    assert.equal(revoked.status, 200, revoked.text);

    // Paused, visibly, and announced once per automation.
    const pausedStation = await ok('GET', `/v1/gas-stations/${station.id}`, owner.secret);
    const pausedRule = await ok('GET', `/v1/consolidation/rules/${rule.id}`, owner.secret);
    assert.ok(pausedStation.automation_paused_at && pausedRule.automation_paused_at, 'both show automation_paused_at');
    assert.deepEqual(
      (await eventsOf('automation.paused')).map((data) => [data.automation_type, data.automation_id, data.revoked_api_key_id]).sort(),
      [['consolidation_rule', rule.id, setter.id], ['gas_station', station.id, setter.id]],
    );

    // They move nothing: the low station is not refilled, the rule's own triggers start no run.
    assert.deepEqual(await assessStation(deps, station.id), { state: 'auto_refill_off' });
    assert.deepEqual(await submitRefill(deps, station.id), {
      refused: { code: 'auto_refill_off', message: 'Auto-refill was turned off, its source removed, or the key it acts for revoked (automation_paused_at).' },
    });
    assert.equal(await armLowStations(deps, { organizationId: o.organizationId }), 0, 'the periodic check skips it');
    assert.equal(await scheduledRun(), null);

    // Taking over needs the scopes of what the automation does, and only a paused one can be taken.
    const narrow = await mint(['gas_stations:write', 'consolidation:write']);
    for (const path of [`/v1/gas-stations/${station.id}/take-over`, `/v1/consolidation/rules/${rule.id}/take-over`]) {
      const refused = await call('POST', path, narrow.secret);
      assert.deepEqual([refused.status, refused.body.error?.details?.required_scope], [403, 'transactions:write'], refused.text);
    }
    const successor = await mint(['*']);
    const resumedStation = await ok('POST', `/v1/gas-stations/${station.id}/take-over`, successor.secret);
    const resumedRule = await ok('POST', `/v1/consolidation/rules/${rule.id}/take-over`, successor.secret);
    assert.deepEqual([resumedStation.automation_paused_at, resumedRule.automation_paused_at], [null, null]);
    const again = await call('POST', `/v1/gas-stations/${station.id}/take-over`, successor.secret);
    assert.deepEqual([again.status, again.body.error?.code], [409, 'automation_not_paused']);
    assert.deepEqual(
      (await eventsOf('automation.resumed')).map((data) => [data.automation_type, data.api_key_id, data.previous_api_key_id]).sort(),
      [['consolidation_rule', successor.id, setter.id], ['gas_station', successor.id, setter.id]],
    );
    const em = orm.em.fork();
    assert.equal((await em.findOneOrFail(GasStation, { id: station.id })).createdByKeyId, successor.id);
    assert.equal((await em.findOneOrFail(ConsolidationRule, { id: rule.id })).createdByKeyId, successor.id);

    // They run again, acting for the key that took them over.
    const refill = await submitRefill(deps, station.id);
    assert.ok('transactionId' in refill, JSON.stringify(refill));
    const [decision] = await orm.em.fork().find(PolicyAuditLog, { organization: o.organizationId, action: 'decision' }, { orderBy: { createdAt: 'desc', id: 'desc' }, limit: 1 });
    assert.deepEqual([decision?.actorId, decision?.metadata.actor_type], [successor.id, 'system'], 'the refill acts for the new owner');
    const run = await scheduledRun();
    assert.equal(run?.started, true);
  });
});
