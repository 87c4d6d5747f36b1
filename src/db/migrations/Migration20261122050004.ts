import { Migration } from '@mikro-orm/migrations';

export class Migration20261122050004 extends Migration {

  override async up(): Promise<void> {
    this.addSql(`create type "policy_category" as enum ('access', 'whitelist', 'limits', 'approvals', 'velocity', 'compliance', 'quorum');`);
    this.addSql(`create type "policy_status" as enum ('draft', 'enforced', 'archived');`);
    this.addSql(`create type "approval_request_status" as enum ('pending', 'approved', 'rejected', 'expired');`);
    this.addSql(`create type "approval_vote_decision" as enum ('approve', 'reject');`);
    this.addSql(`create type "policy_action_type" as enum ('allow', 'block', 'require_approval', 'alert', 'delay');`);
    this.addSql(`create table "policies" ("id" text not null, "organization_id" uuid not null, "name" text not null, "description" text not null default '', "category" "policy_category" not null default 'access', "status" "policy_status" not null default 'draft', "priority" int not null default 100, "template_id" text null, "source_policy_id" text null, "created_by" text not null, "created_by_name" text not null, "activated_at" timestamptz null, "created_at" timestamptz not null, "updated_at" timestamptz not null, constraint "policies_pkey" primary key ("id"));`);
    this.addSql(`create index "policies_organization_id_status_index" on "policies" ("organization_id", "status");`);
    this.addSql(`create index "policies_organization_id_created_at_id_index" on "policies" ("organization_id", "created_at", "id");`);

    this.addSql(`create table "policy_approval_requests" ("id" text not null, "organization_id" uuid not null, "policy_id" text not null, "requested_by" text not null, "requested_by_name" text not null, "comment" text not null default '', "required_approvals" int not null, "status" "approval_request_status" not null default 'pending', "expires_at" timestamptz not null, "decided_at" timestamptz null, "created_at" timestamptz not null, constraint "policy_approval_requests_pkey" primary key ("id"));`);
    this.addSql(`create index "policy_approval_requests_policy_id_status_index" on "policy_approval_requests" ("policy_id", "status");`);

    this.addSql(`create table "policy_approval_votes" ("id" text not null, "approval_request_id" text not null, "member_id" uuid not null, "decision" "approval_vote_decision" not null, "comment" text not null default '', "created_at" timestamptz not null, constraint "policy_approval_votes_pkey" primary key ("id"));`);
    this.addSql(`alter table "policy_approval_votes" add constraint "policy_approval_votes_approval_request_id_member_id_unique" unique ("approval_request_id", "member_id");`);

    this.addSql(`create table "policy_audit_logs" ("id" text not null, "organization_id" uuid not null, "policy_id" text null, "action" text not null, "actor_id" text not null, "actor_name" text not null, "changes" jsonb not null, "metadata" jsonb not null, "created_at" timestamptz not null, constraint "policy_audit_logs_pkey" primary key ("id"));`);
    this.addSql(`create index "policy_audit_logs_policy_id_created_at_id_index" on "policy_audit_logs" ("policy_id", "created_at", "id");`);

    this.addSql(`create table "policy_rules" ("id" text not null, "policy_id" text not null, "name" text not null, "description" text not null default '', "action_type" "policy_action_type" not null, "action_config" jsonb not null, "conditions" jsonb not null, "position" int not null, "created_at" timestamptz not null, "updated_at" timestamptz not null, constraint "policy_rules_pkey" primary key ("id"));`);
    this.addSql(`create index "policy_rules_policy_id_position_index" on "policy_rules" ("policy_id", "position");`);

    this.addSql(`alter table "policies" add constraint "policies_organization_id_foreign" foreign key ("organization_id") references "organizations" ("id") on update cascade on delete cascade;`);
    this.addSql(`alter table "policies" add constraint "policies_source_policy_id_foreign" foreign key ("source_policy_id") references "policies" ("id") on update cascade on delete set null;`);

    this.addSql(`alter table "policy_approval_requests" add constraint "policy_approval_requests_organization_id_foreign" foreign key ("organization_id") references "organizations" ("id") on update cascade on delete cascade;`);
    this.addSql(`alter table "policy_approval_requests" add constraint "policy_approval_requests_policy_id_foreign" foreign key ("policy_id") references "policies" ("id") on update cascade on delete cascade;`);

    this.addSql(`alter table "policy_approval_votes" add constraint "policy_approval_votes_approval_request_id_foreign" foreign key ("approval_request_id") references "policy_approval_requests" ("id") on update cascade on delete cascade;`);
    this.addSql(`alter table "policy_approval_votes" add constraint "policy_approval_votes_member_id_foreign" foreign key ("member_id") references "members" ("id") on update cascade on delete cascade;`);

    this.addSql(`alter table "policy_audit_logs" add constraint "policy_audit_logs_organization_id_foreign" foreign key ("organization_id") references "organizations" ("id") on update cascade on delete cascade;`);

    this.addSql(`alter table "policy_rules" add constraint "policy_rules_policy_id_foreign" foreign key ("policy_id") references "policies" ("id") on update cascade on delete cascade;`);

    this.addSql(`alter table "organizations" add column "policy_activation_required_approvals" int not null default 1;`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "policies" drop constraint "policies_source_policy_id_foreign";`);

    this.addSql(`alter table "policy_approval_requests" drop constraint "policy_approval_requests_policy_id_foreign";`);

    this.addSql(`alter table "policy_rules" drop constraint "policy_rules_policy_id_foreign";`);

    this.addSql(`alter table "policy_approval_votes" drop constraint "policy_approval_votes_approval_request_id_foreign";`);

    this.addSql(`drop table if exists "policies" cascade;`);

    this.addSql(`drop table if exists "policy_approval_requests" cascade;`);

    this.addSql(`drop table if exists "policy_approval_votes" cascade;`);

    this.addSql(`drop table if exists "policy_audit_logs" cascade;`);

    this.addSql(`drop table if exists "policy_rules" cascade;`);

    this.addSql(`alter table "organizations" drop column "policy_activation_required_approvals";`);

    this.addSql(`drop type "policy_category";`);
    this.addSql(`drop type "policy_status";`);
    this.addSql(`drop type "approval_request_status";`);
    this.addSql(`drop type "approval_vote_decision";`);
    this.addSql(`drop type "policy_action_type";`);
  }

}
