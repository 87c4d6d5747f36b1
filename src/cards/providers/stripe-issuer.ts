import { readFileSync } from 'node:fs';
import Stripe from 'stripe';
import type { Config } from '../../config';
import { alpha2Of } from '../countries';
import type { SpendLimitWindow } from '../entities';
import { IssuerDeclined, IssuerKeyRefused, maskPan, type Cardholder, type IssuerCardControls, type IssuerProvider, type MintedCard, type MintRequest } from '../issuer';

/**
 * The live card issuer's connection: the SDK client on the secret key, the signing secrets of the
 * two endpoints Stripe calls (each configured apart at Stripe, each with its own secret), and the
 * mode every event must be of (`livemode`).
 */
export interface StripeIssuing {
  client: Stripe;
  /** The real-time authorization endpoint's secret (Issuing settings): `issuing_authorization.request` only. */
  authorizationSecret: string;
  /** The event endpoint's secret (an event destination): what Stripe did after the decision. */
  eventSecret: string;
  livemode: boolean;
}

/** A secret from its variable, or from the file its `_FILE` variable names (without the trailing newline). */
export function secretSetting(name: string, value: string | undefined, file: string | undefined): string | undefined {
  if (value !== undefined || file === undefined) return value;
  try {
    return readFileSync(file, 'utf8').trim();
  } catch (error) {
    // The path and the reason only: never the contents.
    throw new Error(`${name}_FILE (${file}) cannot be read: ${(error as NodeJS.ErrnoException).code ?? 'unknown error'}`);
  }
}

/** A secret (`sk_`) or restricted (`rk_`) key of the mode: Stripe's prefixes say which. */
const KEY_OF_MODE = { live: /^(sk|rk)_live_/, test: /^(sk|rk)_test_/ } as const;

const configured = new WeakMap<Config, StripeIssuing | null>();

/**
 * Stripe Issuing as configured (the key and both secrets set, directly or by file), or null: live
 * cards are then refused (503 card_issuer_unavailable). One client per configuration; the files are
 * read once. A key of the other mode than STRIPE_ISSUING_MODE (a test key for live money) is refused
 * with an error naming the variables, never the key: the process does not start with it.
 */
export function stripeIssuingFor(config: Config): StripeIssuing | null {
  if (configured.has(config)) return configured.get(config)!;
  const secretKey = secretSetting('STRIPE_ISSUING_SECRET_KEY', config.STRIPE_ISSUING_SECRET_KEY, config.STRIPE_ISSUING_SECRET_KEY_FILE);
  const authorizationSecret = secretSetting('STRIPE_ISSUING_AUTHORIZATION_SECRET', config.STRIPE_ISSUING_AUTHORIZATION_SECRET, config.STRIPE_ISSUING_AUTHORIZATION_SECRET_FILE);
  const eventSecret = secretSetting('STRIPE_ISSUING_WEBHOOK_SECRET', config.STRIPE_ISSUING_WEBHOOK_SECRET, config.STRIPE_ISSUING_WEBHOOK_SECRET_FILE);
  if (secretKey && !KEY_OF_MODE[config.STRIPE_ISSUING_MODE].test(secretKey)) {
    throw new Error(`STRIPE_ISSUING_SECRET_KEY is not a ${config.STRIPE_ISSUING_MODE}-mode key (sk_${config.STRIPE_ISSUING_MODE}_ or rk_${config.STRIPE_ISSUING_MODE}_) as STRIPE_ISSUING_MODE=${config.STRIPE_ISSUING_MODE} requires`);
  }
  const issuing =
    secretKey && authorizationSecret && eventSecret
      ? {
          client: new Stripe(secretKey, {
            ...(config.STRIPE_API_HOST ? { host: config.STRIPE_API_HOST } : {}),
            ...(config.STRIPE_API_PORT ? { port: config.STRIPE_API_PORT } : {}),
            ...(config.STRIPE_API_PROTOCOL ? { protocol: config.STRIPE_API_PROTOCOL } : {}),
            // Retries carry the SDK's idempotency key, so a retried create mints nothing twice.
            maxNetworkRetries: 2,
            timeout: 20_000,
            appInfo: { name: 'custody-platform' },
          }),
          authorizationSecret,
          eventSecret,
          livemode: config.STRIPE_ISSUING_MODE === 'live',
        }
      : null;
  configured.set(config, issuing);
  return issuing;
}

type StripeSpendingLimit = Stripe.Issuing.CardCreateParams.SpendingControls.SpendingLimit;
type StripeInterval = StripeSpendingLimit['interval'];

/** Stripe's intervals for our limit windows; all_time is carried with the balance (stripeSpendingLimits). */
const STRIPE_INTERVALS: Partial<Record<SpendLimitWindow, StripeInterval>> = {
  transaction: 'per_authorization',
  daily: 'daily',
  weekly: 'weekly',
  monthly: 'monthly',
  yearly: 'yearly',
};

/** Stripe takes amounts as JSON numbers: integer cents, exact up to 2^53 (a cap beyond that is no cap). */
const stripeAmount = (cents: bigint): number => Number(cents > BigInt(Number.MAX_SAFE_INTEGER) ? BigInt(Number.MAX_SAFE_INTEGER) : cents < 0n ? 0n : cents);

/**
 * The card's spending controls as Stripe enforces them before it asks us: our windows as they are,
 * and all_time as what the card has spent plus what it may still spend (its balance less holds),
 * within its own all_time limit. A purchase moves both terms by the same amount, so the cap changes
 * only when the balance is funded or withdrawn from, or the limits change: the moments we sync.
 */
export function stripeSpendingLimits(controls: IssuerCardControls): StripeSpendingLimit[] {
  const limits: StripeSpendingLimit[] = [];
  for (const [window, interval] of Object.entries(STRIPE_INTERVALS) as [SpendLimitWindow, StripeInterval][]) {
    const limit = controls.spendingLimits[window];
    if (limit !== undefined) limits.push({ amount: stripeAmount(BigInt(limit)), interval });
  }
  const reachable = controls.spentAllTime + controls.spendable;
  const allTime = controls.spendingLimits.all_time !== undefined && BigInt(controls.spendingLimits.all_time) < reachable ? BigInt(controls.spendingLimits.all_time) : reachable;
  limits.push({ amount: stripeAmount(allTime), interval: 'all_time' });
  return limits;
}

/** Our card status as Stripe's: a frozen card is inactive (reversible), a terminated one canceled (final). */
const stripeStatus = (status: IssuerCardControls['status']): NonNullable<Stripe.Issuing.CardUpdateParams['status']> | null =>
  status === 'active' ? 'active' : status === 'frozen' ? 'inactive' : status === 'terminated' ? 'canceled' : null;

/** Celtic's Authorized User Terms as the customer accepted them (https://docs.stripe.com/issuing/cards#accept-authorized-user-terms), when given. */
const userTermsOf = ({ termsAcceptance }: Cardholder): Pick<Stripe.Issuing.CardholderCreateParams.Individual, 'card_issuing'> =>
  termsAcceptance
    ? {
        card_issuing: {
          user_terms_acceptance: {
            date: Math.floor(Date.parse(termsAcceptance.accepted_at) / 1000),
            ip: termsAcceptance.ip,
            ...(termsAcceptance.user_agent ? { user_agent: termsAcceptance.user_agent } : {}),
          },
        },
      }
    : {};

/** Stripe's refusal of our key for a call (see refusalOf), or null for any other error. */
export function keyRefusalOf(error: unknown, operation: string): IssuerKeyRefused | null {
  if (error instanceof Stripe.errors.StripePermissionError) {
    const permission = /'(rak_[a-z0-9_]+)'/.exec(error.message)?.[1] ?? 'unnamed';
    return new IssuerKeyRefused(`Stripe refused the key for the ${operation}: it lacks the permission ${permission}`, permission, operation);
  }
  if (error instanceof Stripe.errors.StripeAuthenticationError) {
    return new IssuerKeyRefused(`Stripe refused the key for the ${operation}: not a key Stripe takes (401)`, 'authentication', operation);
  }
  return null;
}

/**
 * A call Stripe refused as such, final, so a refusal and not a retry: the request itself (4xx other than conflict and
 * rate limit), or our key for it (a restricted key without the permission, 403, whose message names it as
 * `rak_...`; a key Stripe does not take, 401). Stripe's message is kept only for the request's refusal: for the
 * key's it quotes the key.
 */
function refusalOf(error: unknown, operation: string): IssuerDeclined | null {
  const keyRefusal = keyRefusalOf(error, operation);
  if (keyRefusal) return keyRefusal;
  if (error instanceof Stripe.errors.StripeInvalidRequestError || error instanceof Stripe.errors.StripeCardError) {
    return new IssuerDeclined(`Stripe refused the ${operation}: ${error.message}`);
  }
  return null;
}

/**
 * Stripe Issuing (https://docs.stripe.com/issuing): cardholders from our card customers, virtual
 * cards, their status and spending controls. Money does not move per card at Stripe: purchases
 * draw on the platform's Issuing balance (funded outside this service), each approved or declined
 * by our own decision through the real-time authorization webhook (src/cards/stripe-authorizations.ts).
 */
export class StripeIssuer implements IssuerProvider {
  readonly name = 'stripe';

  constructor(private readonly stripe: Stripe) {}

  async mintCard(request: MintRequest): Promise<MintedCard> {
    if (request.cardType !== 'virtual') throw new IssuerDeclined('Only virtual cards are issued through Stripe Issuing.');
    try {
      const cardholderId = request.cardholder.issuerCardholderId ?? (await this.createCardholder(request));
      // A cardholder made before the customer's acceptance was given (or kept) gets it with the next card: Stripe takes the
      // same acceptance again unchanged, and a Celtic-backed program issues no card to a cardholder without it.
      if (request.cardholder.issuerCardholderId && request.cardholder.termsAcceptance) {
        await this.stripe.issuing.cardholders.update(request.cardholder.issuerCardholderId, { individual: userTermsOf(request.cardholder) });
      }
      // Keyed by our card id: a repeated activity gets the card Stripe made the first time. The parameters
      // never change between attempts (Stripe refuses a key reused with others): nothing to spend yet;
      // the limits and balance follow with syncCard once the card is ours.
      const card = await this.stripe.issuing.cards.create(
        {
          cardholder: cardholderId,
          currency: 'usd',
          type: 'virtual',
          status: 'active',
          spending_controls: { spending_limits: [{ amount: 0, interval: 'all_time' }] },
          metadata: { card_id: request.cardId, organization_id: request.organizationId },
        },
        { idempotencyKey: `custody-card-${request.cardId}` },
      );
      // Number and CVC only come expanded, and only to accounts Stripe lets read them.
      const details = await this.stripe.issuing.cards.retrieve(card.id, { expand: ['number', 'cvc'] });
      const expiry = `${String(details.exp_month).padStart(2, '0')}/${String(details.exp_year % 100).padStart(2, '0')}`;
      const secrets = details.number && details.cvc ? { pan: details.number, cvv: details.cvc, expiry } : null;
      return {
        brand: card.brand.toLowerCase(),
        lastFour: card.last4,
        maskedPan: secrets ? maskPan(secrets.pan) : `${'*'.repeat(12)}${card.last4}`,
        secrets,
        issuerCardId: card.id,
        issuerCardholderId: cardholderId,
      };
    } catch (error) {
      throw refusalOf(error, 'card') ?? error;
    }
  }

  /** Nothing to move: a Stripe card holds no money; its balance reaches Stripe as its spending controls (syncCard). */
  async settle(): Promise<void> {}

  async syncCard(issuerCardId: string, controls: IssuerCardControls): Promise<void> {
    const status = stripeStatus(controls.status);
    if (!status) return;
    try {
      if (status === 'canceled') {
        // Final at Stripe: a canceled card takes no further update, so a repeat stops at the first answer.
        const card = await this.stripe.issuing.cards.retrieve(issuerCardId);
        if (card.status !== 'canceled') await this.stripe.issuing.cards.update(issuerCardId, { status });
        return;
      }
      await this.stripe.issuing.cards.update(issuerCardId, { status, spending_controls: { spending_limits: stripeSpendingLimits(controls) } });
    } catch (error) {
      // Asked again, Stripe would refuse again (a card it canceled itself, one it does not know, a key without the permission): a refusal ends the sync.
      throw refusalOf(error, "card's update") ?? error;
    }
  }

  private async createCardholder(request: MintRequest): Promise<string> {
    const { cardholder } = request;
    const [year, month, day] = cardholder.dateOfBirth.split('-').map(Number) as [number, number, number];
    const created = await this.stripe.issuing.cardholders.create(
      {
        type: 'individual',
        name: `${cardholder.firstName} ${cardholder.lastName}`,
        email: cardholder.email,
        phone_number: cardholder.phoneNumber,
        individual: { first_name: cardholder.firstName, last_name: cardholder.lastName, dob: { day, month, year }, ...userTermsOf(cardholder) },
        billing: {
          address: {
            line1: cardholder.address.line1,
            ...(cardholder.address.line2 ? { line2: cardholder.address.line2 } : {}),
            city: cardholder.address.city,
            state: cardholder.address.state,
            postal_code: cardholder.address.postal_code,
            country: alpha2Of(cardholder.address.country),
          },
        },
        metadata: { customer_id: cardholder.customerId, organization_id: request.organizationId },
      },
      // Keyed by our customer: concurrent first cards of one customer share one cardholder.
      { idempotencyKey: `custody-cardholder-${cardholder.customerId}` },
    );
    return created.id;
  }
}
