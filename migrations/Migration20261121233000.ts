import { Migration } from '@mikro-orm/migrations';

/**
 * Sender domain verification: the DKIM key pair (private key sealed with APP_SECRET), the ownership token, the DNS
 * records with their last check, and the state of a verified domain whose records went missing. A name is VERIFIED in
 * at most one project. The cache trigger now fires only for changes the caches care about (insert, delete, and
 * updates of status, name or project), so a periodic check that changes nothing but check times does not empty the
 * project's domain cache in every API process.
 */
export class Migration20261121233000 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "domains" add column "dkim_selector" varchar(63) null, add column "dkim_public_key" text null, add column "dkim_private_key" text null, add column "verification_token" varchar(100) null, add column "records" jsonb not null default '[]', add column "last_checked_at" timestamptz null, add column "failing_since" timestamptz null, add column "status_reason" text null;`);
    this.addSql(`create unique index "domains_name_verified_unique" on "domains" ("name") where "status" = 'VERIFIED';`);

    this.addSql('drop trigger if exists domains_cache_invalidate on domains;');
    this.addSql(`create trigger domains_cache_invalidate after insert or delete on domains for each row execute function mailwright_notify_domain_change();`);
    this.addSql(`create trigger domains_cache_invalidate_update after update on domains for each row
  when (old.status is distinct from new.status or old.name is distinct from new.name or old.project_id is distinct from new.project_id)
  execute function mailwright_notify_domain_change();`);
  }

  override async down(): Promise<void> {
    this.addSql('drop trigger if exists domains_cache_invalidate_update on domains;');
    this.addSql('drop trigger if exists domains_cache_invalidate on domains;');
    this.addSql(`create trigger domains_cache_invalidate after insert or update or delete on domains for each row execute function mailwright_notify_domain_change();`);
    this.addSql('drop index if exists "domains_name_verified_unique";');
    this.addSql(`alter table "domains" drop column "dkim_selector", drop column "dkim_public_key", drop column "dkim_private_key", drop column "verification_token", drop column "records", drop column "last_checked_at", drop column "failing_since", drop column "status_reason";`);
  }
}
