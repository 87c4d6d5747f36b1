import { Migration } from '@mikro-orm/migrations';
import type { Environment } from '../../api-keys/entities';
import { canonicalConditions } from '../../policies/addresses';
import type { Condition } from '../../policies/schema';

/**
 * Rules written before their address operands were canonicalized (src/policies/addresses.ts) are
 * canonicalized once here, so that evaluation compares the forms sends carry with no per-send cost. The
 * form needs Keccak (EIP-55), which PostgreSQL does not have: the rows are read, rewritten in code and
 * written back, only those that change. An operand no chain reads stays as it was written.
 */
export class Migration20261129050001 extends Migration {

  override async up(): Promise<void> {
    const rules = (await this.execute(
      `select "r"."id", "r"."conditions", "p"."environment" from "policy_rules" as "r" join "policies" as "p" on "p"."id" = "r"."policy_id"`,
    )) as { id: string; conditions: Condition[]; environment: Environment }[];
    for (const rule of rules) {
      const canonical = canonicalConditions(rule.conditions, rule.environment, { strict: false, param: 'conditions' });
      if (JSON.stringify(canonical) === JSON.stringify(rule.conditions)) continue;
      this.addSql(this.getKnex().raw(`update "policy_rules" set "conditions" = ?::jsonb where "id" = ?`, [JSON.stringify(canonical), rule.id]));
    }
  }

  override async down(): Promise<void> {
    // The forms written before cannot be told apart from the canonical ones: nothing to undo.
  }

}
