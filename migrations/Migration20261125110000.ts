import { Migration } from '@mikro-orm/migrations';

/**
 * Uploaded images (domain/uploads). The bytes live outside the database (a local folder or S3), named by their
 * SHA-256; a row per project that uploaded them. Unique on (sha256, project_id): one project's repeated upload is one
 * row, and the index answers the public file route's lookup by hash alone. (project_id, id) serves the project's
 * list, its cursor and its cascade delete. Written by hand.
 */
export class Migration20261125110000 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create table "uploads" ("id" uuid not null, "project_id" uuid not null, "sha256" varchar(64) not null,
      "content_type" text check ("content_type" in ('image/png', 'image/jpeg', 'image/gif', 'image/webp')) not null,
      "size" int not null, "width" int not null, "height" int not null, "file_name" varchar(255) null,
      "created_at" timestamptz not null default now(),
      constraint "uploads_pkey" primary key ("id"),
      constraint "uploads_project_id_foreign" foreign key ("project_id") references "projects" ("id") on delete cascade);`);
    this.addSql('create index "uploads_project_id_id_index" on "uploads" ("project_id", "id");');
    this.addSql('alter table "uploads" add constraint "uploads_sha256_project_id_unique" unique ("sha256", "project_id");');
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists "uploads";');
  }
}
