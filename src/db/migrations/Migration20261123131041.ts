import { Migration } from '@mikro-orm/migrations';

export class Migration20261123131041 extends Migration {

  override async up(): Promise<void> {
    this.addSql(`alter table "members" add column "created_by_key_id" text null, add column "created_by_member_id" uuid null;`);

    this.addSql(`drop index "events_organization_id_created_at_id_index";`);

    this.addSql(`alter table "events" add column "environment" "environment" null;`);
    this.addSql(`create index "events_organization_id_environment_created_at_id_index" on "events" ("organization_id", "environment", "created_at", "id");`);

    this.addSql(`drop index "event_deliveries_organization_id_created_at_id_index";`);

    this.addSql(`alter table "event_deliveries" add column "environment" "environment" null;`);
    this.addSql(`create index "event_deliveries_organization_id_environment_creat_e6c62_index" on "event_deliveries" ("organization_id", "environment", "created_at", "id");`);

    this.addSql(`alter table "api_keys" add column "created_by_key_id" text null, add column "created_by_member_id" uuid null;`);

    this.addSql(`drop index "policies_organization_id_created_at_id_index";`);
    this.addSql(`drop index "policies_organization_id_status_index";`);

    // A policy belongs to the environment of the key that created it; one a member created (no key recorded) to sandbox.
    this.addSql(`alter table "policies" add column "environment" "environment" null;`);
    this.addSql(`update "policies" p set "environment" = coalesce((select k."environment" from "api_keys" k where k."id" = p."created_by"), 'sandbox');`);
    this.addSql(`alter table "policies" alter column "environment" set not null;`);
    // An enforced policy used to decide both environments' requests: it keeps doing so as two policies, the copy enforced
    // in the other environment with the same rules (ids derived from the original's), so no request loses a decision it had.
    this.addSql(`insert into "policies" ("id", "organization_id", "environment", "name", "description", "category", "status", "priority", "template_id",
        "source_policy_id", "created_by", "created_by_name", "activated_at", "created_at", "updated_at")
      select 'pol_' || substr(md5(p."id" || ':other-environment'), 1, 16), p."organization_id",
        (case p."environment" when 'live' then 'sandbox' else 'live' end)::"environment", p."name", p."description", p."category", p."status", p."priority",
        p."template_id", null, p."created_by", p."created_by_name", p."activated_at", p."created_at", now()
      from "policies" p where p."status" = 'enforced';`);
    this.addSql(`insert into "policy_rules" ("id", "policy_id", "name", "description", "action_type", "action_config", "conditions", "position", "created_at", "updated_at")
      select 'rule_' || substr(md5(r."id" || ':other-environment'), 1, 16), 'pol_' || substr(md5(p."id" || ':other-environment'), 1, 16),
        r."name", r."description", r."action_type", r."action_config", r."conditions", r."position", r."created_at", now()
      from "policy_rules" r join "policies" p on p."id" = r."policy_id"
      where exists (select 1 from "policies" c where c."id" = 'pol_' || substr(md5(p."id" || ':other-environment'), 1, 16));`);
    this.addSql(`insert into "policy_audit_logs" ("id", "organization_id", "policy_id", "action", "actor_id", "actor_name", "changes", "metadata", "created_at")
      select 'pal_' || substr(md5(p."id" || ':other-environment'), 1, 16), p."organization_id", c."id", 'created', 'system', 'System',
        jsonb_build_object('status', 'enforced'), jsonb_build_object('actor_type', 'system', 'copied_from_policy_id', p."id", 'reason', 'environments separated'), now()
      from "policies" p join "policies" c on c."id" = 'pol_' || substr(md5(p."id" || ':other-environment'), 1, 16);`);
    this.addSql(`create index "policies_organization_id_environment_status_index" on "policies" ("organization_id", "environment", "status");`);
    this.addSql(`create index "policies_organization_id_environment_created_at_id_index" on "policies" ("organization_id", "environment", "created_at", "id");`);

    this.addSql(`alter table "policy_approval_requests" add column "environment" "environment" null, add column "requested_by_key_id" text null;`);
    this.addSql(`update "policy_approval_requests" a set "environment" = (select p."environment" from "policies" p where p."id" = a."policy_id"),
      "requested_by_key_id" = case when a."requested_by" like 'key\\_%' then a."requested_by" end;`);
    this.addSql(`alter table "policy_approval_requests" alter column "environment" set not null;`);

    // Audit entries follow their policy; a decision that matched no policy, the key that asked for it; else sandbox.
    this.addSql(`alter table "policy_audit_logs" add column "environment" "environment" null;`);
    this.addSql(`update "policy_audit_logs" l set "environment" = coalesce(
        (select p."environment" from "policies" p where p."id" = l."policy_id"),
        (select k."environment" from "api_keys" k where k."id" = l."actor_id"),
        'sandbox');`);
    this.addSql(`alter table "policy_audit_logs" alter column "environment" set not null;`);

    // An event takes the environment of what it is about (a card, an invoice or payment, an endpoint, a policy, a subscription it
    // was addressed to); sandbox where nothing says. Its deliveries take the event's.
    this.addSql(`update "events" e set "environment" = coalesce(
        (select c."environment" from "cards" c where c."id"::text = coalesce(e."data"->>'card_id', e."data"->>'id')),
        (select l."environment" from "lightning_invoices" l where l."id"::text = e."data"->>'id'),
        (select w."environment" from "webhook_endpoints" w where w."id" = e."data"->>'webhook_id'),
        (select p."environment" from "policies" p where p."id" = e."data"->>'policy_id'),
        (select s."environment" from "event_deliveries" d join "subscriptions" s on s."id" = d."destination_id"
          where d."event_id" = e."id" and d."destination_kind" = 'subscription' limit 1),
        'sandbox');`);
    this.addSql(`alter table "events" alter column "environment" set not null;`);
    this.addSql(`update "event_deliveries" d set "environment" = (select e."environment" from "events" e where e."id" = d."event_id");`);
    this.addSql(`alter table "event_deliveries" alter column "environment" set not null;`);

    this.addSql(`drop index "subscriptions_organization_id_created_at_id_index";`);

    this.addSql(`create index "subscriptions_organization_id_environment_created_at_id_index" on "subscriptions" ("organization_id", "environment", "created_at", "id");`);

    this.addSql(`drop index "webhook_endpoints_organization_id_created_at_id_index";`);

    this.addSql(`create index "webhook_endpoints_organization_id_environment_crea_2d8cb_index" on "webhook_endpoints" ("organization_id", "environment", "created_at", "id");`);
  }

  override async down(): Promise<void> {
    // The copies made for the other environment go; the originals decide both environments again.
    this.addSql(`delete from "policies" c where exists (select 1 from "policies" p where c."id" = 'pol_' || substr(md5(p."id" || ':other-environment'), 1, 16));`);
    this.addSql(`alter table "api_keys" drop column "created_by_key_id", drop column "created_by_member_id";`);

    this.addSql(`drop index "event_deliveries_organization_id_environment_creat_e6c62_index";`);
    this.addSql(`alter table "event_deliveries" drop column "environment";`);

    this.addSql(`create index "event_deliveries_organization_id_created_at_id_index" on "event_deliveries" ("organization_id", "created_at", "id");`);

    this.addSql(`drop index "events_organization_id_environment_created_at_id_index";`);
    this.addSql(`alter table "events" drop column "environment";`);

    this.addSql(`create index "events_organization_id_created_at_id_index" on "events" ("organization_id", "created_at", "id");`);

    this.addSql(`alter table "members" drop column "created_by_key_id", drop column "created_by_member_id";`);

    this.addSql(`drop index "policies_organization_id_environment_status_index";`);
    this.addSql(`drop index "policies_organization_id_environment_created_at_id_index";`);
    this.addSql(`alter table "policies" drop column "environment";`);

    this.addSql(`create index "policies_organization_id_created_at_id_index" on "policies" ("organization_id", "created_at", "id");`);
    this.addSql(`create index "policies_organization_id_status_index" on "policies" ("organization_id", "status");`);

    this.addSql(`alter table "policy_approval_requests" drop column "environment", drop column "requested_by_key_id";`);

    this.addSql(`alter table "policy_audit_logs" drop column "environment";`);

    this.addSql(`drop index "subscriptions_organization_id_environment_created_at_id_index";`);

    this.addSql(`create index "subscriptions_organization_id_created_at_id_index" on "subscriptions" ("organization_id", "created_at", "id");`);

    this.addSql(`drop index "webhook_endpoints_organization_id_environment_crea_2d8cb_index";`);

    this.addSql(`create index "webhook_endpoints_organization_id_created_at_id_index" on "webhook_endpoints" ("organization_id", "created_at", "id");`);
  }

}
