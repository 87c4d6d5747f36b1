import { text, z } from '../shared/schemas';

/**
 * The published policy language: condition fields, operators, action types and categories.
 * `GET /v1/policies/schema` serves exactly these tables; the evaluator and validator read them too,
 * so what is documented is what is enforced. Imported by workflow-free code only (no I/O).
 */

export const CATEGORIES = [
  { value: 'access', description: 'Who may initiate which operations (default)' },
  { value: 'whitelist', description: 'Allowed or forbidden destinations' },
  { value: 'limits', description: 'Amount thresholds per transaction' },
  { value: 'approvals', description: 'Transactions that need N-of-M approvals' },
  { value: 'velocity', description: 'Caps over rolling 1 h / 24 h windows' },
  { value: 'compliance', description: 'Screening and regulatory holds' },
  { value: 'quorum', description: 'Quorum approvals; a match answers result "quorum"' },
] as const;
export const CATEGORY_VALUES = ['access', 'whitelist', 'limits', 'approvals', 'velocity', 'compliance', 'quorum'] as const;
export type PolicyCategory = (typeof CATEGORY_VALUES)[number];

export const ACTION_TYPES = ['allow', 'block', 'require_approval', 'alert', 'delay'] as const;
export type ActionType = (typeof ACTION_TYPES)[number];

export const OPERATOR_NAMES = [
  'equal',
  'not_equal',
  'greater_than',
  'less_than',
  'greater_than_or_equal',
  'less_than_or_equal',
  'between',
  'not_between',
  'in',
  'not_in',
  'contains',
  'in_address_book',
  'not_in_address_book',
] as const;
export type OperatorName = (typeof OPERATOR_NAMES)[number];

/** Which part of a condition carries the operand. */
export type ValueShape = 'scalar' | 'array' | 'range';

export const OPERATORS: { name: OperatorName; description: string; arity: number; value_shape: ValueShape }[] = [
  { name: 'equal', description: 'actual equals value (decimals compared exactly: "0.30" equals "0.3")', arity: 1, value_shape: 'scalar' },
  { name: 'not_equal', description: 'actual differs from value', arity: 1, value_shape: 'scalar' },
  { name: 'greater_than', description: 'actual > value', arity: 1, value_shape: 'scalar' },
  { name: 'less_than', description: 'actual < value', arity: 1, value_shape: 'scalar' },
  { name: 'greater_than_or_equal', description: 'actual >= value', arity: 1, value_shape: 'scalar' },
  { name: 'less_than_or_equal', description: 'actual <= value', arity: 1, value_shape: 'scalar' },
  { name: 'between', description: 'min <= actual <= max (inclusive)', arity: 2, value_shape: 'range' },
  { name: 'not_between', description: 'actual < min or actual > max', arity: 2, value_shape: 'range' },
  { name: 'in', description: 'actual is one of values', arity: -1, value_shape: 'array' },
  { name: 'not_in', description: 'actual is none of values', arity: -1, value_shape: 'array' },
  { name: 'contains', description: 'actual contains value as a substring', arity: 1, value_shape: 'scalar' },
  {
    name: 'in_address_book',
    description:
      "to_address is an address-book entry of the request's chain in the request's environment: one of values (entry ids), or any entry when values is empty or omitted",
    arity: -1,
    value_shape: 'array',
  },
  { name: 'not_in_address_book', description: 'to_address is not such an entry (the negation of in_address_book)', arity: -1, value_shape: 'array' },
];
export const OPERATOR_SHAPE = Object.fromEntries(OPERATORS.map((op) => [op.name, op.value_shape])) as Record<OperatorName, ValueShape>;

/** Operators that test the destination against the address book, looked up when the policies are evaluated (so a deleted entry no longer matches). */
export const ADDRESS_BOOK_OPERATORS: readonly OperatorName[] = ['in_address_book', 'not_in_address_book'];
export const isAddressBookOperator = (operator: string): boolean => (ADDRESS_BOOK_OPERATORS as readonly string[]).includes(operator);

export type ValueType = 'decimal' | 'string' | 'boolean' | 'enum';

const OPERATORS_BY_TYPE: Record<ValueType, OperatorName[]> = {
  decimal: ['equal', 'not_equal', 'greater_than', 'less_than', 'greater_than_or_equal', 'less_than_or_equal', 'between', 'not_between', 'in', 'not_in'],
  string: ['equal', 'not_equal', 'in', 'not_in', 'contains'],
  enum: ['equal', 'not_equal', 'in', 'not_in'],
  boolean: ['equal', 'not_equal'],
};

export interface ConditionFieldSpec {
  name: string;
  description: string;
  value_type: ValueType;
  valid_operators: OperatorName[];
  /** Allowed values of an enum field. */
  enum_values?: readonly string[];
}

const field = (name: string, value_type: ValueType, description: string, enum_values?: readonly string[]): ConditionFieldSpec => ({
  name,
  description,
  value_type,
  valid_operators: OPERATORS_BY_TYPE[value_type],
  ...(enum_values ? { enum_values } : {}),
});

/**
 * The values the movement gate (src/movements/gate.ts) gives the request fields it sets: every
 * outgoing movement of value (out of a custody address, or out of a balance the service holds) has
 * one operation type, and a rule can name each. Published as the fields' enums, so a rule cannot name a value the evaluator never sees.
 */
export const ACTOR_TYPES = ['apikey', 'session', 'system'] as const;
export const OPERATION_TYPES = [
  'transfer',
  'sponsored_transfer',
  'fuel_send',
  'gas_refill',
  'gas_auto_refill',
  'consolidation_sweep',
  'payout_refund',
  'speed_up',
  'cancel',
  'sign',
  'sign_raw',
  'lightning_payment',
  'card_funding',
  'card_withdrawal',
] as const;
export type OperationType = (typeof OPERATION_TYPES)[number];
export const TX_TYPES = [
  'native_transfer',
  'token_transfer',
  'message_signature',
  'raw_signature',
  'transaction_signature',
  'typed_data_signature',
  'authorization_signature',
  'balance_transfer',
] as const;
export type TxType = (typeof TX_TYPES)[number];
export const SOURCE_TYPES = ['wallet', 'lightning_balance', 'company_balance', 'card'] as const;
export type SourceType = (typeof SOURCE_TYPES)[number];
export const DESTINATION_TYPES = ['one_time_address', 'address_book', 'vault', 'gas_station', 'sponsored_sender', 'unknown', 'lightning_node', 'card', 'company_balance'] as const;
export type DestinationType = (typeof DESTINATION_TYPES)[number];
/** The fields worth USD: when the price is unknown or stale they are absent and `price_unavailable` is true (see the evaluator). */
export const USD_FIELDS: ReadonlySet<string> = new Set(['amount_usd', 'fee_usd', 'velocity_amount_usd_1h', 'velocity_amount_usd_24h']);
/** What moves: absent from a movement whose value is unknown (a signature that decodes to none), which then says `price_unavailable`. */
export const VALUE_FIELDS: ReadonlySet<string> = new Set(['amount', 'amount_raw', 'asset_symbol']);
/** Who receives or may spend: absent from a movement whose destination is unknown, which then says `destination_type` unknown. */
export const DESTINATION_FIELDS: ReadonlySet<string> = new Set(['to_address', 'spender']);
const UNKNOWN_NOTE = 'block, require_approval and delay rules take a condition on it to hold, allow and alert rules not';

/** The velocity fields: a movement that reads them waits for the organization's velocity lock when a policy tests one (src/movements/gate.ts). */
export const VELOCITY_FIELDS: ReadonlySet<string> = new Set(['velocity_amount_usd_24h', 'velocity_amount_usd_1h', 'velocity_count_24h', 'velocity_count_1h']);

const VELOCITY_NOTE =
  "On-chain sends only (every kind that records a transaction; failed ones excluded): absent on signatures, Lightning payments and card movements. In a dry run taken from the request; when sending, computed from the organization's own history, every earlier send of the environment committed and counted (sends judged by a policy testing a velocity field are serialized per organization and environment), this one not included: a limit of N is written greater_than_or_equal N.";

/** Every field of the evaluate request that a condition can test, plus the velocity fields. */
export const CONDITION_FIELDS: ConditionFieldSpec[] = [
  field('actor_type', 'enum', 'Who initiates: apikey, session, or system for an automated movement (auto-refill, consolidation, fuel, refunds; absent: conditions on it do not match)', ACTOR_TYPES),
  field('actor_id', 'string', 'API key id of the initiator; for an automated movement the key that created its rule or station (or that triggered a manual run), "system" when none did'),
  field('user_id', 'string', 'Member the initiating key acts for'),
  field('amount', 'decimal', `Amount in display units of the asset; absent when unknown (a signature that decodes to no amount, or of a token the catalogue does not know: then price_unavailable is true, and ${UNKNOWN_NOTE})`),
  field('amount_raw', 'decimal', `Amount in base units (integer); absent when unknown (then price_unavailable is true, and ${UNKNOWN_NOTE})`),
  field('amount_usd', 'decimal', 'USD value of the amount; absent when no current price is known (then price_unavailable is true, and block, require_approval and delay rules apply as if a USD condition held)'),
  field('fee_raw', 'decimal', "Most the movement's fee can cost: a network fee in base units of the chain's native coin; a Lightning payment's routing fee limit in sats; a card funding's fee in cents"),
  field('fee_usd', 'decimal', 'USD value of fee_raw; absent when no current price is known'),
  field('price_unavailable', 'boolean', 'True when a USD value of the movement (amount, fee or velocity) is unknown or stale: a signature that decodes to no known amount, a live key without a price source, an asset without a price'),
  field('asset_symbol', 'string', `Asset symbol, e.g. BTC (also a Lightning payment), USDC, USD (a card funding or withdrawal); absent when unknown (then price_unavailable is true, and ${UNKNOWN_NOTE})`),
  field('chain', 'string', 'Chain id, e.g. ethereum'),
  field('network', 'string', 'Network name, e.g. mainnet, sepolia'),
  field('from_address', 'string', "Source address; a card withdrawal's card id"),
  {
    ...field(
      'to_address',
      'string',
      `Destination address: a signature's decoded recipient, spender or delegate; a Lightning payment's payee node public key; a card funding's card id (in_address_book, not_in_address_book: tested against the address book, GET /v1/address-book); absent when unknown (then destination_type is unknown, and ${UNKNOWN_NOTE})`,
    ),
    valid_operators: [...OPERATORS_BY_TYPE.string, ...ADDRESS_BOOK_OPERATORS],
  },
  field('token_address', 'string', 'Token contract address (a signature: the token its transaction or permit moves or approves)'),
  field('wallet_id', 'string', 'Source wallet'),
  field('vault_id', 'string', 'Source vault'),
  field('connection_id', 'string', 'Connection the request came through'),
  field(
    'operation_type',
    'enum',
    "The kind of movement (docs/policies.md lists each): a send, a sponsored send, a gas station's fuel send, a manual or automatic refill, a consolidation sweep, a payout refund, a send's fee-bumping replacement (speed_up) or cancelling one (cancel), a signature over a payload the service hashes or reads as it is (sign) or over bytes it cannot read, such as a digest (sign_raw: in live only a rule that lets it through and names sign_raw lets it through), a Lightning payment out of the Lightning balance (lightning_payment), a card funding out of the USD company balance (card_funding) or a withdrawal out of a card back to it (card_withdrawal)",
    OPERATION_TYPES,
  ),
  field(
    'tx_type',
    'enum',
    'Transaction type: a native or token transfer; a signature of a transaction (transaction_signature), of EIP-712 typed data (typed_data_signature), of an EIP-7702 authorization (authorization_signature), of a payload that does not decode to one (message_signature), or of bytes given as they are (raw_signature); a move between balances the service holds (balance_transfer: Lightning payments, card fundings and withdrawals)',
    TX_TYPES,
  ),
  field('source_type', 'enum', "Source kind: a custody wallet, the organization's Lightning balance, its USD company balance, or a card (a withdrawal)", SOURCE_TYPES),
  field(
    'destination_type',
    'enum',
    "Destination kind: an address-book entry usable now, a custody address of the organization's (vault), its gas station, a sponsored sender (fuel), any other address, unknown (a signature whose payload does not decode to a destination), a Lightning payee node, a card (a funding), or the company balance (a card withdrawal)",
    DESTINATION_TYPES,
  ),
  field('is_automated', 'boolean', 'True when started by an automation (consolidation, auto-refill, fuel, refunds)'),
  field('automation_rule_id', 'string', 'The automation that started it: the consolidation rule, the gas station, or payout-trip-<id>'),
  field('velocity_amount_usd_24h', 'decimal', `USD sent in the rolling 24 h before this request. ${VELOCITY_NOTE}`),
  field('velocity_amount_usd_1h', 'decimal', `USD sent in the rolling 1 h before this request. ${VELOCITY_NOTE}`),
  field('velocity_count_24h', 'decimal', `Transactions in the rolling 24 h before this request. ${VELOCITY_NOTE}`),
  field('velocity_count_1h', 'decimal', `Transactions in the rolling 1 h before this request. ${VELOCITY_NOTE}`),
  field('spender', 'string', `Who a signature lets spend from the address: an ERC-20 approval's or a permit's (EIP-2612, Permit2) spender, an EIP-7702 delegate; absent when it grants none, and when unknown (then destination_type is unknown, and ${UNKNOWN_NOTE})`),
];
export const CONDITION_FIELD_NAMES = CONDITION_FIELDS.map((f) => f.name);
export const FIELD_BY_NAME = new Map(CONDITION_FIELDS.map((f) => [f.name, f]));

/** A condition operand as stored and returned. */
export const ScalarValue = z.union([text(0, 1000), z.number(), z.boolean()]);
export type ScalarValue = z.infer<typeof ScalarValue>;

export interface Condition {
  field: string;
  operator: string;
  value?: ScalarValue;
  values?: ScalarValue[];
  min?: ScalarValue;
  max?: ScalarValue;
}

export const ApproverRef = z.object({ id: z.string().min(1).max(64), type: z.enum(['user', 'role']) }).strict();

/**
 * action_config per action type; the schema route publishes their JSON schemas. zod writes those
 * (z.toJSONSchema), which reads no `.openapi()`: its strings keep zod's own lengths.
 */
export const ACTION_CONFIG_SCHEMAS = {
  allow: z.object({}).strict(),
  block: z.object({ reason: z.string().max(500).optional() }).strict(),
  alert: z.object({ message: z.string().max(500).optional() }).strict(),
  require_approval: z
    .object({
      approvers: z.array(ApproverRef).min(1).max(50).openapi({ description: 'The M: members (type user) or roles (type role)' }),
      required_approvals: z.number().int().min(1).max(50).openapi({ description: 'The N of N-of-M' }),
      expiry_hours: z.number().int().min(1).max(720).default(24).openapi({ description: 'How long the approval request stays open' }),
    })
    .strict(),
  delay: z.object({ delay_minutes: z.number().int().min(1).max(10080) }).strict(),
} satisfies Record<ActionType, z.ZodType>;

/** The JSON Schema of an action type's config, as the schema route and the OpenAPI document give it. */
export function actionConfigJsonSchema(type: ActionType): Record<string, unknown> {
  return z.toJSONSchema(ACTION_CONFIG_SCHEMAS[type], { io: 'input' }) as Record<string, unknown>;
}

const ACTION_DESCRIPTIONS: Record<ActionType, string> = {
  allow: 'Let the transaction through',
  block: 'Refuse the transaction (sending answers 403 policy_blocked)',
  require_approval: 'Hold for N-of-M approvals (sending answers 400 policy_approval_required)',
  alert: 'Let it through and emit policy.alert',
  delay: 'Hold for a cooling period (sending answers 400 policy_delay_required)',
};

export function policySchemaDocument() {
  return {
    object: 'policy_schema' as const,
    action_types: ACTION_TYPES.map((value) => ({
      value,
      description: ACTION_DESCRIPTIONS[value],
      config_schema: actionConfigJsonSchema(value),
    })),
    categories: CATEGORIES.map((c) => ({ ...c })),
    condition_fields: CONDITION_FIELDS.map(({ name, description, value_type, valid_operators, enum_values }) => ({
      name,
      description,
      value_type,
      valid_operators,
      ...(enum_values ? { enum_values: [...enum_values] } : {}),
    })),
    operators: OPERATORS.map((op) => ({ ...op })),
  };
}
