import { Migration } from '@mikro-orm/migrations';

/**
 * Account lifecycle and sign-in (domain/auth): single-use email tokens (stored as SHA-256), OAuth provider accounts
 * linked to users, the login throttle's counters (UNLOGGED, like rate_limit_windows: worthless after a crash), and
 * `users.session_version`, which every session cookie carries: a password reset increments it, ending the user's
 * other sessions. Written by hand.
 */
export class Migration20261125140000 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "users" add column "session_version" int not null default 0;`);
    this.addSql(`create table "account_tokens" ("id" uuid not null, "user_id" uuid not null, "purpose" text check ("purpose" in ('VERIFY_EMAIL', 'RESET_PASSWORD')) not null, "token_hash" varchar(64) not null, "email" varchar(320) not null, "expires_at" timestamptz not null, "used_at" timestamptz null, "created_at" timestamptz not null default now(), constraint "account_tokens_pkey" primary key ("id"));`);
    this.addSql(`create index "account_tokens_user_id_purpose_index" on "account_tokens" ("user_id", "purpose");`);
    this.addSql(`create index "account_tokens_expires_at_index" on "account_tokens" ("expires_at");`);
    this.addSql(`alter table "account_tokens" add constraint "account_tokens_token_hash_unique" unique ("token_hash");`);
    this.addSql(`alter table "account_tokens" add constraint "account_tokens_user_id_foreign" foreign key ("user_id") references "users" ("id") on update cascade on delete cascade;`);
    this.addSql(`create table "oauth_accounts" ("id" uuid not null, "user_id" uuid not null, "provider" text check ("provider" in ('github', 'google')) not null, "provider_user_id" varchar(255) not null, "email" varchar(320) not null, "created_at" timestamptz not null default now(), constraint "oauth_accounts_pkey" primary key ("id"));`);
    this.addSql(`alter table "oauth_accounts" add constraint "oauth_accounts_provider_provider_user_id_unique" unique ("provider", "provider_user_id");`);
    this.addSql(`alter table "oauth_accounts" add constraint "oauth_accounts_user_id_foreign" foreign key ("user_id") references "users" ("id") on update cascade on delete cascade;`);
    this.addSql(`create unlogged table "login_throttle_windows" ("key" varchar(64) not null, "window_start" timestamptz not null, "count" int not null default 0, constraint "login_throttle_windows_pkey" primary key ("key", "window_start"));`);
    this.addSql(`create index "login_throttle_windows_window_start_index" on "login_throttle_windows" ("window_start");`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "login_throttle_windows";`);
    this.addSql(`drop table if exists "oauth_accounts";`);
    this.addSql(`drop table if exists "account_tokens";`);
    this.addSql(`alter table "users" drop column "session_version";`);
  }
}
