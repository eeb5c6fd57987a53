import { Migration } from '@mikro-orm/migrations';

/** Contacts and events: indexes for cursor pagination (ids are UUIDv7, so id order is creation order) and search. */
export class Migration20261121231500 extends Migration {
  override async up(): Promise<void> {
    this.addSql('create extension if not exists pg_trgm;');
    // Contacts are updated in place all the time (/v1/track): free space in each page lets Postgres make those
    // updates HOT (no new index entries while no indexed column changes).
    this.addSql('alter table "contacts" set (fillfactor = 70);');
    this.addSql('drop index if exists "contacts_project_id_index";');
    this.addSql('create index "contacts_project_id_id_index" on "contacts" ("project_id", "id");');
    // Case-insensitive substring search on email (emails are stored lowercased).
    this.addSql('create index "contacts_email_trgm_index" on "contacts" using gin ("email" gin_trgm_ops);');
    this.addSql('drop index if exists "events_contact_id_created_at_index";');
    this.addSql('create index "events_contact_id_id_index" on "events" ("contact_id", "id");');
    this.addSql('create index "events_project_id_id_index" on "events" ("project_id", "id");');
  }

  override async down(): Promise<void> {
    this.addSql('alter table "contacts" reset (fillfactor);');
    this.addSql('drop index if exists "events_project_id_id_index";');
    this.addSql('drop index if exists "events_contact_id_id_index";');
    this.addSql('create index "events_contact_id_created_at_index" on "events" ("contact_id", "created_at");');
    this.addSql('drop index if exists "contacts_email_trgm_index";');
    this.addSql('drop index if exists "contacts_project_id_id_index";');
    this.addSql('create index "contacts_project_id_index" on "contacts" ("project_id");');
  }
}
