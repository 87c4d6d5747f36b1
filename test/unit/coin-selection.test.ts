import assert from 'node:assert/strict';
import { secp256k1 } from '@noble/curves/secp256k1';
import { sha256 } from '@noble/hashes/sha256';
import { hex } from '@scure/base';
import * as btc from '@scure/btc-signer';
import {
  DUST_LIMIT,
  MAX_INPUTS,
  selectCoins,
  virtualSize,
  type CoinSelection,
  type CoinSelectionRequest,
  type OutputType,
  type SpendableFormat,
  type SpendableOutput,
} from '../../src/transactions/coin-selection';
import { DomainError } from '../../src/shared/errors';

/** Testnet addresses of each script type a payment can go to (BIP-173 and btc-signer test vectors). */
const RECIPIENTS: Record<OutputType, string> = {
  p2wpkh: 'tb1qw508d6qejxtdg4y5r3zarvary0c5xw7kxpjzsx',
  p2tr: 'tb1pqqqqp399et2xygdj5xreqhjjvcmzhxw4aywxecjdzew6hylgvsesf3hn0c',
  p2pkh: 'mipcBbFg9gMiCh81Kj8tqqdgoZub1ZJRfn',
  p2sh: '2MzQwSSnBHWHqSAqtTVQ6v47XtaisrJa1Vc',
  p2wsh: 'tb1qrp33g0q5c5txsp9arysrx4k6zdkfs4nce4xj0gdcccefvpysxf3q0sl5k7',
};

let sequence = 0;
function output(amount: bigint, format: SpendableFormat = 'p2wpkh'): SpendableOutput {
  sequence += 1;
  return { id: `output-${sequence}`, txid: sequence.toString(16).padStart(64, '0'), vout: sequence % 3, amount, address: RECIPIENTS[format], format };
}

function request(overrides: Partial<CoinSelectionRequest>): CoinSelectionRequest {
  return {
    amount: 100_000n,
    gross: false,
    satPerVbyte: 2n,
    recipient: RECIPIENTS.p2wpkh,
    changeFormat: 'p2wpkh',
    pinned: null,
    others: [],
    fillFromUnselected: false,
    ...overrides,
  };
}

function refusal(work: () => unknown): DomainError {
  try {
    work();
  } catch (error) {
    if (error instanceof DomainError) return error;
    throw error;
  }
  assert.fail('expected a DomainError');
}

const total = (outputs: readonly SpendableOutput[]) => outputs.reduce((sum, one) => sum + one.amount, 0n);
const outputsOf = (req: CoinSelectionRequest, selection: CoinSelection): OutputType[] => {
  const recipient = Object.entries(RECIPIENTS).find(([, address]) => address === req.recipient)![0] as OutputType;
  return selection.change > 0n ? [recipient, req.changeFormat] : [recipient];
};

/** The invariants every selection keeps, whatever the request. */
function assertBalanced(req: CoinSelectionRequest, selection: CoinSelection): void {
  const inputs = total(selection.inputs);
  assert.equal(inputs, selection.recipientAmount + selection.change + selection.fee, 'inputs = recipient + change + fee');
  assert.equal(selection.vsize, virtualSize(selection.inputs, outputsOf(req, selection)));
  const priced = req.satPerVbyte * BigInt(selection.vsize);
  assert.ok(selection.fee >= priced, 'the fee pays the rate');
  if (selection.change > 0n) {
    assert.ok(selection.change >= DUST_LIMIT, 'no dust change');
    assert.equal(selection.fee, priced, 'with change, the fee is exactly rate x vsize');
  } else {
    // The remainder paid to the miner is what a change output would have held, below dust.
    const withChange = virtualSize(selection.inputs, [...outputsOf(req, selection), req.changeFormat]);
    assert.ok(selection.fee - priced < DUST_LIMIT + req.satPerVbyte * BigInt(withChange - selection.vsize), 'the dropped remainder is below dust');
  }
  assert.ok(selection.recipientAmount >= DUST_LIMIT);
  if (req.gross) assert.equal(selection.recipientAmount, req.amount - priced);
  else assert.equal(selection.recipientAmount, req.amount);
  assert.ok(selection.inputs.length <= MAX_INPUTS);
  assert.equal(new Set(selection.inputs.map((one) => one.id)).size, selection.inputs.length, 'no input twice');
  const offered = new Set([...(req.pinned ?? []), ...req.others].map((one) => one.id));
  assert.ok(selection.inputs.every((one) => offered.has(one.id)));
  if (req.pinned) {
    const chosen = new Set(selection.inputs.map((one) => one.id));
    assert.ok(req.pinned.every((one) => chosen.has(one.id)), 'every pinned input is spent');
    if (!req.fillFromUnselected) assert.equal(selection.inputs.length, req.pinned.length, 'only the pinned inputs');
  }
}

describe('Coin selection', () => {
  it('sizes transactions from the weight of each script type, rounded up to whole vbytes', () => {
    assert.equal(virtualSize([{ format: 'p2wpkh' }], ['p2wpkh', 'p2wpkh']), 141);
    assert.equal(virtualSize([{ format: 'p2tr' }], ['p2tr', 'p2tr']), 154);
    assert.equal(virtualSize([{ format: 'p2tr' }, { format: 'p2tr' }], ['p2wpkh']), Math.ceil(10.5 + 2 * 57.5 + 31));
    // Legacy only: no segwit marker.
    assert.equal(virtualSize([{ format: 'p2pkh' }], ['p2pkh', 'p2pkh']), 226);
    // A legacy input among segwit ones carries an empty witness.
    assert.equal(virtualSize([{ format: 'p2pkh' }, { format: 'p2wpkh' }], ['p2sh']), Math.ceil((40 + 2 + 1 + 592 + 272 + 128) / 4));
    assert.equal(virtualSize([{ format: 'p2wpkh' }], ['p2wsh']) - virtualSize([{ format: 'p2wpkh' }], ['p2pkh']), 9);
  });

  it('never sizes below a real signed transaction, and at most a vbyte an input above it', () => {
    const cases: SpendableFormat[][] = [['p2wpkh'], ['p2tr'], ['p2wpkh', 'p2tr', 'p2wpkh'], ['p2pkh'], ['p2pkh', 'p2wpkh']];
    for (const formats of cases) {
      const key = secp256k1.utils.randomPrivateKey();
      const publicKey = secp256k1.getPublicKey(key, true);
      const tx = new btc.Transaction();
      formats.forEach((format, index) => {
        const payment = format === 'p2wpkh' ? btc.p2wpkh(publicKey) : format === 'p2tr' ? btc.p2tr(publicKey.slice(1)) : btc.p2pkh(publicKey);
        if (format === 'p2pkh') {
          // A legacy input signs over its whole previous transaction.
          const previous = btc.RawTx.encode({
            version: 2,
            segwitFlag: false,
            witnesses: [],
            inputs: [{ txid: new Uint8Array(32).fill(index + 1), index: 0, finalScriptSig: new Uint8Array(), sequence: 0xffffffff }],
            outputs: [{ amount: 100_000n, script: payment.script }],
            lockTime: 0,
          });
          tx.addInput({ txid: sha256(sha256(previous)).reverse(), index: 0, nonWitnessUtxo: previous });
        } else {
          tx.addInput({ ...payment, txid: hex.encode(new Uint8Array(32).fill(index + 1)), index: 0, witnessUtxo: { script: payment.script, amount: 100_000n } });
        }
      });
      tx.addOutputAddress(RECIPIENTS.p2tr, 50_000n, btc.TEST_NETWORK);
      tx.addOutputAddress(RECIPIENTS.p2wpkh, 40_000n, btc.TEST_NETWORK);
      tx.sign(key);
      tx.finalize();
      const estimate = virtualSize(
        formats.map((format) => ({ format })),
        ['p2tr', 'p2wpkh'],
      );
      assert.ok(estimate >= tx.vsize && estimate - tx.vsize <= formats.length, `${formats.join('+')}: estimated ${estimate}, signed ${tx.vsize}`);
    }
  });

  it('spends exactly the pinned inputs, even when one would do', () => {
    const pinned = [output(80_000n), output(60_000n)];
    const req = request({ pinned, others: [output(5_000_000n)] });
    const selection = selectCoins(req);
    assert.deepEqual(
      selection.inputs.map((one) => one.id),
      pinned.map((one) => one.id),
    );
    assert.equal(selection.change, 140_000n - 100_000n - selection.fee);
    assertBalanced(req, selection);
  });

  it('refuses pinned inputs that do not cover amount and fee unless fill_fee_from_unselected', () => {
    const pinned = [output(100_000n)];
    const others = [output(30_000n), output(500_000n)];
    const error = refusal(() => selectCoins(request({ pinned, others })));
    assert.equal(error.code, 'pinned_inputs_insufficient');
    assert.equal(error.param, 'inputs');
    assert.deepEqual(error.details, { pinned: '100000', needed: (100_000n + 2n * 110n).toString() });

    const req = request({ pinned, others, fillFromUnselected: true });
    const selection = selectCoins(req);
    assert.equal(selection.inputs[0]!.id, pinned[0]!.id, 'the pinned input first');
    assert.ok(selection.inputs.length >= 2);
    assertBalanced(req, selection);
  });

  it('fills from the unselected outputs when the pins cover the amount but not the fee', () => {
    const pinned = [output(100_000n)];
    const small = output(10_000n);
    const req = request({ pinned, others: [small], fillFromUnselected: true });
    const selection = selectCoins(req);
    assert.deepEqual(
      selection.inputs.map((one) => one.id),
      [pinned[0]!.id, small.id],
    );
    assertBalanced(req, selection);
  });

  it('refuses a rate above max_fee_rate, and pays one at it', () => {
    const others = [output(1_000_000n)];
    const error = refusal(() => selectCoins(request({ others, satPerVbyte: 21n, maxSatPerVbyte: 20n })));
    assert.equal(error.code, 'fee_rate_above_max');
    assert.equal(error.param, 'max_fee_rate');
    assert.deepEqual(error.details, { fee_rate: '21', max_fee_rate: '20' });
    const req = request({ others, satPerVbyte: 20n, maxSatPerVbyte: 20n });
    const selection = selectCoins(req);
    assert.equal(selection.fee, 20n * BigInt(selection.vsize));
    assertBalanced(req, selection);
  });

  it('counts a remainder paid to the miner against max_fee_rate: refused for pins alone, filled to make change, avoided by selection', () => {
    // One p2wpkh input to a p2wpkh recipient: 110 vB without change (220 sat at 2 sat/vB), 141 vB with it; 500 sat left over.
    const pinned = [output(100_720n)];
    const withoutMax = selectCoins(request({ pinned }));
    assert.deepEqual([withoutMax.fee, withoutMax.change], [720n, 0n], 'without a max the remainder is fee');
    const error = refusal(() => selectCoins(request({ pinned, maxSatPerVbyte: 2n })));
    assert.equal(error.code, 'fee_rate_above_max');
    assert.equal(error.param, 'max_fee_rate');
    assert.deepEqual(error.details, { fee_rate: '2', max_fee_rate: '2', fee: '720' });

    const other = output(50_000n);
    const filled = request({ pinned, others: [other], fillFromUnselected: true, maxSatPerVbyte: 2n });
    const selection = selectCoins(filled);
    assert.deepEqual(
      selection.inputs.map((one) => one.id),
      [pinned[0]!.id, other.id],
    );
    assert.ok(selection.change >= DUST_LIMIT && selection.fee === 2n * BigInt(selection.vsize));
    assertBalanced(filled, selection);

    const chosen = request({ others: [pinned[0]!, other], maxSatPerVbyte: 2n });
    const unpinned = selectCoins(chosen);
    assert.ok(unpinned.fee <= 2n * BigInt(unpinned.vsize), 'coin selection never picks a set whose remainder breaks the max');
    assertBalanced(chosen, unpinned);
  });

  it('takes the fee out of a gross amount: sending everything leaves no change', () => {
    const others = [output(300_000n), output(200_000n, 'p2tr'), output(100_000n, 'p2pkh')];
    const req = request({ others, amount: 600_000n, gross: true, satPerVbyte: 5n });
    const selection = selectCoins(req);
    assert.equal(selection.inputs.length, 3);
    assert.equal(selection.change, 0n);
    assert.equal(selection.fee, 5n * BigInt(virtualSize(others, ['p2wpkh'])));
    assert.equal(selection.recipientAmount, 600_000n - selection.fee);
    assertBalanced(req, selection);
  });

  it('refuses a gross amount the fee would eat', () => {
    const error = refusal(() => selectCoins(request({ others: [output(100_000n)], amount: 1_000n, gross: true, satPerVbyte: 10n })));
    assert.equal(error.code, 'amount_below_fee');
    assert.equal(error.param, 'amount');
    const dusty = refusal(() => selectCoins(request({ others: [output(100_000n)], amount: 1_500n, gross: true, satPerVbyte: 10n })));
    assert.equal(dusty.code, 'amount_below_dust');
  });

  it('gives a remainder below the dust limit to the miner instead of a change output', () => {
    // One p2wpkh input to one p2wpkh output: 110 vB; 100 sat more than amount and fee.
    const source = output(100_000n + 110n + 100n);
    const req = request({ others: [source], amount: 100_000n, satPerVbyte: 1n });
    const selection = selectCoins(req);
    assert.equal(selection.change, 0n);
    assert.equal(selection.vsize, 110);
    assert.equal(selection.fee, 210n);
    assertBalanced(req, selection);
    // Enough left for change at the dust limit: change, and the fee exactly rate x vsize.
    const richer = request({ others: [output(100_000n + 141n + DUST_LIMIT)], amount: 100_000n, satPerVbyte: 1n });
    const withChange = selectCoins(richer);
    assert.equal(withChange.change, DUST_LIMIT);
    assert.equal(withChange.fee, 141n);
  });

  it('prefers a set that needs no change over the largest outputs', () => {
    const large = output(100_000n);
    const exact = [output(60_000n), output(45_000n)];
    // Two p2wpkh inputs to one p2wpkh output: 178 vB at 1 sat/vB.
    const req = request({ others: [large, ...exact], amount: 105_000n - 178n, satPerVbyte: 1n });
    const selection = selectCoins(req);
    assert.deepEqual(selection.inputs.map((one) => one.id).sort(), exact.map((one) => one.id).sort());
    assert.equal(selection.change, 0n);
    assert.equal(selection.fee, 178n);
  });

  it('does not trade a change output for many more inputs', () => {
    const large = output(1_000_000n);
    const small = Array.from({ length: 5 }, () => output(20_000n));
    // The five small ones pay exactly amount and fee without change (382 vB at 5 sat/vB), but one large
    // input with change pays 141 vB, and 68 vB more when its change is spent later: cheaper.
    const req = request({ others: [...small, large], amount: 100_000n - 5n * 382n, satPerVbyte: 5n });
    const selection = selectCoins(req);
    assert.deepEqual(selection.inputs.map((one) => one.id), [large.id]);
    assert.equal(selection.fee, 5n * 141n);
    assertBalanced(req, selection);
    // Two small ones paying it exactly: 178 sat at 1 sat/vB against 141 + 68 for the large one and its change.
    const pair = request({ others: [small[0]!, small[1]!, large], amount: 40_000n - 178n, satPerVbyte: 1n });
    assert.deepEqual(selectCoins(pair).inputs.map((one) => one.id).sort(), [small[0]!.id, small[1]!.id].sort());
  });

  it('leaves outputs worth less than the fee of spending them', () => {
    const crumbs = [output(600n), output(700n)];
    const req = request({ others: [...crumbs, output(200_000n)], amount: 150_000n, satPerVbyte: 50n });
    const selection = selectCoins(req);
    assert.equal(selection.inputs.length, 1);
    assert.equal(selection.inputs[0]!.amount, 200_000n);
  });

  it('refuses insufficient funds with what is available and needed', () => {
    const others = [output(40_000n), output(50_000n)];
    const error = refusal(() => selectCoins(request({ others, amount: 100_000n, satPerVbyte: 1n })));
    assert.equal(error.code, 'insufficient_funds');
    assert.deepEqual(error.details, { available: '90000', needed: (100_000n + BigInt(virtualSize(others, ['p2wpkh']))).toString() });
  });

  it('refuses a send that would need more than 250 inputs, and an amount below dust', () => {
    const others = Array.from({ length: 300 }, () => output(10_000n));
    const error = refusal(() => selectCoins(request({ others, amount: 2_600_000n, satPerVbyte: 1n })));
    assert.equal(error.code, 'too_many_inputs');
    assert.equal(refusal(() => selectCoins(request({ others, amount: DUST_LIMIT - 1n }))).code, 'amount_below_dust');
    assert.equal(refusal(() => selectCoins(request({ pinned: others, others: [] }))).code, 'too_many_inputs');
  });

  it('balances every selection, whatever the wallet and request (seeded random cases)', () => {
    let seed = 0x2545f491;
    const random = () => {
      // xorshift32: the same cases on every run.
      seed ^= seed << 13;
      seed ^= seed >>> 17;
      seed ^= seed << 5;
      return (seed >>> 0) / 0x1_0000_0000;
    };
    const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
    const formats: SpendableFormat[] = ['p2wpkh', 'p2tr', 'p2pkh'];
    const outcomes = new Map<string, number>();
    for (let run = 0; run < 600; run++) {
      const count = Math.floor(random() * 25);
      const outputs = Array.from({ length: count }, () => output(BigInt(Math.floor(10 ** (2.5 + random() * 5.5))), pick(formats)));
      const pinnedCount = random() < 0.3 ? Math.floor(random() * Math.min(count, 4)) + (count > 0 ? 1 : 0) : 0;
      const pinned = pinnedCount > 0 ? outputs.slice(0, pinnedCount) : null;
      const req = request({
        amount: BigInt(Math.floor(10 ** (2.7 + random() * 5.5))),
        gross: random() < 0.3,
        satPerVbyte: BigInt(1 + Math.floor(random() * 120)),
        recipient: RECIPIENTS[pick(Object.keys(RECIPIENTS) as OutputType[])],
        changeFormat: pick(formats),
        pinned,
        others: pinned ? outputs.slice(pinnedCount) : outputs,
        fillFromUnselected: random() < 0.5,
      });
      let selection: CoinSelection;
      try {
        selection = selectCoins(req);
      } catch (error) {
        assert.ok(error instanceof DomainError, String(error));
        assert.ok(['insufficient_funds', 'pinned_inputs_insufficient', 'amount_below_fee', 'amount_below_dust'].includes(error.code), error.code);
        if (error.code === 'insufficient_funds') assert.equal(error.details.available, total(outputs).toString());
        outcomes.set(error.code, (outcomes.get(error.code) ?? 0) + 1);
        continue;
      }
      assertBalanced(req, selection);
      // Deterministic, whatever order the wallet's outputs come in.
      const again = selectCoins({ ...req, others: [...req.others].reverse() });
      assert.deepEqual(again, selection);
      outcomes.set(selection.change > 0n ? 'change' : 'no change', (outcomes.get(selection.change > 0n ? 'change' : 'no change') ?? 0) + 1);
    }
    for (const outcome of ['change', 'no change', 'insufficient_funds', 'pinned_inputs_insufficient']) assert.ok((outcomes.get(outcome) ?? 0) > 10, `${outcome}: ${outcomes.get(outcome)}`);
  });
});
