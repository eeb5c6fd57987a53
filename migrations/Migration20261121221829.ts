import { Migration } from '@mikro-orm/migrations';

export class Migration20261121221829 extends Migration {

  override async up(): Promise<void> {
    this.addSql(`create table "projects" ("id" uuid not null, "name" varchar(200) not null, "public_key" varchar(80) not null, "secret_key_hash" varchar(64) not null, "secret_key_hint" varchar(16) not null, "keys_rotated_at" timestamptz not null, "disabled" boolean not null default false, "disabled_reason" varchar(255) null, "settings" jsonb not null default '{"trackOpens":true,"trackClicks":true}', "created_at" timestamptz not null default now(), "updated_at" timestamptz not null default now(), constraint "projects_pkey" primary key ("id"));`);
    this.addSql(`alter table "projects" add constraint "projects_public_key_unique" unique ("public_key");`);
    this.addSql(`alter table "projects" add constraint "projects_secret_key_hash_unique" unique ("secret_key_hash");`);

    this.addSql(`create table "domains" ("id" uuid not null, "project_id" uuid not null, "name" varchar(253) not null, "status" text check ("status" in ('PENDING', 'VERIFIED')) not null default 'PENDING', "verified_at" timestamptz null, "created_at" timestamptz not null default now(), "updated_at" timestamptz not null default now(), constraint "domains_pkey" primary key ("id"));`);
    this.addSql(`create index "domains_project_id_index" on "domains" ("project_id");`);
    this.addSql(`create index "domains_name_index" on "domains" ("name");`);
    this.addSql(`alter table "domains" add constraint "domains_project_id_name_unique" unique ("project_id", "name");`);

    this.addSql(`create table "contacts" ("id" uuid not null, "project_id" uuid not null, "email" varchar(320) not null, "subscribed" boolean not null, "data" jsonb not null default '{}', "created_at" timestamptz not null default now(), "updated_at" timestamptz not null default now(), constraint "contacts_pkey" primary key ("id"));`);
    this.addSql(`create index "contacts_project_id_index" on "contacts" ("project_id");`);
    this.addSql(`alter table "contacts" add constraint "contacts_project_id_email_unique" unique ("project_id", "email");`);

    this.addSql(`create table "events" ("id" uuid not null, "project_id" uuid not null, "contact_id" uuid not null, "name" varchar(200) not null, "data" jsonb not null default '{}', "source" text check ("source" in ('TRACKED', 'SYSTEM')) not null, "email_id" uuid null, "created_at" timestamptz not null default now(), constraint "events_pkey" primary key ("id"));`);
    this.addSql(`create index "events_project_id_name_created_at_index" on "events" ("project_id", "name", "created_at");`);
    this.addSql(`create index "events_contact_id_created_at_index" on "events" ("contact_id", "created_at");`);

    this.addSql(`create table "emails" ("id" uuid not null, "project_id" uuid not null, "contact_id" uuid null, "kind" text check ("kind" in ('TRANSACTIONAL', 'MARKETING')) not null, "to_email" varchar(320) not null, "to_name" varchar(255) null, "from_email" varchar(320) not null, "from_name" varchar(255) null, "reply_to" varchar(320) null, "subject" text not null, "html" text not null, "text" text null, "headers" jsonb not null default '{}', "status" text check ("status" in ('QUEUED', 'SENDING', 'SENT', 'DELIVERED', 'BOUNCED', 'FAILED', 'CANCELLED')) not null default 'QUEUED', "workflow_id" varchar(255) null, "message_id" varchar(255) null, "smtp_response" text null, "error" text null, "attempts" int not null default 0, "sent_at" timestamptz null, "created_at" timestamptz not null default now(), "updated_at" timestamptz not null default now(), constraint "emails_pkey" primary key ("id"));`);
    this.addSql(`create index "emails_project_id_created_at_index" on "emails" ("project_id", "created_at");`);
    this.addSql(`create index "emails_contact_id_created_at_index" on "emails" ("contact_id", "created_at");`);
    this.addSql(`create index "emails_status_index" on "emails" ("status");`);

    this.addSql(`create table "users" ("id" uuid not null, "email" varchar(320) not null, "name" varchar(255) null, "password_hash" varchar(255) not null, "email_verified_at" timestamptz null, "created_at" timestamptz not null default now(), "updated_at" timestamptz not null default now(), constraint "users_pkey" primary key ("id"));`);
    this.addSql(`alter table "users" add constraint "users_email_unique" unique ("email");`);

    this.addSql(`create table "memberships" ("project_id" uuid not null, "user_id" uuid not null, "role" text check ("role" in ('OWNER', 'ADMIN', 'MEMBER')) not null, "created_at" timestamptz not null default now(), constraint "memberships_pkey" primary key ("project_id", "user_id"));`);

    this.addSql(`alter table "domains" add constraint "domains_project_id_foreign" foreign key ("project_id") references "projects" ("id") on update cascade on delete cascade;`);

    this.addSql(`alter table "contacts" add constraint "contacts_project_id_foreign" foreign key ("project_id") references "projects" ("id") on update cascade on delete cascade;`);

    this.addSql(`alter table "events" add constraint "events_project_id_foreign" foreign key ("project_id") references "projects" ("id") on update cascade on delete cascade;`);
    this.addSql(`alter table "events" add constraint "events_contact_id_foreign" foreign key ("contact_id") references "contacts" ("id") on update cascade on delete cascade;`);

    this.addSql(`alter table "emails" add constraint "emails_project_id_foreign" foreign key ("project_id") references "projects" ("id") on update cascade on delete cascade;`);
    this.addSql(`alter table "emails" add constraint "emails_contact_id_foreign" foreign key ("contact_id") references "contacts" ("id") on update cascade on delete set null;`);

    this.addSql(`alter table "memberships" add constraint "memberships_project_id_foreign" foreign key ("project_id") references "projects" ("id") on update cascade on delete cascade;`);
    this.addSql(`alter table "memberships" add constraint "memberships_user_id_foreign" foreign key ("user_id") references "users" ("id") on update cascade on delete cascade;`);
  }

}
