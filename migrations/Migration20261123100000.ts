import { Migration } from '@mikro-orm/migrations';

/**
 * The event outbox (domain/events/event-dispatcher.ts). Every consumer a worker has registered is a row of
 * `event_consumers`; a statement-level trigger on `events` writes one `event_outbox` row per new event and consumer
 * in the inserting statement's own transaction, whatever code path inserted the events, and wakes the dispatchers
 * (NOTIFY mailwright_outbox, sent at commit). `shard` spreads contacts over 64 queues (from the last, random byte of
 * the contact's UUID): a dispatcher locks shards, so one contact's events are only ever in one dispatcher's hands.
 * No foreign key from the outbox to its consumer: its check would lock the consumer's row once per event, from every
 * recording transaction (outbox-admin.ts deletes a retired consumer's rows itself). `event_probe_receipts` is written
 * by the optional probe consumer (EVENTS_PROBE). Written by hand.
 */
export class Migration20261123100000 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create table "event_consumers" ("name" varchar(100) not null, "registered_at" timestamptz not null default now(),
      constraint "event_consumers_pkey" primary key ("name"));`);
    // One index serves the queues (a consumer's shard in order), the deletes and the updates.
    this.addSql(`create table "event_outbox" ("consumer" varchar(100) not null, "shard" smallint not null, "seq" bigserial not null,
      "event_id" uuid not null, "contact_id" uuid not null, "attempts" int not null default 0, "next_attempt_at" timestamptz null,
      "last_error" text null, "parked_at" timestamptz null, constraint "event_outbox_pkey" primary key ("consumer", "shard", "seq"));`);
    // Only rows that failed at least once: what holds back a contact's later events (retrying or parked).
    this.addSql('create index "event_outbox_retrying_index" on "event_outbox" ("consumer", "contact_id", "seq") where attempts > 0;');
    this.addSql(`create table "event_probe_receipts" ("event_id" uuid not null, "received_at" timestamptz not null default clock_timestamp(),
      "deliveries" int not null default 1, constraint "event_probe_receipts_pkey" primary key ("event_id"));`);

    // Rows are numbered in event id order within a statement: ids are UUIDv7 made in the order the events happened
    // (a contact's subscription change before the tracked event of the same call).
    this.addSql(`create or replace function mailwright_event_outbox() returns trigger language plpgsql as $$
declare
  n bigint;
begin
  insert into event_outbox (consumer, event_id, contact_id, shard)
  select c.name, e.id, e.contact_id, get_byte(uuid_send(e.contact_id), 15) % 64
  from new_events e cross join event_consumers c
  order by e.id, c.name;
  get diagnostics n = row_count;
  if n > 0 then
    perform pg_notify('mailwright_outbox', '');
  end if;
  return null;
end $$;`);
    this.addSql(`create trigger events_outbox after insert on events referencing new table as new_events
      for each statement execute function mailwright_event_outbox();`);
  }

  override async down(): Promise<void> {
    this.addSql('drop trigger if exists events_outbox on events;');
    this.addSql('drop function if exists mailwright_event_outbox();');
    this.addSql('drop table if exists "event_probe_receipts";');
    this.addSql('drop table if exists "event_outbox";');
    this.addSql('drop table if exists "event_consumers";');
  }
}
