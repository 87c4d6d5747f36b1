/**
 * The routes of webhook endpoints and subscriptions, the signed destinations an organization owns:
 * one CRUD (create, list, retrieve, update, delete, rotate-secret) serves both, and each kind says
 * how it is named, created, updated and presented. routes.ts registers them among the events routes.
 */
import type { EntityManager, FilterQuery } from '@mikro-orm/postgresql';
import type { ZodType } from 'zod';
import type { Environment } from '../api-keys/entities';
import { findChain, networkFor, type ChainId } from '../catalogue/service';
import { canonicalAddress } from '../chains/addresses';
import type { Config } from '../config';
import { errors } from '../shared/errors';
import { assertBelowLimit } from '../shared/limits';
import type { AuthContext } from '../http/context';
import type { RouteRegistry } from '../http/route';
import { Organization } from '../organizations/entities';
import { ListQuery, listBody, paginate } from '../shared/pagination';
import { listEnvelopeSchema, type z } from '../shared/schemas';
import { type SigningSecrets, Subscription, WebhookEndpoint } from './entities';
import {
  CreateSubscriptionBody,
  CreateWebhookBody,
  DeletedObject,
  IdParams,
  SigningSecretObject,
  SubscriptionObject,
  UpdateSubscriptionBody,
  UpdateWebhookBody,
  WebhookObject,
} from './schemas';
import { newSigningSecrets, rotateSigningSecrets } from './secrets';
import {
  failHeldDeliveries,
  findSubscription,
  findWebhook,
  presentSubscription,
  presentWebhook,
  releaseHeldDeliveries,
  type Scope,
  validatedUrl,
} from './service';
import { checkDestinationUrl } from './url-policy';
import { withArticle } from '../shared/articles';

/**
 * Webhook endpoints and subscriptions are the same resource to the API: a URL the organization
 * owns, signed with a secret shown once, soft-deleted. One CRUD serves both; each kind says how
 * it is named, created, updated and presented.
 */
interface SignedDestinationKind<E extends WebhookEndpoint | Subscription, C extends ZodType, U extends ZodType> {
  tag: string;
  path: string;
  /** Operation id suffix: createWebhook, listWebhooks... */
  operationName: string;
  object: 'webhook' | 'subscription';
  /** In summaries: 'webhook endpoint'. */
  title: string;
  /** In response descriptions: 'endpoint', 'endpoints'. */
  noun: string;
  nouns: string;
  createSummary: string;
  /** How many an environment may hold (docs/limits.md): the configuration variable, and the resource as limit_reached names it. */
  limit: { setting: 'MAX_WEBHOOK_ENDPOINTS' | 'MAX_SUBSCRIPTIONS'; resource: 'webhook_endpoints' | 'subscriptions' };
  /** The URL field: its name (the param of validation errors), where create and update bodies carry it, where the entity keeps it. */
  url: {
    param: 'url' | 'webhook_url';
    created: (body: z.infer<C>) => string;
    updated: (body: z.infer<U>) => string | undefined;
    set: (entity: E, url: string) => void;
  };
  schema: ZodType;
  createBody: C;
  updateBody: U;
  entity: new (...args: never[]) => E;
  find: (em: EntityManager, scope: Scope, id: string) => Promise<E>;
  present: (entity: E, signingSecret?: string) => unknown;
  create: (em: EntityManager, auth: AuthContext, body: z.infer<C>, url: string, secrets: SigningSecrets) => E;
  /** Applies the changes besides the URL, which is validated and set already (in the request's transaction). */
  update: (em: EntityManager, entity: E, body: z.infer<U>) => Promise<void>;
  /** What else ends with a deleted one (in the request's transaction). */
  deleted?: (em: EntityManager, entity: E) => Promise<void>;
  rotated: { description: string; schema: ZodType; body: (entity: E, signingSecret: string) => unknown };
}

const urlPolicy = (config: Config, environment: Environment) => ({ environment, allowInsecureLoopback: config.WEBHOOK_ALLOW_INSECURE_LOOPBACK });

export const webhookRoutes: SignedDestinationKind<WebhookEndpoint, typeof CreateWebhookBody, typeof UpdateWebhookBody> = {
  tag: 'Webhooks',
  path: '/v1/webhooks',
  operationName: 'Webhook',
  object: 'webhook',
  title: 'webhook endpoint',
  noun: 'endpoint',
  nouns: 'endpoints',
  createSummary: 'Create a webhook endpoint (the signing secret is shown once)',
  limit: { setting: 'MAX_WEBHOOK_ENDPOINTS', resource: 'webhook_endpoints' },
  url: {
    param: 'url',
    created: (body) => body.url,
    updated: (body) => body.url,
    set: (endpoint, url) => {
      endpoint.url = url;
    },
  },
  schema: WebhookObject,
  createBody: CreateWebhookBody,
  updateBody: UpdateWebhookBody,
  entity: WebhookEndpoint,
  find: findWebhook,
  present: presentWebhook,
  create: (em, auth, body, url, secrets) =>
    em.create(WebhookEndpoint, {
      organization: em.getReference(Organization, auth.organizationId),
      environment: auth.environment,
      name: body.name,
      url,
      eventTypes: [...new Set(body.event_types)],
      apiVersion: auth.apiVersion,
      maxAttempts: body.max_attempts ?? null,
      secrets,
    }),
  update: async (em, endpoint, body) => {
    if (body.name !== undefined) endpoint.name = body.name;
    if (body.event_types !== undefined) endpoint.eventTypes = [...new Set(body.event_types)];
    if (body.max_attempts !== undefined) endpoint.maxAttempts = body.max_attempts;
    if (body.status !== undefined) {
      endpoint.status = body.status;
      endpoint.disabledReason = null;
      // Re-enabled or disabled by hand: the failure streak and its circuit start afresh.
      endpoint.consecutiveFailures = 0;
      endpoint.failingSince = null;
      endpoint.probeDeliveryId = null;
      // So its circuit is closed: what it held starts now, or ends with the endpoint. Written first: the
      // endpoint's row lock orders this after any emit holding a delivery (events/service.ts), so none is missed.
      await em.flush();
      if (body.status === 'enabled') await releaseHeldDeliveries(em, endpoint.id);
      else await failHeldDeliveries(em, endpoint.id, 'webhook endpoint disabled');
    }
  },
  deleted: async (em, endpoint) => {
    await failHeldDeliveries(em, endpoint.id, 'webhook endpoint deleted');
  },
  rotated: {
    description: 'The new secret, shown only here',
    schema: SigningSecretObject,
    body: (endpoint, signingSecret) => ({
      object: 'signing_secret',
      signing_secret: signingSecret,
      previous_secret_expires_at: endpoint.secrets.previousExpiresAt?.toISOString() ?? null,
    }),
  },
};

export const subscriptionRoutes: SignedDestinationKind<Subscription, typeof CreateSubscriptionBody, typeof UpdateSubscriptionBody> = {
  tag: 'Subscriptions',
  path: '/v1/subscriptions',
  operationName: 'Subscription',
  object: 'subscription',
  title: 'subscription',
  noun: 'subscription',
  nouns: 'subscriptions',
  createSummary: 'Watch an on-chain address (the signing secret is shown once)',
  limit: { setting: 'MAX_SUBSCRIPTIONS', resource: 'subscriptions' },
  url: {
    param: 'webhook_url',
    created: (body) => body.webhook_url,
    updated: (body) => body.webhook_url,
    set: (subscription, url) => {
      subscription.webhookUrl = url;
    },
  },
  schema: SubscriptionObject,
  createBody: CreateSubscriptionBody,
  updateBody: UpdateSubscriptionBody,
  entity: Subscription,
  find: findSubscription,
  present: presentSubscription,
  create: (em, auth, body, url, secrets) =>
    em.create(Subscription, {
      organization: em.getReference(Organization, auth.organizationId),
      environment: auth.environment,
      address: watchedAddress(body.chain, auth.environment, body.address),
      chain: body.chain,
      // The environment decides the network; a contradicting request value is ignored (deprecated field).
      network: networkFor(findChain(body.chain), auth.environment),
      webhookUrl: url,
      eventType: body.event_type,
      label: body.label ?? null,
      metadata: body.metadata,
      apiVersion: auth.apiVersion,
      maxAttempts: body.max_attempts ?? null,
      secrets,
    }),
  update: async (_em, subscription, body) => {
    if (body.event_type !== undefined) subscription.eventType = body.event_type;
    if (body.label !== undefined) subscription.label = body.label;
    if (body.metadata !== undefined) subscription.metadata = body.metadata;
    if (body.max_attempts !== undefined) subscription.maxAttempts = body.max_attempts;
    if (body.status !== undefined) {
      subscription.status = body.status;
      subscription.failureReason = null;
    }
  },
  rotated: {
    description: 'The subscription with its new secret, shown only here',
    schema: SubscriptionObject,
    body: (subscription, signingSecret) => presentSubscription(subscription, signingSecret),
  },
};

export function registerSignedDestinationRoutes<E extends WebhookEndpoint | Subscription, C extends ZodType, U extends ZodType>(
  routes: RouteRegistry,
  kind: SignedDestinationKind<E, C, U>,
): void {
  const { tag, path, title } = kind;
  const checkedUrl = (config: Config, environment: Environment, url: string) =>
    validatedUrl(kind.url.param, () => checkDestinationUrl(url, urlPolicy(config, environment)));

  routes.add({
    method: 'post',
    path,
    operationId: `create${kind.operationName}`,
    summary: kind.createSummary,
    description: `An environment holds at most ${kind.limit.setting} ${kind.nouns} (deleted ones do not count): one more is 409 \`limit_reached\` (details limit, current). See docs/limits.md.`,
    tag,
    scope: 'webhooks:write',
    body: kind.createBody,
    response: { status: 201, description: `The new ${kind.noun} with its signing secret`, schema: kind.schema },
    handler: async ({ auth, em, body, deps }) => {
      const url = await checkedUrl(deps.config, auth.environment, kind.url.created(body));
      const { secrets, plaintext } = await newSigningSecrets(deps.keys.provider, auth.organizationId);
      await assertBelowLimit(em, {
        resource: kind.limit.resource,
        owner: `${auth.organizationId}:${auth.environment}`,
        holder: 'environment',
        limit: deps.config[kind.limit.setting],
        setting: kind.limit.setting,
        remedy: 'delete one',
        count: (tx) => tx.count(kind.entity, { organization: auth.organizationId, environment: auth.environment, deletedAt: null } as FilterQuery<E>),
      });
      const entity = kind.create(em, auth, body, url, secrets);
      await em.flush();
      return { status: 201, body: kind.present(entity, plaintext) };
    },
  });

  routes.add({
    method: 'get',
    path,
    operationId: `list${kind.operationName}s`,
    summary: `List ${title}s`,
    tag,
    scope: 'webhooks:read',
    query: ListQuery,
    response: { status: 200, description: `A page of ${kind.nouns}, newest first`, schema: listEnvelopeSchema(kind.schema) },
    handler: async ({ auth, em, query }) => {
      const page = await paginate(em, kind.entity, { organization: auth.organizationId, environment: auth.environment, deletedAt: null } as FilterQuery<E>, query);
      return { body: listBody(page, (entity) => kind.present(entity)) };
    },
  });

  routes.add({
    method: 'get',
    path: `${path}/:id`,
    operationId: `get${kind.operationName}`,
    summary: `Retrieve a ${title}`,
    tag,
    scope: 'webhooks:read',
    params: IdParams,
    response: { status: 200, description: `The ${kind.noun}`, schema: kind.schema },
    handler: async ({ auth, em, params }) => ({ body: kind.present(await kind.find(em, auth, params.id)) }),
  });

  routes.add({
    method: 'patch',
    path: `${path}/:id`,
    operationId: `update${kind.operationName}`,
    summary: `Update a ${title}; omitted fields are unchanged`,
    tag,
    scope: 'webhooks:write',
    params: IdParams,
    body: kind.updateBody,
    response: { status: 200, description: `The updated ${kind.noun}`, schema: kind.schema },
    handler: async ({ auth, em, params, body, deps }) => {
      const entity = await kind.find(em, auth, params.id);
      const url = kind.url.updated(body);
      if (url !== undefined) kind.url.set(entity, await checkedUrl(deps.config, entity.environment, url));
      await kind.update(em, entity, body);
      entity.updatedAt = new Date();
      await em.flush();
      return { body: kind.present(entity) };
    },
  });

  routes.add({
    method: 'delete',
    path: `${path}/:id`,
    operationId: `delete${kind.operationName}`,
    summary: `Delete a ${title}; its pending deliveries stop`,
    tag,
    scope: 'webhooks:write',
    params: IdParams,
    response: { status: 200, description: `The deleted ${kind.noun}`, schema: DeletedObject },
    handler: async ({ auth, em, params }) => {
      const entity = await kind.find(em, auth, params.id);
      entity.deletedAt = new Date();
      await em.flush();
      await kind.deleted?.(em, entity);
      return { body: { id: entity.id, object: kind.object, deleted: true } };
    },
  });

  routes.add({
    method: 'post',
    path: `${path}/:id/rotate-secret`,
    operationId: `rotate${kind.operationName}Secret`,
    summary: 'Rotate the signing secret; the previous one keeps signing for the rotation window',
    tag,
    scope: 'webhooks:write',
    params: IdParams,
    response: { status: 200, description: kind.rotated.description, schema: kind.rotated.schema },
    handler: async ({ auth, em, params, deps }) => {
      const entity = await kind.find(em, auth, params.id);
      const plaintext = await rotateSigningSecrets(deps.keys.provider, auth.organizationId, entity.secrets, deps.config.WEBHOOK_SECRET_ROTATION_HOURS);
      entity.updatedAt = new Date();
      await em.flush();
      return { body: kind.rotated.body(entity, plaintext) };
    },
  });
}

/** The address in its canonical form on the environment's network (so scanning matches it), or a 400. */
function watchedAddress(chain: ChainId, environment: Environment, address: string): string {
  const canonical = canonicalAddress(chain, environment, address);
  if (!canonical) throw errors.validation(`address is not ${withArticle(chain)} address on ${networkFor(findChain(chain), environment)}.`, 'address');
  return canonical;
}
