import type { EntityManager } from '@mikro-orm/postgresql';
import { sql, statement } from '../db/sql';
import { selectList } from '../db/rows';
import type { EventColumns } from './event.entity';
import { decodeCursor, toPage, type CursorPage } from '../pagination';

const LISTED = ['id', 'name', 'contactId', 'data', 'source', 'emailId', 'createdAt'] as const satisfies readonly (keyof EventColumns)[];

/** An event as the lists show it: its columns and its contact's email. */
export type EventRow = Pick<EventColumns, (typeof LISTED)[number]> & { contactEmail: string };

const EVENT_COLUMNS = `${selectList<EventColumns>(LISTED, 'e')}, c.email as "contactEmail"`;

/** Recent events of the project, newest first; optionally one name or one contact. */
export async function listEvents(
  em: EntityManager,
  projectId: string,
  q: { limit: number; cursor?: string; name?: string; contactId?: string },
): Promise<CursorPage<EventRow>> {
  const after = decodeCursor(q.cursor);
  const params: unknown[] = [projectId];
  const where = ['e.project_id = $1'];
  if (q.name) where.push(`e.name = $${params.push(q.name)}`);
  if (q.contactId) where.push(`e.contact_id = $${params.push(q.contactId)}`);
  const filter = where.join(' and ');
  const page = [...params];
  const before = after ? ` and e.id < $${page.push(after)}` : '';
  const rows = await sql(em).query<EventRow>(
    `select ${EVENT_COLUMNS} from events e join contacts c on c.id = e.contact_id
     where ${filter}${before} order by e.id desc limit $${page.push(q.limit + 1)}`,
    page,
  );
  let total = 0;
  if (!after) {
    const count = await sql(em).one<{ n: string }>(`select count(*) as n from events e where ${filter}`, params);
    total = Number(count!.n);
  }
  return toPage(rows, q.limit, total);
}

export interface EventStats {
  windowDays: number;
  total: number;
  inWindow: number;
  last24h: number;
  uniqueContacts: number;
  byName: { name: string; count: number }[];
  daily: { date: string; count: number }[];
}

const EVENT_STATS_DAILY = statement(
  'event_stats_daily',
  `select to_char(d, 'YYYY-MM-DD') as date, coalesce(x.n, 0)::text as count
  from generate_series(date_trunc('day', now() at time zone 'utc') - make_interval(days => $2 - 1), date_trunc('day', now() at time zone 'utc'), interval '1 day') d
  left join (select date_trunc('day', hour at time zone 'utc') as day, sum(count) as n from event_name_hourly
             where project_id = $1 and hour >= date_trunc('hour', now() - make_interval(days => $2), 'UTC') group by 1) x on x.day = d
  order by d`,
);

const EVENT_STATS_NAMES = statement(
  'event_stats_names',
  `select name, sum(count)::text as count from event_name_hourly
  where project_id = $1 and hour >= date_trunc('hour', now() - make_interval(days => $2), 'UTC')
  group by name order by sum(count) desc, name limit 20`,
);

const EVENT_STATS_TOTALS = statement(
  'event_stats_totals',
  `select coalesce(sum(count), 0)::text as total,
         coalesce(sum(count) filter (where hour >= date_trunc('hour', now() - make_interval(days => $2), 'UTC')), 0)::text as in_window,
         coalesce(sum(count) filter (where hour >= date_trunc('hour', now() - interval '24 hours', 'UTC')), 0)::text as last24h,
         (select coalesce(sum(c.contacts), 0) from contact_last_event_hourly c
          where c.project_id = $1 and c.hour >= date_trunc('hour', now() - make_interval(days => $2), 'UTC'))::text as contacts
  from event_name_hourly where project_id = $1`,
);

/**
 * Counts over the last `days` days: totals, per name (top 20) and per UTC day. From the hourly rollup of every event
 * (event_name_hourly, kept by the `analytics` consumer) and the contacts per hour of their latest event
 * (contact_last_event_hourly, kept by triggers on contact_last_event), never a scan of events: a window is whole UTC
 * hours, from the start of the hour it begins in up to now.
 */
export async function eventStats(em: EntityManager, projectId: string, days: number): Promise<EventStats> {
  const [totals] = await sql(em).query<{ total: string; in_window: string; last24h: string; contacts: string }>(
    EVENT_STATS_TOTALS,
    [projectId, days],
  );
  const byName = await sql(em).query<{ name: string; count: string }>(
    EVENT_STATS_NAMES,
    [projectId, days],
  );
  const daily = await sql(em).query<{ date: string; count: string }>(
    EVENT_STATS_DAILY,
    [projectId, days],
  );
  return {
    windowDays: days,
    total: Number(totals!.total),
    inWindow: Number(totals!.in_window),
    last24h: Number(totals!.last24h),
    uniqueContacts: Number(totals!.contacts),
    byName: byName.map((r) => ({ name: r.name, count: Number(r.count) })),
    daily: daily.map((r) => ({ date: r.date, count: Number(r.count) })),
  };
}

/** Distinct event names with their counts and when each was last seen. */
export async function eventNames(
  em: EntityManager,
  projectId: string,
): Promise<{ name: string; count: number; lastSeenAt: Date; source: 'TRACKED' | 'SYSTEM' }[]> {
  const rows = await sql(em).query<{ name: string; count: string; lastSeenAt: Date; source: 'TRACKED' | 'SYSTEM' }>(
    `select name, count(*) as count, max(created_at) as "lastSeenAt", min(source) as source
     from events where project_id = $1 group by name order by name`,
    [projectId],
  );
  return rows.map((r) => ({ ...r, count: Number(r.count) }));
}

/** Deletes every event with this name in the project; returns how many. */
export async function deleteEventsByName(em: EntityManager, projectId: string, name: string): Promise<number> {
  // The rollup loses what it had counted of them: the events the `analytics` consumer has taken (no outbox row left),
  // taken back by a negative tally the consumer applies (the rollups have no other writer); those still waiting are
  // dropped by the dispatcher without a count once they are gone. (An event the consumer is counting at this very
  // moment, in a round not yet committed, stays counted.) A contact's latest-event time is not moved back.
  const row = await sql(em).one<{ n: string }>(
    `with gone as (delete from events where project_id = $1 and name = $2 returning id, created_at),
     counted as (
       select date_trunc('hour', g.created_at, 'UTC') as hour, count(*) as n from gone g
       where not exists (select 1 from event_outbox o where o.consumer = 'analytics' and o.event_id = g.id) group by 1
     ),
     fix as (
       insert into event_tallies (project_id, rollup, key, hour, count)
       select $1, 'event_name_hourly', $2, c.hour, -c.n from counted c
     )
     select count(*) as n from gone`,
    [projectId, name],
  );
  return Number(row!.n);
}
