import Stripe from 'stripe';
import { secretSetting, stripeIssuingFor, type StripeIssuing } from '../../cards/providers/stripe-issuer';
import type { Config } from '../../config';
import { failing, misconfigured, ok, reasonOf, type Check, type CheckOutcome, type DoctorContext } from './check';

/** A Stripe signing secret as Stripe shows it (`whsec_` and its base64 body); the value itself is never printed. */
const SIGNING_SECRET = /^whsec_[A-Za-z0-9+/=_-]{24,}$/;

const SECRETS = ['STRIPE_ISSUING_AUTHORIZATION_SECRET', 'STRIPE_ISSUING_WEBHOOK_SECRET'] as const;
const given = (config: Config, name: 'STRIPE_ISSUING_SECRET_KEY' | (typeof SECRETS)[number]) => config[name] !== undefined || config[`${name}_FILE`] !== undefined;

/** The key's line: of STRIPE_ISSUING_MODE's mode (stripeIssuingFor's own refusal), answered by Stripe in that mode, allowed to read what the reconciliation reads. */
async function keyOutcome(config: Config): Promise<CheckOutcome> {
  if (!given(config, 'STRIPE_ISSUING_SECRET_KEY')) return misconfigured('STRIPE_ISSUING_SECRET_KEY not set: live cards answer 503 card_issuer_unavailable', 'set STRIPE_ISSUING_SECRET_KEY (or _FILE; docs/cards.md)');
  let issuing: StripeIssuing | null;
  try {
    issuing = stripeIssuingFor(config);
  } catch (error) {
    return misconfigured(reasonOf(error), 'set a key of STRIPE_ISSUING_MODE\'s mode (docs/cards.md); the service does not start with this one');
  }
  if (!issuing) return misconfigured('not asked: without both webhook secrets live cards answer 503 card_issuer_unavailable', 'see the webhook secrets\' line');
  try {
    const balance = await issuing.client.balance.retrieve();
    if (balance.livemode !== issuing.livemode) {
      return misconfigured(`Stripe answers in ${balance.livemode ? 'live' : 'test'} mode; STRIPE_ISSUING_MODE=${config.STRIPE_ISSUING_MODE}`, 'use a key of STRIPE_ISSUING_MODE\'s mode');
    }
    await issuing.client.issuing.authorizations.list({ limit: 1 });
    return ok(`${config.STRIPE_ISSUING_MODE}-mode key; Stripe answers in ${config.STRIPE_ISSUING_MODE} mode; reads the balance and Issuing authorizations`);
  } catch (error) {
    if (error instanceof Stripe.errors.StripeAuthenticationError) return misconfigured(`Stripe refused the key: ${error.message}`, 'set a valid key');
    if (error instanceof Stripe.errors.StripePermissionError) {
      return misconfigured(`the key may not read what the service reads: ${error.message}`, 'give the restricted key read on the balance and Issuing, and write on Issuing cards and cardholders');
    }
    return failing(`Stripe did not answer: ${reasonOf(error)}`, 'check the network to Stripe (STRIPE_API_HOST when set)');
  }
}

/** The secrets' line: each endpoint's signing secret present, of Stripe's shape, and not one for both. Only lengths and prefixes are printed. */
function secretsOutcome(config: Config): CheckOutcome {
  const secrets: string[] = [];
  const wrong: string[] = [];
  for (const name of SECRETS) {
    let secret: string | undefined;
    try {
      secret = secretSetting(name, config[name], config[`${name}_FILE`]);
    } catch (error) {
      wrong.push(reasonOf(error));
      continue;
    }
    if (secret === undefined) wrong.push(`${name} not set`);
    else if (!SIGNING_SECRET.test(secret)) wrong.push(`${name} is not a Stripe signing secret (${secret.length} characters${secret.startsWith('whsec_') ? '' : ', no whsec_ prefix'})`);
    else secrets.push(secret);
  }
  if (wrong.length > 0) {
    return misconfigured(`${wrong.join('; ')}: live cards answer 503 card_issuer_unavailable, or Stripe's calls are refused`, 'copy each endpoint\'s signing secret (whsec_...) from Stripe: the Issuing settings\' authorization endpoint, and the event destination');
  }
  if (secrets[0] === secrets[1]) {
    return misconfigured('the authorization endpoint and the event endpoint have the same secret: Stripe gives each its own, so one of them refuses every call', 'set each endpoint\'s own secret (docs/cards.md)');
  }
  return ok('both present, of Stripe\'s shape (whsec_...), one per endpoint');
}

/** Stripe Issuing, the live card issuer, when any of its variables is set: its key and its two endpoints' secrets. */
export function cardChecks({ config }: DoctorContext): Check[] {
  if (!given(config, 'STRIPE_ISSUING_SECRET_KEY') && !SECRETS.some((name) => given(config, name))) return [];
  return [
    { name: 'stripe issuing key', environment: 'live', run: () => keyOutcome(config) },
    { name: 'stripe issuing webhook secrets', environment: 'live', run: async () => secretsOutcome(config) },
  ];
}
