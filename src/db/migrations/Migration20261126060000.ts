import { Migration } from '@mikro-orm/migrations';

/**
 * The movement gate. Stations and consolidation rules remember the key that created them, and a
 * manual run the key that asked (the actor of their automated movements).
 *
 * Stored rules keep their meaning: before the gate every send was operation_type `transfer` (refills,
 * sweeps, fuel and refunds included) to destination_type `one_time_address`, and every signature
 * `sign`; those fields are now enums with one value per kind of movement. A condition naming an old
 * value is rewritten to name every value it stood for (equal -> in, not_equal -> not_in), and a
 * `contains`, which an enum does not take, to `in` the values it matched, so that no block rule
 * stops matching what it matched yesterday.
 */
const SENDS = ['transfer', 'sponsored_transfer', 'fuel_send', 'gas_refill', 'gas_auto_refill', 'consolidation_sweep', 'payout_refund'];
const WAS: Record<string, Record<string, string[]>> = {
  operation_type: { transfer: SENDS, sign: ['sign', 'sign_raw'] },
  destination_type: { one_time_address: ['one_time_address', 'address_book', 'vault', 'gas_station', 'sponsored_sender'] },
  tx_type: { native_transfer: ['native_transfer'], token_transfer: ['token_transfer'] },
  source_type: { wallet: ['wallet'] },
};

interface StoredCondition {
  field: string;
  operator: string;
  value?: unknown;
  values?: unknown[];
  [key: string]: unknown;
}

const expand = (field: string, value: unknown): unknown[] => (typeof value === 'string' ? (WAS[field]![value] ?? [value]) : [value]);
const unique = (values: unknown[]) => [...new Set(values)];

function rewriteCondition(condition: StoredCondition): StoredCondition {
  if (!(condition.field in WAS)) return condition;
  const { value, values, ...rest } = condition;
  switch (condition.operator) {
    case 'equal':
      return { ...rest, operator: 'in', values: unique(expand(condition.field, value)) };
    case 'not_equal':
      return { ...rest, operator: 'not_in', values: unique(expand(condition.field, value)) };
    case 'in':
    case 'not_in':
      return { ...rest, values: unique((values ?? []).flatMap((one) => expand(condition.field, one))) };
    case 'contains': {
      const matched = Object.keys(WAS[condition.field]!).filter((old) => typeof value === 'string' && old.includes(value));
      // Nothing matched before either: an `in` of the text itself matches nothing still.
      return { ...rest, operator: 'in', values: matched.length ? unique(matched.flatMap((old) => expand(condition.field, old))) : [value] };
    }
    default:
      return condition;
  }
}

export class Migration20261126060000 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "gas_stations" add column "created_by_key_id" text null;`);
    this.addSql(`alter table "consolidation_rules" add column "created_by_key_id" text null;`);
    this.addSql(`alter table "consolidation_runs" add column "initiated_by_key_id" text null;`);
    const rules = (await this.execute(
      `select id, conditions from policy_rules where exists (select 1 from jsonb_array_elements(conditions) c where c->>'field' in ('operation_type', 'destination_type', 'tx_type', 'source_type'))`,
    )) as { id: string; conditions: StoredCondition[] }[];
    for (const rule of rules) {
      this.addSql(this.getKnex().raw(`update policy_rules set conditions = ?::jsonb where id = ?`, [JSON.stringify(rule.conditions.map(rewriteCondition)), rule.id]));
    }
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "gas_stations" drop column "created_by_key_id";`);
    this.addSql(`alter table "consolidation_rules" drop column "created_by_key_id";`);
    this.addSql(`alter table "consolidation_runs" drop column "initiated_by_key_id";`);
  }
}
