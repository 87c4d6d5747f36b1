import assert from 'node:assert/strict';
import { bytesToHex } from '@noble/hashes/utils';
import { mnemonicToSeedSync, validateMnemonic } from '@scure/bip39';
import { wordlist } from '@scure/bip39/wordlists/english';
import { generateMnemonicBytes, isValidMnemonicBytes, mnemonicToSeed } from '../../src/keys/mnemonic';

const ABANDON = 'abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about';
const bytes = (text: string) => Buffer.from(text, 'utf8');

describe('BIP-39 on bytes', () => {
  it('generates 24-word mnemonics the reference implementation accepts, and the same seed from them', async () => {
    for (let round = 0; round < 20; round++) {
      const mnemonic = generateMnemonicBytes();
      const text = mnemonic.toString('utf8');
      assert.equal(text.split(' ').length, 24);
      assert.ok(validateMnemonic(text, wordlist), text);
      assert.ok(isValidMnemonicBytes(mnemonic));
      if (round < 3) assert.equal(bytesToHex(await mnemonicToSeed(mnemonic)), bytesToHex(mnemonicToSeedSync(text)));
    }
  });

  it('accepts the published vectors of every length, and refuses a wrong checksum, unknown words and any other spacing or case', () => {
    const valid = [
      ABANDON,
      'legal winner thank year wave sausage worth useful legal winner thank yellow',
      'letter advice cage absurd amount doctor acoustic avoid letter advice cage absurd amount doctor acoustic avoid letter always',
      'zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo vote',
      'void come effort suffer camp survey warrior heavy shoot primary clutch crush open amazing screen patrol group space point ten exist slush involve unfold',
    ];
    for (const text of valid) assert.ok(isValidMnemonicBytes(bytes(text)), text);
    const invalid = [
      ABANDON.replace(/about$/, 'abandon'), // checksum
      ABANDON.replace(/about$/, 'aboutt'), // not a word
      ABANDON.replace(' ', '  '), // two spaces
      ` ${ABANDON}`,
      `${ABANDON} `,
      ABANDON.toUpperCase(),
      ABANDON.split(' ').slice(0, 11).join(' '), // 11 words
      '',
    ];
    for (const text of invalid) assert.equal(isValidMnemonicBytes(bytes(text)), false, text);
  });
});
