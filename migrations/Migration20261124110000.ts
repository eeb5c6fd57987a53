import { Migration } from '@mikro-orm/migrations';

/**
 * What the `campaign-stats` outbox consumer (domain/campaigns/campaign-stats.ts) needs to count each event once,
 * although the outbox delivers at least once:
 * - `campaign_email_marks`: one row per campaign email and kind of outcome counted once per email (delivered,
 *   opened, clicked, bounced, complained, unsubscribed). The insert that finds the row new is the one that counts
 *   the unique counter, so the first open of an email counts once however often its events come. At most six rows
 *   per campaign email, removed with the email (the foreign key cascades).
 * - `campaign_event_receipts`: the ids of the open and click events already added to the totals, so a redelivered
 *   event adds nothing. They grow with engagement; the consumer prunes those whose events are more than a week old
 *   and no longer in the outbox (nothing can deliver them again). `campaign_id` says whose they are (no foreign key:
 *   a receipt outlives nothing it would protect, and the check would lock the campaign once per event).
 * Written by hand.
 */
export class Migration20261124110000 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create table "campaign_email_marks" ("email_id" uuid not null,
      "kind" text check ("kind" in ('delivered', 'opened', 'clicked', 'bounced', 'complained', 'unsubscribed')) not null,
      constraint "campaign_email_marks_pkey" primary key ("email_id", "kind"),
      constraint "campaign_email_marks_email_id_foreign" foreign key ("email_id") references "emails" ("id") on delete cascade);`);
    this.addSql(`create table "campaign_event_receipts" ("event_id" uuid not null, "campaign_id" uuid not null,
      constraint "campaign_event_receipts_pkey" primary key ("event_id"));`);
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists "campaign_event_receipts";');
    this.addSql('drop table if exists "campaign_email_marks";');
  }
}
