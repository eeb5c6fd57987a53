import { Migration } from '@mikro-orm/migrations';

/**
 * The activity feed and the event statistics on rollups (domain/activity, domain/analytics). Written by hand.
 * - `events.campaign_id`: the campaign of the email an event reports on, set by a trigger from `emails` (so every path
 *   that records a service event fills it), for the feed's campaign filter.
 * - `events (project_id, created_at, id) include (name, source)`: the feed's order; a type filter reads the names from
 *   the index, not from the table.
 * - `event_name_hourly` counts every event from now on, service events too (`system`), for `/events/stats` and
 *   `/activity/stats`; the backfill adds the service events already stored, except those still waiting in the
 *   `analytics` consumer's outbox (it counts them itself when they arrive, with the new code).
 * - `contact_last_event`: when each contact's latest event happened, kept by the `analytics` consumer: the contacts
 *   active in a window ending now are the contacts whose latest event falls in it.
 * - `automation_execution_steps.project_id` / `automation_id`: the feed's automation steps by project and automation.
 * - indexes for `/activity/upcoming`.
 */
export class Migration20261125130000 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "events" add column "campaign_id" uuid null;`);
    this.addSql(`create or replace function mailwright_event_campaign() returns trigger language plpgsql as $$
      begin
        if new.email_id is not null and new.campaign_id is null then
          select m.campaign_id into new.campaign_id from emails m where m.id = new.email_id;
        end if;
        return new;
      end $$;`);
    this.addSql(`create trigger "events_campaign" before insert on "events" for each row execute function mailwright_event_campaign();`);
    this.addSql(`update events e set campaign_id = m.campaign_id from emails m where m.id = e.email_id and m.campaign_id is not null;`);
    this.addSql(`create index "events_project_id_campaign_id_created_at_index" on "events" ("project_id", "campaign_id", "created_at", "id") where campaign_id is not null;`);
    this.addSql(`create index "events_project_id_created_at_id_index" on "events" ("project_id", "created_at", "id") include ("name", "source");`);

    this.addSql(`alter table "event_name_hourly" add column "system" boolean not null default false;`);
    this.addSql(`insert into event_name_hourly (project_id, name, hour, count, system)
      select e.project_id, e.name, date_trunc('hour', e.created_at, 'UTC'), count(*), true from events e
      where e.source = 'SYSTEM' and not exists (select 1 from event_outbox o where o.consumer = 'analytics' and o.event_id = e.id)
      group by 1, 2, 3;`);

    this.addSql(`create table "contact_last_event" ("contact_id" uuid not null, "project_id" uuid not null, "at" timestamptz not null, constraint "contact_last_event_pkey" primary key ("contact_id"));`);
    this.addSql(`alter table "contact_last_event" add constraint "contact_last_event_contact_id_foreign" foreign key ("contact_id") references "contacts" ("id") on update no action on delete cascade;`);
    this.addSql(`create index "contact_last_event_project_id_at_index" on "contact_last_event" ("project_id", "at");`);
    this.addSql(`insert into contact_last_event (contact_id, project_id, at)
      select e.contact_id, min(e.project_id::text)::uuid, max(e.created_at) from events e
      where not exists (select 1 from event_outbox o where o.consumer = 'analytics' and o.event_id = e.id)
      group by e.contact_id;`);

    this.addSql(`alter table "automation_execution_steps" add column "project_id" uuid null, add column "automation_id" uuid null;`);
    this.addSql(`update automation_execution_steps s set project_id = x.project_id, automation_id = x.automation_id from automation_executions x where x.id = s.execution_id;`);
    this.addSql(`alter table "automation_execution_steps" alter column "project_id" set not null, alter column "automation_id" set not null;`);
    this.addSql(`create index "automation_execution_steps_project_id_finished_at_index" on "automation_execution_steps" ("project_id", "finished_at");`);
    this.addSql(`create index "automation_execution_steps_automation_id_finished_at_index" on "automation_execution_steps" ("automation_id", "finished_at");`);

    this.addSql(`create index "automation_executions_project_id_next_wake_at_index" on "automation_executions" ("project_id", "next_wake_at") where next_wake_at is not null and status in ('RUNNING', 'WAITING');`);
    this.addSql(`create index "campaigns_project_id_scheduled_at_index" on "campaigns" ("project_id", "scheduled_at") where status = 'SCHEDULED';`);
    this.addSql(`create index "campaigns_project_id_started_at_index" on "campaigns" ("project_id", "started_at") where started_at is not null;`);
    this.addSql(`create index "campaigns_project_id_finished_at_index" on "campaigns" ("project_id", "finished_at") where finished_at is not null;`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop index if exists "campaigns_project_id_finished_at_index";`);
    this.addSql(`drop index if exists "campaigns_project_id_started_at_index";`);
    this.addSql(`drop index if exists "campaigns_project_id_scheduled_at_index";`);
    this.addSql(`drop index if exists "automation_executions_project_id_next_wake_at_index";`);
    this.addSql(`alter table "automation_execution_steps" drop column "project_id", drop column "automation_id";`);
    this.addSql(`drop table if exists "contact_last_event" cascade;`);
    this.addSql(`delete from event_name_hourly where system;`);
    this.addSql(`alter table "event_name_hourly" drop column "system";`);
    this.addSql(`drop index if exists "events_project_id_created_at_id_index";`);
    this.addSql(`drop trigger if exists "events_campaign" on "events";`);
    this.addSql(`drop function if exists mailwright_event_campaign();`);
    this.addSql(`alter table "events" drop column "campaign_id";`);
  }
}
