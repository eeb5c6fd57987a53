import { TALLY_BATCH, type EventConsumer } from '../events/event-consumer';
import { statement } from '../db/sql';
import { engagementOutcome } from '../events/engagement';

/** Service events that count toward a metric besides the engagement outcomes (domain/events/engagement.ts). */
const DELIVERY_METRIC_OF: Readonly<Record<string, string>> = { 'email.sent': 'sent', 'email.failed': 'failed' };

/** The metrics analytics report, in a stable order. */
export const ANALYTICS_METRICS = ['sent', 'delivered', 'opened', 'clicked', 'bounced', 'complained', 'unsubscribed', 'failed'] as const;
export type AnalyticsMetric = (typeof ANALYTICS_METRICS)[number];

const hourOf = (d: Date) => {
  const t = new Date(d);
  t.setUTCMinutes(0, 0, 0);
  return t.toISOString();
};

/** Adds `n` under the key made of `parts` (joined by a character no part contains). */
function bump(counts: Map<string, number>, parts: string[]): void {
  const key = parts.join('\u0000');
  counts.set(key, (counts.get(key) ?? 0) + 1);
}

const ANALYTICS_HOURLY_ADD = statement(
  'analytics_hourly_add',
  `insert into analytics_hourly (project_id, metric, hour, count)
  select * from unnest($1::uuid[], $2::text[], $3::timestamptz[], $4::bigint[])
  on conflict (project_id, metric, hour) do update set count = analytics_hourly.count + excluded.count`,
);

const EVENT_NAME_HOURLY_ADD = statement(
  'event_name_hourly_add',
  `insert into event_name_hourly (project_id, name, hour, system, count)
  select * from unnest($1::uuid[], $2::text[], $3::timestamptz[], $4::boolean[], $5::bigint[])
  on conflict (project_id, name, hour) do update set count = event_name_hourly.count + excluded.count`,
);

const CONTACT_LAST_EVENT_FORWARD = statement(
  'contact_last_event_forward',
  `insert into contact_last_event (contact_id, project_id, at)
  select t.contact_id, t.project_id, t.at from unnest($1::uuid[], $2::uuid[], $3::timestamptz[]) as t(contact_id, project_id, at)
  where exists (select 1 from contacts c where c.id = t.contact_id)
  order by t.contact_id
  on conflict (contact_id) do update set at = greatest(contact_last_event.at, excluded.at)`,
);

/**
 * Folds a batch of tallies (counts recorded without an event each: a campaign's sends; what `DELETE /events/:name`
 * takes back) into their rollups and removes them, in one statement. A tally of a project deleted since is dropped
 * with it; one that takes back from an hour the rollup does not hold changes nothing.
 */
const TALLIES_TAKE = statement(
  'analytics_tallies_take',
  `with taken as (
    delete from event_tallies where seq in (select seq from event_tallies order by seq limit $1 for update skip locked)
    returning project_id, rollup, key, hour, count
  ),
  summed as (select project_id, rollup, key, hour, sum(count)::bigint as count from taken group by project_id, rollup, key, hour),
  metrics as (
    insert into analytics_hourly (project_id, metric, hour, count)
    select s.project_id, s.key, s.hour, s.count from summed s
    where s.rollup = 'analytics_hourly' and exists (select 1 from projects p where p.id = s.project_id)
    order by s.project_id, s.key, s.hour
    on conflict (project_id, metric, hour) do update set count = analytics_hourly.count + excluded.count
  ),
  names as (
    update event_name_hourly h set count = h.count + s.count from summed s
    where s.rollup = 'event_name_hourly' and h.project_id = s.project_id and h.name = s.key and h.hour = s.hour
  )
  select (select count(*) from taken)::int as taken`,
);

/**
 * The `analytics` consumer: counts each event into the hourly rollups, in the dispatcher's transaction (a
 * transactional consumer), so an event is counted exactly once however often it is delivered: the counts commit with
 * the outbox rows' removal, or not at all. Email metrics from the service events (a transient bounce report is not a
 * bounce: the provider retries), tracked events per name. One upsert per table per call, over arrays. It is also the
 * one taker of tallies (`event_tallies`), the same way: the rollups have no other writer.
 */
export const analyticsConsumer: EventConsumer = {
  name: 'analytics',
  transactional: true,
  timeoutMs: 30_000,
  async takeTallies(tx) {
    const rows = await tx.query<{ taken: number }>(TALLIES_TAKE, [TALLY_BATCH]);
    return rows[0]?.taken ?? 0;
  },
  async handle(events, { tx }) {
    if (!tx) throw new Error('the analytics consumer runs in the dispatcher transaction');
    const metrics = new Map<string, number>();
    const names = new Map<string, number>();
    const lastEvent = new Map<string, { projectId: string; at: Date }>();
    for (const e of events) {
      const metric = DELIVERY_METRIC_OF[e.name] ?? engagementOutcome(e);
      if (metric) bump(metrics, [e.projectId, metric, hourOf(e.createdAt)]);
      bump(names, [e.projectId, e.name, hourOf(e.createdAt), e.source === 'SYSTEM' ? 't' : 'f']);
      const seen = lastEvent.get(e.contactId);
      if (!seen || seen.at < e.createdAt) lastEvent.set(e.contactId, { projectId: e.projectId, at: e.createdAt });
    }
    const rowsOf = (counts: Map<string, number>) => [...counts].map(([key, n]) => [...key.split('\u0000'), n] as (string | number)[]);
    const column = <T>(rows: (string | number)[][], i: number) => rows.map((r) => r[i] as T);
    if (metrics.size) {
      const rows = rowsOf(metrics);
      await tx.run(
        ANALYTICS_HOURLY_ADD,
        [0, 1, 2, 3].map((i) => column(rows, i)),
      );
    }
    if (names.size) {
      const rows = rowsOf(names);
      await tx.run(
        EVENT_NAME_HOURLY_ADD,
        [0, 1, 2, 3, 4].map((i) => column(rows, i)),
      );
    }
    // Only forward: a contact deleted since has no row to refer to (the insert skips it; its events are gone too).
    const contacts = [...lastEvent];
    await tx.run(
      CONTACT_LAST_EVENT_FORWARD,
      [contacts.map(([id]) => id), contacts.map(([, v]) => v.projectId), contacts.map(([, v]) => v.at)],
    );
  },
};
