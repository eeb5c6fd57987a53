import { Migration } from '@mikro-orm/migrations';

/**
 * API rate limit: per-project request counts per fixed window, added up by every API process (domain/rate-limit/).
 * UNLOGGED: the counters are rewritten several times a second and worthless after a crash (budgets start over), so
 * they skip the WAL. The window_start index serves the periodic deletion of old windows. Written by hand.
 */
export class Migration20261122014000 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create unlogged table "rate_limit_windows" ("project_id" uuid not null, "window_start" timestamptz not null,
      "count" int not null default 0, constraint "rate_limit_windows_pkey" primary key ("project_id", "window_start"));`);
    this.addSql('create index "rate_limit_windows_window_start_index" on "rate_limit_windows" ("window_start");');
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists "rate_limit_windows";');
  }
}
