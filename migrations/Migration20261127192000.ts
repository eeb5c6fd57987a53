import { Migration } from '@mikro-orm/migrations';

/**
 * Replays of webhook deliveries (issue 29, POST /webhook-endpoints/:id/replay): the replay a delivery was queued or
 * queued again by, so that a retried page of the replay finds exactly the deliveries it queued. Written by hand.
 */
export class Migration20261127192000 extends Migration {
  override async up(): Promise<void> {
    this.addSql('alter table "webhook_deliveries" add column "replay_id" uuid null;');
  }

  override async down(): Promise<void> {
    this.addSql('alter table "webhook_deliveries" drop column if exists "replay_id";');
  }
}
