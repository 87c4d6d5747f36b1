import { Migration } from '@mikro-orm/migrations';

export class Migration20261123115821 extends Migration {

  override async up(): Promise<void> {
    this.addSql(`create table "workflow_starts" ("id" text not null, "workflow_id" text not null, "workflow_type" text not null, "input" jsonb not null, "organization_id" uuid null, "resource_type" text not null, "resource_id" text not null, "id_reuse_policy" text not null, "id_conflict_policy" text not null, "created_at" timestamptz not null, "started_at" timestamptz null, "attempts" int not null default 0, "last_error" text null, "restarts" int not null default 0, constraint "workflow_starts_pkey" primary key ("id"));`);
    this.addSql(`create index "workflow_starts_started_at_created_at_index" on "workflow_starts" ("started_at", "created_at");`);
    this.addSql(`alter table "workflow_starts" add constraint "workflow_starts_workflow_id_unique" unique ("workflow_id");`);

    // Deliveries committed but never dispatched by the relay this replaces: the start sweep fires them.
    this.addSql(`insert into "workflow_starts" ("id", "workflow_id", "workflow_type", "input", "organization_id", "resource_type", "resource_id", "id_reuse_policy", "id_conflict_policy", "created_at")
      select 'wfs_' || md5(d.id || ':' || d.run), 'webhook-delivery-' || d.id || '-' || d.run, 'webhookDeliveryWorkflow',
        jsonb_build_object('deliveryId', d.id, 'run', d.run, 'maxAttempts', d.max_attempts), d.organization_id, 'event_delivery', d.id, 'REJECT_DUPLICATE', 'FAIL', d.updated_at
      from "event_deliveries" d where d.dispatched_at is null and d.status = 'pending';`);
    this.addSql(`drop index "event_deliveries_dispatched_at_updated_at_index";`);
    this.addSql(`alter table "event_deliveries" drop column "dispatched_at";`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "workflow_starts" cascade;`);

    this.addSql(`alter table "event_deliveries" add column "dispatched_at" timestamptz(6) null;`);
    this.addSql(`create index "event_deliveries_dispatched_at_updated_at_index" on "event_deliveries" ("dispatched_at", "updated_at");`);
  }

}
