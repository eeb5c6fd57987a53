import { Migration } from '@mikro-orm/migrations';

/**
 * Teams (domain/projects/members.service.ts): pending invitations of addresses that have no account yet, one per
 * project and address, each with the SHA-256 of its single-use token and the token's expiry (both set when the
 * invitation email is sent). Written by hand.
 */
export class Migration20261125150000 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create table "invitations" ("id" uuid not null, "project_id" uuid not null, "email" varchar(320) not null, "role" text check ("role" in ('OWNER', 'ADMIN', 'MEMBER')) not null, "invited_by_id" uuid null, "token_hash" varchar(64) null, "expires_at" timestamptz null, "created_at" timestamptz not null default now(), "updated_at" timestamptz not null default now(), constraint "invitations_pkey" primary key ("id"));`);
    this.addSql(`alter table "invitations" add constraint "invitations_token_hash_unique" unique ("token_hash");`);
    this.addSql(`alter table "invitations" add constraint "invitations_project_id_email_unique" unique ("project_id", "email");`);
    this.addSql(`alter table "invitations" add constraint "invitations_project_id_foreign" foreign key ("project_id") references "projects" ("id") on update cascade on delete cascade;`);
    this.addSql(`alter table "invitations" add constraint "invitations_invited_by_id_foreign" foreign key ("invited_by_id") references "users" ("id") on update cascade on delete set null;`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "invitations";`);
  }
}
