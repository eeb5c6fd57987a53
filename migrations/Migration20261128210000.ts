import { Migration } from '@mikro-orm/migrations';

/**
 * A campaign's outcome updates become HOT (heap-only: the new row version on the same page, no new index entries).
 * Postgres makes an update HOT only if it changes no indexed column and the page has room; each outcome changed
 * `status`, indexed for one reader, the stranded-mail sweeper, so every sent message added an entry to each of the
 * table's indexes (BENCHMARKS.md › Issue 28, twelfth stop).
 * - `emails.queued_at`: set when a transactional email is accepted, cleared when a delivery attempt claims it (null for
 *   campaign and automation emails). Its partial index holds only the unclaimed ones, and replaces the sweeper's use of
 *   `emails_status_index`, which is dropped. The backfill covers what is QUEUED now.
 * - `fillfactor`: new pages of `emails` are filled to 70% at insert, so a row's update finds room on its own page.
 * Written by hand.
 */
export class Migration20261128210000 extends Migration {
  override async up(): Promise<void> {
    this.addSql('alter table "emails" add column "queued_at" timestamptz null;');
    this.addSql(`update "emails" set "queued_at" = "created_at" where "status" = 'QUEUED' and "campaign_id" is null
      and ("workflow_id" is null or "workflow_id" not like 'automation/%');`);
    this.addSql('create index "emails_queued_at_index" on "emails" ("queued_at") where "queued_at" is not null;');
    this.addSql('drop index if exists "emails_status_index";');
    this.addSql('alter table "emails" set (fillfactor = 70);');
  }

  override async down(): Promise<void> {
    this.addSql('alter table "emails" reset (fillfactor);');
    this.addSql('create index "emails_status_index" on "emails" ("status");');
    this.addSql('drop index if exists "emails_queued_at_index";');
    this.addSql('alter table "emails" drop column "queued_at";');
  }
}
