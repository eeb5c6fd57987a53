import { Migration } from '@mikro-orm/migrations';

/** Project resets (domain/projects/project-reset.ts): one row per reset, at most one RUNNING per project. */
export class Migration20261125130200 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create table "project_resets" ("id" uuid not null, "project_id" uuid not null, "status" text check ("status" in ('RUNNING', 'COMPLETED', 'FAILED', 'CANCELLED')) not null, "workflow_id" varchar(255) not null, "requested_by" uuid null, "deleted" jsonb not null default '{}', "error" text null, "created_at" timestamptz not null default now(), "finished_at" timestamptz null, constraint "project_resets_pkey" primary key ("id"));`);
    this.addSql(`alter table "project_resets" add constraint "project_resets_project_id_foreign" foreign key ("project_id") references "projects" ("id") on update no action on delete cascade;`);
    this.addSql(`create index "project_resets_project_id_id_index" on "project_resets" ("project_id", "id");`);
    this.addSql(`create unique index "project_resets_one_running" on "project_resets" ("project_id") where status = 'RUNNING';`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "project_resets" cascade;`);
  }
}
