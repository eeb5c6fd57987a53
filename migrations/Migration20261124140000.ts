import { Migration } from '@mikro-orm/migrations';

/**
 * Automations (the API's workflows): the trigger and graph as clients edit them, frozen graph versions runs start on,
 * executions (one per Temporal run) and the steps each took. Generated from the entities (automation.entity.ts).
 */
export class Migration20261124140000 extends Migration {

  override async up(): Promise<void> {
    this.addSql(`create table "automations" ("id" uuid not null, "project_id" uuid not null, "name" varchar(200) not null, "description" text null, "trigger_type" text check ("trigger_type" in ('EVENT')) not null default 'EVENT', "trigger_event" varchar(200) null, "trigger_filter" jsonb null, "enabled" boolean not null default false, "allow_reentry" boolean not null default false, "entry_step_id" uuid null, "graph_version" int not null default 1, "published_version" int null, "webhook_secret" varchar(100) not null, "created_at" timestamptz not null default now(), "updated_at" timestamptz not null default now(), constraint "automations_pkey" primary key ("id"));`);
    this.addSql(`create index "automations_project_id_id_index" on "automations" ("project_id", "id");`);
    this.addSql(`create index "automations_trigger_index" on "automations" ("project_id", "trigger_event") where enabled;`);

    this.addSql(`create table "automation_versions" ("automation_id" uuid not null, "version" int not null, "graph" jsonb not null, "created_at" timestamptz not null default now(), constraint "automation_versions_pkey" primary key ("automation_id", "version"));`);

    this.addSql(`create table "automation_steps" ("id" uuid not null, "automation_id" uuid not null, "type" text check ("type" in ('SEND_EMAIL', 'DELAY', 'WAIT_FOR_EVENT', 'CONDITION', 'WEBHOOK', 'UPDATE_CONTACT', 'EXIT')) not null, "name" varchar(200) null, "config" jsonb not null, "created_at" timestamptz not null default now(), "updated_at" timestamptz not null default now(), constraint "automation_steps_pkey" primary key ("id"));`);
    this.addSql(`create index "automation_steps_automation_id_index" on "automation_steps" ("automation_id");`);

    this.addSql(`create table "automation_transitions" ("id" uuid not null, "automation_id" uuid not null, "from_step_id" uuid not null, "to_step_id" uuid not null, "branch" text check ("branch" in ('yes', 'no', 'event', 'timeout')) null, "created_at" timestamptz not null default now(), constraint "automation_transitions_pkey" primary key ("id"));`);
    this.addSql(`create index "automation_transitions_automation_id_index" on "automation_transitions" ("automation_id");`);
    this.addSql(`create index "automation_transitions_to_step_id_index" on "automation_transitions" ("to_step_id");`);
    this.addSql(`create unique index "automation_transitions_out_unique" on "automation_transitions" ("from_step_id", coalesce("branch", ''));`);

    this.addSql(`create table "automation_executions" ("id" uuid not null, "project_id" uuid not null, "automation_id" uuid not null, "contact_id" uuid not null, "n" int not null, "version" int not null, "workflow_id" varchar(200) not null, "status" text check ("status" in ('RUNNING', 'WAITING', 'COMPLETED', 'CANCELLED', 'FAILED')) not null, "current_step_id" uuid null, "waiting_event" varchar(200) null, "wait_since" timestamptz null, "next_wake_at" timestamptz null, "context" jsonb null, "trigger_event_id" uuid null, "status_reason" text null, "started_at" timestamptz not null default now(), "finished_at" timestamptz null, "updated_at" timestamptz not null default now(), constraint "automation_executions_pkey" primary key ("id"));`);
    this.addSql(`create index "automation_executions_project_id_index" on "automation_executions" ("project_id");`);
    this.addSql(`create index "automation_executions_automation_id_id_index" on "automation_executions" ("automation_id", "id");`);
    this.addSql(`create index "automation_executions_status_index" on "automation_executions" ("automation_id", "status", "id");`);
    this.addSql(`create index "automation_executions_waiting_index" on "automation_executions" ("contact_id", "waiting_event") where waiting_event is not null;`);
    this.addSql(`create index "automation_executions_trigger_index" on "automation_executions" ("trigger_event_id") where trigger_event_id is not null;`);
    this.addSql(`alter table "automation_executions" add constraint "automation_executions_automation_id_contact_id_n_unique" unique ("automation_id", "contact_id", "n");`);
    this.addSql(`create unique index "automation_executions_one_active" on "automation_executions" ("automation_id", "contact_id") where status in ('RUNNING', 'WAITING');`);

    this.addSql(`create table "automation_execution_steps" ("execution_id" uuid not null, "seq" int not null, "step_id" uuid not null, "type" text check ("type" in ('SEND_EMAIL', 'DELAY', 'WAIT_FOR_EVENT', 'CONDITION', 'WEBHOOK', 'UPDATE_CONTACT', 'EXIT')) not null, "started_at" timestamptz not null, "finished_at" timestamptz not null, "outcome" jsonb not null, constraint "automation_execution_steps_pkey" primary key ("execution_id", "seq"));`);

    this.addSql(`alter table "automations" add constraint "automations_project_id_foreign" foreign key ("project_id") references "projects" ("id") on update no action on delete cascade;`);

    this.addSql(`alter table "automation_versions" add constraint "automation_versions_automation_id_foreign" foreign key ("automation_id") references "automations" ("id") on update no action on delete cascade;`);

    this.addSql(`alter table "automation_steps" add constraint "automation_steps_automation_id_foreign" foreign key ("automation_id") references "automations" ("id") on update no action on delete cascade;`);

    this.addSql(`alter table "automation_transitions" add constraint "automation_transitions_automation_id_foreign" foreign key ("automation_id") references "automations" ("id") on update no action on delete cascade;`);
    this.addSql(`alter table "automation_transitions" add constraint "automation_transitions_from_step_id_foreign" foreign key ("from_step_id") references "automation_steps" ("id") on update no action on delete cascade;`);
    this.addSql(`alter table "automation_transitions" add constraint "automation_transitions_to_step_id_foreign" foreign key ("to_step_id") references "automation_steps" ("id") on update no action on delete cascade;`);

    this.addSql(`alter table "automation_executions" add constraint "automation_executions_automation_id_foreign" foreign key ("automation_id") references "automations" ("id") on update no action on delete cascade;`);

    this.addSql(`alter table "automation_execution_steps" add constraint "automation_execution_steps_execution_id_foreign" foreign key ("execution_id") references "automation_executions" ("id") on update no action on delete cascade;`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "automation_versions" drop constraint "automation_versions_automation_id_foreign";`);

    this.addSql(`alter table "automation_steps" drop constraint "automation_steps_automation_id_foreign";`);

    this.addSql(`alter table "automation_transitions" drop constraint "automation_transitions_automation_id_foreign";`);

    this.addSql(`alter table "automation_executions" drop constraint "automation_executions_automation_id_foreign";`);

    this.addSql(`alter table "automation_transitions" drop constraint "automation_transitions_from_step_id_foreign";`);

    this.addSql(`alter table "automation_transitions" drop constraint "automation_transitions_to_step_id_foreign";`);

    this.addSql(`alter table "automation_execution_steps" drop constraint "automation_execution_steps_execution_id_foreign";`);

    this.addSql(`drop table if exists "automations" cascade;`);

    this.addSql(`drop table if exists "automation_versions" cascade;`);

    this.addSql(`drop table if exists "automation_steps" cascade;`);

    this.addSql(`drop table if exists "automation_transitions" cascade;`);

    this.addSql(`drop table if exists "automation_executions" cascade;`);

    this.addSql(`drop table if exists "automation_execution_steps" cascade;`);
  }

}
