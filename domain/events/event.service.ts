import { preparedQuery } from '../prepared';
import type { EntityManager } from '@mikro-orm/postgresql';
import { uuidv7 } from '../ids';
import { selectList } from '../db/rows';
import type { EventColumns } from './event.entity';
import { decodeCursor, toPage, type CursorPage } from '../pagination';

export interface NewEvent {
  projectId: string;
  contactId: string;
  name: string;
  data?: Record<string, unknown>;
  source: 'TRACKED' | 'SYSTEM';
  emailId?: string;
}

export interface RecordedEvent extends NewEvent {
  id: string;
  createdAt: Date;
}

/**
 * Inserts the events in one statement. Whatever inserts into `events` (here or in the set-based statements elsewhere),
 * a trigger writes the event outbox in the same transaction, and the worker's dispatcher hands the events to the
 * registered consumers after the commit (event-dispatcher.ts); nothing else needs to be called.
 */
export async function insertEvents(em: EntityManager, events: NewEvent[]): Promise<RecordedEvent[]> {
  if (events.length === 0) return [];
  const now = new Date();
  const recorded = events.map((e) => ({ ...e, id: uuidv7(), createdAt: now }));
  const values: unknown[] = [];
  const rows = recorded.map((e) => {
    values.push(e.id, e.projectId, e.contactId, e.name, JSON.stringify(e.data ?? {}), e.source, e.emailId ?? null, now);
    return '(?, ?, ?, ?, ?, ?, ?, ?)';
  });
  await em.execute(
    `insert into events (id, project_id, contact_id, name, data, source, email_id, created_at) values ${rows.join(', ')}`,
    values,
  );
  return recorded;
}

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
  const where = ['e.project_id = ?'];
  const params: unknown[] = [projectId];
  if (q.name) {
    where.push('e.name = ?');
    params.push(q.name);
  }
  if (q.contactId) {
    where.push('e.contact_id = ?');
    params.push(q.contactId);
  }
  const filter = where.join(' and ');
  const rows = await em.execute<EventRow[]>(
    `select ${EVENT_COLUMNS} from events e join contacts c on c.id = e.contact_id
     where ${filter}${after ? ' and e.id < ?' : ''} order by e.id desc limit ?`,
    [...params, ...(after ? [after] : []), q.limit + 1],
  );
  let total = 0;
  if (!after) {
    const [count] = await em.execute<{ n: string }[]>(`select count(*) as n from events e where ${filter}`, params);
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

/**
 * Counts over the last `days` days: totals, per name (top 20) and per UTC day. From the hourly rollup of every event
 * (event_name_hourly, kept by the `analytics` consumer) and the contacts per hour of their latest event
 * (contact_last_event_hourly, kept by triggers on contact_last_event), never a scan of events: a window is whole UTC
 * hours, from the start of the hour it begins in up to now.
 */
export async function eventStats(em: EntityManager, projectId: string, days: number): Promise<EventStats> {
  const [totals] = await preparedQuery<{ total: string; in_window: string; last24h: string; contacts: string }>(
    em,
    'event_stats_totals',
    `select coalesce(sum(count), 0)::text as total,
            coalesce(sum(count) filter (where hour >= date_trunc('hour', now() - make_interval(days => $2), 'UTC')), 0)::text as in_window,
            coalesce(sum(count) filter (where hour >= date_trunc('hour', now() - interval '24 hours', 'UTC')), 0)::text as last24h,
            (select coalesce(sum(c.contacts), 0) from contact_last_event_hourly c
             where c.project_id = $1 and c.hour >= date_trunc('hour', now() - make_interval(days => $2), 'UTC'))::text as contacts
     from event_name_hourly where project_id = $1`,
    [projectId, days],
  );
  const byName = await preparedQuery<{ name: string; count: string }>(
    em,
    'event_stats_names',
    `select name, sum(count)::text as count from event_name_hourly
     where project_id = $1 and hour >= date_trunc('hour', now() - make_interval(days => $2), 'UTC')
     group by name order by sum(count) desc, name limit 20`,
    [projectId, days],
  );
  const daily = await preparedQuery<{ date: string; count: string }>(
    em,
    'event_stats_daily',
    `select to_char(d, 'YYYY-MM-DD') as date, coalesce(x.n, 0)::text as count
     from generate_series(date_trunc('day', now() at time zone 'utc') - make_interval(days => $2 - 1), date_trunc('day', now() at time zone 'utc'), interval '1 day') d
     left join (select date_trunc('day', hour at time zone 'utc') as day, sum(count) as n from event_name_hourly
                where project_id = $1 and hour >= date_trunc('hour', now() - make_interval(days => $2), 'UTC') group by 1) x on x.day = d
     order by d`,
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
  const rows = await em.execute<{ name: string; count: string; lastSeenAt: Date; source: 'TRACKED' | 'SYSTEM' }[]>(
    `select name, count(*) as count, max(created_at) as "lastSeenAt", min(source) as source
     from events where project_id = ? group by name order by name`,
    [projectId],
  );
  return rows.map((r) => ({ ...r, count: Number(r.count) }));
}

/** Deletes every event with this name in the project; returns how many. */
export async function deleteEventsByName(em: EntityManager, projectId: string, name: string): Promise<number> {
  // The rollup loses what it had counted of them: the events the `analytics` consumer has taken (no outbox row left);
  // those still waiting are dropped by the dispatcher without a count once they are gone. (An event the consumer is
  // counting at this very moment, in a round not yet committed, stays counted.) A contact's latest-event time is not
  // moved back.
  const [row] = await em.execute<{ n: string }[]>(
    `with gone as (delete from events where project_id = ? and name = ? returning id, created_at),
     counted as (
       select date_trunc('hour', g.created_at, 'UTC') as hour, count(*) as n from gone g
       where not exists (select 1 from event_outbox o where o.consumer = 'analytics' and o.event_id = g.id) group by 1
     ),
     fix as (
       update event_name_hourly h set count = h.count - c.n from counted c where h.project_id = ? and h.name = ? and h.hour = c.hour
     )
     select count(*) as n from gone`,
    [projectId, name, projectId, name],
  );
  return Number(row!.n);
}
