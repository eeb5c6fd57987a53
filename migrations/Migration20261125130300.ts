import { Migration } from '@mikro-orm/migrations';

/** Sending reputation (domain/reputation): a project's suspensions, at most one active (not lifted) at a time. */
export class Migration20261125130300 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create table "project_suspensions" ("id" uuid not null, "project_id" uuid not null, "reason" text check ("reason" in ('BOUNCE_RATE', 'COMPLAINT_RATE')) not null, "sent" bigint not null, "bounced" bigint not null, "complained" bigint not null, "bounce_rate" double precision not null, "complaint_rate" double precision not null, "window_from" timestamptz not null, "created_at" timestamptz not null default now(), "notified_at" timestamptz null, "lifted_at" timestamptz null, "lifted_by" uuid null, constraint "project_suspensions_pkey" primary key ("id"));`);
    this.addSql(`alter table "project_suspensions" add constraint "project_suspensions_project_id_foreign" foreign key ("project_id") references "projects" ("id") on update no action on delete cascade;`);
    this.addSql(`create index "project_suspensions_project_id_id_index" on "project_suspensions" ("project_id", "id");`);
    this.addSql(`create unique index "project_suspensions_one_active" on "project_suspensions" ("project_id") where lifted_at is null;`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "project_suspensions" cascade;`);
  }
}
