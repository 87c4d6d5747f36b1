import assert from 'node:assert/strict';
import { checkUrlShape, DestinationRefused, isPublicAddress } from '../../src/events/url-policy';

describe('Webhook URL policy', () => {
  const live = { environment: 'live' as const, allowInsecureLoopback: false };

  it('refuses every IPv6 form that embeds or reaches an IPv4 address, and private IPv4 in mapped form', () => {
    for (const address of [
      '64:ff9b::a00:1', // NAT64 of 10.0.0.1
      '64:ff9b::808:808', // NAT64 of a public address: still a tunnel
      '64:ff9b:1::1', // local-use NAT64
      '2002:a00:1::1', // 6to4 of 10.0.0.1
      '2001:0:4136:e378:8000:63bf:3fff:fdd2', // Teredo
      '::a00:1', // IPv4-compatible
      '::ffff:a00:1', // IPv4-mapped, hex form
      '::ffff:10.0.0.1', // IPv4-mapped, dotted
      '::ffff:127.0.0.1',
      '::ffff:0:a00:1', // IPv4-translated
      'fd00::1',
      'fe80::1',
      '::1',
      '::',
    ]) {
      assert.equal(isPublicAddress(address), false, address);
    }
    assert.equal(isPublicAddress('::ffff:8.8.8.8'), true, 'a mapped public address is judged as that address');
    assert.equal(isPublicAddress('2606:4700:4700::1111'), true);
  });

  it('refuses such literals in a URL, as URL parsing rewrites them', () => {
    for (const url of ['https://[::ffff:10.0.0.1]/hook', 'https://[64:ff9b::10.0.0.1]/hook', 'https://[2002:c0a8:101::1]/hook', 'https://[::ffff:127.0.0.1]/hook']) {
      assert.throws(() => checkUrlShape(url, live), DestinationRefused, url);
    }
    assert.equal(checkUrlShape('https://[2606:4700:4700::1111]/hook', live).hostname, '[2606:4700:4700::1111]');
  });
});
