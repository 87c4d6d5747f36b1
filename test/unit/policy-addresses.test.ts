import assert from 'node:assert/strict';
import { canonicalConditions, canonicalRequestAddresses } from '../../src/policies/addresses';
import type { Condition } from '../../src/policies/schema';
import { DomainError } from '../../src/shared/errors';

const CHECKSUMMED = '0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed';
const BECH32 = 'tb1qw508d6qejxtdg4y5r3zarvary0c5xw7kxpjzsx';
const TRON = 'TLa2f6VPqDgRE67v1736s7bJ8Ray5wYjU7';
const SOLANA = '4sGjMW1sUnHzSxGspuhpqLDx6wiyjNtZAMdL4VZHirAn';

const strict = { strict: true, param: 'conditions' };
const operands = (conditions: Condition[]) => conditions.map((condition) => condition.value ?? condition.values);

describe('Policy address operands: canonical as sends carry them (src/policies/addresses.ts)', () => {
  it('by the form the address tells when the rule names no chain: EIP-55, lower-case bech32, Tron and Solana base58 as written', () => {
    const written: Condition[] = [
      { field: 'to_address', operator: 'equal', value: CHECKSUMMED.toLowerCase() },
      { field: 'from_address', operator: 'not_equal', value: CHECKSUMMED.toUpperCase().replace('0X', '0x') },
      { field: 'to_address', operator: 'in', values: [BECH32.toUpperCase(), TRON, SOLANA] },
      { field: 'token_address', operator: 'not_in', values: [CHECKSUMMED.toLowerCase()] },
    ];
    assert.deepEqual(operands(canonicalConditions(written, 'sandbox', strict)), [CHECKSUMMED, CHECKSUMMED, [BECH32, TRON, SOLANA], [CHECKSUMMED]]);
  });

  it('leaves what is not a whole address alone: contains fragments, address-book ids, other fields, placeholders of a rule naming no chain', () => {
    const written: Condition[] = [
      { field: 'to_address', operator: 'contains', value: CHECKSUMMED.toLowerCase().slice(0, 10) },
      { field: 'to_address', operator: 'in_address_book', values: ['abe_1'] },
      { field: 'wallet_id', operator: 'equal', value: CHECKSUMMED.toLowerCase() },
      { field: 'to_address', operator: 'equal', value: 'blocked-addr' },
    ];
    assert.deepEqual(canonicalConditions(written, 'sandbox', strict), written);
  });

  it("under a chain condition: 400 naming the operand its chain does not read (a wrong checksum, a Tron checksum that fails, another network's bech32); stored rows keep it", () => {
    const wrongChecksum = CHECKSUMMED.replace('aA', 'Aa');
    const badTron = `${TRON.slice(0, -1)}8`;
    const cases: [string, string, 'sandbox' | 'live'][] = [
      ['ethereum', wrongChecksum, 'sandbox'],
      ['tron', badTron, 'sandbox'],
      ['bitcoin', BECH32, 'live'],
    ];
    for (const [chain, address, environment] of cases) {
      const written: Condition[] = [
        { field: 'chain', operator: 'in', values: [chain] },
        { field: 'to_address', operator: 'in', values: [address] },
      ];
      assert.throws(
        () => canonicalConditions(written, environment, { strict: true, param: 'rules.2.conditions' }),
        (error) => error instanceof DomainError && error.param === 'rules.2.conditions.1.values.0',
        `${chain} ${address}`,
      );
      assert.deepEqual(canonicalConditions(written, environment, { strict: false, param: 'conditions' }), written);
    }
  });

  it("a dry run's addresses on its chain, else by their form", () => {
    const request = { chain: 'ethereum', to_address: CHECKSUMMED.toLowerCase(), from_address: 'not-an-address', amount: '1' };
    assert.deepEqual(canonicalRequestAddresses(request, 'sandbox'), { ...request, to_address: CHECKSUMMED });
    assert.deepEqual(canonicalRequestAddresses({ to_address: BECH32.toUpperCase() }, 'sandbox'), { to_address: BECH32 });
  });
});
