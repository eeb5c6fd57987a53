import { Migration } from '@mikro-orm/migrations';

/**
 * `contact_last_event_hourly`: per project and UTC hour, how many contacts have their latest event in that hour, kept
 * by statement-level triggers on `contact_last_event` (a contact's move to a later hour, a new contact, a deleted
 * one). The active contacts of a window that ends now are then a sum over the window's hours, not a count over every
 * active contact (`/events/stats`). Written by hand.
 */
export class Migration20261125130100 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create table "contact_last_event_hourly" ("project_id" uuid not null, "hour" timestamptz not null, "contacts" bigint not null default 0, constraint "contact_last_event_hourly_pkey" primary key ("project_id", "hour"));`);
    this.addSql(`alter table "contact_last_event_hourly" add constraint "contact_last_event_hourly_project_id_foreign" foreign key ("project_id") references "projects" ("id") on update no action on delete cascade;`);
    // One function for the three triggers: each passes its transition tables' difference per project and hour.
    this.addSql(`create or replace function mailwright_contact_last_event_hourly() returns trigger language plpgsql as $$
      begin
        if tg_op = 'INSERT' then
          insert into contact_last_event_hourly (project_id, hour, contacts)
          select project_id, date_trunc('hour', at, 'UTC'), count(*) from new_rows group by 1, 2 order by 1, 2
          on conflict (project_id, hour) do update set contacts = contact_last_event_hourly.contacts + excluded.contacts;
        elsif tg_op = 'UPDATE' then
          insert into contact_last_event_hourly (project_id, hour, contacts)
          select project_id, hour, sum(d) from (
            select project_id, date_trunc('hour', at, 'UTC') as hour, -1 as d from old_rows
            union all select project_id, date_trunc('hour', at, 'UTC'), 1 from new_rows
          ) x group by 1, 2 having sum(d) <> 0 order by 1, 2
          on conflict (project_id, hour) do update set contacts = contact_last_event_hourly.contacts + excluded.contacts;
        else
          update contact_last_event_hourly h set contacts = h.contacts - g.n
          from (select project_id, date_trunc('hour', at, 'UTC') as hour, count(*) as n from old_rows group by 1, 2) g
          where h.project_id = g.project_id and h.hour = g.hour;
        end if;
        return null;
      end $$;`);
    this.addSql(`create trigger "contact_last_event_hourly_ins" after insert on "contact_last_event" referencing new table as new_rows for each statement execute function mailwright_contact_last_event_hourly();`);
    this.addSql(`create trigger "contact_last_event_hourly_upd" after update on "contact_last_event" referencing old table as old_rows new table as new_rows for each statement execute function mailwright_contact_last_event_hourly();`);
    this.addSql(`create trigger "contact_last_event_hourly_del" after delete on "contact_last_event" referencing old table as old_rows for each statement execute function mailwright_contact_last_event_hourly();`);
    this.addSql(`insert into contact_last_event_hourly (project_id, hour, contacts) select project_id, date_trunc('hour', at, 'UTC'), count(*) from contact_last_event group by 1, 2;`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop trigger if exists "contact_last_event_hourly_del" on "contact_last_event";`);
    this.addSql(`drop trigger if exists "contact_last_event_hourly_upd" on "contact_last_event";`);
    this.addSql(`drop trigger if exists "contact_last_event_hourly_ins" on "contact_last_event";`);
    this.addSql(`drop function if exists mailwright_contact_last_event_hourly();`);
    this.addSql(`drop table if exists "contact_last_event_hourly" cascade;`);
  }
}
