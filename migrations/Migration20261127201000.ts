import { Migration } from '@mikro-orm/migrations';

/**
 * A/B-tested campaigns (issue 30): a campaign's test (`ab_test`: its variants, shares, metric, duration and what
 * follows), a person's pick of the winner while the run waits (`ab_pick`), and the decision with its numbers
 * (`ab_decision`); each recipient row of a test share names its variant (`emails.variant`, 0-based; null for the
 * remainder, which gets the winner, and for every row of a campaign without variants). Written by hand.
 */
export class Migration20261127201000 extends Migration {
  override async up(): Promise<void> {
    this.addSql('alter table "campaigns" add column "ab_test" jsonb null, add column "ab_pick" smallint null, add column "ab_decision" jsonb null;');
    this.addSql('alter table "emails" add column "variant" smallint null;');
  }

  override async down(): Promise<void> {
    this.addSql('alter table "emails" drop column if exists "variant";');
    this.addSql('alter table "campaigns" drop column if exists "ab_test", drop column if exists "ab_pick", drop column if exists "ab_decision";');
  }
}
