import { Migration } from '@mikro-orm/migrations';

const OUTBOX_TRIGGER = (projectFilter: boolean) => `create or replace function mailwright_event_outbox() returns trigger language plpgsql as $$
declare
  n bigint;
begin
  insert into event_outbox (consumer, event_id, contact_id, shard)
  select c.name, e.id, e.contact_id, get_byte(uuid_send(e.contact_id), 15) % 64
  from new_events e join event_consumers c on (c.event_names is null or e.name = any(c.event_names))${
    projectFilter
      ? `
    and (not c.project_scoped or exists (select 1 from event_consumer_projects p where p.consumer = c.name and p.project_id = e.project_id))`
      : ''
  }
  order by e.id, c.name;
  get diagnostics n = row_count;
  if n > 0 then
    perform pg_notify('mailwright_outbox', '');
  end if;
  return null;
end $$;`;

/**
 * Project interest (issue 29): a consumer may be `project_scoped`, and then the outbox trigger queues an event for it
 * only when its project is listed for that consumer in `event_consumer_projects`. `webhooks-out` is such a consumer:
 * a project is listed while it has an enabled webhook endpoint, so projects without one pay no outbox row, dispatch or
 * delete per event. The list is kept by a trigger on `webhook_endpoints` (insert, delete, a change of `enabled`), in the
 * transaction of the change, whoever makes it: the API, the delivery activity that disables a failing endpoint, a
 * project's deletion. Changes of one project's list are serialised by an advisory lock, so an enable and a disable
 * committed at once cannot leave it wrong. Written by hand.
 */
export class Migration20261127190000 extends Migration {
  override async up(): Promise<void> {
    this.addSql('alter table "event_consumers" add column "project_scoped" boolean not null default false;');
    this.addSql(`create table "event_consumer_projects" ("consumer" varchar(100) not null, "project_id" uuid not null,
      constraint "event_consumer_projects_pkey" primary key ("consumer", "project_id"));`);
    this.addSql(`alter table "event_consumer_projects" add constraint "event_consumer_projects_project_id_foreign" foreign key ("project_id") references "projects" ("id") on update no action on delete cascade;`);

    this.addSql(`create or replace function mailwright_webhook_interest() returns trigger language plpgsql as $$
declare
  project uuid := case when tg_op = 'DELETE' then old.project_id else new.project_id end;
begin
  perform pg_advisory_xact_lock(hashtext('webhooks-out'), hashtext(project::text));
  if tg_op <> 'INSERT' then
    delete from event_consumer_projects p where p.consumer = 'webhooks-out' and p.project_id = old.project_id
      and not exists (select 1 from webhook_endpoints w where w.project_id = old.project_id and w.enabled);
  end if;
  if tg_op <> 'DELETE' and new.enabled then
    insert into event_consumer_projects (consumer, project_id) values ('webhooks-out', new.project_id) on conflict do nothing;
  end if;
  return null;
end $$;`);
    this.addSql(`create trigger webhook_endpoints_interest after insert or delete on webhook_endpoints
      for each row execute function mailwright_webhook_interest();`);
    // Only a change of `enabled`: the failure streak's updates (every failed attempt) do not take the lock.
    this.addSql(`create trigger webhook_endpoints_interest_change after update of enabled, project_id on webhook_endpoints
      for each row when (old.enabled is distinct from new.enabled or old.project_id is distinct from new.project_id)
      execute function mailwright_webhook_interest();`);

    this.addSql(`insert into event_consumers (name, event_names, project_scoped) values ('webhooks-out', null, true)
      on conflict (name) do update set project_scoped = true;`);
    this.addSql(`insert into event_consumer_projects (consumer, project_id)
      select distinct 'webhooks-out', project_id from webhook_endpoints where enabled on conflict do nothing;`);
    // What was queued for projects without an enabled endpoint would be dropped by the consumer anyway.
    this.addSql(`delete from event_outbox o where o.consumer = 'webhooks-out' and not exists (
      select 1 from events e join event_consumer_projects p on p.consumer = 'webhooks-out' and p.project_id = e.project_id where e.id = o.event_id);`);
    this.addSql(OUTBOX_TRIGGER(true));
  }

  override async down(): Promise<void> {
    this.addSql(OUTBOX_TRIGGER(false));
    this.addSql('drop trigger if exists webhook_endpoints_interest_change on webhook_endpoints;');
    this.addSql('drop trigger if exists webhook_endpoints_interest on webhook_endpoints;');
    this.addSql('drop function if exists mailwright_webhook_interest();');
    this.addSql('drop table if exists "event_consumer_projects";');
    this.addSql('alter table "event_consumers" drop column if exists "project_scoped";');
  }
}
