import { createTemporalClient } from '../../temporal/client';
import { failing, misconfigured, ok, reasonOf, warn, type Check, type DoctorContext } from './check';

/** What every process stands on: PostgreSQL (reachable, migrated) and Temporal (reachable, its namespace there). */
export function platformChecks({ config, timeoutMs, database }: DoctorContext): Check[] {
  return [
    {
      name: 'postgresql',
      environment: null,
      run: async () => {
        let orm;
        try {
          orm = await database();
          await orm.em.getConnection().execute('select 1');
        } catch (error) {
          return failing(`unreachable: ${reasonOf(error)}`, 'start PostgreSQL or fix DATABASE_URL');
        }
        const pending = await orm.getMigrator().getPendingMigrations();
        if (pending.length > 0) return warn(`reachable; ${pending.length} migrations not applied`, 'run npm run cli -- migrate');
        return ok('reachable, every migration applied');
      },
    },
    {
      name: 'temporal',
      environment: null,
      run: async () => {
        const { connection } = createTemporalClient(config);
        try {
          // The connection's own deadline, so its retries stop when the check gives up.
          await connection.withDeadline(Date.now() + timeoutMs, () => connection.workflowService.describeNamespace({ namespace: config.TEMPORAL_NAMESPACE }));
          return ok(`reachable at ${config.TEMPORAL_ADDRESS}, namespace ${config.TEMPORAL_NAMESPACE}`);
        } catch (error) {
          const message = reasonOf(error);
          if (/not ?found/i.test(message)) return misconfigured(`namespace ${config.TEMPORAL_NAMESPACE} does not exist`, 'create it, or fix TEMPORAL_NAMESPACE');
          return failing(`unreachable at ${config.TEMPORAL_ADDRESS}: ${message}`, 'start Temporal or fix TEMPORAL_ADDRESS (and its TLS or API key)');
        } finally {
          await connection.close().catch(() => undefined);
        }
      },
    },
  ];
}
