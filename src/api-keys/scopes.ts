import { errors } from '../shared/errors';

/** Every scope of the contract. `*` grants all; a `x:write` scope also grants `x:read`. */
export const SCOPES = [
  '*',
  'api_keys:admin',
  'custody:read',
  'custody:write',
  'transactions:write',
  'signing:write',
  'gas_stations:read',
  'gas_stations:write',
  'policies:read',
  'policies:write',
  'policies:approve',
  'consolidation:read',
  'consolidation:write',
  'webhooks:read',
  'webhooks:write',
  'rpc:call',
  'cards:read',
  'cards:write',
  'cards:secure',
  'lightning:read',
  'lightning:write',
  'payouts:read',
  'payouts:write',
] as const;

export type Scope = (typeof SCOPES)[number];

export function grants(held: readonly string[], required: Scope): boolean {
  if (held.includes('*') || held.includes(required)) return true;
  return required.endsWith(':read') && held.includes(required.replace(/:read$/, ':write'));
}

/** Refuses a key without `required` (403 `insufficient_scope`), as the route registry does: for a request whose content needs more than its route's scope. */
export function requireScope(held: readonly string[], required: Scope): void {
  if (!grants(held, required)) throw errors.insufficientScope(required);
}

/** True when every scope in `requested` is already granted by `held` (no privilege escalation). */
export function covers(held: readonly string[], requested: readonly string[]): boolean {
  if (held.includes('*')) return true;
  return requested.every((scope) => scope !== '*' && grants(held, scope as Scope));
}
