import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { BlockList, isIP } from 'node:net';
import type { Environment } from '../api-keys/entities';

/**
 * Where deliveries may go. Live: HTTPS only, and every address the host resolves to must be
 * public (checked at creation and again at connect time, so DNS rebinding cannot reach inside).
 * Sandbox: the same, plus http(s) to loopback when `allowInsecureLoopback` (local receivers).
 */
export interface UrlPolicy {
  environment: Environment;
  allowInsecureLoopback: boolean;
}

const LOOPBACK = new BlockList();
LOOPBACK.addSubnet('127.0.0.0', 8, 'ipv4');
LOOPBACK.addAddress('::1', 'ipv6');

/** Private, loopback, link-local and other non-public ranges (RFC 6890). */
const NON_PUBLIC = new BlockList();
for (const [network, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const) {
  NON_PUBLIC.addSubnet(network, prefix, 'ipv4');
}
// IPv6 forms that carry or reach an IPv4 address (NAT64, 6to4, Teredo, IPv4-compatible and
// IPv4-translated) are refused whole: a receiver on them is a tunnel into a network we cannot judge.
for (const [network, prefix] of [
  ['::', 96],
  ['::ffff:0:0:0', 96],
  ['64:ff9b::', 96],
  ['64:ff9b:1::', 48],
  ['100::', 64],
  ['2001::', 32],
  ['2001:db8::', 32],
  ['2002::', 16],
  ['fc00::', 7],
  ['fe80::', 10],
  ['ff00::', 8],
] as const) {
  NON_PUBLIC.addSubnet(network, prefix, 'ipv6');
}

function family(address: string): 'ipv4' | 'ipv6' {
  return isIP(address) === 6 ? 'ipv6' : 'ipv4';
}

/**
 * IPv4-mapped IPv6 is judged as the IPv4 address it carries, in both its dotted (::ffff:10.0.0.1)
 * and its hex form (::ffff:a00:1, which is how URL parsing writes it).
 */
function normalize(address: string): string {
  const dotted = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (dotted) return dotted[1]!;
  const hex = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/i.exec(address);
  if (!hex) return address;
  const [high, low] = [parseInt(hex[1]!, 16), parseInt(hex[2]!, 16)];
  return [high >> 8, high & 0xff, low >> 8, low & 0xff].join('.');
}

export const isLoopbackAddress = (address: string): boolean => LOOPBACK.check(normalize(address), family(normalize(address)));
export const isPublicAddress = (address: string): boolean => !NON_PUBLIC.check(normalize(address), family(normalize(address)));

const LOOPBACK_NAMES = new Set(['localhost', 'localhost.']);

export class DestinationRefused extends Error {
  override name = 'DestinationRefused';
}

/** Syntax and scheme checks that need no DNS; returns the parsed URL. */
export function checkUrlShape(raw: string, policy: UrlPolicy): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new DestinationRefused('must be an absolute URL');
  }
  if (url.username || url.password) throw new DestinationRefused('must not carry credentials');
  const host = url.hostname.replace(/^\[|\]$/g, '').toLowerCase();
  const loopbackHost = LOOPBACK_NAMES.has(host) || (isIP(host) !== 0 && isLoopbackAddress(host));
  const loopbackAllowed = policy.environment === 'sandbox' && policy.allowInsecureLoopback && loopbackHost;
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && loopbackAllowed)) {
    throw new DestinationRefused(
      policy.environment === 'live' ? 'must use https' : 'must use https (http is accepted only for loopback receivers in sandbox)',
    );
  }
  if (isIP(host) !== 0) assertAddressAllowed(host, policy);
  else if (LOOPBACK_NAMES.has(host) && !loopbackAllowed) throw new DestinationRefused('must not point to a loopback address');
  return url;
}

export function assertAddressAllowed(address: string, policy: UrlPolicy): void {
  if (isPublicAddress(address)) return;
  if (policy.environment === 'sandbox' && policy.allowInsecureLoopback && isLoopbackAddress(address)) return;
  throw new DestinationRefused('must not resolve to a private, loopback or link-local address');
}

/** Full check at create/update: shape, then every address the host resolves to. */
export async function checkDestinationUrl(raw: string, policy: UrlPolicy): Promise<URL> {
  const url = checkUrlShape(raw, policy);
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (isIP(host) !== 0) return url;
  const addresses = await new Promise<LookupAddress[]>((resolve, reject) =>
    dnsLookup(host, { all: true }, (error, found) => (error ? reject(new DestinationRefused(`host does not resolve (${error.code ?? 'DNS error'})`)) : resolve(found))),
  );
  for (const { address } of addresses) assertAddressAllowed(address, policy);
  return url;
}

/** A `lookup` for http(s).request that refuses non-public addresses at connect time. */
export function guardedLookup(policy: UrlPolicy) {
  return (hostname: string, options: object, callback: (error: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void) => {
    dnsLookup(hostname, { ...options, all: true }, (error, addresses) => {
      if (error) return callback(error, []);
      try {
        for (const { address } of addresses) assertAddressAllowed(address, policy);
      } catch (refused) {
        return callback(refused as NodeJS.ErrnoException, []);
      }
      if ((options as { all?: boolean }).all) return callback(null, addresses);
      const first = addresses[0]!;
      return callback(null, first.address, first.family);
    });
  };
}
