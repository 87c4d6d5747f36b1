import type { Environment } from '../api-keys/entities';
import { CHAIN_IDS, type ChainId } from '../catalogue/service';
import { canonicalAddress } from '../chains/addresses';
import { errors } from '../shared/errors';
import type { Condition, ScalarValue } from './schema';

/**
 * Address operands of rules in the form a movement carries its addresses (canonicalAddress: EIP-55 on
 * Ethereum, lower-case bech32 on Bitcoin, Tron and Solana base58 as they are), so that a rule naming
 * 0xabc… in lower case matches the checksummed address of a send. Pure, no I/O.
 */

/** The condition fields whose operands are addresses. */
export const ADDRESS_FIELDS: ReadonlySet<string> = new Set(['to_address', 'from_address', 'token_address', 'spender']);

/** Operators whose operands are whole addresses (`contains` takes a fragment, the address-book operators entry ids). */
const WHOLE_ADDRESS_OPERATORS: ReadonlySet<string> = new Set(['equal', 'not_equal', 'in', 'not_in']);

const isChain = (value: unknown): value is ChainId => (CHAIN_IDS as readonly unknown[]).includes(value);

/** The chains a rule's `chain` condition (equal, in) confines it to, or null when it names none. */
function chainsOf(conditions: readonly Condition[]): ChainId[] | null {
  const chain = conditions.find((condition) => condition.field === 'chain' && (condition.operator === 'equal' || condition.operator === 'in'));
  if (!chain) return null;
  const named = chain.operator === 'equal' ? [chain.value] : (chain.values ?? []);
  return named.filter(isChain);
}

/** `address` as the first of `chains` reads it, or null when none does. */
function canonicalOn(chains: readonly ChainId[], environment: Environment, address: string): string | null {
  for (const chain of chains) {
    const canonical = canonicalAddress(chain, environment, address.trim());
    if (canonical !== null) return canonical;
  }
  return null;
}

/**
 * A request's addresses (a dry run's to_address...) as a send on its chain carries them: by its `chain`
 * when it names one, else by each address's own form; as given when no chain reads one.
 */
export function canonicalRequestAddresses<T extends Readonly<Record<string, unknown>>>(request: T, environment: Environment): T {
  const chains = isChain(request.chain) ? [request.chain] : CHAIN_IDS;
  const canonical: Record<string, unknown> = { ...request };
  for (const field of ADDRESS_FIELDS) {
    const address = request[field];
    if (typeof address === 'string') canonical[field] = canonicalOn(chains, environment, address) ?? address;
  }
  return canonical as T;
}

/**
 * A rule's conditions with every address operand canonical on the rule's chain (its `chain` condition),
 * else on the chain its form tells (0x and 40 hex digits: Ethereum). An operand the rule's chain does
 * not read as an address (a wrong checksum, another network's form) could never match: `strict`, it is
 * 400 on `<param>.<i>.value(s)`; otherwise (stored rows) it is kept as written. An operand of a rule
 * naming no chain that no chain reads (a placeholder, a fragment) is kept as written.
 */
export function canonicalConditions(conditions: readonly Condition[], environment: Environment, options: { strict: boolean; param: string }): Condition[] {
  const named = chainsOf(conditions);
  return conditions.map((condition, index) => {
    if (!ADDRESS_FIELDS.has(condition.field) || !WHOLE_ADDRESS_OPERATORS.has(condition.operator)) return condition;
    const canonical = (operand: ScalarValue, param: string): ScalarValue => {
      if (typeof operand !== 'string') return operand;
      const address = canonicalOn(named ?? CHAIN_IDS, environment, operand);
      if (address !== null) return address;
      if (options.strict && named !== null) {
        throw errors.validation(`${condition.field} '${operand}' is not an address of ${named.join(' or ')} in ${environment}: a rule naming it would never match.`, param);
      }
      return operand;
    };
    const at = `${options.param}.${index}`;
    return {
      ...condition,
      ...(condition.value === undefined ? {} : { value: canonical(condition.value, `${at}.value`) }),
      ...(condition.values === undefined ? {} : { values: condition.values.map((value, position) => canonical(value, `${at}.values.${position}`)) }),
    };
  });
}
