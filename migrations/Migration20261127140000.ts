import { Migration } from '@mikro-orm/migrations';

/**
 * Delivery reports by provider webhooks (SendGrid, Mailgun, Postmark, Resend; domain/webhooks/provider-reports.ts):
 * - `provider_webhook_events`: the provider's id of each event applied, so a redelivered or replayed report changes
 *   nothing; pruned by `received_at` (hence the index). Written by hand.
 * - `emails.provider_message_id`: the id the relay gave the message when it accepted it (`250 Ok: queued as <id>`),
 *   written with SENT, so a report that names the message only by the relay's id (SendGrid's `sg_message_id`,
 *   Postmark's `MessageID`, Resend's `email_id`) finds it. Indexed where set only: a relay that names no id costs nothing.
 */
export class Migration20261127140000 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create table "provider_webhook_events" ("provider" varchar(32) not null, "event_id" varchar(255) not null,
      "received_at" timestamptz not null default now(), constraint "provider_webhook_events_pkey" primary key ("provider", "event_id"));`);
    this.addSql('create index "provider_webhook_events_received_at_index" on "provider_webhook_events" ("received_at");');
    this.addSql('alter table "emails" add column "provider_message_id" varchar(255) null;');
    this.addSql('create index "emails_provider_message_id_index" on "emails" ("provider_message_id") where "provider_message_id" is not null;');
  }

  override async down(): Promise<void> {
    this.addSql('drop index if exists "emails_provider_message_id_index";');
    this.addSql('alter table "emails" drop column "provider_message_id";');
    this.addSql('drop table if exists "provider_webhook_events";');
  }
}
