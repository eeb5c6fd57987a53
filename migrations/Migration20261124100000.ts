import { Migration } from '@mikro-orm/migrations';

/**
 * Campaigns, their counters, and `emails.campaign_id`: a campaign's audience snapshot is one `emails` row per
 * (campaign, contact), created QUEUED with no body (the body is rendered at send time), so tracking, delivery reports
 * and `GET /emails/:id` work for campaign mail as for any other. The partial unique index is both the snapshot's
 * dedupe and the order the send activity walks. Written by hand.
 */
export class Migration20261124100000 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create table "campaigns" ("id" uuid not null, "project_id" uuid not null, "name" varchar(200) not null,
      "description" text null, "subject" varchar(998) null, "body" text null, "template_id" uuid null,
      "from_email" varchar(320) not null, "from_name" varchar(200) null, "reply_to" varchar(320) null,
      "audience_type" text check ("audience_type" in ('ALL', 'SEGMENT', 'FILTERED')) not null,
      "segment_id" uuid null, "audience_filter" jsonb null,
      "status" text check ("status" in ('DRAFT', 'SCHEDULED', 'SENDING', 'PAUSED', 'SENT', 'CANCELLED', 'FAILED')) not null default 'DRAFT',
      "scheduled_at" timestamptz null, "track_opens" boolean null, "track_clicks" boolean null, "workflow_id" varchar(255) null,
      "audience_size" int null, "send_content" jsonb null, "started_at" timestamptz null, "finished_at" timestamptz null, "status_reason" text null,
      "created_at" timestamptz not null default now(), "updated_at" timestamptz not null default now(),
      constraint "campaigns_pkey" primary key ("id"),
      constraint "campaigns_project_id_foreign" foreign key ("project_id") references "projects" ("id") on delete cascade);`);
    this.addSql('create index "campaigns_project_id_id_index" on "campaigns" ("project_id", "id");');
    this.addSql(`create table "campaign_stats" ("campaign_id" uuid not null,
      "audience" int not null default 0, "sent" int not null default 0, "delivered" int not null default 0,
      "opened_unique" int not null default 0, "opened_total" int not null default 0,
      "clicked_unique" int not null default 0, "clicked_total" int not null default 0,
      "bounced" int not null default 0, "complained" int not null default 0, "unsubscribed" int not null default 0,
      "failed" int not null default 0, "skipped" int not null default 0, "updated_at" timestamptz not null default now(),
      constraint "campaign_stats_pkey" primary key ("campaign_id"),
      constraint "campaign_stats_campaign_id_foreign" foreign key ("campaign_id") references "campaigns" ("id") on delete cascade);`);
    this.addSql('alter table "emails" add column "campaign_id" uuid null;');
    this.addSql(
      'create unique index "emails_campaign_id_contact_id_unique" on "emails" ("campaign_id", "contact_id") where "campaign_id" is not null;',
    );
  }

  override async down(): Promise<void> {
    this.addSql('drop index if exists "emails_campaign_id_contact_id_unique";');
    this.addSql('alter table "emails" drop column if exists "campaign_id";');
    this.addSql('drop table if exists "campaign_stats";');
    this.addSql('drop table if exists "campaigns";');
  }
}
