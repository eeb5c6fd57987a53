import { Migration } from '@mikro-orm/migrations';

/**
 * Webhooks out (issue 29, domain/webhook-endpoints): the customer's endpoints, each event's delivery to one, and every
 * attempt of a delivery. Written by hand.
 */
export class Migration20261127170000 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create table "webhook_endpoints" ("id" uuid not null, "project_id" uuid not null, "url" varchar(2048) not null,
      "description" varchar(500) null, "event_types" jsonb not null, "enabled" boolean not null default true, "secret" text not null,
      "previous_secret" text null, "previous_secret_expires_at" timestamptz null, "failing_since" timestamptz null,
      "disabled_reason" varchar(500) null, "created_at" timestamptz not null default now(), "updated_at" timestamptz not null default now(),
      constraint "webhook_endpoints_pkey" primary key ("id"));`);
    this.addSql(`create index "webhook_endpoints_project_id_id_index" on "webhook_endpoints" ("project_id", "id");`);
    this.addSql(`alter table "webhook_endpoints" add constraint "webhook_endpoints_project_id_foreign" foreign key ("project_id") references "projects" ("id") on update no action on delete cascade;`);

    this.addSql(`create table "webhook_deliveries" ("id" uuid not null, "endpoint_id" uuid not null, "project_id" uuid not null, "event_id" uuid null,
      "type" varchar(200) not null, "payload" jsonb not null,
      "status" text check ("status" in ('PENDING', 'SUCCEEDED', 'FAILED', 'CANCELLED')) not null default 'PENDING',
      "attempts" int not null default 0, "last_response_code" int null,
      "created_at" timestamptz not null default now(), "updated_at" timestamptz not null default now(),
      constraint "webhook_deliveries_pkey" primary key ("id"));`);
    this.addSql(`alter table "webhook_deliveries" add constraint "webhook_deliveries_endpoint_id_event_id_unique" unique ("endpoint_id", "event_id");`);
    this.addSql(`create index "webhook_deliveries_endpoint_id_id_index" on "webhook_deliveries" ("endpoint_id", "id");`);
    this.addSql(`alter table "webhook_deliveries" add constraint "webhook_deliveries_endpoint_id_foreign" foreign key ("endpoint_id") references "webhook_endpoints" ("id") on update no action on delete cascade;`);

    this.addSql(`create table "webhook_attempts" ("id" uuid not null, "delivery_id" uuid not null, "succeeded" boolean not null,
      "response_code" int null, "duration_ms" int not null, "response_body" text null, "error" text null,
      "created_at" timestamptz not null default now(), constraint "webhook_attempts_pkey" primary key ("id"));`);
    this.addSql(`create index "webhook_attempts_delivery_id_id_index" on "webhook_attempts" ("delivery_id", "id");`);
    this.addSql(`alter table "webhook_attempts" add constraint "webhook_attempts_delivery_id_foreign" foreign key ("delivery_id") references "webhook_deliveries" ("id") on update no action on delete cascade;`);
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists "webhook_attempts" cascade;');
    this.addSql('drop table if exists "webhook_deliveries" cascade;');
    this.addSql('drop table if exists "webhook_endpoints" cascade;');
  }
}
