/**
 * LND macaroons: the permissions the service uses, reading the permissions a macaroon grants (so live
 * refuses an admin macaroon), and baking one with only ours. The identifier is read by hand: the two
 * formats involved (macaroon V2 fields, one protobuf message) are small and fixed, and the packages that
 * decode it bring a protobuf runtime for these forty lines.
 */
import { readFileSync, statSync } from 'node:fs';

/**
 * Every permission the service's LND calls need (LND's `entity:action`), and no other:
 * - `info:read`: GetInfo (the node's network and identity), QueryRoutes (the payment preview's fee);
 * - `invoices:read`: LookupInvoice, SubscribeInvoices (settling our invoices);
 * - `invoices:write`: AddInvoice, CancelInvoice (an internal payment closes the node's copy);
 * - `offchain:read`: TrackPaymentV2 (a payment's outcome), ListChannels (whether invoices need route hints; the preview's multi-path split);
 * - `offchain:write`: SendPaymentV2.
 * docs/lightning.md lists them; `npm run cli -- lnd:bake-macaroon` bakes a macaroon of exactly these.
 */
export const LND_PERMISSIONS = ['info:read', 'invoices:read', 'invoices:write', 'offchain:read', 'offchain:write'] as const;

/** Reads one unsigned LEB128 varint (macaroon field lengths and protobuf keys alike) at `at.offset`, moving it on. */
function varint(bytes: Buffer, at: { offset: number }): number {
  let value = 0;
  for (let shift = 0; shift < 35; shift += 7) {
    const byte = bytes[at.offset++];
    if (byte === undefined) throw new Error('truncated');
    value += (byte & 0x7f) * 2 ** shift;
    if (byte < 0x80) return value;
  }
  throw new Error('varint too long');
}

/** The length-delimited fields of a protobuf message as [field number, bytes]; other wire types are skipped. */
function protobufFields(message: Buffer): [number, Buffer][] {
  const fields: [number, Buffer][] = [];
  const at = { offset: 0 };
  while (at.offset < message.length) {
    const key = varint(message, at);
    const wireType = key & 7;
    if (wireType === 2) {
      const length = varint(message, at);
      fields.push([key >>> 3, message.subarray(at.offset, at.offset + length)]);
      at.offset += length;
    } else if (wireType === 0) varint(message, at);
    else throw new Error(`unexpected protobuf wire type ${wireType}`);
  }
  return fields;
}

/**
 * The permissions (`entity:action`) a macaroon grants, from its identifier, or null when it is not an LND
 * macaroon this reads (a binary V2 macaroon whose identifier is version 3 then LND's `MacaroonId`
 * protobuf: nonce 1, storageId 2, ops 3, each op entity 1 and actions 2). Caveats only narrow what it
 * grants; an LND node checks them, this reads only what the macaroon could ever do.
 */
export function macaroonPermissions(macaroon: Buffer): string[] | null {
  try {
    if (macaroon[0] !== 2) return null;
    const at = { offset: 1 };
    // The header's fields (1 location, 2 identifier) up to end-of-section (0).
    for (let type = macaroon[at.offset++]; type !== 0 && type !== undefined; type = macaroon[at.offset++]) {
      const length = varint(macaroon, at);
      const value = macaroon.subarray(at.offset, at.offset + length);
      at.offset += length;
      if (type !== 2) continue;
      if (value[0] !== 3) return null;
      const permissions: string[] = [];
      for (const [field, op] of protobufFields(value.subarray(1))) {
        if (field !== 3) continue;
        const parts = protobufFields(op);
        const entity = parts.find(([number]) => number === 1)?.[1].toString('utf8') ?? '';
        for (const [number, action] of parts) if (number === 2) permissions.push(`${entity}:${action.toString('utf8')}`);
      }
      return permissions;
    }
    return null;
  } catch {
    return null;
  }
}

/** What a macaroon grants beyond LND_PERMISSIONS (null: unreadable, so it may grant anything). */
export function excessPermissions(macaroon: Buffer): string[] | null {
  const granted = macaroonPermissions(macaroon);
  return granted && granted.filter((permission) => !(LND_PERMISSIONS as readonly string[]).includes(permission));
}

/** What of LND_PERMISSIONS a macaroon does not grant (null: unreadable): the calls that need it would be refused. */
export function missingPermissions(macaroon: Buffer): string[] | null {
  const granted = macaroonPermissions(macaroon);
  return granted && LND_PERMISSIONS.filter((permission) => !granted.includes(permission));
}

/** The macaroon (as LND wrote it) and the certificate authority a call to the node uses now. */
export interface LndCredentials {
  macaroon: Buffer;
  tlsCert: Buffer;
}

/**
 * The credentials in two files, read again whenever either changes (its inode, size or modification
 * time): a rotated certificate or macaroon is used from the next call on, without a restart. A file
 * caught missing or empty mid-rotation leaves the last one read in use.
 */
export function lndFileCredentials(macaroonPath: string, tlsCertPath: string): () => LndCredentials {
  let known: { stamp: string; credentials: LndCredentials } | undefined;
  return () => {
    try {
      const stamp = [macaroonPath, tlsCertPath].map((file) => statSync(file, { bigint: true })).map((stat) => `${stat.ino}:${stat.size}:${stat.mtimeNs}`).join('|');
      if (known?.stamp !== stamp) {
        const credentials = { macaroon: readFileSync(macaroonPath), tlsCert: readFileSync(tlsCertPath) };
        if (credentials.macaroon.length && credentials.tlsCert.length) known = { stamp, credentials };
      }
    } catch (error) {
      if (!known) throw error;
    }
    if (!known) throw new Error(`LND credentials ${macaroonPath} or ${tlsCertPath} are empty`);
    return known.credentials;
  };
}

/**
 * A macaroon of exactly LND_PERMISSIONS, baked by `node` (whose own macaroon must grant
 * `macaroon:generate`: the admin one) under root key `rootKeyId`: deleting that root key on the node
 * (`lncli deletemacid`) revokes it and nothing else baked under other ids.
 */
export async function bakeMacaroon(node: { call<T>(method: 'POST', path: string, body: unknown): Promise<T> }, rootKeyId: bigint): Promise<Buffer> {
  const baked = await node.call<{ macaroon: string }>('POST', '/v1/macaroon', {
    permissions: LND_PERMISSIONS.map((permission) => {
      const [entity, action] = permission.split(':');
      return { entity, action };
    }),
    root_key_id: rootKeyId.toString(),
  });
  return Buffer.from(baked.macaroon, 'hex');
}
