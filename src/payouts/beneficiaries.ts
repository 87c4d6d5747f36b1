import { parsePhoneNumberFromString } from 'libphonenumber-js/max';
import { openText, sealText } from '../keys/envelope';
import { envelopeColumn, type SealedColumn } from '../keys/rotation';
import type { KeyProvider } from '../keys/provider';
import { DomainError, errors } from '../shared/errors';
import { findCorridor } from './corridors';
import type { Beneficiary, PayoutQuote, PayoutTrip } from './entities';
import { withArticle } from '../shared/articles';

/** Bank account numbers by country: digits only, of these lengths (NG: the 10-digit NUBAN). */
const ACCOUNT_NUMBER_LENGTHS: Record<string, [number, number]> = { NG: [10, 10], ZA: [9, 11], KE: [6, 16], GH: [10, 16], UG: [8, 16], TZ: [8, 16] };
/** Bank codes by country: NG's 3-digit CBN code or 6-digit NIP code, ZA's 6-digit branch code; elsewhere a local code or BIC. */
const BANK_CODES: Record<string, RegExp> = { NG: /^\d{3}(\d{3})?$/, ZA: /^\d{6}$/ };
const OTHER_BANK_CODE = /^[A-Z0-9]{2,11}$/;
/** Letters of any script, spaces and the punctuation names carry. */
const ACCOUNT_NAME = /^\p{L}[\p{L}\p{M} .'-]{1,99}$/u;
const E164 = /^\+[1-9]\d{7,14}$/;

/**
 * The beneficiary of a trip checked against its quote's corridor: the type is the quote's payment
 * method (400 beneficiary_type_mismatch), then each field by the country's formats (400
 * validation_failed naming `beneficiary.<field>`). Returns it normalised (trimmed; network upper case).
 */
export function validateBeneficiary(input: Beneficiary, quote: Pick<PayoutQuote, 'country' | 'toCurrency' | 'paymentMethod'>): Beneficiary {
  if (input.type !== quote.paymentMethod) {
    throw new DomainError({
      kind: 'invalid',
      code: 'beneficiary_type_mismatch',
      message: `The quote pays by ${quote.paymentMethod}: the beneficiary must be of type ${quote.paymentMethod}.`,
      param: 'beneficiary.type',
    });
  }
  const accountName = input.accountName.trim().replace(/\s+/g, ' ');
  if (!ACCOUNT_NAME.test(accountName)) throw errors.validation("accountName is 2 to 100 letters, spaces and . ' -", 'beneficiary.accountName');
  if (input.type === 'bank') {
    const [min, max] = ACCOUNT_NUMBER_LENGTHS[quote.country] ?? [6, 20];
    const accountNumber = input.accountNumber.trim();
    if (!/^\d+$/.test(accountNumber) || accountNumber.length < min || accountNumber.length > max) {
      throw errors.validation(`A ${quote.country} bank account number is ${min === max ? min : `${min} to ${max}`} digits.`, 'beneficiary.accountNumber');
    }
    const bankCode = input.bankCode.trim().toUpperCase();
    if (!(BANK_CODES[quote.country] ?? OTHER_BANK_CODE).test(bankCode)) throw errors.validation(`bankCode is not ${withArticle(quote.country)} bank code.`, 'beneficiary.bankCode');
    return { type: 'bank', accountNumber, bankCode, accountName };
  }
  const phoneNumber = input.phoneNumber.trim();
  const parsed = E164.test(phoneNumber) ? parsePhoneNumberFromString(phoneNumber) : undefined;
  if (!parsed) throw errors.validation('phoneNumber is an E.164 number: + then the country code and the number, digits only.', 'beneficiary.phoneNumber');
  if (parsed.country !== quote.country) throw errors.validation(`phoneNumber is not ${withArticle(quote.country)} number.`, 'beneficiary.phoneNumber');
  const type = parsed.getType();
  if (!parsed.isValid() || (type !== 'MOBILE' && type !== 'FIXED_LINE_OR_MOBILE')) throw errors.validation(`phoneNumber is not a valid ${quote.country} mobile number.`, 'beneficiary.phoneNumber');
  const networks = findCorridor(quote.country, quote.toCurrency, 'mobile_money').terms.networks ?? [];
  const network = input.network.trim().toUpperCase();
  if (!networks.includes(network)) throw errors.validation(`network is one of ${networks.join(', ')} in ${quote.country}.`, 'beneficiary.network');
  return { type: 'mobile_money', phoneNumber: parsed.number, network, accountName };
}

/** All but the last four characters replaced by '*', as card and bank APIs show an account ('******6789'). */
export const maskIdentifier = (identifier: string): string => `${'*'.repeat(Math.max(0, identifier.length - 4))}${identifier.slice(-4)}`;

/** The account or phone number: what is sealed and masked. */
export const identifierOf = (beneficiary: Beneficiary): string => (beneficiary.type === 'bank' ? beneficiary.accountNumber : beneficiary.phoneNumber);

/** The beneficiary as it may be stored in clear, shown and sent: its account or phone number masked. */
export function maskBeneficiary(beneficiary: Beneficiary): Beneficiary {
  return beneficiary.type === 'bank'
    ? { ...beneficiary, accountNumber: maskIdentifier(beneficiary.accountNumber) }
    : { ...beneficiary, phoneNumber: maskIdentifier(beneficiary.phoneNumber) };
}

/**
 * The whole beneficiary is sealed like a card's PAN (envelope-encrypted under the KeyProvider),
 * bound to its trip: a sealed beneficiary opens for no other trip.
 */
const beneficiaryContext = (tripId: string) => `custody-platform/payout-beneficiary/v1/${tripId}`;

/** Where keys:rotate finds the sealed beneficiaries' data keys. */
export const beneficiaryColumn: SealedColumn = envelopeColumn('payout_trips', 'beneficiary_sealed', [], (row) => beneficiaryContext(row.id));

export const sealBeneficiary = (keys: KeyProvider, tripId: string, beneficiary: Beneficiary): Promise<string> =>
  sealText(keys, JSON.stringify(beneficiary), beneficiaryContext(tripId));

/**
 * The trip's beneficiary with its whole account or phone number, for the rail only. A trip stored
 * before beneficiaries were sealed still holds it in clear until `cli migrate` seals it.
 */
export async function openBeneficiary(keys: KeyProvider, trip: Pick<PayoutTrip, 'id' | 'beneficiary' | 'beneficiarySealed'>): Promise<Beneficiary> {
  if (!trip.beneficiarySealed) return trip.beneficiary;
  return JSON.parse(await openText(keys, trip.beneficiarySealed, beneficiaryContext(trip.id))) as Beneficiary;
}
