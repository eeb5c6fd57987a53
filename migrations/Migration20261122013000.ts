import { Migration } from '@mikro-orm/migrations';

/**
 * Amazon SES delivery reports via SNS: the ids of processed SNS messages, so a redelivery records nothing twice.
 * Pruned by `received_at` (hence the index). Written by hand.
 */
export class Migration20261122013000 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create table "sns_messages" ("message_id" varchar(255) not null, "received_at" timestamptz not null default now(),
      constraint "sns_messages_pkey" primary key ("message_id"));`);
    this.addSql('create index "sns_messages_received_at_index" on "sns_messages" ("received_at");');
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists "sns_messages";');
  }
}
