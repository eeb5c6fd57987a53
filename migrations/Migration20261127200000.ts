import { Migration } from '@mikro-orm/migrations';

/**
 * The status of a webhook replay (issue 29, GET /webhook-endpoints/:id/replays/:replayId) counts the deliveries it
 * queued by status: an index of the deliveries that a replay queued, by replay, so the count reads only those and not
 * every delivery of the endpoint. Written by hand.
 */
export class Migration20261127200000 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create index "webhook_deliveries_replay_id_index" on "webhook_deliveries" ("replay_id") where replay_id is not null;`);
  }

  override async down(): Promise<void> {
    this.addSql('drop index if exists "webhook_deliveries_replay_id_index";');
  }
}
