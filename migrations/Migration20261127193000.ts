import { Migration } from '@mikro-orm/migrations';

/**
 * Per-contact order of webhook deliveries (issue 29): each delivery's contact (null for `webhook.test`), and an index
 * of the PENDING ones by endpoint and contact, which the delivery activity asks before each attempt whether an earlier
 * delivery of the same contact to the same endpoint is still on its way. Written by hand.
 */
export class Migration20261127193000 extends Migration {
  override async up(): Promise<void> {
    this.addSql('alter table "webhook_deliveries" add column "contact_id" uuid null;');
    this.addSql(`update webhook_deliveries set contact_id = (payload -> 'data' -> 'contact' ->> 'id')::uuid where event_id is not null;`);
    this.addSql(`create index "webhook_deliveries_pending_contact_index" on "webhook_deliveries" ("endpoint_id", "contact_id", "id") where status = 'PENDING' and contact_id is not null;`);
  }

  override async down(): Promise<void> {
    this.addSql('drop index if exists "webhook_deliveries_pending_contact_index";');
    this.addSql('alter table "webhook_deliveries" drop column if exists "contact_id";');
  }
}
