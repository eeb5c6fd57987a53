import { Migration } from '@mikro-orm/migrations';

/**
 * API processes cache the templates /v1/send reads (domain/templates/template.service.ts). This trigger tells every
 * process (LISTEN mailwright_cache) the moment a template is changed or deleted, whatever made the change, so the
 * next send uses the new version. A new template needs no message: only templates that were found are cached.
 */
export class Migration20261122015000 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create or replace function mailwright_notify_template_change() returns trigger language plpgsql as $$
begin
  perform pg_notify('mailwright_cache', 'templates:' || (case when tg_op = 'DELETE' then old.project_id else new.project_id end)::text);
  return null;
end $$;`);
    this.addSql(`create trigger templates_cache_invalidate after update or delete on templates for each row execute function mailwright_notify_template_change();`);
  }

  override async down(): Promise<void> {
    this.addSql('drop trigger if exists templates_cache_invalidate on templates;');
    this.addSql('drop function if exists mailwright_notify_template_change();');
  }
}
