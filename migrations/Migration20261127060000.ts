import { Migration } from '@mikro-orm/migrations';

/**
 * Tallies: the outbox's entries for counts that are not recorded one event at a time. A campaign's sends record no
 * `email.sent` event per message (100,000 events and an outbox row per consumer each would cost more than the sends);
 * the statement that records a batch of sends adds one tally row (project, rollup, key, hour, count) instead, in its
 * own transaction, and so does `DELETE /events/:name` for what the rollup had counted of the deleted events (a
 * negative count). The analytics consumer folds tallies into the rollups in the transaction that removes them. So the
 * rollups have one writer, the outbox's, and a count is applied exactly once. The statement-level trigger wakes
 * the dispatchers as the events' trigger does (NOTIFY mailwright_outbox, sent at commit). Written by hand.
 */
export class Migration20261127060000 extends Migration {
  override async up(): Promise<void> {
    // `rollup` names the rollup a tally goes to, `key` its metric (analytics_hourly) or event name (event_name_hourly).
    this.addSql(`create table "event_tallies" ("seq" bigserial not null, "project_id" uuid not null,
      "rollup" varchar(40) not null check ("rollup" in ('analytics_hourly', 'event_name_hourly')), "key" varchar(200) not null,
      "hour" timestamptz not null, "count" bigint not null, "created_at" timestamptz not null default now(),
      constraint "event_tallies_pkey" primary key ("seq"));`);
    this.addSql(`create or replace function mailwright_tally_notify() returns trigger language plpgsql as $$
begin
  if exists (select 1 from new_tallies) then
    perform pg_notify('mailwright_outbox', '');
  end if;
  return null;
end $$;`);
    this.addSql(`create trigger event_tallies_notify after insert on event_tallies referencing new table as new_tallies for each statement execute function mailwright_tally_notify();`);
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists "event_tallies";');
    this.addSql('drop function if exists mailwright_tally_notify();');
  }
}
