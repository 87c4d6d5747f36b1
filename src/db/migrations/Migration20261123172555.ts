import { Migration } from '@mikro-orm/migrations';

export class Migration20261123172555 extends Migration {

  override async up(): Promise<void> {
    this.addSql(`create index "policy_audit_logs_organization_id_environment_acti_69e10_index" on "policy_audit_logs" ("organization_id", "environment", "action", "created_at");`);

    this.addSql(`create index "transactions_from_address_id_nonce_index" on "transactions" ("from_address_id", "nonce");`);
    this.addSql(`create index "transactions_status_created_at_index" on "transactions" ("status", "created_at");`);

    // Bitcoin deposits recorded before wallets tracked their outputs: their outputs, so that they can be spent.
    this.addSql(`insert into wallet_outputs (id, organization_id, environment, wallet_id, address_id, txid, vout, amount, origin, status, created_at, updated_at)
      select gen_random_uuid(), organization_id, environment, wallet_id, address_id, txid, substring(position from 5)::int, amount, 'deposit',
             case status when 'confirmed' then 'available'::wallet_output_status else 'unconfirmed'::wallet_output_status end, created_at, now()
        from incoming_transfers
       where chain = 'bitcoin' and wallet_id is not null and address_id is not null and status <> 'dropped' and position like 'out:%'
      on conflict do nothing;`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop index "policy_audit_logs_organization_id_environment_acti_69e10_index";`);

    this.addSql(`drop index "transactions_from_address_id_nonce_index";`);
    this.addSql(`drop index "transactions_status_created_at_index";`);
  }

}
