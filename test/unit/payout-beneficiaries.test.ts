import assert from 'node:assert/strict';
import { validateBeneficiary } from '../../src/payouts/beneficiaries';
import type { Beneficiary } from '../../src/payouts/entities';
import { DomainError } from '../../src/shared/errors';

const NG_BANK = { country: 'NG', toCurrency: 'NGN', paymentMethod: 'bank' as const };
const ZA_BANK = { country: 'ZA', toCurrency: 'ZAR', paymentMethod: 'bank' as const };
const KE_MOBILE = { country: 'KE', toCurrency: 'KES', paymentMethod: 'mobile_money' as const };
const bank = (fields: Partial<Extract<Beneficiary, { type: 'bank' }>> = {}): Beneficiary => ({ type: 'bank', accountNumber: '0123456789', bankCode: '058', accountName: 'Ada Obi', ...fields });
const mobile = (fields: Partial<Extract<Beneficiary, { type: 'mobile_money' }>> = {}): Beneficiary => ({
  type: 'mobile_money',
  phoneNumber: '+254712345678',
  network: 'mpesa',
  accountName: 'Wanjiru Kamau',
  ...fields,
});

function refusal(run: () => unknown): [string, string | undefined] {
  try {
    run();
  } catch (error) {
    assert.ok(error instanceof DomainError, String(error));
    return [error.code, error.param];
  }
  assert.fail('accepted');
}

describe('Payout beneficiaries: validated by type and country', () => {
  it('accepts a Nigerian NUBAN account with a CBN or NIP bank code, and a South African branch code', () => {
    assert.deepEqual(validateBeneficiary(bank({ accountName: '  Ada   Obi ' }), NG_BANK), bank());
    assert.equal((validateBeneficiary(bank({ bankCode: '000013' }), NG_BANK) as { bankCode: string }).bankCode, '000013');
    assert.deepEqual(validateBeneficiary(bank({ accountNumber: '62012345678', bankCode: '250655', accountName: "Thandi O'Neil-Dlamini" }), ZA_BANK), bank({ accountNumber: '62012345678', bankCode: '250655', accountName: "Thandi O'Neil-Dlamini" }));
  });

  it('refuses account numbers, bank codes and names that do not fit, naming the field', () => {
    assert.deepEqual(refusal(() => validateBeneficiary(bank({ accountNumber: '012345678' }), NG_BANK)), ['validation_failed', 'beneficiary.accountNumber']);
    assert.deepEqual(refusal(() => validateBeneficiary(bank({ accountNumber: '01234567890' }), NG_BANK)), ['validation_failed', 'beneficiary.accountNumber']);
    assert.deepEqual(refusal(() => validateBeneficiary(bank({ accountNumber: '01234-6789' }), NG_BANK)), ['validation_failed', 'beneficiary.accountNumber']);
    assert.deepEqual(refusal(() => validateBeneficiary(bank({ accountNumber: '12345678' }), ZA_BANK)), ['validation_failed', 'beneficiary.accountNumber']);
    assert.deepEqual(refusal(() => validateBeneficiary(bank({ bankCode: '58' }), NG_BANK)), ['validation_failed', 'beneficiary.bankCode']);
    assert.deepEqual(refusal(() => validateBeneficiary(bank({ bankCode: '25065' }), ZA_BANK)), ['validation_failed', 'beneficiary.bankCode']);
    assert.deepEqual(refusal(() => validateBeneficiary(bank({ accountName: 'A' }), NG_BANK)), ['validation_failed', 'beneficiary.accountName']);
    assert.deepEqual(refusal(() => validateBeneficiary(bank({ accountName: 'Robert); DROP' }), NG_BANK)), ['validation_failed', 'beneficiary.accountName']);
  });

  it('accepts an E.164 mobile number of the corridor country on one of its networks, upper-casing the network', () => {
    assert.deepEqual(validateBeneficiary(mobile(), KE_MOBILE), mobile({ network: 'MPESA' }));
    assert.equal((validateBeneficiary(mobile({ network: 'Airtel', phoneNumber: '+254733123456' }), KE_MOBILE) as { network: string }).network, 'AIRTEL');
  });

  it('refuses numbers that are not E.164, of another country, not mobile or not valid, and networks the corridor does not pay', () => {
    assert.deepEqual(refusal(() => validateBeneficiary(mobile({ phoneNumber: '0712345678' }), KE_MOBILE)), ['validation_failed', 'beneficiary.phoneNumber']);
    assert.deepEqual(refusal(() => validateBeneficiary(mobile({ phoneNumber: '+254 712 345 678' }), KE_MOBILE)), ['validation_failed', 'beneficiary.phoneNumber']);
    assert.deepEqual(refusal(() => validateBeneficiary(mobile({ phoneNumber: '+2348031234567' }), KE_MOBILE)), ['validation_failed', 'beneficiary.phoneNumber']);
    assert.deepEqual(refusal(() => validateBeneficiary(mobile({ phoneNumber: '+254202123456' }), KE_MOBILE)), ['validation_failed', 'beneficiary.phoneNumber']);
    assert.deepEqual(refusal(() => validateBeneficiary(mobile({ phoneNumber: '+25471234' }), KE_MOBILE)), ['validation_failed', 'beneficiary.phoneNumber']);
    assert.deepEqual(refusal(() => validateBeneficiary(mobile({ network: 'MTN' }), KE_MOBILE)), ['validation_failed', 'beneficiary.network']);
  });

  it("refuses a beneficiary of another type than the quote's payment method", () => {
    assert.deepEqual(refusal(() => validateBeneficiary(mobile(), NG_BANK)), ['beneficiary_type_mismatch', 'beneficiary.type']);
    assert.deepEqual(refusal(() => validateBeneficiary(bank(), KE_MOBILE)), ['beneficiary_type_mismatch', 'beneficiary.type']);
  });
});
