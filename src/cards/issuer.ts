import { randomBytes, randomInt } from 'node:crypto';
import type { KeyProvider } from '../keys/provider';
import { aesGcmDecrypt, aesGcmEncrypt } from '../keys/aes-gcm';
import type { SealedCardSecrets } from './entities';

export interface MintedCard {
  pan: string;
  cvv: string;
  /** MM/YY */
  expiry: string;
  brand: string;
}

export interface CardSecrets {
  pan: string;
  cvv: string;
  expiry: string;
}

/** The card issuer (processor) the service provisions cards and moves card balances with. */
export interface IssuerProvider {
  readonly name: string;
  /** Mints the card; throws IssuerDeclined when the issuer refuses it. */
  mintCard(request: { cardId: string; name: string; cardType: string }): Promise<MintedCard>;
  /** Moves money on the issuer side for a funding or withdrawal; throws IssuerDeclined when refused. */
  settle(request: { transactionId: string; type: 'funding' | 'withdrawal'; amount: bigint }): Promise<void>;
}

/** A refusal by the issuer: final, so activities name it in nonRetryableErrorTypes. */
export class IssuerDeclined extends Error {
  override readonly name = 'IssuerDeclined';
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
    return {
      pan: body + String(luhnCheckDigit(body)),
      cvv: String(randomInt(1000)).padStart(3, '0'),
      expiry: `${String(expires.getUTCMonth() + 1).padStart(2, '0')}/${String(expires.getUTCFullYear() % 100).padStart(2, '0')}`,
      brand: this.bin.startsWith('4') ? 'visa' : 'mastercard',
    };
  }

  async settle(request: { amount: bigint }): Promise<void> {
    if (request.amount === SANDBOX_DECLINED_SETTLEMENT_AMOUNT) throw new IssuerDeclined('The issuer declined the balance movement.');
  }
}

const secretsContext = (cardId: string) => `custody-platform/card-secrets/v1/${cardId}`;

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
