import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { sha256 } from '@noble/hashes/sha2';
import { secp256k1 } from '@noble/curves/secp256k1';
import { bech32 } from '@scure/base';
import bolt11 from 'bolt11';
import { Bolt11Error, decodeBolt11, encodeBolt11 } from '../../src/lightning/bolt11';

/** The examples of the BOLT #11 specification (lightning/bolts, 11-payment-encoding.md), signed by the spec's key e126f68f... */
const SPEC_PRIVATE_KEY = Buffer.from('e126f68f7eafcc8b74f54d269fe206be715000f94dac067d1c04a8ca3b2db734', 'hex');
const SPEC_PAYEE = '03e7156ae33b0a208d0744199163177e909e80176e55d97a2f221ede0f934dd9ad';
const SPEC_HASH = '0001020304050607080900010203040506070809000102030405060708090102';
const SPEC_SECRET = '11'.repeat(32);
const SPEC_TIMESTAMP = 1496314658;
/** The description the spec's `h` examples commit to. */
const SPEC_HASHED_DESCRIPTION =
  'One piece of chocolate cake, one icecream cone, one pickle, one slice of swiss cheese, one slice of salami, one lollypop, one piece of cherry pie, one sausage, one cupcake, and one slice of watermelon';

/** The valid examples of BOLT #11 as of lightning/bolts a3772650 (2026): every one carries `s`. */
const VALID = [
  {
    name: 'donation, any amount',
    request:
      'lnbc1pvjluezsp5zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zygspp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqdpl2pkx2ctnv5sxxmmwwd5kgetjypeh2ursdae8g6twvus8g6rfwvs8qun0dfjkxaq9qrsgq357wnc5r2ueh7ck6q93dj32dlqnls087fxdwk8qakdyafkq3yap9us6v52vjjsrvywa6rt52cm9r9zqt8r2t7mlcwspyetp5h2tztugp9lfyql',
    network: 'mainnet',
    amountMsat: null,
    description: 'Please consider supporting this project',
    expirySeconds: 3600,
  },
  {
    name: '$3 for a cup of coffee within one minute',
    request:
      'lnbc2500u1pvjluezsp5zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zygspp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqdq5xysxxatsyp3k7enxv4jsxqzpu9qrsgquk0rl77nj30yxdy8j9vdx85fkpmdla2087ne0xh8nhedh8w27kyke0lp53ut353s06fv3qfegext0eh0ymjpf39tuven09sam30g4vgpfna3rh',
    network: 'mainnet',
    amountMsat: 250_000_000n,
    description: '1 cup coffee',
    expirySeconds: 60,
  },
  {
    name: 'UTF-8 description',
    request:
      'lnbc2500u1pvjluezsp5zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zygspp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqdpquwpc4curk03c9wlrswe78q4eyqc7d8d0xqzpu9qrsgqhtjpauu9ur7fw2thcl4y9vfvh4m9wlfyz2gem29g5ghe2aak2pm3ps8fdhtceqsaagty2vph7utlgj48u0ged6a337aewvraedendscp573dxr',
    network: 'mainnet',
    amountMsat: 250_000_000n,
    description: 'ナンセンス 1杯',
    expirySeconds: 60,
  },
  {
    name: 'hashed description',
    request:
      'lnbc20m1pvjluezsp5zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zygspp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqhp58yjmdan79s6qqdhdzgynm4zwqd5d7xmw5fk98klysy043l2ahrqs9qrsgq7ea976txfraylvgzuxs8kgcw23ezlrszfnh8r6qtfpr6cxga50aj6txm9rxrydzd06dfeawfk6swupvz4erwnyutnjq7x39ymw6j38gp7ynn44',
    network: 'mainnet',
    amountMsat: 2_000_000_000n,
    description: null,
    expirySeconds: 3600,
  },
  {
    name: 'testnet with a fallback address',
    request:
      'lntb20m1pvjluezsp5zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zygshp58yjmdan79s6qqdhdzgynm4zwqd5d7xmw5fk98klysy043l2ahrqspp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqfpp3x9et2e20v6pu37c5d9vax37wxq72un989qrsgqdj545axuxtnfemtpwkc45hx9d2ft7x04mt8q7y6t0k2dge9e7h8kpy9p34ytyslj3yu569aalz2xdk8xkd7ltxqld94u8h2esmsmacgpghe9k8',
    network: 'testnet',
    amountMsat: 2_000_000_000n,
    description: null,
    expirySeconds: 3600,
  },
  {
    name: 'route hints and a P2PKH fallback',
    request:
      'lnbc20m1pvjluezsp5zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zygspp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqhp58yjmdan79s6qqdhdzgynm4zwqd5d7xmw5fk98klysy043l2ahrqsfpp3qjmp7lwpagxun9pygexvgpjdc4jdj85fr9yq20q82gphp2nflc7jtzrcazrra7wwgzxqc8u7754cdlpfrmccae92qgzqvzq2ps8pqqqqqqpqqqqq9qqqvpeuqafqxu92d8lr6fvg0r5gv0heeeqgcrqlnm6jhphu9y00rrhy4grqszsvpcgpy9qqqqqqgqqqqq7qqzq9qrsgqdfjcdk6w3ak5pca9hwfwfh63zrrz06wwfya0ydlzpgzxkn5xagsqz7x9j4jwe7yj7vaf2k9lqsdk45kts2fd0fkr28am0u4w95tt2nsq76cqw0',
    network: 'mainnet',
    amountMsat: 2_000_000_000n,
    description: null,
    expirySeconds: 3600,
  },
  {
    name: 'P2SH fallback',
    request:
      'lnbc20m1pvjluezsp5zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zygshp58yjmdan79s6qqdhdzgynm4zwqd5d7xmw5fk98klysy043l2ahrqspp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqfppj3a24vwu6r8ejrss3axul8rxldph2q7z99qrsgqz6qsgww34xlatfj6e3sngrwfy3ytkt29d2qttr8qz2mnedfqysuqypgqex4haa2h8fx3wnypranf3pdwyluftwe680jjcfp438u82xqphf75ym',
    network: 'mainnet',
    amountMsat: 2_000_000_000n,
    description: null,
    expirySeconds: 3600,
  },
  {
    name: 'P2WPKH fallback',
    request:
      'lnbc20m1pvjluezsp5zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zygshp58yjmdan79s6qqdhdzgynm4zwqd5d7xmw5fk98klysy043l2ahrqspp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqfppqw508d6qejxtdg4y5r3zarvary0c5xw7k9qrsgqt29a0wturnys2hhxpner2e3plp6jyj8qx7548zr2z7ptgjjc7hljm98xhjym0dg52sdrvqamxdezkmqg4gdrvwwnf0kv2jdfnl4xatsqmrnsse',
    network: 'mainnet',
    amountMsat: 2_000_000_000n,
    description: null,
    expirySeconds: 3600,
  },
  {
    name: 'P2WSH fallback',
    request:
      'lnbc20m1pvjluezsp5zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zygshp58yjmdan79s6qqdhdzgynm4zwqd5d7xmw5fk98klysy043l2ahrqspp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqfp4qrp33g0q5c5txsp9arysrx4k6zdkfs4nce4xj0gdcccefvpysxf3q9qrsgq9vlvyj8cqvq6ggvpwd53jncp9nwc47xlrsnenq2zp70fq83qlgesn4u3uyf4tesfkkwwfg3qs54qe426hp3tz7z6sweqdjg05axsrjqp9yrrwc',
    network: 'mainnet',
    amountMsat: 2_000_000_000n,
    description: null,
    expirySeconds: 3600,
  },
  {
    name: 'P2TR fallback',
    request:
      'lnbc20m1pvjluezsp5zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zygspp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqhp58yjmdan79s6qqdhdzgynm4zwqd5d7xmw5fk98klysy043l2ahrqsfp4pptdvg0d2nj99568qn6ssdy4cygnwuxgw2ukmnwgwz7jpqjz2kszs9qrsgqy606dznq28exnydt2r4c29y56xjtn3sk4mhgjtl4pg2y4ar3249rq4ajlmj9jy8zvlzw7cr8mggqzm842xfr0v72rswzq9xvr4hknfsqwmn6xd',
    network: 'mainnet',
    amountMsat: 2_000_000_000n,
    description: null,
    expirySeconds: 3600,
  },
  {
    name: 'features 8, 14 and 99',
    request:
      'lnbc25m1pvjluezpp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqdq5vdhkven9v5sxyetpdeessp5zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zygs9q5sqqqqqqqqqqqqqqqqsgq2a25dxl5hrntdtn6zvydt7d66hyzsyhqs4wdynavys42xgl6sgx9c4g7me86a27t07mdtfry458rtjr0v92cnmswpsjscgt2vcse3sgpz3uapa',
    network: 'mainnet',
    amountMsat: 2_500_000_000n,
    description: 'coffee beans',
    expirySeconds: 3600,
  },
  {
    name: 'the same, all upper case',
    request:
      'LNBC25M1PVJLUEZPP5QQQSYQCYQ5RQWZQFQQQSYQCYQ5RQWZQFQQQSYQCYQ5RQWZQFQYPQDQ5VDHKVEN9V5SXYETPDEESSP5ZYG3ZYG3ZYG3ZYG3ZYG3ZYG3ZYG3ZYG3ZYG3ZYG3ZYG3ZYG3ZYGS9Q5SQQQQQQQQQQQQQQQQSGQ2A25DXL5HRNTDTN6ZVYDT7D66HYZSYHQS4WDYNAVYS42XGL6SGX9C4G7ME86A27T07MDTFRY458RTJR0V92CNMSWPSJSCGT2VCSE3SGPZ3UAPA',
    network: 'mainnet',
    amountMsat: 2_500_000_000n,
    description: 'coffee beans',
    expirySeconds: 3600,
  },
  {
    // Wrong-length p, h, s and n fields (51, 53; n 52, 54), an unknown field and an f of version 19, all skipped.
    name: 'fields which must be ignored',
    request:
      'lnbc25m1pvjluezpp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqdq5vdhkven9v5sxyetpdeessp5zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zygs9q5sqqqqqqqqqqqqqqqqsgq2qrqqqfppnqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqppnqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqpp4qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqhpnqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqhp4qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqspnqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqsp4qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqnp5qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqnpkqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqz599y53s3ujmcfjp5xrdap68qxymkqphwsexhmhr8wdz5usdzkzrse33chw6dlp3jhuhge9ley7j2ayx36kawe7kmgg8sv5ugdyusdcqzn8z9x',
    network: 'mainnet',
    amountMsat: 2_500_000_000n,
    description: 'coffee beans',
    expirySeconds: 3600,
  },
  {
    name: 'fields which must be ignored (2020 revision of the example)',
    request:
      'lnbc25m1pvjluezpp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqdq5vdhkven9v5sxyetpdeessp5zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zygs9q5sqqqqqqqqqqqqqqqpqsq2qrqqqfppnqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqppnqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqpp4qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqhpnqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqhp4qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqspnqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqsp4qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqnp5qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqnpkqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqq2jxxfsnucm4jf4zwtznpaxphce606fvhvje5x7d4gw7n73994hgs7nteqvenq8a4ml8aqtchv5d9pf7l558889hp4yyrqv6a7zpq9fgpskqhza',
    network: 'mainnet',
    amountMsat: 2_500_000_000n,
    description: 'coffee beans',
    expirySeconds: 3600,
  },
  {
    name: 'payment metadata',
    request:
      'lnbc10m1pvjluezpp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqdp9wpshjmt9de6zqmt9w3skgct5vysxjmnnd9jx2mq8q8a04uqsp5zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zygs9q2gqqqqqqsgq7hf8he7ecf7n4ffphs6awl9t6676rrclv9ckg3d3ncn7fct63p6s365duk5wrk202cfy3aj5xnnp5gs3vrdvruverwwq7yzhkf5a3xqpd05wjc',
    network: 'mainnet',
    amountMsat: 1_000_000_000n,
    description: 'payment metadata inside',
    expirySeconds: 3600,
  },
  {
    name: 'public-key recovery with a high-S signature',
    request:
      'lnbc1pvjluezsp5zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zygspp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqdpl2pkx2ctnv5sxxmmwwd5kgetjypeh2ursdae8g6twvus8g6rfwvs8qun0dfjkxaq9qrsgq357wnc5r2ueh7ck6q93dj32dlqnls087fxdwk8qakdyafkq3yap2r09nt4ndd0unm3z9u5t48y6ucv4r5sg7lk98c77ctvjczkspk5qprc90gx',
    network: 'mainnet',
    amountMsat: null,
    description: 'Please consider supporting this project',
    expirySeconds: 3600,
    // The vector negated s but kept recovery flag 1 (the low-S original's): public-key recovery, as
    // libsecp256k1's secp256k1_ecdsa_recover does it, accepts the signature and yields another key.
    // (With flag 0 it yields the spec's key: see "without n: recovers the payee from low-S and high-S".)
    payee: '02d0139ce7427d6dfffd26a326c18be754ef1e64672b42694ba5b23ef6e6e7803d',
  },
  {
    name: 'features 9, 15 and 99 with a payment secret (2020 revision of the example)',
    request:
      'lnbc25m1pvjluezpp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqdq5vdhkven9v5sxyetpdeessp5zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zygs9q5sqqqqqqqqqqqqqqqpqsq67gye39hfg3zd8rgc80k32tvy9xk2xunwm5lzexnvpx6fd77en8qaq424dxgt56cag2dpt359k3ssyhetktkpqh24jqnjyw6uqd08sgptq44qu',
    network: 'mainnet',
    amountMsat: 2_500_000_000n,
    description: 'coffee beans',
    expirySeconds: 3600,
  },
  {
    name: 'the same, all upper case (2020 revision of the example)',
    request:
      'LNBC25M1PVJLUEZPP5QQQSYQCYQ5RQWZQFQQQSYQCYQ5RQWZQFQQQSYQCYQ5RQWZQFQYPQDQ5VDHKVEN9V5SXYETPDEESSP5ZYG3ZYG3ZYG3ZYG3ZYG3ZYG3ZYG3ZYG3ZYG3ZYG3ZYG3ZYG3ZYGS9Q5SQQQQQQQQQQQQQQQPQSQ67GYE39HFG3ZD8RGC80K32TVY9XK2XUNWM5LZEXNVPX6FD77EN8QAQ424DXGT56CAG2DPT359K3SSYHETKTKPQH24JQNJYW6UQD08SGPTQ44QU',
    network: 'mainnet',
    amountMsat: 2_500_000_000n,
    description: 'coffee beans',
    expirySeconds: 3600,
  },
] as const;

const PICO_EXAMPLE =
  'lnbc9678785340p1pwmna7lpp5gc3xfm08u9qy06djf8dfflhugl6p7lgza6dsjxq454gxhj9t7a0sd8dgfkx7cmtwd68yetpd5s9xar0wfjn5gpc8qhrsdfq24f5ggrxdaezqsnvda3kkum5wfjkzmfqf3jkgem9wgsyuctwdus9xgrcyqcjcgpzgfskx6eqf9hzqnteypzxz7fzypfhg6trddjhygrcyqezcgpzfysywmm5ypxxjemgw3hxjmn8yptk7untd9hxwg3q2d6xjcmtv4ezq7pqxgsxzmnyyqcjqmt0wfjjq6t5v4khxsp5zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zygsxqyjw5qcqp2rzjq0gxwkzc8w6323m55m4jyxcjwmy7stt9hwkwe2qxmy8zpsgg7jcuwz87fcqqeuqqqyqqqqlgqqqqn3qq9q9qrsgqrvgkpnmps664wgkp43l22qsgdw4ve24aca4nymnxddlnp8vh9v2sdxlu5ywdxefsfvm0fq3sesf08uf6q9a2ke0hc9j6z6wlxg5z5kqpu2v9wz';

/** The invalid examples of BOLT #11 (same revision). */
const INVALID = [
  {
    name: 'unknown compulsory feature 100',
    request:
      'lnbc25m1pvjluezpp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqdq5vdhkven9v5sxyetpdeessp5zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zygs9q4psqqqqqqqqqqqqqqqqsgqtqyx5vggfcsll4wu246hz02kp85x4katwsk9639we5n5yngc3yhqkm35jnjw4len8vrnqnf5ejh0mzj9n3vz2px97evektfm2l6wqccp3y7372',
    message: /requires unknown feature bit 100/,
  },
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
      'lnbc2500u1pvjluezpp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqdq5xysxxatsyp3k7enxv4jsxqzpusp5zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zygs9qrsgqwgt7mcn5yqw3yx0w94pswkpq6j9uh6xfqqqtsk4tnarugeektd4hg5975x9am52rz4qskukxdmjemg92vvqz8nvmsye63r5ykel43pgz7zq0g2',
    message: /bad signature/,
  },
  {
    name: 'string too short',
    request:
      'lnbc1pvjluezpp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqdpl2pkx2ctnv5sxxmmwwd5kgetjypeh2ursdae8g6na6hlh',
    message: /too short/,
  },
  {
    name: 'invalid multiplier',
    request:
      'lnbc2500x1pvjluezpp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqdq5xysxxatsyp3k7enxv4jsxqzpusp5zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zygs9qrsgqrrzc4cvfue4zp3hggxp47ag7xnrlr8vgcmkjxk3j5jqethnumgkpqp23z9jclu3v0a7e0aruz366e9wqdykw6dxhdzcjjhldxq0w6wgqcnu43j',
    message: /malformed amount.*invalid multiplier 'x'/,
  },
  {
    name: 'sub-millisatoshi precision',
    request:
      'lnbc2500000001p1pvjluezpp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqdq5xysxxatsyp3k7enxv4jsxqzpusp5zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zygs9qrsgq0lzc236j96a95uv0m3umg28gclm5lqxtqqwk32uuk4k6673k6n5kfvx3d2h8s295fad45fdhmusm8sjudfhlf6dcsxmfvkeywmjdkxcp99202x',
    message: /malformed amount.*sub-millisatoshi/,
  },
  {
    name: 'missing required s field',
    request:
      'lnbc20m1pvjluezpp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqhp58yjmdan79s6qqdhdzgynm4zwqd5d7xmw5fk98klysy043l2ahrqs9qrsgq7ea976txfraylvgzuxs8kgcw23ezlrszfnh8r6qtfpr6cxga50aj6txm9rxrydzd06dfeawfk6swupvz4erwnyutnjq7x39ymw6j38gp49qdkj',
    message: /missing payment secret \(s field\)/,
  },
  {
    name: 'high-S signature with an n field',
    request:
      'lnbc25m1p70xwfzpp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqdpl2pkx2ctnv5sxxmmwwd5kgetjypeh2ursdae8g6twvus8g6rfwvs8qun0dfjkxaqnp4q0n326hr8v9zprg8gsvezcch06gfaqqhde2aj730yg0durunfhv66sp5zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zygs9qrsgqsp5zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zygsp5cfzp9ugllvk03rltd6hvndxj26ux6gcxc5azyxk060rj9tzghct5zvjlps76gx8wpq5yuu79688k8gnm2c0al6v608s96l0xzrrlqqwnzxmu',
    message: /bad signature: not in low-S form/,
  },
  {
    name: 'invalid multiplier (2020 revision of the example)',
    request:
      'lnbc2500x1pvjluezpp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqdq5xysxxatsyp3k7enxv4jsxqzpujr6jxr9gq9pv6g46y7d20jfkegkg4gljz2ea2a3m9lmvvr95tq2s0kvu70u3axgelz3kyvtp2ywwt0y8hkx2869zq5dll9nelr83zzqqpgl2zg',
    message: /malformed amount.*invalid multiplier 'x'/,
  },
  {
    name: 'sub-millisatoshi precision (2020 revision of the example)',
    request:
      'lnbc2500000001p1pvjluezpp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqdq5xysxxatsyp3k7enxv4jsxqzpu7hqtk93pkf7sw55rdv4k9z2vj050rxdr6za9ekfs3nlt5lr89jqpdmxsmlj9urqumg0h9wzpqecw7th56tdms40p2ny9q4ddvjsedzcplva53s',
    message: /malformed amount.*sub-millisatoshi/,
  },
  {
    name: 'unknown compulsory feature 100 (2020 revision of the example)',
    request:
      'lnbc25m1pvjluezpp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqdq5vdhkven9v5sxyetpdeessp5zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zygs9q4psqqqqqqqqqqqqqqqpqsqq40wa3khl49yue3zsgm26jrepqr2eghqlx86rttutve3ugd05em86nsefzh4pfurpd9ek9w2vp95zxqnfe2u7ckudyahsa52q66tgzcp6t2dyk',
    message: /requires unknown feature bit 100/,
  },
];

/**
 * The examples as the specification gave them before 2021, without a payment secret: valid then, refused
 * now that readers MUST fail an invoice without a valid `s` field (lightning/bolts#1242).
 */
const LEGACY_WITHOUT_SECRET = [
  {
    name: 'donation, any amount',
    request:
      'lnbc1pvjluezpp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqdpl2pkx2ctnv5sxxmmwwd5kgetjypeh2ursdae8g6twvus8g6rfwvs8qun0dfjkxaq8rkx3yf5tcsyz3d73gafnh3cax9rn449d9p5uxz9ezhhypd0elx87sjle52x86fux2ypatgddc6k63n7erqz25le42c4u4ecky03ylcqca784w',
  },
  {
    name: '$3 for a cup of coffee within one minute',
    request:
      'lnbc2500u1pvjluezpp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqdq5xysxxatsyp3k7enxv4jsxqzpuaztrnwngzn3kdzw5hydlzf03qdgm2hdq27cqv3agm2awhz5se903vruatfhq77w3ls4evs3ch9zw97j25emudupq63nyw24cg27h2rspfj9srp',
  },
  {
    name: 'UTF-8 description',
    request:
      'lnbc2500u1pvjluezpp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqdpquwpc4curk03c9wlrswe78q4eyqc7d8d0xqzpuyk0sg5g70me25alkluzd2x62aysf2pyy8edtjeevuv4p2d5p76r4zkmneet7uvyakky2zr4cusd45tftc9c5fh0nnqpnl2jfll544esqchsrny',
  },
  {
    name: 'hashed description',
    request:
      'lnbc20m1pvjluezpp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqhp58yjmdan79s6qqdhdzgynm4zwqd5d7xmw5fk98klysy043l2ahrqscc6gd6ql3jrc5yzme8v4ntcewwz5cnw92tz0pc8qcuufvq7khhr8wpald05e92xw006sq94mg8v2ndf4sefvf9sygkshp5zfem29trqq2yxxz7',
  },
  {
    name: 'testnet with a fallback address',
    request:
      'lntb20m1pvjluezhp58yjmdan79s6qqdhdzgynm4zwqd5d7xmw5fk98klysy043l2ahrqspp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqfpp3x9et2e20v6pu37c5d9vax37wxq72un98kmzzhznpurw9sgl2v0nklu2g4d0keph5t7tj9tcqd8rexnd07ux4uv2cjvcqwaxgj7v4uwn5wmypjd5n69z2xm3xgksg28nwht7f6zspwp3f9t',
  },
  {
    name: 'route hints and a P2PKH fallback',
    request:
      'lnbc20m1pvjluezpp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqhp58yjmdan79s6qqdhdzgynm4zwqd5d7xmw5fk98klysy043l2ahrqsfpp3qjmp7lwpagxun9pygexvgpjdc4jdj85fr9yq20q82gphp2nflc7jtzrcazrra7wwgzxqc8u7754cdlpfrmccae92qgzqvzq2ps8pqqqqqqpqqqqq9qqqvpeuqafqxu92d8lr6fvg0r5gv0heeeqgcrqlnm6jhphu9y00rrhy4grqszsvpcgpy9qqqqqqgqqqqq7qqzqj9n4evl6mr5aj9f58zp6fyjzup6ywn3x6sk8akg5v4tgn2q8g4fhx05wf6juaxu9760yp46454gpg5mtzgerlzezqcqvjnhjh8z3g2qqdhhwkj',
  },
  {
    name: 'P2WSH fallback',
    request:
      'lnbc20m1pvjluezhp58yjmdan79s6qqdhdzgynm4zwqd5d7xmw5fk98klysy043l2ahrqspp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqfp4qrp33g0q5c5txsp9arysrx4k6zdkfs4nce4xj0gdcccefvpysxf3q28j0v3rwgy9pvjnd48ee2pl8xrpxysd5g44td63g6xcjcu003j3qe8878hluqlvl3km8rm92f5stamd3jw763n3hck0ct7p8wwj463cql26ava',
  },
  {
    name: 'pico-BTC amount',
    request:
      'lnbc9678785340p1pwmna7lpp5gc3xfm08u9qy06djf8dfflhugl6p7lgza6dsjxq454gxhj9t7a0sd8dgfkx7cmtwd68yetpd5s9xar0wfjn5gpc8qhrsdfq24f5ggrxdaezqsnvda3kkum5wfjkzmfqf3jkgem9wgsyuctwdus9xgrcyqcjcgpzgfskx6eqf9hzqnteypzxz7fzypfhg6trddjhygrcyqezcgpzfysywmm5ypxxjemgw3hxjmn8yptk7untd9hxwg3q2d6xjcmtv4ezq7pqxgsxzmnyyqcjqmt0wfjjq6t5v4khxxqyjw5qcqp2rzjq0gxwkzc8w6323m55m4jyxcjwmy7stt9hwkwe2qxmy8zpsgg7jcuwz87fcqqeuqqqyqqqqlgqqqqn3qq9qn07ytgrxxzad9hc4xt3mawjjt8znfv8xzscs7007v9gh9j569lencxa8xeujzkxs0uamak9aln6ez02uunw6rd2ht2sqe4hz8thcdagpleym0j',
  },
  {
    name: 'signature not recoverable',
    request:
      'lnbc2500u1pvjluezpp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqdq5xysxxatsyp3k7enxv4jsxqzpuaxtrnwngzn3kdzw5hydlzf03qdgm2hdq27cqv3agm2awhz5se903vruatfhq77w3ls4evs3ch9zw97j25emudupq63nyw24cg27h2rspk28uwq',
  },
];

const TESTNET = { bech32: 'tb', pubKeyHash: 0x6f, scriptHash: 0xc4, validWitnessVersions: [0, 1] };

/** Throws a Bolt11Error whose message matches. */
function refuses(request: string, message: RegExp, options?: { description?: string }) {
  assert.throws(
    () => decodeBolt11(request, options),
    (error: unknown) => {
      assert.ok(error instanceof Bolt11Error, `a Bolt11Error, not ${String(error)}`);
      assert.match(error.message, message);
      return true;
    },
  );
}

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
        assert.equal(decoded.paymentSecret, SPEC_SECRET);
        assert.equal(decoded.timestamp, SPEC_TIMESTAMP);
        assert.equal(decoded.payee, 'payee' in example ? example.payee : SPEC_PAYEE);
        assert.equal(decoded.expiresAt, SPEC_TIMESTAMP + example.expirySeconds);
      });
    }

    it('reads the payment secret, the features, payment metadata and pico-BTC amounts', () => {
      const coffee = decodeBolt11(VALID.find((example) => example.name === 'features 8, 14 and 99')!.request);
      assert.equal(coffee.paymentSecret, SPEC_SECRET);
      assert.deepEqual(coffee.features, [8, 14, 99]);
      assert.equal(coffee.minFinalCltvExpiry, 18, 'no c field: 18');
      assert.equal(coffee.paymentMetadata, null);
      const older = decodeBolt11(VALID.find((example) => example.name.startsWith('features 9, 15 and 99'))!.request);
      assert.deepEqual(older.features, [9, 15, 99]);
      const metadata = decodeBolt11(VALID.find((example) => example.name === 'payment metadata')!.request);
      assert.equal(metadata.paymentMetadata, '01fafaf0');
      assert.deepEqual(metadata.features, [8, 14, 48]);
      const pico = decodeBolt11(PICO_EXAMPLE);
      assert.equal(pico.amountMsat, 967_878_534n);
      assert.equal(pico.expirySeconds, 604_800);
      assert.equal(pico.minFinalCltvExpiry, 10);
      assert.equal(pico.paymentHash, '462264ede7e14047e9b249da94fefc47f41f7d02ee9b091815a5506bc8abf75f');
      assert.equal(pico.paymentSecret, SPEC_SECRET);
      assert.equal(pico.payee, SPEC_PAYEE);
    });

    for (const example of INVALID) {
      it(`refuses: ${example.name}`, () => refuses(example.request, example.message));
    }

    for (const example of LEGACY_WITHOUT_SECRET) {
      it(`refuses the pre-2021 example without a payment secret: ${example.name}`, () => refuses(example.request, /missing payment secret \(s field\)/));
    }

    it('refuses an unknown network', () => {
      const invoice = encodeBolt11(sampleInvoice(), randomBytes(32));
      // Re-wrap the same words under a prefix that names no network.
      const request = bolt11Words(invoice, 'lnxy1000n');
      assert.throws(() => decodeBolt11(request), /unknown network/);
    });
  });

  describe('reader requirements, one fault at a time (invoices signed with the spec key)', () => {
    it('the base invoice of these tests is valid', () => {
      const decoded = decodeBolt11(build(base()));
      assert.equal(decoded.payee, SPEC_PAYEE);
      assert.equal(decoded.paymentHash, SPEC_HASH);
      assert.equal(decoded.paymentSecret, SPEC_SECRET);
      assert.equal(decoded.description, 'one fault at a time');
      assert.equal(decoded.minFinalCltvExpiry, 18);
      assert.equal(decoded.expirySeconds, 3600);
      assert.deepEqual(decoded.features, [8, 14]);
      const withPayee = decodeBolt11(build([...base(), payeeField()]));
      assert.equal(withPayee.payee, SPEC_PAYEE);
    });

    describe('bech32', () => {
      it('has no length limit: neither 90 nor 1023 characters', () => {
        const request = encodeBolt11({ ...sampleInvoice(), description: 'x'.repeat(639) }, SPEC_PRIVATE_KEY);
        assert.ok(request.length > 1023, `${request.length} characters`);
        assert.equal(decodeBolt11(request).description, 'x'.repeat(639));
        // The d field's data_length is 10 bits: 1023 words, 639 bytes, the most it holds.
        assert.throws(() => encodeBolt11({ ...sampleInvoice(), description: 'x'.repeat(640) }, SPEC_PRIVATE_KEY), /too long/);
      });

      it('accepts upper case, refuses mixed case and a bad checksum', () => {
        const request = build(base());
        assert.equal(decodeBolt11(request.toUpperCase()).paymentHash, SPEC_HASH);
        refuses(request.slice(0, 10).toUpperCase() + request.slice(10), /malformed bech32/);
        refuses(request.slice(0, -1) + (request.endsWith('q') ? 'p' : 'q'), /bad bech32 checksum/);
      });
    });

    describe('human-readable part', () => {
      it('refuses an amount with a non-digit or an unknown multiplier', () => {
        refuses(build(base(), { prefix: 'lnbc2x5u' }), /malformed amount '2x5u'/);
        refuses(build(base(), { prefix: 'lnbc25k' }), /invalid multiplier 'k'/);
      });

      it('refuses a p amount whose last decimal is not 0, accepts one that ends in 0', () => {
        refuses(build(base(), { prefix: 'lnbc15p' }), /sub-millisatoshi/);
        assert.equal(decodeBolt11(build(base(), { prefix: 'lnbc150p' })).amountMsat, 15n);
      });

      it('accepts a non-largest multiplier, refuses leading zeros and a zero amount', () => {
        assert.equal(decodeBolt11(build(base(), { prefix: 'lnbc2500000n' })).amountMsat, 250_000_000n);
        refuses(build(base(), { prefix: 'lnbc025m' }), /leading zeros/);
        refuses(build(base(), { prefix: 'lnbc0m' }), /zero/);
      });

      it('reads every known prefix, refuses an unknown one', () => {
        assert.equal(decodeBolt11(build(base(), { prefix: 'lntbs10u' })).network, 'signet');
        assert.equal(decodeBolt11(build(base(), { prefix: 'lnbcrt10u' })).network, 'regtest');
        assert.equal(decodeBolt11(build(base(), { prefix: 'lntb10u' })).network, 'testnet');
        refuses(build(base(), { prefix: 'lnltc10u' }), /unknown network/);
      });
    });

    describe('tagged fields', () => {
      for (const [letter, tag, expected] of [
        ['p', 1, 52],
        ['s', 16, 52],
        ['h', 23, 52],
        ['n', 19, 53],
      ] as const) {
        for (const length of [expected - 1, expected + 1, 0]) {
          it(`skips an ${letter} field of data_length ${length} (fixed length ${expected}), before or after the real one`, () => {
            const odd: [number, number[]] = [tag, zeros(length)];
            for (const fields of [[...base(), odd], [odd, ...base()]]) {
              const decoded = decodeBolt11(build(fields));
              assert.equal(decoded.paymentHash, SPEC_HASH);
              assert.equal(decoded.paymentSecret, SPEC_SECRET);
              assert.equal(decoded.payee, SPEC_PAYEE);
            }
          });
        }
      }

      it('refuses an invoice without a p field', () => {
        refuses(build(base().filter(([tag]) => tag !== 1)), /missing payment hash \(p field\)/);
      });

      it('refuses an invoice without an s field, even when the features do not mention payment_secret', () => {
        const noSecret = base().filter(([tag]) => tag !== 16);
        refuses(build(noSecret), /missing payment secret \(s field\)/);
        refuses(build(noSecret.filter(([tag]) => tag !== 5)), /missing payment secret \(s field\)/);
      });

      it('refuses neither d nor h, and both d and h', () => {
        refuses(build(base().filter(([tag]) => tag !== 13)), /missing description \(d or h field\)/);
        refuses(build([...base(), [23, bech32.toWords(sha256(utf8('one fault at a time')))]]), /both a description \(d field\) and a description hash \(h field\)/);
        const hashed = build([...base().filter(([tag]) => tag !== 13), [23, bech32.toWords(sha256(utf8(SPEC_HASHED_DESCRIPTION)))]]);
        assert.equal(decodeBolt11(hashed).descriptionHash, Buffer.from(sha256(utf8(SPEC_HASHED_DESCRIPTION))).toString('hex'));
      });

      it('refuses a d field that is not UTF-8', () => {
        refuses(build([...base().filter(([tag]) => tag !== 13), [13, bech32.toWords(Uint8Array.from([0xc3, 0x28]))]]), /not valid UTF-8/);
      });

      it('checks the h field against the description when the payer has it', () => {
        const hashed = VALID.find((example) => example.name === 'hashed description')!.request;
        assert.equal(decodeBolt11(hashed, { description: SPEC_HASHED_DESCRIPTION }).descriptionHash, '3925b6f67e2c340036ed12093dd44e0368df1b6ea26c53dbe4811f58fd5db8c1');
        refuses(hashed, /description hash \(h field\) does not match the description/, { description: `${SPEC_HASHED_DESCRIPTION}.` });
      });

      it('refuses a second p field, even an identical one', () => {
        refuses(build([...base(), [1, bech32.toWords(Buffer.from(SPEC_HASH, 'hex'))]]), /more than one p field/);
        refuses(build([...base(), [1, bech32.toWords(Buffer.alloc(32, 7))]]), /more than one p field/);
      });

      it('refuses conflicting repeats of s, d, n, x and c', () => {
        refuses(build([...base(), [16, bech32.toWords(Buffer.alloc(32, 2))]]), /more than one s field/);
        refuses(build([...base(), [13, bech32.toWords(utf8('another description'))]]), /more than one d field/);
        refuses(build([...base(), payeeField(), [19, bech32.toWords(secp256k1.getPublicKey(randomBytes(32), true))]]), /more than one n field/);
        refuses(build([...base(), [6, [1]], [6, [2]]]), /more than one x field/);
        refuses(build([...base(), [24, [1]], [24, [2]]]), /more than one c field/);
      });

      it('skips unknown fields, route hints and fallback addresses of unknown version', () => {
        const decoded = decodeBolt11(build([...base(), [2, zeros(3)], [9, [19, ...zeros(32)]], [3, zeros(82)], [11, zeros(10)]]));
        assert.equal(decoded.paymentHash, SPEC_HASH);
      });

      it('reads x and c, refuses them with a leading zero (non-minimal data_length)', () => {
        const decoded = decodeBolt11(build([...base(), [6, [1, 28]], [24, [4, 16]]]));
        assert.equal(decoded.expirySeconds, 60);
        assert.equal(decoded.minFinalCltvExpiry, 144);
        refuses(build([...base(), [6, [0, 1, 28]]]), /x field is not minimally encoded/);
        refuses(build([...base(), [24, [0, 4, 16]]]), /c field is not minimally encoded/);
      });

      it('uses 18 as min_final_cltv_expiry_delta and 3600 s as expiry when c and x are absent', () => {
        const decoded = decodeBolt11(build(base()));
        assert.equal(decoded.minFinalCltvExpiry, 18);
        assert.equal(decoded.expiresAt, SPEC_TIMESTAMP + 3600);
      });

      it('refuses an x value too large to be exact', () => {
        refuses(build([...base(), [6, [1, ...zeros(11)]]]), /x field value is too large/);
      });

      it('reads the m field as payment metadata', () => {
        assert.equal(decodeBolt11(build([...base(), [27, bech32.toWords(Uint8Array.from([1, 0xfa, 0xfa, 0xf0]))]])).paymentMetadata, '01fafaf0');
      });
    });

    describe('feature bits', () => {
      it('ignores unknown odd bits, refuses unknown even bits naming the bit', () => {
        assert.deepEqual(decodeBolt11(build(withFeatures([8, 14, 101]))).features, [8, 14, 101]);
        refuses(build(withFeatures([8, 14, 100])), /requires unknown feature bit 100/);
        refuses(build(withFeatures([8, 14, 24])), /requires unknown feature bit 24/);
      });

      it('accepts the compulsory bits it knows: var_onion_optin, payment_secret, basic_mpp, payment_metadata', () => {
        assert.deepEqual(decodeBolt11(build(withFeatures([8, 14, 16, 48]))).features, [8, 14, 16, 48]);
      });

      it('refuses basic_mpp without its dependency payment_secret', () => {
        refuses(build(withFeatures([8, 17])), /feature basic_mpp \(bit 17\) is set without its dependency payment_secret/);
        refuses(build(withFeatures([8, 16])), /feature basic_mpp \(bit 16\) is set without its dependency payment_secret/);
        assert.deepEqual(decodeBolt11(build(withFeatures([9, 15, 17]))).features, [9, 15, 17]);
      });

      it('refuses a 9 field with a leading zero (non-minimal data_length)', () => {
        refuses(build([...base().filter(([tag]) => tag !== 5), [5, [0, ...featureWords([8, 14])]]]), /9 field is not minimally encoded/);
      });
    });

    describe('signature', () => {
      it('without n: recovers the payee from low-S and high-S signatures alike', () => {
        assert.equal(decodeBolt11(build(base())).payee, SPEC_PAYEE);
        assert.equal(decodeBolt11(build(base(), { highS: true })).payee, SPEC_PAYEE);
      });

      it('with n: verifies against n and requires low-S (signature normalisation)', () => {
        assert.equal(decodeBolt11(build([...base(), payeeField()])).payee, SPEC_PAYEE);
        refuses(build([...base(), payeeField()], { highS: true }), /bad signature: not in low-S form/);
      });

      it('with n: the payee is n, verified, not a key recovered with the recovery flag', () => {
        // A valid low-S signature by n's key whose recovery flag points at another key: n decides.
        assert.equal(decodeBolt11(build([...base(), payeeField()], { flipRecovery: true })).payee, SPEC_PAYEE);
        // Without n the wrong flag recovers another key, so the signature is refused or names someone else.
        let recovered: string | null = null;
        try {
          recovered = decodeBolt11(build(base(), { flipRecovery: true })).payee;
        } catch (error) {
          assert.ok(error instanceof Bolt11Error);
        }
        assert.notEqual(recovered, SPEC_PAYEE);
      });

      it('with n: refuses a signature by another key, and an n that is not a public key', () => {
        refuses(build([...base(), payeeField(secp256k1.getPublicKey(randomBytes(32), true))]), /bad signature: not made by the payee node key in the n field/);
        refuses(build([...base(), payeeField(Uint8Array.from([5, ...Buffer.alloc(32, 1)]))]), /n field is not a valid public key/);
      });

      it('with verifiedPayee (a stored payment read again): reads the same invoice without checking the signature again', () => {
        const request = build(base());
        assert.deepEqual(decodeBolt11(request, { verifiedPayee: SPEC_PAYEE }), decodeBolt11(request));
        // The signature is not looked at: a zero r, refused by a full decode, passes, the payee is the one given.
        assert.equal(decodeBolt11(build(base(), { zeroR: true }), { verifiedPayee: SPEC_PAYEE }).payee, SPEC_PAYEE);
        // Everything else is still checked.
        assert.throws(() => decodeBolt11(`${request.slice(0, -1)}${request.endsWith('q') ? 'p' : 'q'}`, { verifiedPayee: SPEC_PAYEE }), /bad bech32 checksum/);
      });

      it('refuses a recovery flag above 3 and r or s out of range', () => {
        refuses(build(base(), { recovery: 4 }), /recovery flag 4/);
        refuses(build(base(), { zeroR: true }), /bad signature/);
      });

      it('refuses a signature over other data', () => {
        const request = build(base());
        const other = build([...base().filter(([tag]) => tag !== 13), [13, bech32.toWords(utf8('another description'))]]);
        const { prefix, words } = splitRequest(request);
        const forged = joinRequest(prefix, [...splitRequest(other).words.slice(0, -104), ...words.slice(-104)]);
        assert.notEqual(decodeBolt11(forged).payee, SPEC_PAYEE, 'recovery yields some other key');
        const withPayee = build([...base(), payeeField()]);
        const otherWithPayee = build([...base().filter(([tag]) => tag !== 13), [13, bech32.toWords(utf8('another description'))], payeeField()]);
        refuses(joinRequest(prefix, [...splitRequest(otherWithPayee).words.slice(0, -104), ...splitRequest(withPayee).words.slice(-104)]), /bad signature: not made by the payee node key/);
      });
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
      // Handed the node's public key, it writes the invoice it derives (the signature is deterministic, RFC 6979).
      assert.equal(encodeBolt11(input, key, secp256k1.getPublicKey(key, true)), encodeBolt11(input, key));
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

    it('agrees with bolt11 on the payee of every invoice the fault tests accept, with and without n', () => {
      for (const request of [build(base()), build([...base(), payeeField()]), build(withFeatures([9, 15, 17, 101])), build([...base(), [6, [1, 28]], [24, [4, 16]]])]) {
        assert.equal(decodeBolt11(request).payee, bolt11.decode(request).payeeNodeKey);
      }
    });

    it('refuses what the more lenient bolt11 package accepts: no s field', () => {
      const missingSecret = INVALID.find((example) => example.name === 'missing required s field')!.request;
      assert.ok(bolt11.decode(missingSecret).paymentRequest, 'bolt11 decodes it');
      refuses(missingSecret, /missing payment secret/);
      const noSecret = build(base().filter(([tag]) => tag !== 16));
      assert.ok(bolt11.decode(noSecret).paymentRequest, 'bolt11 decodes it');
      refuses(noSecret, /missing payment secret/);
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

type Field = [tag: number, words: number[]];

const utf8 = (text: string) => new TextEncoder().encode(text);
const zeros = (count: number) => new Array<number>(count).fill(0);

function featureWords(bits: number[]): number[] {
  const words = zeros(Math.floor(Math.max(...bits) / 5) + 1);
  for (const bit of bits) words[words.length - 1 - Math.floor(bit / 5)]! |= 1 << bit % 5;
  return words;
}

/** p, s, d and 9 (var_onion_optin and payment_secret compulsory): the fields a modern invoice needs. */
const base = (): Field[] => [
  [1, bech32.toWords(Buffer.from(SPEC_HASH, 'hex'))],
  [16, bech32.toWords(Buffer.from(SPEC_SECRET, 'hex'))],
  [13, bech32.toWords(utf8('one fault at a time'))],
  [5, featureWords([8, 14])],
];
const withFeatures = (bits: number[]): Field[] => [...base().filter(([tag]) => tag !== 5), [5, featureWords(bits)]];
const payeeField = (key: Uint8Array = Buffer.from(SPEC_PAYEE, 'hex')): Field => [19, bech32.toWords(key)];

/**
 * An invoice of exactly these fields, signed with the spec's key over BOLT #11's preimage (the
 * human-readable part, then the data words zero-padded to bytes). `highS` swaps s for n - s (and
 * flips the recovery flag, so recovery still finds the signer); the other options break the signature.
 */
function build(fields: Field[], options: { prefix?: string; highS?: boolean; flipRecovery?: boolean; recovery?: number; zeroR?: boolean } = {}): string {
  const prefix = options.prefix ?? 'lnbc';
  const words = [...timestampWords(SPEC_TIMESTAMP), ...fields.flatMap(([tag, value]) => [tag, value.length >> 5, value.length & 31, ...value])];
  const bits = words.flatMap((word) => [4, 3, 2, 1, 0].map((shift) => (word >> shift) & 1));
  while (bits.length % 8) bits.push(0);
  const data = Uint8Array.from({ length: bits.length / 8 }, (_, index) => bits.slice(index * 8, index * 8 + 8).reduce((byte, bit) => (byte << 1) | bit, 0));
  const hash = sha256(Uint8Array.from([...utf8(prefix), ...data]));
  let signature = secp256k1.sign(hash, SPEC_PRIVATE_KEY);
  let recovery = signature.recovery;
  if (options.highS) {
    signature = new secp256k1.Signature(signature.r, secp256k1.CURVE.n - signature.s).addRecoveryBit(recovery ^ 1);
    recovery ^= 1;
    assert.ok(signature.hasHighS());
  }
  if (options.flipRecovery) recovery ^= 1;
  const signatureBytes = new Uint8Array(65);
  signatureBytes.set(signature.toCompactRawBytes());
  if (options.zeroR) signatureBytes.fill(0, 0, 32);
  signatureBytes[64] = options.recovery ?? recovery;
  return joinRequest(prefix, [...words, ...bech32.toWords(signatureBytes)]);
}

function timestampWords(seconds: number): number[] {
  return Array.from({ length: 7 }, (_, index) => Math.floor(seconds / 32 ** (6 - index)) % 32);
}
