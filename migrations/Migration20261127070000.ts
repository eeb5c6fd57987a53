import { Migration } from '@mikro-orm/migrations';

/**
 * Inbound mail (domain/inbound): every message the inbound SMTP server accepts is stored here before it answers 250,
 * then processed by the `inbound-mail/<id>` workflow. `digest` (SHA-256 of the message's bytes) makes a message that a
 * sending MTA delivers twice (its 250 lost) one row, processed once. `raw` is dropped once the message is processed
 * and older than INBOUND_RETENTION_DAYS; what processing found stays (`kind`, `outcome`). Written by hand.
 */
export class Migration20261127070000 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create table "inbound_messages" ("id" uuid not null, "received_at" timestamptz not null default now(),
      "digest" bytea not null, "mail_from" varchar(998) not null, "rcpt_to" text[] not null, "remote_address" varchar(64) null,
      "helo" varchar(255) null, "size" int not null, "raw" bytea null,
      "status" text not null default 'RECEIVED' check ("status" in ('RECEIVED', 'PROCESSED', 'FAILED')),
      "started_at" timestamptz null, "processed_at" timestamptz null,
      "kind" varchar(20) null, "outcome" jsonb null, "project_id" uuid null, "email_id" uuid null, "contact_id" uuid null,
      constraint "inbound_messages_pkey" primary key ("id"));`);
    this.addSql('create unique index "inbound_messages_digest_unique" on "inbound_messages" ("digest");');
    // What the sweeper looks for: received and not yet processed (a start that failed, a worker that was down).
    this.addSql(`create index "inbound_messages_pending_index" on "inbound_messages" ("received_at") where status = 'RECEIVED';`);
    this.addSql('create index "inbound_messages_project_index" on "inbound_messages" ("project_id", "received_at") where project_id is not null;');
    this.addSql(`alter table "inbound_messages" add constraint "inbound_messages_project_id_foreign" foreign key ("project_id") references "projects" ("id") on update no action on delete cascade;`);
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists "inbound_messages";');
  }
}
