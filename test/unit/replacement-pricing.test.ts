import assert from 'node:assert/strict';
import { bitcoinReplacementTerms, type BitcoinReplacementBasis } from '../../src/transactions/bitcoin';
import { replacementTerms } from '../../src/transactions/replacements';
import { DomainError } from '../../src/shared/errors';

/**
 * The price of a replacement: above what nodes require to take it in place of the newest candidate,
 * at the market's level, and for automatic bumps lowered to their cap, or none when the cap cannot outbid.
 */
describe('Replacement pricing (speed-up, cancel, automatic bump)', () => {
  describe('Bitcoin (BIP-125)', () => {
    /** A send of 1-in 2-out p2wpkh (141 vB) that paid 1 sat/vB; 5 sat/vB asked. */
    const basis = (overrides: Partial<BitcoinReplacementBasis> = {}): BitcoinReplacementBasis => ({
      kind: 'speed_up',
      inputTotal: 100_000n,
      recipientAmount: 50_000n,
      previous: { model: 'per_byte', satPerVbyte: '1', vsize: 141 },
      previousFee: 141n,
      rate: 5n,
      cap: null,
      ...overrides,
    });

    it('pays the rate asked times the send size, or at least the replaced fee plus 1 sat/vB (rule 4)', () => {
      assert.deepEqual(bitcoinReplacementTerms(basis())?.feeLimit, 705n);
      assert.deepEqual(bitcoinReplacementTerms(basis({ rate: 1n })), { terms: { model: 'per_byte', satPerVbyte: '2', vsize: 141 }, feeLimit: 282n });
    });

    it('lowers an automatic bump to its cap while the cap still outbids; none when it cannot', () => {
      assert.deepEqual(bitcoinReplacementTerms(basis({ cap: 423n })), { terms: { model: 'per_byte', satPerVbyte: '3', vsize: 141 }, feeLimit: 423n });
      assert.equal(bitcoinReplacementTerms(basis({ cap: 282n }))?.feeLimit, 282n, 'the rule-4 minimum exactly');
      assert.equal(bitcoinReplacementTerms(basis({ cap: 281n })), null);
    });

    it('refuses a fee the change cannot pay and stay above dust (change_too_small)', () => {
      assert.throws(
        () => bitcoinReplacementTerms(basis({ inputTotal: 51_000n })),
        (error: unknown) => error instanceof DomainError && error.code === 'change_too_small',
      );
    });
  });

  describe('Ethereum (EIP-1559, the same nonce)', () => {
    const previous = { model: 'eip1559' as const, gasLimit: '21000', maxFeePerGas: '3000000000', maxPriorityFeePerGas: '1000000000' };
    const market = { model: 'eip1559' as const, baseFeePerGas: 100_000_000_000n, priorityFeePerGas: { low: 1_000_000_000n, medium: 2_000_000_000n, high: 3_000_000_000n } };

    it('prices at the market level, at least 10% (and 1 wei) above the newest candidate', () => {
      const priced = replacementTerms(previous, market, 'high', 21_000n, null)!;
      assert.deepEqual(priced.terms, { model: 'eip1559', gasLimit: '21000', maxFeePerGas: '203000000000', maxPriorityFeePerGas: '3000000000' });
      const calm = replacementTerms(previous, { ...market, baseFeePerGas: 1n }, 'low', 21_000n, null)!;
      assert.deepEqual([calm.terms.maxFeePerGas, calm.terms.maxPriorityFeePerGas], ['3300000001', '1100000001']);
    });

    it('lowers an automatic bump to its cap while the cap still outbids; none when it cannot', () => {
      const capped = replacementTerms(previous, market, 'high', 21_000n, 21_000n * 9_000_000_000n)!;
      assert.deepEqual([capped.terms.maxFeePerGas, capped.feeLimit], ['9000000000', 189_000_000_000_000n]);
      assert.equal(replacementTerms(previous, market, 'high', 21_000n, 21_000n * 3_000_000_000n), null);
    });
  });
});
