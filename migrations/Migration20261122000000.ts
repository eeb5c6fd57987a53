import { Migration } from '@mikro-orm/migrations';

/**
 * Import and bulk contact jobs (issue 6). A job row is written before its workflow starts, so the workflow (and a
 * retried activity) always finds its input in Postgres: the uploaded CSV in `contact_import_files`, the contact ids
 * of a bulk job in `jobs.contact_ids`. `job_chunks` makes chunk processing idempotent: a chunk's row is inserted in
 * the same transaction as its upserts and counters, so a chunk that was committed is never applied twice.
 */
export class Migration20261122000000 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create table "jobs" (
      "id" uuid not null primary key,
      "project_id" uuid not null constraint "jobs_project_id_foreign" references "projects" ("id") on delete cascade,
      "type" text not null check ("type" in ('IMPORT', 'BULK_SUBSCRIBE', 'BULK_UNSUBSCRIBE', 'BULK_DELETE')),
      "status" text not null default 'QUEUED' check ("status" in ('QUEUED', 'RUNNING', 'COMPLETED', 'FAILED', 'CANCELLED')),
      "options" jsonb not null default '{}',
      "contact_ids" uuid[] null,
      "total" integer not null default 0,
      "processed" integer not null default 0,
      "created" integer not null default 0,
      "updated" integer not null default 0,
      "changed" integer not null default 0,
      "skipped" integer not null default 0,
      "failed" integer not null default 0,
      "errors" jsonb not null default '[]',
      "message" text null,
      "next_offset" integer not null default 0,
      "next_line" integer not null default 1,
      "next_chunk" integer not null default 0,
      "created_at" timestamptz not null default now(),
      "started_at" timestamptz null,
      "finished_at" timestamptz null);`);
    this.addSql('create index "jobs_project_id_id_index" on "jobs" ("project_id", "id");');
    this.addSql(`create table "contact_import_files" (
      "job_id" uuid not null primary key constraint "contact_import_files_job_id_foreign" references "jobs" ("id") on delete cascade,
      "file_name" text null,
      "content" bytea not null,
      constraint "contact_import_files_size" check (octet_length("content") <= 5242880));`);
    this.addSql(`create table "job_chunks" (
      "job_id" uuid not null constraint "job_chunks_job_id_foreign" references "jobs" ("id") on delete cascade,
      "chunk" integer not null,
      "rows" integer not null default 0,
      "done_at" timestamptz not null default now(),
      primary key ("job_id", "chunk"));`);
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists "job_chunks";');
    this.addSql('drop table if exists "contact_import_files";');
    this.addSql('drop table if exists "jobs";');
  }
}
