import assert from 'node:assert/strict';
import { ed25519 } from '@noble/curves/ed25519';
import { bytesToHex, hexToBytes } from '@noble/hashes/utils';
import { base58 } from '@scure/base';
import { mnemonicToSeedSync } from '@scure/bip39';
import { Address as BitcoinAddress, NETWORK, TEST_NETWORK } from '@scure/btc-signer';
import { isAddress } from 'viem';
import { coinTypeFor, deriveKey, derivationPath, slip10Ed25519, type KeyLocation } from '../../src/keys/derivation';
import { mnemonicToSeed } from '../../src/keys/mnemonic';

const ABANDON = 'abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about';

describe('Key derivation against published vectors', () => {
  let seed: Uint8Array;
  before(async () => {
    seed = await mnemonicToSeed(Buffer.from(ABANDON));
  });

  /** The coin type a new wallet of the network gets, unless the location names one. */
  const at = (location: Partial<KeyLocation> & Pick<KeyLocation, 'chain' | 'format'>) =>
    deriveKey(seed, { testnet: false, account: 0, index: 0, coinType: coinTypeFor(location.chain, location.testnet ?? false), ...location });

  it('computes the BIP-39 seed as the reference implementation does', () => {
    assert.equal(bytesToHex(seed), bytesToHex(mnemonicToSeedSync(ABANDON)));
  });

  it('derives the BIP-84, BIP-86 and BIP-44 first receive addresses on mainnet', () => {
    const p2wpkh = at({ chain: 'bitcoin', format: 'p2wpkh' });
    assert.equal(p2wpkh.path, "m/84'/0'/0'/0/0");
    assert.equal(p2wpkh.address, 'bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyu');
    // BIP-84's second receive address: the index is the last step.
    assert.equal(at({ chain: 'bitcoin', format: 'p2wpkh', index: 1 }).address, 'bc1qnjg0jd8228aq7egyzacy8cys3knf9xvrerkf9g');

    const p2tr = at({ chain: 'bitcoin', format: 'p2tr' });
    assert.equal(p2tr.path, "m/86'/0'/0'/0/0");
    assert.equal(p2tr.address, 'bc1p5cyxnuxmeuwuvkwfem96lqzszd02n6xdcjrs20cac6yqjjwudpxqkedrcr');

    const p2pkh = at({ chain: 'bitcoin', format: 'p2pkh' });
    assert.equal(p2pkh.path, "m/44'/0'/0'/0/0");
    assert.equal(p2pkh.address, '1LqBGSKuX5yYUonjxT5qGfpUsXKYYWeabA');
  });

  it('derives the testnet forms under coin type 1 with testnet encodings', () => {
    const expected = {
      p2wpkh: ["m/84'/1'/0'/0/0", 'tb1q6rz28mcfaxtmd6v789l9rrlrusdprr9pqcpvkl'],
      p2tr: ["m/86'/1'/0'/0/0", 'tb1p8wpt9v4frpf3tkn0srd97pksgsxc5hs52lafxwru9kgeephvs7rqlqt9zj'],
      p2pkh: ["m/44'/1'/0'/0/0", 'mkpZhYtJu2r87Js3pDiWJDmPte2NRZ8bJV'],
    } as const;
    for (const [format, [path, address]] of Object.entries(expected)) {
      const key = at({ chain: 'bitcoin', format: format as 'p2wpkh', testnet: true });
      assert.equal(key.path, path);
      assert.equal(key.address, address, format);
      assert.ok(BitcoinAddress(TEST_NETWORK).decode(key.address));
      assert.throws(() => BitcoinAddress(NETWORK).decode(key.address));
    }
  });

  it("derives the known Ethereum m/44'/60'/0'/0/0 address, EIP-55 checksummed", () => {
    const key = at({ chain: 'ethereum', format: 'eip55' });
    assert.equal(key.path, "m/44'/60'/0'/0/0");
    assert.equal(key.address, '0x9858EfFD232B4033E47d90003D41EC34EcaEda94');
    assert.ok(isAddress(key.address, { strict: true }));
  });

  it('derives new testnet wallets of every chain under coin type 1, so their keys hold no mainnet path; an older wallet keeps its coin type', () => {
    const mainnet = { ethereum: 'eip55', tron: 'base58check', solana: 'base58' } as const;
    for (const [chain, format] of Object.entries(mainnet) as [keyof typeof mainnet, (typeof mainnet)[keyof typeof mainnet]][]) {
      const live = at({ chain, format });
      const sandbox = at({ chain, format, testnet: true });
      assert.equal(sandbox.path, live.path.replace(/^m\/44'\/\d+'/, "m/44'/1'"), chain);
      assert.notEqual(sandbox.address, live.address, chain);
      // A sandbox wallet made before coin type 1 records its chain's coin type and derives what it always did.
      assert.equal(at({ chain, format, testnet: true, coinType: coinTypeFor(chain, false) }).address, live.address, chain);
    }
  });

  it("derives Tron at m/44'/195'/0'/0/0 as base58check with the 0x41 prefix", () => {
    const key = at({ chain: 'tron', format: 'base58check' });
    assert.equal(key.path, "m/44'/195'/0'/0/0");
    assert.equal(key.address, 'TUEZSdKsoDHQMeZwihtdoBiN46zxhGWYdH');
  });

  it("derives Solana at m/44'/501'/0'/0' with SLIP-10 ed25519", () => {
    const key = at({ chain: 'solana', format: 'base58' });
    assert.equal(key.path, "m/44'/501'/0'/0'");
    assert.equal(key.address, 'HAgk14JpMQLgt6rVgv7cBQFJWFto5Dqxi472uT3DKpqk');
    assert.equal(base58.decode(key.address).length, 32);
    assert.deepEqual(ed25519.getPublicKey(key.privateKey), key.publicKey);
  });

  it('matches the SLIP-10 ed25519 test vector 1', () => {
    const vectorSeed = hexToBytes('000102030405060708090a0b0c0d0e0f');
    assert.equal(bytesToHex(slip10Ed25519(vectorSeed, 'm')), '2b4be7f19ee27bbf30c667b642d5f4aa69fd169872f8fc3059c08ebae2eb19e7');
    assert.equal(bytesToHex(slip10Ed25519(vectorSeed, "m/0'")), '68e0fe46dfb67e368c75379acec591dad19df3cde26e63b93a8e704f1dade7a3');
    assert.equal(bytesToHex(slip10Ed25519(vectorSeed, "m/0'/1'/2'/2'")), '30d1dc7e5fc04c31219ab25a27ae00b50f6fd66622f6e9c913253d6511d1e662');
    assert.throws(() => slip10Ed25519(vectorSeed, "m/0'/1"), /hardened/);
  });

  it('places each wallet on its own account and each address on the next index', () => {
    assert.equal(derivationPath({ chain: 'bitcoin', format: 'p2tr', testnet: true, coinType: 1, account: 3, index: 7 }), "m/86'/1'/3'/0/7");
    assert.equal(derivationPath({ chain: 'ethereum', format: 'eip55', testnet: false, coinType: 60, account: 2, index: 5 }), "m/44'/60'/2'/0/5");
    assert.equal(derivationPath({ chain: 'solana', format: 'base58', testnet: true, coinType: 1, account: 1, index: 4 }), "m/44'/1'/1'/4'");
    const accounts = new Set([0, 1, 2].map((account) => at({ chain: 'ethereum', format: 'eip55', account }).address));
    assert.equal(accounts.size, 3);
  });
});
