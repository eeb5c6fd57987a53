import { Migration } from '@mikro-orm/migrations';

/**
 * Billing (domain/billing): one row per project that has a plan other than the default, caps of its own or a Stripe
 * customer; a project without a row is on the default plan with no caps of its own. Every change notifies
 * `billing:<project id>` on the cache channel, so API processes drop the caps they hold for that project.
 */
export class Migration20261125160000 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create table "project_billing" ("project_id" uuid not null, "plan" varchar(64) not null default 'free', "emails_per_month" bigint null, "contacts" bigint null, "events_per_month" bigint null, "stripe_customer_id" varchar(255) null, "stripe_subscription_id" varchar(255) null, "subscription_status" varchar(40) null, "stripe_event_at" timestamptz null, "updated_at" timestamptz not null default now(), constraint "project_billing_pkey" primary key ("project_id"));`);
    this.addSql(`alter table "project_billing" add constraint "project_billing_project_id_foreign" foreign key ("project_id") references "projects" ("id") on update no action on delete cascade;`);
    this.addSql(`alter table "project_billing" add constraint "project_billing_stripe_customer_id_unique" unique ("stripe_customer_id");`);
    this.addSql(`create or replace function mailwright_notify_billing_change() returns trigger language plpgsql as $$
begin
  perform pg_notify('mailwright_cache', 'billing:' || (case when tg_op = 'DELETE' then old.project_id else new.project_id end)::text);
  return null;
end $$;`);
    this.addSql(`create trigger project_billing_cache_invalidate after insert or update or delete on project_billing for each row execute function mailwright_notify_billing_change();`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "project_billing" cascade;`);
    this.addSql('drop function if exists mailwright_notify_billing_change();');
  }
}
