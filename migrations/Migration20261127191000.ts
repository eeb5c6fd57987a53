import { Migration } from '@mikro-orm/migrations';

/**
 * The notice to a project's owners when the service disables a failing webhook endpoint (issue 29): when it was sent,
 * so that it goes once per disabling (enabling the endpoint again clears it). Written by hand.
 */
export class Migration20261127191000 extends Migration {
  override async up(): Promise<void> {
    this.addSql('alter table "webhook_endpoints" add column "owners_notified_at" timestamptz null;');
  }

  override async down(): Promise<void> {
    this.addSql('alter table "webhook_endpoints" drop column if exists "owners_notified_at";');
  }
}
