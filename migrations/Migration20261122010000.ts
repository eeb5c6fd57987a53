import { Migration } from '@mikro-orm/migrations';

/**
 * Templates. One project's templates are listed newest first by UUIDv7 id, so (project_id, id) serves the
 * list, its cursor and the project's cascade delete. Search scans the project's templates: a project has hundreds of
 * them, not millions, so no trigram index. Written by hand.
 */
export class Migration20261122010000 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create table "templates" ("id" uuid not null, "project_id" uuid not null, "name" varchar(200) not null,
      "subject" varchar(998) not null, "body" text not null, "type" text check ("type" in ('TRANSACTIONAL', 'MARKETING')) not null,
      "from_email" varchar(320) null, "from_name" varchar(200) null, "reply_to" varchar(320) null,
      "created_at" timestamptz not null default now(), "updated_at" timestamptz not null default now(),
      constraint "templates_pkey" primary key ("id"),
      constraint "templates_project_id_foreign" foreign key ("project_id") references "projects" ("id") on delete cascade);`);
    this.addSql('create index "templates_project_id_id_index" on "templates" ("project_id", "id");');
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists "templates";');
  }
}
