import type { EntityManager } from '@mikro-orm/postgresql';
import type { Config } from '../config';
import type { DestinationKind } from './entities';
import { Subscription, WebhookEndpoint } from './entities';
import { keyProviderFor } from '../keys/provider';
import { signingSecretsAt } from './secrets';
import { failHeldDeliveries } from './service';
import type { UrlPolicy } from './url-policy';

/** Where an event goes besides the organization's matching endpoints. */
export type Destination = { kind: 'webhook' | 'subscription'; id: string } | { kind: 'card'; id: string; url: string };

/** A destination as it is at attempt time. */
export interface ResolvedDestination {
  url: string;
  secrets: string[];
  apiVersion: string;
  policy: UrlPolicy;
  /** Why nothing more may be sent (disabled, deleted...); null when it accepts deliveries. */
  inactiveReason: string | null;
}

/**
 * What the delivery machinery needs from each kind of destination. The events domain provides
 * `webhook` and `subscription`; the cards domain provides `card` (its webhook_url and secret).
 * The activities receive one per kind where they are wired (activities/index.ts).
 */
export interface DestinationResolver {
  resolve(em: EntityManager, config: Config, organizationId: string, id: string): Promise<ResolvedDestination | null>;
  /** The destination answered 410 Gone: stop sending to it. */
  markGone(em: EntityManager, id: string, reason: string): Promise<void>;
}

export type DestinationResolvers = Record<DestinationKind, DestinationResolver>;

const policyOf = (config: Config, environment: UrlPolicy['environment']): UrlPolicy => ({
  environment,
  allowInsecureLoopback: config.WEBHOOK_ALLOW_INSECURE_LOOPBACK,
});

export const webhookDestinationResolver: DestinationResolver = {
  async resolve(em, config, organizationId, id) {
    const endpoint = await em.findOne(WebhookEndpoint, { id, organization: organizationId });
    if (!endpoint) return null;
    return {
      url: endpoint.url,
      secrets: await signingSecretsAt(keyProviderFor(config), organizationId, endpoint.secrets),
      apiVersion: endpoint.apiVersion,
      policy: policyOf(config, endpoint.environment),
      inactiveReason: endpoint.deletedAt ? 'webhook endpoint deleted' : endpoint.status === 'disabled' ? 'webhook endpoint disabled' : null,
    };
  },
  async markGone(em, id, reason) {
    await em.nativeUpdate(WebhookEndpoint, { id }, { status: 'disabled', disabledReason: reason, updatedAt: new Date() });
    await failHeldDeliveries(em, id, 'webhook endpoint disabled (410 Gone)');
  },
};

export const subscriptionDestinationResolver: DestinationResolver = {
  async resolve(em, config, organizationId, id) {
    const subscription = await em.findOne(Subscription, { id, organization: organizationId });
    if (!subscription) return null;
    return {
      url: subscription.webhookUrl,
      secrets: await signingSecretsAt(keyProviderFor(config), organizationId, subscription.secrets),
      apiVersion: subscription.apiVersion,
      policy: policyOf(config, subscription.environment),
      inactiveReason: subscription.deletedAt ? 'subscription deleted' : subscription.status !== 'active' ? `subscription ${subscription.status}` : null,
    };
  },
  async markGone(em, id, reason) {
    await em.nativeUpdate(Subscription, { id }, { status: 'failed', failureReason: reason, updatedAt: new Date() });
  },
};
