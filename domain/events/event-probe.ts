import { sql } from '../db/sql';
import type { EventConsumer } from './event-consumer';

/**
 * A consumer that records each event id it receives, when it first arrived and how often (`event_probe_receipts`).
 * On with EVENTS_PROBE=true: the test stack uses it to check that every event arrives, and `npm run bench:track` to
 * measure the dispatch lag (receipt time minus the event's created_at). Idempotent by event id, as consumers must be.
 */
export const probeConsumer: EventConsumer = {
  name: 'probe',
  async handle(events, { pool }) {
    const ids = [...new Set(events.map((e) => e.id))];
    await sql(pool).run(
      `insert into event_probe_receipts (event_id) select unnest($1::uuid[])
       on conflict (event_id) do update set deliveries = event_probe_receipts.deliveries + 1`,
      [ids],
    );
  },
};
