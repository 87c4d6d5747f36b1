import type { DestinationResolver } from '../events/destinations';
import { signingSecretsAt } from '../events/secrets';
import { keyProviderFor } from '../keys/provider';
import { Card } from './entities';

/** A card's webhook_url as an event destination: signed with the card's own secret at the creating key's version. */
export const cardDestinationResolver: DestinationResolver = {
  async resolve(em, config, organizationId, id) {
    const card = await em.findOne(Card, { id, organization: organizationId });
    if (!card?.webhookUrl) return null;
    return {
      url: card.webhookUrl,
      secrets: await signingSecretsAt(keyProviderFor(config), organizationId, card.webhookSecrets),
      apiVersion: card.apiVersion,
      policy: { environment: card.environment, allowInsecureLoopback: config.WEBHOOK_ALLOW_INSECURE_LOOPBACK },
      inactiveReason: null,
    };
  },
  async markGone(em, id) {
    // 410 from a card's webhook_url: stop sending lifecycle events there; the card itself is unaffected.
    await em.nativeUpdate(Card, { id }, { webhookUrl: null });
  },
};
