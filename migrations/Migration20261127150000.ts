import { Migration } from '@mikro-orm/migrations';

/**
 * Inbound messages read from the bounce mailbox over IMAP (issue 26): where a message came from (`smtp`, the inbound
 * server; `imap`, the bounce mailbox), and for mailbox messages the key of the message on the server
 * (`<user>@<host>:<port>/<folder>/<UIDVALIDITY>/<UID>`), unique, so a message read again after a restart is stored once.
 */
export class Migration20261127150000 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "inbound_messages" add column "source" varchar(10) not null default 'smtp', add column "source_ref" varchar(1100) null;`);
    this.addSql('alter table "inbound_messages" add constraint "inbound_messages_source_ref_unique" unique ("source_ref");');
  }

  override async down(): Promise<void> {
    this.addSql('alter table "inbound_messages" drop constraint "inbound_messages_source_ref_unique";');
    this.addSql('alter table "inbound_messages" drop column "source", drop column "source_ref";');
  }
}
