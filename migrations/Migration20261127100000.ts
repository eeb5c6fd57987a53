import { Migration } from '@mikro-orm/migrations';

const STATUSES_BEFORE = `'QUEUED', 'SENDING', 'SENT', 'DELIVERED', 'BOUNCED', 'FAILED', 'CANCELLED'`;

/**
 * The suppression list (domain/suppressions): addresses no send path mails, per project, and the soft bounces counted
 * towards suppressing one. Emails not sent because their address is suppressed end `SUPPRESSED`; a campaign counts its
 * suppressed recipients in `campaign_stats.suppressed`. Written by hand.
 */
export class Migration20261127100000 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create table "suppressions" ("id" uuid not null, "project_id" uuid not null, "email" varchar(320) not null,
      "reason" text check ("reason" in ('hard_bounce', 'complaint', 'soft_bounce_limit', 'manual')) not null,
      "source" varchar(32) not null, "detail" text null, "email_id" uuid null,
      "created_at" timestamptz not null default now(), "updated_at" timestamptz not null default now(),
      constraint "suppressions_pkey" primary key ("id"));`);
    // The lookup of every send path: (project, address).
    this.addSql(`alter table "suppressions" add constraint "suppressions_project_id_email_unique" unique ("project_id", "email");`);
    // GET /suppressions: newest first, and by reason.
    this.addSql(`create index "suppressions_project_id_id_index" on "suppressions" ("project_id", "id");`);
    this.addSql(`create index "suppressions_project_id_reason_id_index" on "suppressions" ("project_id", "reason", "id");`);
    this.addSql(`alter table "suppressions" add constraint "suppressions_project_id_foreign" foreign key ("project_id") references "projects" ("id") on update no action on delete cascade;`);

    this.addSql(`create table "suppression_soft_bounces" ("project_id" uuid not null, "email" varchar(320) not null, "email_id" uuid not null,
      "source" varchar(32) not null, "detail" text null, "created_at" timestamptz not null default now(),
      constraint "suppression_soft_bounces_pkey" primary key ("project_id", "email", "email_id"));`);
    this.addSql(`alter table "suppression_soft_bounces" add constraint "suppression_soft_bounces_project_id_foreign" foreign key ("project_id") references "projects" ("id") on update no action on delete cascade;`);

    // The new check reads every stored email once, under the table's lock (the migrations of a deploy run as one
    // transaction, so validating it later would not release the lock sooner): about a second per few million emails.
    this.addSql(`alter table "emails" drop constraint "emails_status_check";`);
    this.addSql(`alter table "emails" add constraint "emails_status_check" check ("status" in (${STATUSES_BEFORE}, 'SUPPRESSED'));`);

    this.addSql(`alter table "campaign_stats" add column "suppressed" int not null default 0;`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "campaign_stats" drop column "suppressed";`);
    this.addSql(`update "emails" set "status" = 'CANCELLED' where "status" = 'SUPPRESSED';`);
    this.addSql(`alter table "emails" drop constraint "emails_status_check";`);
    this.addSql(`alter table "emails" add constraint "emails_status_check" check ("status" in (${STATUSES_BEFORE}));`);
    this.addSql(`drop table if exists "suppression_soft_bounces";`);
    this.addSql(`drop table if exists "suppressions";`);
  }
}
