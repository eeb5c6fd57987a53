import { Migration } from '@mikro-orm/migrations';

/**
 * API processes cache API-key lookups and verified sender domains. These triggers tell every process (LISTEN
 * mailwright_cache) the moment a project or a domain changes, whatever made the change, so a rotated key or a
 * disabled project stops working at once.
 */
export class Migration20261121224000 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create or replace function mailwright_notify_project_change() returns trigger language plpgsql as $$
begin
  perform pg_notify('mailwright_cache', 'project:' || (case when tg_op = 'DELETE' then old.id else new.id end)::text);
  return null;
end $$;`);
    this.addSql(`create trigger projects_cache_invalidate after update or delete on projects for each row execute function mailwright_notify_project_change();`);
    this.addSql(`create or replace function mailwright_notify_domain_change() returns trigger language plpgsql as $$
begin
  perform pg_notify('mailwright_cache', 'domains:' || (case when tg_op = 'DELETE' then old.project_id else new.project_id end)::text);
  return null;
end $$;`);
    this.addSql(`create trigger domains_cache_invalidate after insert or update or delete on domains for each row execute function mailwright_notify_domain_change();`);
  }

  override async down(): Promise<void> {
    this.addSql('drop trigger if exists domains_cache_invalidate on domains;');
    this.addSql('drop trigger if exists projects_cache_invalidate on projects;');
    this.addSql('drop function if exists mailwright_notify_domain_change();');
    this.addSql('drop function if exists mailwright_notify_project_change();');
  }
}
