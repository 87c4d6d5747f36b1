import { Migration } from '@mikro-orm/migrations';

/**
 * Issue 50, Stripe Issuing: a card sync the issuer refuses ends with a state on the card (why, and
 * when) instead of being retried forever, cleared by the next sync the issuer takes; a customer keeps
 * its acceptance of the card program's user terms (Celtic's Authorized User Terms) for its cardholder;
 * card_issuer_drifts holds what the Stripe Issuing reconciliation finds apart from our cards.
 */
export class Migration20261201005003 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "cards" add column "issuer_sync_failure" text null, add column "issuer_sync_failed_at" timestamptz null;`);
    this.addSql(`alter table "card_customers" add column "terms_acceptance" jsonb null;`);
    this.addSql(`create table "card_issuer_drifts" ("id" text not null, "organization_id" uuid null, "environment" "environment" not null, "subject" text not null, "subject_id" text not null, "card_id" uuid null, "our_amount" numeric(38,0) not null, "issuer_amount" numeric(38,0) not null, "status" text not null, "first_seen_at" timestamptz not null, "last_seen_at" timestamptz not null, "resolved_at" timestamptz null, constraint "card_issuer_drifts_pkey" primary key ("id"));`);
    this.addSql(`create index "card_issuer_drifts_status_subject_subject_id_index" on "card_issuer_drifts" ("status", "subject", "subject_id");`);
    this.addSql(`alter table "card_issuer_drifts" add constraint "card_issuer_drifts_organization_id_foreign" foreign key ("organization_id") references "organizations" ("id") on update cascade on delete cascade;`);
    this.addSql(`alter table "card_issuer_drifts" add constraint "card_issuer_drifts_card_id_foreign" foreign key ("card_id") references "cards" ("id") on update cascade on delete cascade;`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "card_issuer_drifts" cascade;`);
    this.addSql(`alter table "card_customers" drop column "terms_acceptance";`);
    this.addSql(`alter table "cards" drop column "issuer_sync_failure", drop column "issuer_sync_failed_at";`);
  }
}
