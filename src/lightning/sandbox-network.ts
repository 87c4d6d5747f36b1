import { randomBytes } from 'node:crypto';
import { secp256k1 } from '@noble/curves/secp256k1';
import { hmac } from '@noble/hashes/hmac';
import { sha256 } from '@noble/hashes/sha2';
import { encodeBolt11, type DecodedInvoice } from './bolt11';

/**
 * The sandbox's simulated remote Lightning nodes. Each has its own (public, sandbox-only) key and
 * a behaviour chosen by which node issues the invoice:
 * - ok: pays at once; slow: pays after SLOW_NODE_DELAY_MS; fail: the payment fails at the destination;
 * - unknown: the send's outcome is unknown, re-queries answer unknown until the UNKNOWN_QUERIES-th, then paid;
 * - unknown_then_fail: the same, then failed; unroutable: no route (preview route_found false, pay 400).
 * Stateless: a node's preimage for an invoice is HMAC-SHA256(node key, payment secret), so any
 * invoice the node issued can be settled from its BOLT11 string alone.
 */
export const SANDBOX_NODES = ['ok', 'slow', 'fail', 'unknown', 'unknown_then_fail', 'unroutable'] as const;
export type SandboxNode = (typeof SANDBOX_NODES)[number];
export const SLOW_NODE_DELAY_MS = 3_000;
export const UNKNOWN_QUERIES = 2;

const nodePrivateKey = (node: SandboxNode) => sha256(new TextEncoder().encode(`custody-platform sandbox lightning node ${node}`));
const NODE_BY_PUBLIC_KEY = new Map(SANDBOX_NODES.map((node) => [Buffer.from(secp256k1.getPublicKey(nodePrivateKey(node), true)).toString('hex'), node]));

export const sandboxNodeFor = (publicKey: string): SandboxNode | undefined => NODE_BY_PUBLIC_KEY.get(publicKey);

export function sandboxPreimage(node: SandboxNode, paymentSecretHex: string): Uint8Array {
  return hmac(sha256, nodePrivateKey(node), Buffer.from(paymentSecretHex, 'hex'));
}

/** Fee model of the simulated network: 1 sat base plus 1,000 ppm of the amount, rounded up to whole sats. */
export function sandboxFeeMsat(amountMsat: bigint): bigint {
  const proportional = (amountMsat * 1_000n + 999_999n) / 1_000_000n;
  return ((1_000n + proportional + 999n) / 1_000n) * 1_000n;
}

export function issueSandboxInvoice(input: { node: SandboxNode; amountSat: number | null; description: string; expirySeconds: number; now: Date }) {
  const paymentSecret = randomBytes(32);
  const preimage = sandboxPreimage(input.node, paymentSecret.toString('hex'));
  const paymentHash = sha256(preimage);
  const privateKey = nodePrivateKey(input.node);
  const request = encodeBolt11(
    {
      network: 'testnet',
      amountMsat: input.amountSat === null ? null : BigInt(input.amountSat) * 1_000n,
      timestamp: Math.floor(input.now.getTime() / 1000),
      paymentHash,
      paymentSecret,
      description: input.description,
      expirySeconds: input.expirySeconds,
      minFinalCltvExpiry: 40,
    },
    privateKey,
  );
  return { request, paymentHash: Buffer.from(paymentHash).toString('hex'), destination: Buffer.from(secp256k1.getPublicKey(privateKey, true)).toString('hex') };
}

export const sandboxPreimageFor = (node: SandboxNode, invoice: DecodedInvoice) => Buffer.from(sandboxPreimage(node, invoice.paymentSecret ?? '')).toString('hex');
