import { Migration } from '@mikro-orm/migrations';

/**
 * Segments (issue 7). One membership table serves both kinds: the member list of a STATIC segment, and the last
 * computed membership of a tracked DYNAMIC segment (what `compute` diffs against). Two helper functions let the filter
 * compiler compare text stored in contact data as numbers and dates without failing on values that are neither.
 * Written by hand; the regular expressions avoid the `?` quantifier because raw SQL treats `?` as a placeholder.
 */
export class Migration20261122001000 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create table "segments" ("id" uuid not null, "project_id" uuid not null, "name" varchar(200) not null,
      "slug" varchar(64) not null, "description" text null, "type" text check ("type" in ('DYNAMIC', 'STATIC')) not null,
      "condition" jsonb null, "track_membership" boolean not null default false, "member_count" bigint not null default 0,
      "counted_at" timestamptz null, "computed_at" timestamptz null,
      "created_at" timestamptz not null default now(), "updated_at" timestamptz not null default now(),
      constraint "segments_pkey" primary key ("id"),
      constraint "segments_project_id_foreign" foreign key ("project_id") references "projects" ("id") on delete cascade);`);
    this.addSql('create unique index "segments_project_id_slug_unique" on "segments" ("project_id", "slug");');
    this.addSql(`create table "segment_memberships" ("segment_id" uuid not null, "contact_id" uuid not null,
      "created_at" timestamptz not null default now(),
      constraint "segment_memberships_pkey" primary key ("segment_id", "contact_id"),
      constraint "segment_memberships_segment_id_foreign" foreign key ("segment_id") references "segments" ("id") on delete cascade,
      constraint "segment_memberships_contact_id_foreign" foreign key ("contact_id") references "contacts" ("id") on delete cascade);`);
    this.addSql('create index "segment_memberships_contact_id_index" on "segment_memberships" ("contact_id");');
    // Event conditions: "has done X (within N days)" is a semi-join over one project's events of one name.
    this.addSql('create index "events_project_id_name_contact_id_created_at_index" on "events" ("project_id", "name", "contact_id", "created_at");');
    // It starts with (project_id, name), so the older (project_id, name, created_at) index only costs writes now.
    this.addSql('drop index if exists "events_project_id_name_created_at_index";');
    this.addSql(`create or replace function mailwright_to_numeric(t text) returns numeric language sql immutable parallel safe as $$
  select case when t ~ '^\\s*[-+]{0,1}([0-9]+(\\.[0-9]*){0,1}|\\.[0-9]+)([eE][-+]{0,1}[0-9]+){0,1}\\s*$' then t::numeric end
$$;`);
    this.addSql(`create or replace function mailwright_to_timestamptz(t text) returns timestamptz language plpgsql stable parallel safe as $$
begin
  if t is null or t !~ '^\\s*[0-9]{4}-[0-9]{2}-[0-9]{2}' then return null; end if;
  return t::timestamptz;
exception when others then return null;
end $$;`);
  }

  override async down(): Promise<void> {
    this.addSql('drop function if exists mailwright_to_timestamptz(text);');
    this.addSql('drop function if exists mailwright_to_numeric(text);');
    this.addSql('create index "events_project_id_name_created_at_index" on "events" ("project_id", "name", "created_at");');
    this.addSql('drop index if exists "events_project_id_name_contact_id_created_at_index";');
    this.addSql('drop table if exists "segment_memberships";');
    this.addSql('drop table if exists "segments";');
  }
}
