import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { secp256k1 } from '@noble/curves/secp256k1';
import { bech32 } from '@scure/base';
import bolt11 from 'bolt11';
import { Bolt11Error, decodeBolt11, encodeBolt11 } from '../../src/lightning/bolt11';

/** The examples of the BOLT #11 specification (lightning/bolts, 11-payment-encoding.md), signed by the spec's key e126f68f... */
const SPEC_PAYEE = '03e7156ae33b0a208d0744199163177e909e80176e55d97a2f221ede0f934dd9ad';
const SPEC_HASH = '0001020304050607080900010203040506070809000102030405060708090102';
const SPEC_TIMESTAMP = 1496314658;

const VALID = [
  {
    name: 'donation, any amount',
    request:
      'lnbc1pvjluezpp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqdpl2pkx2ctnv5sxxmmwwd5kgetjypeh2ursdae8g6twvus8g6rfwvs8qun0dfjkxaq8rkx3yf5tcsyz3d73gafnh3cax9rn449d9p5uxz9ezhhypd0elx87sjle52x86fux2ypatgddc6k63n7erqz25le42c4u4ecky03ylcqca784w',
    network: 'mainnet',
    amountMsat: null,
    description: 'Please consider supporting this project',
    expirySeconds: 3600,
  },
  {
    name: '$3 for a cup of coffee within one minute',
    request:
      'lnbc2500u1pvjluezpp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqdq5xysxxatsyp3k7enxv4jsxqzpuaztrnwngzn3kdzw5hydlzf03qdgm2hdq27cqv3agm2awhz5se903vruatfhq77w3ls4evs3ch9zw97j25emudupq63nyw24cg27h2rspfj9srp',
    network: 'mainnet',
    amountMsat: 250_000_000n,
    description: '1 cup coffee',
    expirySeconds: 60,
  },
  {
    name: 'UTF-8 description',
    request:
      'lnbc2500u1pvjluezpp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqdpquwpc4curk03c9wlrswe78q4eyqc7d8d0xqzpuyk0sg5g70me25alkluzd2x62aysf2pyy8edtjeevuv4p2d5p76r4zkmneet7uvyakky2zr4cusd45tftc9c5fh0nnqpnl2jfll544esqchsrny',
    network: 'mainnet',
    amountMsat: 250_000_000n,
    description: 'ナンセンス 1杯',
    expirySeconds: 60,
  },
  {
    name: 'hashed description',
    request:
      'lnbc20m1pvjluezpp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqhp58yjmdan79s6qqdhdzgynm4zwqd5d7xmw5fk98klysy043l2ahrqscc6gd6ql3jrc5yzme8v4ntcewwz5cnw92tz0pc8qcuufvq7khhr8wpald05e92xw006sq94mg8v2ndf4sefvf9sygkshp5zfem29trqq2yxxz7',
    network: 'mainnet',
    amountMsat: 2_000_000_000n,
    description: null,
    expirySeconds: 3600,
  },
  {
    name: 'testnet with a fallback address',
    request:
      'lntb20m1pvjluezhp58yjmdan79s6qqdhdzgynm4zwqd5d7xmw5fk98klysy043l2ahrqspp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqfpp3x9et2e20v6pu37c5d9vax37wxq72un98kmzzhznpurw9sgl2v0nklu2g4d0keph5t7tj9tcqd8rexnd07ux4uv2cjvcqwaxgj7v4uwn5wmypjd5n69z2xm3xgksg28nwht7f6zspwp3f9t',
    network: 'testnet',
    amountMsat: 2_000_000_000n,
    description: null,
    expirySeconds: 3600,
  },
  {
    name: 'route hints and a P2PKH fallback',
    request:
      'lnbc20m1pvjluezpp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqhp58yjmdan79s6qqdhdzgynm4zwqd5d7xmw5fk98klysy043l2ahrqsfpp3qjmp7lwpagxun9pygexvgpjdc4jdj85fr9yq20q82gphp2nflc7jtzrcazrra7wwgzxqc8u7754cdlpfrmccae92qgzqvzq2ps8pqqqqqqpqqqqq9qqqvpeuqafqxu92d8lr6fvg0r5gv0heeeqgcrqlnm6jhphu9y00rrhy4grqszsvpcgpy9qqqqqqgqqqqq7qqzqj9n4evl6mr5aj9f58zp6fyjzup6ywn3x6sk8akg5v4tgn2q8g4fhx05wf6juaxu9760yp46454gpg5mtzgerlzezqcqvjnhjh8z3g2qqdhhwkj',
    network: 'mainnet',
    amountMsat: 2_000_000_000n,
    description: null,
    expirySeconds: 3600,
  },
  {
    name: 'P2WSH fallback',
    request:
      'lnbc20m1pvjluezhp58yjmdan79s6qqdhdzgynm4zwqd5d7xmw5fk98klysy043l2ahrqspp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqfp4qrp33g0q5c5txsp9arysrx4k6zdkfs4nce4xj0gdcccefvpysxf3q28j0v3rwgy9pvjnd48ee2pl8xrpxysd5g44td63g6xcjcu003j3qe8878hluqlvl3km8rm92f5stamd3jw763n3hck0ct7p8wwj463cql26ava',
    network: 'mainnet',
    amountMsat: 2_000_000_000n,
    description: null,
    expirySeconds: 3600,
  },
  {
    name: 'features 9, 15 and 99 with a payment secret',
    request:
      'lnbc25m1pvjluezpp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqdq5vdhkven9v5sxyetpdeessp5zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zygs9q5sqqqqqqqqqqqqqqqpqsq67gye39hfg3zd8rgc80k32tvy9xk2xunwm5lzexnvpx6fd77en8qaq424dxgt56cag2dpt359k3ssyhetktkpqh24jqnjyw6uqd08sgptq44qu',
    network: 'mainnet',
    amountMsat: 2_500_000_000n,
    description: 'coffee beans',
    expirySeconds: 3600,
  },
  {
    name: 'the same, all upper case',
    request:
      'LNBC25M1PVJLUEZPP5QQQSYQCYQ5RQWZQFQQQSYQCYQ5RQWZQFQQQSYQCYQ5RQWZQFQYPQDQ5VDHKVEN9V5SXYETPDEESSP5ZYG3ZYG3ZYG3ZYG3ZYG3ZYG3ZYG3ZYG3ZYG3ZYG3ZYG3ZYG3ZYGS9Q5SQQQQQQQQQQQQQQQPQSQ67GYE39HFG3ZD8RGC80K32TVY9XK2XUNWM5LZEXNVPX6FD77EN8QAQ424DXGT56CAG2DPT359K3SSYHETKTKPQH24JQNJYW6UQD08SGPTQ44QU',
    network: 'mainnet',
    amountMsat: 2_500_000_000n,
    description: 'coffee beans',
    expirySeconds: 3600,
  },
] as const;

const INVALID = [
  {
    name: 'bad bech32 checksum',
    request:
      'lnbc2500u1pvjluezpp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqdpquwpc4curk03c9wlrswe78q4eyqc7d8d0xqzpuyk0sg5g70me25alkluzd2x62aysf2pyy8edtjeevuv4p2d5p76r4zkmneet7uvyakky2zr4cusd45tftc9c5fh0nnqpnl2jfll544esqchsrnt',
    message: /checksum/,
  },
  {
    name: 'no separator',
    request:
      'pvjluezpp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqdpquwpc4curk03c9wlrswe78q4eyqc7d8d0xqzpuyk0sg5g70me25alkluzd2x62aysf2pyy8edtjeevuv4p2d5p76r4zkmneet7uvyakky2zr4cusd45tftc9c5fh0nnqpnl2jfll544esqchsrny',
    message: /malformed bech32/,
  },
  {
    name: 'mixed case',
    request:
      'LNBC2500u1pvjluezpp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqdpquwpc4curk03c9wlrswe78q4eyqc7d8d0xqzpuyk0sg5g70me25alkluzd2x62aysf2pyy8edtjeevuv4p2d5p76r4zkmneet7uvyakky2zr4cusd45tftc9c5fh0nnqpnl2jfll544esqchsrny',
    message: /malformed bech32/,
  },
  {
    name: 'signature not recoverable',
    request:
      'lnbc2500u1pvjluezpp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqdq5xysxxatsyp3k7enxv4jsxqzpuaxtrnwngzn3kdzw5hydlzf03qdgm2hdq27cqv3agm2awhz5se903vruatfhq77w3ls4evs3ch9zw97j25emudupq63nyw24cg27h2rspk28uwq',
    message: /bad signature/,
  },
  {
    name: 'string too short',
    request: 'lnbc1pvjluezpp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqdpl2pkx2ctnv5sxxmmwwd5kgetjypeh2ursdae8g6na6hlh',
    message: /too short/,
  },
  {
    name: 'invalid multiplier',
    request:
      'lnbc2500x1pvjluezpp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqdq5xysxxatsyp3k7enxv4jsxqzpujr6jxr9gq9pv6g46y7d20jfkegkg4gljz2ea2a3m9lmvvr95tq2s0kvu70u3axgelz3kyvtp2ywwt0y8hkx2869zq5dll9nelr83zzqqpgl2zg',
    message: /malformed amount.*invalid multiplier 'x'/,
  },
  {
    name: 'sub-millisatoshi precision',
    request:
      'lnbc2500000001p1pvjluezpp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqdq5xysxxatsyp3k7enxv4jsxqzpu7hqtk93pkf7sw55rdv4k9z2vj050rxdr6za9ekfs3nlt5lr89jqpdmxsmlj9urqumg0h9wzpqecw7th56tdms40p2ny9q4ddvjsedzcplva53s',
    message: /malformed amount.*sub-millisatoshi/,
  },
  {
    name: 'unknown compulsory feature 100',
    request:
      'lnbc25m1pvjluezpp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqdq5vdhkven9v5sxyetpdeessp5zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zygs9q4psqqqqqqqqqqqqqqqpqsqq40wa3khl49yue3zsgm26jrepqr2eghqlx86rttutve3ugd05em86nsefzh4pfurpd9ek9w2vp95zxqnfe2u7ckudyahsa52q66tgzcp6t2dyk',
    message: /unknown feature bit 100/,
  },
];

const TESTNET = { bech32: 'tb', pubKeyHash: 0x6f, scriptHash: 0xc4, validWitnessVersions: [0, 1] };

describe('BOLT #11', () => {
  describe('the specification examples', () => {
    for (const example of VALID) {
      it(`decodes: ${example.name}`, () => {
        const decoded = decodeBolt11(example.request);
        assert.equal(decoded.network, example.network);
        assert.equal(decoded.amountMsat, example.amountMsat);
        assert.equal(decoded.description, example.description);
        assert.equal(decoded.expirySeconds, example.expirySeconds);
        assert.equal(decoded.paymentHash, SPEC_HASH);
        assert.equal(decoded.timestamp, SPEC_TIMESTAMP);
        assert.equal(decoded.payee, SPEC_PAYEE);
        assert.equal(decoded.expiresAt, SPEC_TIMESTAMP + example.expirySeconds);
      });
    }

    it('reads the payment secret, the features and pico-BTC amounts', () => {
      const coffee = decodeBolt11(VALID[7].request);
      assert.equal(coffee.paymentSecret, '11'.repeat(32));
      assert.deepEqual(coffee.features, [9, 15, 99]);
      const pico = decodeBolt11(
        'lnbc9678785340p1pwmna7lpp5gc3xfm08u9qy06djf8dfflhugl6p7lgza6dsjxq454gxhj9t7a0sd8dgfkx7cmtwd68yetpd5s9xar0wfjn5gpc8qhrsdfq24f5ggrxdaezqsnvda3kkum5wfjkzmfqf3jkgem9wgsyuctwdus9xgrcyqcjcgpzgfskx6eqf9hzqnteypzxz7fzypfhg6trddjhygrcyqezcgpzfysywmm5ypxxjemgw3hxjmn8yptk7untd9hxwg3q2d6xjcmtv4ezq7pqxgsxzmnyyqcjqmt0wfjjq6t5v4khxxqyjw5qcqp2rzjq0gxwkzc8w6323m55m4jyxcjwmy7stt9hwkwe2qxmy8zpsgg7jcuwz87fcqqeuqqqyqqqqlgqqqqn3qq9qn07ytgrxxzad9hc4xt3mawjjt8znfv8xzscs7007v9gh9j569lencxa8xeujzkxs0uamak9aln6ez02uunw6rd2ht2sqe4hz8thcdagpleym0j',
      );
      assert.equal(pico.amountMsat, 967_878_534n);
      assert.equal(pico.expirySeconds, 604_800);
      assert.equal(pico.minFinalCltvExpiry, 10);
      assert.equal(pico.paymentHash, '462264ede7e14047e9b249da94fefc47f41f7d02ee9b091815a5506bc8abf75f');
    });

    for (const example of INVALID) {
      it(`refuses: ${example.name}`, () => {
        assert.throws(() => decodeBolt11(example.request), (error: unknown) => error instanceof Bolt11Error && example.message.test(error.message));
      });
    }

    it('refuses an unknown network', () => {
      const invoice = encodeBolt11(sampleInvoice(), randomBytes(32));
      // Re-wrap the same words under a prefix that names no network.
      const request = bolt11Words(invoice, 'lnxy1000n');
      assert.throws(() => decodeBolt11(request), /unknown network/);
    });
  });

  describe('our encoder', () => {
    it('round-trips every field, signed by the node key', () => {
      const key = randomBytes(32);
      const input = sampleInvoice();
      const decoded = decodeBolt11(encodeBolt11(input, key));
      assert.equal(decoded.network, 'testnet');
      assert.equal(decoded.amountMsat, input.amountMsat);
      assert.equal(decoded.paymentHash, Buffer.from(input.paymentHash).toString('hex'));
      assert.equal(decoded.paymentSecret, Buffer.from(input.paymentSecret).toString('hex'));
      assert.equal(decoded.description, input.description);
      assert.equal(decoded.expirySeconds, input.expirySeconds);
      assert.equal(decoded.minFinalCltvExpiry, 40);
      assert.equal(decoded.payee, Buffer.from(secp256k1.getPublicKey(key, true)).toString('hex'));
      assert.deepEqual(decoded.features, [8, 14]);
    });

    it('uses the shortest exact amount unit', () => {
      for (const [msat, prefix] of [
        [1_000n, 'lntb10n1'],
        [150_000n, 'lntb1500n1'],
        [100_000_000_000n, 'lntb11'],
        [2_000_000_000_000n, 'lntb201'],
        [100_000_000n, 'lntb1m1'],
        [1_001n, 'lntb10010p1'],
      ] as const) {
        const request = encodeBolt11({ ...sampleInvoice(), amountMsat: msat }, randomBytes(32));
        assert.ok(request.startsWith(prefix), `${msat} msat encodes as ${request.slice(0, 12)}`);
        assert.equal(decodeBolt11(request).amountMsat, msat);
      }
    });

    it('fails verification when the signature was made by another key than the n field names', () => {
      const request = encodeBolt11(sampleInvoice(), randomBytes(32));
      const other = encodeBolt11(sampleInvoice(), randomBytes(32));
      // Same data words (n included), the signature of another key.
      const { prefix, words } = splitRequest(request);
      const forged = joinRequest(prefix, [...words.slice(0, -104), ...splitRequest(other).words.slice(-104)]);
      assert.throws(() => decodeBolt11(forged), /bad signature: not made by the payee node key/);
    });
  });

  describe('against the independent bolt11 package', () => {
    it('decodes what bolt11 signs', () => {
      const key = randomBytes(32);
      const unsigned = bolt11.encode({
        network: TESTNET,
        millisatoshis: '1234000',
        timestamp: 1_700_000_000,
        tags: [
          { tagName: 'payment_hash', data: 'ab'.repeat(32) },
          { tagName: 'payment_secret', data: 'cd'.repeat(32) },
          { tagName: 'description', data: 'independent encoder' },
          { tagName: 'expire_time', data: 900 },
          { tagName: 'min_final_cltv_expiry', data: 144 },
        ],
      });
      const signed = bolt11.sign(unsigned, key.toString('hex'));
      const decoded = decodeBolt11(signed.paymentRequest!);
      assert.equal(decoded.amountMsat, 1_234_000n);
      assert.equal(decoded.paymentHash, 'ab'.repeat(32));
      assert.equal(decoded.paymentSecret, 'cd'.repeat(32));
      assert.equal(decoded.description, 'independent encoder');
      assert.equal(decoded.expiresAt, 1_700_000_900);
      assert.equal(decoded.minFinalCltvExpiry, 144);
      assert.equal(decoded.payee, Buffer.from(secp256k1.getPublicKey(key, true)).toString('hex'));
    });

    it('bolt11 decodes ours with the same fields and payee', () => {
      const key = randomBytes(32);
      const input = sampleInvoice();
      const theirs = bolt11.decode(encodeBolt11(input, key), TESTNET);
      assert.equal(theirs.millisatoshis, input.amountMsat!.toString());
      assert.equal(theirs.timestamp, input.timestamp);
      assert.equal(theirs.payeeNodeKey, Buffer.from(secp256k1.getPublicKey(key, true)).toString('hex'));
      const tag = (name: string) => theirs.tags.find((candidate) => candidate.tagName === name)?.data;
      assert.equal(tag('payment_hash'), Buffer.from(input.paymentHash).toString('hex'));
      assert.equal(tag('payment_secret'), Buffer.from(input.paymentSecret).toString('hex'));
      assert.equal(tag('description'), input.description);
      assert.equal(tag('expire_time'), input.expirySeconds);
      assert.equal(tag('min_final_cltv_expiry'), 40);
    });
  });
});

function sampleInvoice() {
  return {
    network: 'testnet' as const,
    amountMsat: 150_000n,
    timestamp: 1_750_000_000,
    paymentHash: randomBytes(32),
    paymentSecret: randomBytes(32),
    description: 'sample invoice ☕',
    expirySeconds: 86_400,
    minFinalCltvExpiry: 40,
  };
}

const splitRequest = (request: string) => bech32.decode(request as `${string}1${string}`, false);
const joinRequest = (prefix: string, words: number[]) => bech32.encode(prefix, words, false);
const bolt11Words = (request: string, prefix: string) => joinRequest(prefix, splitRequest(request).words);
