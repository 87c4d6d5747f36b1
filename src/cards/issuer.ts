import { randomBytes, randomInt } from 'node:crypto';
import type { KeyProvider } from '../keys/provider';
import { aesGcmDecrypt, aesGcmEncrypt } from '../keys/aes-gcm';
import { jsonKeyColumn, type SealedColumn } from '../keys/rotation';
import type { BillingAddress, Card, CardStatus, SealedCardSecrets, SpendLimits, TermsAcceptance } from './entities';

export interface CardSecrets {
  pan: string;
  cvv: string;
  /** MM/YY */
  expiry: string;
}

export interface MintedCard {
  brand: string;
  lastFour: string;
  /** First six and last four digits, the rest starred. */
  maskedPan: string;
  /** PAN, CVV and expiry when the issuer hands them over (sealed at rest); null when it keeps them (Stripe without access to them). */
  secrets: CardSecrets | null;
  /** The issuer's own ids of the card and its cardholder, when it keeps a copy of the card. */
  issuerCardId: string | null;
  issuerCardholderId: string | null;
}

/** The cardholder a card is minted for: one of our card customers. */
export interface Cardholder {
  customerId: string;
  /** The issuer's cardholder made for this customer earlier, if any. */
  issuerCardholderId: string | null;
  firstName: string;
  lastName: string;
  email: string;
  /** E.164: dial code and local number. */
  phoneNumber: string;
  /** YYYY-MM-DD */
  dateOfBirth: string;
  address: BillingAddress;
  /** The customer's acceptance of the program's user terms, when given (a Celtic-backed program needs it). */
  termsAcceptance: TermsAcceptance | null;
}

/** What the issuer's copy of a card carries: our status and what our balance and spend limits allow (cents). */
export interface IssuerCardControls {
  status: CardStatus;
  spendingLimits: SpendLimits;
  /** The balance less what pending withdrawals hold. */
  spendable: bigint;
  /** Every approved purchase so far. */
  spentAllTime: bigint;
}

export interface MintRequest {
  cardId: string;
  organizationId: string;
  name: string;
  cardType: string;
  cardholder: Cardholder;
}

/** The card issuer (processor) the service provisions cards and moves card balances with. */
export interface IssuerProvider {
  readonly name: string;
  /**
   * Mints the card, active and with nothing to spend until `syncCard` gives it our status and controls;
   * throws IssuerDeclined when the issuer refuses it. Safe to repeat for one card id.
   */
  mintCard(request: MintRequest): Promise<MintedCard>;
  /** Moves money on the issuer side for a funding or withdrawal; throws IssuerDeclined when refused. */
  settle(request: { transactionId: string; type: 'funding' | 'withdrawal'; amount: bigint }): Promise<void>;
  /** Brings the issuer's copy of a card (`issuerCardId`) to our status and controls; absolute, so safe to repeat; throws IssuerDeclined when refused. */
  syncCard(issuerCardId: string, controls: IssuerCardControls): Promise<void>;
}

export const issuerControlsOf = (card: Pick<Card, 'status' | 'spendingLimits' | 'balance' | 'held' | 'spentAllTime'>): IssuerCardControls => ({
  status: card.status,
  spendingLimits: card.spendingLimits,
  spendable: BigInt(card.balance) - BigInt(card.held),
  spentAllTime: BigInt(card.spentAllTime),
});

export const maskPan = (pan: string) => `${pan.slice(0, 6)}${'*'.repeat(pan.length - 10)}${pan.slice(-4)}`;

/** A refusal by the issuer: final, so activities name it in nonRetryableErrorTypes. */
export class IssuerDeclined extends Error {
  override readonly name = 'IssuerDeclined';
}

/**
 * The issuer refused our key for a call (a restricted key without a permission; a key it does not take): final
 * until the operator grants the permission or changes the key, so ended like any refusal, and counted per
 * `permission` (src/cards/issuer-key-refusals.ts). Its message never quotes the issuer's (which quotes the key).
 */
export class IssuerKeyRefused extends IssuerDeclined {
  constructor(
    message: string,
    /** The issuer's name of the permission the key lacks (`rak_issuing_card_write`), or `authentication` for a key refused outright. */
    readonly permission: string,
    /** The call refused, in our words (`card creation`, `card update`). */
    readonly operation: string,
  ) {
    super(message);
  }
}

/** Sandbox magic values (documented in docs/cards.md) that make the sandbox issuer refuse. */
export const SANDBOX_DECLINED_CARD_NAME = 'issuer_decline';
export const SANDBOX_DECLINED_SETTLEMENT_AMOUNT = 13n;

/** The Luhn check digit that completes `partial` (all digits but the last). */
export function luhnCheckDigit(partial: string): number {
  let sum = 0;
  for (let index = 0; index < partial.length; index += 1) {
    let digit = Number(partial[partial.length - 1 - index]);
    if (index % 2 === 0) {
      digit *= 2;
      if (digit > 9) digit -= 9;
    }
    sum += digit;
  }
  return (10 - (sum % 10)) % 10;
}

export const isLuhnValid = (pan: string): boolean => /^\d{12,19}$/.test(pan) && luhnCheckDigit(pan.slice(0, -1)) === Number(pan.at(-1));

/** Mints 16-digit Luhn-valid numbers under the configured BIN, a random CVV and a 3-year expiry. */
export class SandboxIssuer implements IssuerProvider {
  readonly name = 'sandbox';

  constructor(private readonly bin: string) {}

  async mintCard(request: { name: string }): Promise<MintedCard> {
    if (request.name === SANDBOX_DECLINED_CARD_NAME) throw new IssuerDeclined('The issuer declined to provision the card.');
    let body = this.bin;
    while (body.length < 15) body += String(randomInt(10));
    const expires = new Date();
    expires.setUTCFullYear(expires.getUTCFullYear() + 3);
    const pan = body + String(luhnCheckDigit(body));
    return {
      brand: this.bin.startsWith('4') ? 'visa' : 'mastercard',
      lastFour: pan.slice(-4),
      maskedPan: maskPan(pan),
      secrets: {
        pan,
        cvv: String(randomInt(1000)).padStart(3, '0'),
        expiry: `${String(expires.getUTCMonth() + 1).padStart(2, '0')}/${String(expires.getUTCFullYear() % 100).padStart(2, '0')}`,
      },
      issuerCardId: null,
      issuerCardholderId: null,
    };
  }

  async settle(request: { amount: bigint }): Promise<void> {
    if (request.amount === SANDBOX_DECLINED_SETTLEMENT_AMOUNT) throw new IssuerDeclined('The issuer declined the balance movement.');
  }

  /** Never called: the sandbox issuer keeps no copy of a card (its cards have no issuerCardId). */
  async syncCard(): Promise<void> {}
}

const secretsContext = (cardId: string) => `custody-platform/card-secrets/v1/${cardId}`;

/** Where keys:rotate finds the cards' data keys. */
export const cardSecretsColumn: SealedColumn = jsonKeyColumn('cards', 'secrets', (row) => secretsContext(row.id));

/** Seals PAN, CVV and expiry under a fresh data key wrapped by the KeyProvider, bound to the card id. */
export async function sealCardSecrets(keys: KeyProvider, cardId: string, secrets: CardSecrets): Promise<SealedCardSecrets> {
  const dataKey = randomBytes(32);
  try {
    const wrapped = await keys.encryptDataKey(dataKey, secretsContext(cardId));
    const ciphertext = aesGcmEncrypt(dataKey, Buffer.from(JSON.stringify(secrets), 'utf8'), secretsContext(cardId));
    return { masterKeyId: wrapped.masterKeyId, wrappedDataKey: wrapped.ciphertext, ciphertext: ciphertext.toString('base64') };
  } finally {
    dataKey.fill(0);
  }
}

export async function openCardSecrets(keys: KeyProvider, cardId: string, sealed: SealedCardSecrets): Promise<CardSecrets> {
  const dataKey = await keys.decryptDataKey({ masterKeyId: sealed.masterKeyId, ciphertext: sealed.wrappedDataKey }, secretsContext(cardId));
  try {
    return JSON.parse(aesGcmDecrypt(dataKey, Buffer.from(sealed.ciphertext, 'base64'), secretsContext(cardId)).toString('utf8')) as CardSecrets;
  } finally {
    dataKey.fill(0);
  }
}
