import { Migration } from '@mikro-orm/migrations';

/**
 * Analytics rollups (domain/analytics): per project and hour, email metrics and tracked events per name. The
 * `analytics` consumer is registered here, in the same transaction as the backfill from what is already stored, so no
 * event falls between the two: older events are counted by the backfill, newer ones reach the consumer through the
 * outbox. Written by hand.
 */
export class Migration20261125120000 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create table "analytics_hourly" ("project_id" uuid not null, "metric" varchar(40) not null, "hour" timestamptz not null, "count" bigint not null default 0, constraint "analytics_hourly_pkey" primary key ("project_id", "metric", "hour"));`);
    this.addSql(`create table "event_name_hourly" ("project_id" uuid not null, "name" varchar(200) not null, "hour" timestamptz not null, "count" bigint not null default 0, constraint "event_name_hourly_pkey" primary key ("project_id", "name", "hour"));`);
    this.addSql(`alter table "analytics_hourly" add constraint "analytics_hourly_project_id_foreign" foreign key ("project_id") references "projects" ("id") on update no action on delete cascade;`);
    this.addSql(`alter table "event_name_hourly" add constraint "event_name_hourly_project_id_foreign" foreign key ("project_id") references "projects" ("id") on update no action on delete cascade;`);
    this.addSql(`insert into event_consumers (name, event_names) values ('analytics', null) on conflict (name) do nothing;`);
    this.addSql(`insert into analytics_hourly (project_id, metric, hour, count)
      select project_id, metric, hour, count(*) from (
        select e.project_id, date_trunc('hour', e.created_at, 'UTC') as hour,
               case e.name when 'email.sent' then 'sent' when 'email.delivered' then 'delivered' when 'email.open' then 'opened'
                           when 'email.click' then 'clicked' when 'email.bounced' then 'bounced' when 'email.complained' then 'complained'
                           when 'contact.unsubscribed' then 'unsubscribed' when 'email.failed' then 'failed' end as metric
        from events e
        where e.name in ('email.sent', 'email.delivered', 'email.open', 'email.click', 'email.complained', 'contact.unsubscribed', 'email.failed')
           or (e.name = 'email.bounced' and coalesce(e.data ->> 'transient', 'false') <> 'true')
        union all
        select m.project_id, date_trunc('hour', m.sent_at, 'UTC'), 'sent' from emails m where m.campaign_id is not null and m.sent_at is not null
      ) x group by 1, 2, 3;`);
    this.addSql(`insert into event_name_hourly (project_id, name, hour, count)
      select project_id, name, date_trunc('hour', created_at, 'UTC'), count(*) from events where source = 'TRACKED' group by 1, 2, 3;`);
  }

  override async down(): Promise<void> {
    this.addSql(`delete from event_outbox where consumer = 'analytics';`);
    this.addSql(`delete from event_consumers where name = 'analytics';`);
    this.addSql(`drop table if exists "event_name_hourly" cascade;`);
    this.addSql(`drop table if exists "analytics_hourly" cascade;`);
  }
}
