import { Migration } from '@mikro-orm/migrations';

/**
 * Consumers declare the event names they handle (`event_consumers.event_names`; null: every event), and the outbox
 * trigger writes rows only for the consumers an event concerns. Campaign stats read six service events: without this,
 * every tracked event paid an outbox row, a dispatch and a delete for a consumer that ignores it. Written by hand.
 */
export class Migration20261124120000 extends Migration {
  override async up(): Promise<void> {
    this.addSql('alter table "event_consumers" add column "event_names" text[] null;');
    this.addSql(`create or replace function mailwright_event_outbox() returns trigger language plpgsql as $$
declare
  n bigint;
begin
  insert into event_outbox (consumer, event_id, contact_id, shard)
  select c.name, e.id, e.contact_id, get_byte(uuid_send(e.contact_id), 15) % 64
  from new_events e join event_consumers c on c.event_names is null or e.name = any(c.event_names)
  order by e.id, c.name;
  get diagnostics n = row_count;
  if n > 0 then
    perform pg_notify('mailwright_outbox', '');
  end if;
  return null;
end $$;`);
  }

  override async down(): Promise<void> {
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
    this.addSql('alter table "event_consumers" drop column if exists "event_names";');
  }
}
