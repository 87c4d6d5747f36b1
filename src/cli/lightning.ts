import type { EntityManager } from '@mikro-orm/postgresql';
import { loadConfig } from '../config';
import type { Orm } from '../db/orm';
import { committedClaims } from '../lightning/claims';
import { LightningInvoice } from '../lightning/entities';
import { heldPayments, resolveHeldPayment } from '../lightning/held';
import { configuredLightningNodes } from '../lightning/lnd';
import { LndProvider } from '../lightning/lnd-provider';
import { createLogger } from '../logger';
import { createTemporalClient } from '../temporal/client';
import { WorkflowStarter } from '../temporal/starter';
import { environmentOption, organization, required, text, UsageError, type Options } from './options';

/** The operator CLI's Lightning commands: payments held for an operator (docs/lightning.md, "Held payments"). */
export const lightningCommands: Record<string, (orm: Orm, options: Options) => Promise<unknown>> = {
  async 'lightning:held'(orm, options) {
    const em = orm.em.fork();
    const payments = await heldPayments(em, {
      ...(text(options, 'org') ? { organizationId: (await organization(em, required(options, 'org'))).id } : {}),
      ...(text(options, 'environment') ? { environment: environmentOption(options) } : {}),
    });
    return { count: payments.length, payments };
  },

  async 'lightning:resolve'(orm, options) {
    const paymentId = required(options, 'payment');
    const em = orm.em.fork();
    const payment = await em.findOne(LightningInvoice, { id: paymentId, direction: 'outgoing' });
    if (!payment) throw new UsageError(`no Lightning payment ${paymentId}`);
    const config = loadConfig();
    const node = configuredLightningNodes(config).lnd(payment.environment);
    if (!node) throw new UsageError(`no LND is configured for ${payment.environment}: only its node can say what became of the payment`);
    // The payment's events start their webhook deliveries once the resolution commits (else the start sweep does).
    const temporal = createTemporalClient(config);
    const starter = new WorkflowStarter(temporal.client, config, createLogger(config.LOG_LEVEL, 'cli'));
    try {
      return await resolveHeldPayment(em, new LndProvider(node, committedClaims(orm)), paymentId, <T>(work: (tx: EntityManager) => Promise<T>) => starter.transaction(orm.em.fork(), work));
    } finally {
      await temporal.connection.close();
    }
  },
};
