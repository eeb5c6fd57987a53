import { Migration } from '@mikro-orm/migrations';

/**
 * Tallies wake the dispatchers with their own payload (NOTIFY mailwright_outbox, 'tallies'): a dispatcher woken by one
 * folds tallies only, instead of also running a round per consumer to find that no event is due. A campaign adds a
 * tally with every batch of recorded sends, up to twenty a second, and each of those wake-ups cost a transaction per
 * consumer (BENCHMARKS.md › Issue 28, fifth stop). Events still notify with the empty payload. Written by hand.
 */
const TALLY_NOTIFY = (payload: string) => `create or replace function mailwright_tally_notify() returns trigger language plpgsql as $$
begin
  if exists (select 1 from new_tallies) then
    perform pg_notify('mailwright_outbox', '${payload}');
  end if;
  return null;
end $$;`;

export class Migration20261128000000 extends Migration {
  override async up(): Promise<void> {
    this.addSql(TALLY_NOTIFY('tallies'));
  }

  override async down(): Promise<void> {
    this.addSql(TALLY_NOTIFY(''));
  }
}
