import { Migration } from '@mikro-orm/migrations';

/**
 * Inbound messages are processed in batches (one `inbound-mail/<first id>` workflow for the messages stored within a
 * few milliseconds of each other): each row names the run that processes it, so an operator finds it in Temporal Web UI.
 */
export class Migration20261127130000 extends Migration {
  override async up(): Promise<void> {
    this.addSql('alter table "inbound_messages" add column "workflow_id" varchar(255) null;');
  }

  override async down(): Promise<void> {
    this.addSql('alter table "inbound_messages" drop column "workflow_id";');
  }
}
