import { Migration } from '@mikro-orm/migrations';

/**
 * A return path per sender domain (issue 25): `return_path_host` is the bounce host whose MX a check found naming the
 * inbound server, null while it is not configured. Every send path reads it with the sender domain it already looks
 * up (the DKIM key), so it is a column rather than a search of the `records` jsonb, and it changes only when a check
 * decides so (a failed lookup keeps it). The API processes cache it with the domain's status, so the cache trigger now
 * fires when it changes too. The bounce host's two DNS records are not written here: the check adds them to each
 * domain's records from the configuration it runs with (withReturnPathRecords). Written by hand.
 */
export class Migration20261127120000 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "domains" add column "return_path_host" varchar(253) null;`);
    this.addSql('drop trigger if exists domains_cache_invalidate_update on domains;');
    this.addSql(`create trigger domains_cache_invalidate_update after update on domains for each row
  when (old.status is distinct from new.status or old.name is distinct from new.name or old.project_id is distinct from new.project_id
    or old.return_path_host is distinct from new.return_path_host)
  execute function mailwright_notify_domain_change();`);
  }

  override async down(): Promise<void> {
    this.addSql('drop trigger if exists domains_cache_invalidate_update on domains;');
    this.addSql(`create trigger domains_cache_invalidate_update after update on domains for each row
  when (old.status is distinct from new.status or old.name is distinct from new.name or old.project_id is distinct from new.project_id)
  execute function mailwright_notify_domain_change();`);
    this.addSql(`alter table "domains" drop column "return_path_host";`);
  }
}
