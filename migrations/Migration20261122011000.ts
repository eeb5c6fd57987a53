import { Migration } from '@mikro-orm/migrations';

/**
 * The complete /v1/send (issue 4):
 * - emails: the template it was rendered from (no foreign key: a deleted template leaves its sent mail's history
 *   intact), the first open and click and their counts, and when the relay's DSN/webhook reported delivery.
 * - email_attachments: attachment bytes live in their own rows, never in Temporal payloads or the email row; a send
 *   to many recipients stores each attachment once and every email lists the ids it carries (`attachment_ids`).
 * - idempotency_keys: the first response to an `Idempotency-Key` per project, kept 24 hours.
 */
export class Migration20261122011000 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "emails"
      add column "template_id" uuid null,
      add column "first_opened_at" timestamptz null,
      add column "first_clicked_at" timestamptz null,
      add column "open_count" int not null default 0,
      add column "click_count" int not null default 0,
      add column "delivered_at" timestamptz null,
      add column "attachment_ids" uuid[] not null default '{}';`);
    this.addSql(`create table "email_attachments" (
      "id" uuid not null,
      "project_id" uuid not null,
      "filename" varchar(255) not null,
      "content_type" varchar(255) not null,
      "disposition" varchar(16) not null default 'attachment',
      "content_id" varchar(255) null,
      "size" int not null,
      "content" bytea not null,
      "created_at" timestamptz not null default now(),
      constraint "email_attachments_pkey" primary key ("id"),
      constraint "email_attachments_project_id_foreign" foreign key ("project_id") references "projects" ("id") on update cascade on delete cascade
    );`);
    this.addSql('create index "email_attachments_project_id_index" on "email_attachments" ("project_id");');
    this.addSql(`create table "idempotency_keys" (
      "project_id" uuid not null,
      "key" varchar(255) not null,
      "request_hash" varchar(64) not null,
      "status_code" int null,
      "response" jsonb null,
      "created_at" timestamptz not null default now(),
      constraint "idempotency_keys_pkey" primary key ("project_id", "key"),
      constraint "idempotency_keys_project_id_foreign" foreign key ("project_id") references "projects" ("id") on update cascade on delete cascade
    );`);
    this.addSql('create index "idempotency_keys_created_at_index" on "idempotency_keys" ("created_at");');
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists "idempotency_keys" cascade;');
    this.addSql('drop table if exists "email_attachments" cascade;');
    this.addSql(`alter table "emails" drop column "template_id", drop column "first_opened_at", drop column "first_clicked_at",
      drop column "open_count", drop column "click_count", drop column "delivered_at", drop column "attachment_ids";`);
  }
}
