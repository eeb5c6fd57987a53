import { Migration } from '@mikro-orm/migrations';

/**
 * Exact contact counts per project without counting a million rows on every list request. Statement-level triggers
 * append one delta row per statement (no shared row to contend on); a read sums the project's base row and its
 * deltas, and folds the deltas into the base once they pile up (see contact-counts.ts). Deltas of a project being
 * deleted are not written.
 */
export class Migration20261121234500 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create table "contact_counts" ("project_id" uuid primary key,
      "total" bigint not null default 0, "subscribed" bigint not null default 0,
      constraint "contact_counts_project_id_foreign" foreign key ("project_id") references "projects" ("id") on delete cascade);`);
    this.addSql(`create table "contact_count_deltas" ("id" bigserial primary key, "project_id" uuid not null,
      "total" bigint not null, "subscribed" bigint not null);`);
    this.addSql('create index "contact_count_deltas_project_id_index" on "contact_count_deltas" ("project_id");');
    // Folds a project's deltas into its base row. Writers call it now and then (1 in 100 statements), readers when
    // they see many deltas, so the deltas stay few even for a project nobody lists.
    this.addSql(`create or replace function mailwright_contact_counts_compact(p uuid) returns void language sql as $$
  with moved as (delete from contact_count_deltas where project_id = p returning total, subscribed)
  insert into contact_counts (project_id, total, subscribed)
  select p, coalesce(sum(total), 0), coalesce(sum(subscribed), 0) from moved
  where exists (select 1 from projects where id = p)
  on conflict (project_id) do update set total = contact_counts.total + excluded.total, subscribed = contact_counts.subscribed + excluded.subscribed;
$$;`);
    this.addSql(`create or replace function mailwright_contact_counts_insert() returns trigger language plpgsql as $$
declare p uuid;
begin
  for p in
    insert into contact_count_deltas (project_id, total, subscribed)
    select n.project_id, count(*), count(*) filter (where n.subscribed) from new_rows n group by n.project_id
    returning project_id
  loop
    if random() < 0.01 then perform mailwright_contact_counts_compact(p); end if;
  end loop;
  return null;
end $$;`);
    this.addSql(`create or replace function mailwright_contact_counts_delete() returns trigger language plpgsql as $$
begin
  insert into contact_count_deltas (project_id, total, subscribed)
  select o.project_id, -count(*), -count(*) filter (where o.subscribed) from old_rows o
  where exists (select 1 from projects p where p.id = o.project_id)
  group by o.project_id;
  return null;
end $$;`);
    // Updates are the hot path (/v1/track updates data on every call) and rarely change the subscription: a row
    // trigger guarded by WHEN costs nothing unless `subscribed` really changed.
    this.addSql(`create or replace function mailwright_contact_counts_update() returns trigger language plpgsql as $$
begin
  insert into contact_count_deltas (project_id, total, subscribed)
  values (new.project_id, 0, case when new.subscribed then 1 else -1 end);
  return null;
end $$;`);
    this.addSql(`create trigger contacts_count_insert after insert on contacts referencing new table as new_rows
      for each statement execute function mailwright_contact_counts_insert();`);
    this.addSql(`create trigger contacts_count_delete after delete on contacts referencing old table as old_rows
      for each statement execute function mailwright_contact_counts_delete();`);
    this.addSql(`create trigger contacts_count_update after update of subscribed on contacts
      for each row when (old.subscribed is distinct from new.subscribed) execute function mailwright_contact_counts_update();`);
    this.addSql(`insert into contact_counts (project_id, total, subscribed)
      select p.id, count(c.id), count(c.id) filter (where c.subscribed) from projects p left join contacts c on c.project_id = p.id group by p.id;`);
  }

  override async down(): Promise<void> {
    this.addSql('drop trigger if exists contacts_count_update on contacts;');
    this.addSql('drop trigger if exists contacts_count_delete on contacts;');
    this.addSql('drop trigger if exists contacts_count_insert on contacts;');
    this.addSql('drop function if exists mailwright_contact_counts_update();');
    this.addSql('drop function if exists mailwright_contact_counts_delete();');
    this.addSql('drop function if exists mailwright_contact_counts_insert();');
    this.addSql('drop function if exists mailwright_contact_counts_compact(uuid);');
    this.addSql('drop table if exists "contact_count_deltas";');
    this.addSql('drop table if exists "contact_counts";');
  }
}
