import type { EntityManager } from '@mikro-orm/postgresql';
import { sql, statement } from '../db/sql';
import { validationError } from '../errors';
import { ANALYTICS_METRICS, type AnalyticsMetric } from './analytics-consumer';

type Interval = 'hour' | 'day';

/** The most buckets one request may ask for: 31 days of hours, about three years of days. */
const MAX_BUCKETS: Record<Interval, number> = { hour: 744, day: 1100 };

export interface TimeseriesQuery {
  from?: Date;
  to?: Date;
  interval: Interval;
  timezone: string;
  metrics?: AnalyticsMetric[];
}

interface TimeseriesPoint {
  /** The bucket's start, an instant (UTC). */
  start: string;
  /** The bucket's start on the requested zone's clock: `YYYY-MM-DD` for days, `YYYY-MM-DDTHH:MM` for hours. */
  local: string;
  values: Record<AnalyticsMetric, number>;
}

export interface Timeseries {
  interval: Interval;
  timezone: string;
  from: string;
  to: string;
  metrics: AnalyticsMetric[];
  data: TimeseriesPoint[];
  totals: Record<AnalyticsMetric, number>;
}

const ANALYTICS_TZ = statement('analytics_tz', 'select exists (select 1 from pg_timezone_names where name = $1) as ok');

/** 422 unless Postgres knows the zone (the rollup is grouped there, so its zone database is the one that counts). */
async function assertTimezone(em: EntityManager, tz: string): Promise<void> {
  const [row] = await sql(em).query<{ ok: boolean }>(ANALYTICS_TZ, [tz]);
  if (!row!.ok) throw validationError([{ field: 'query.timezone', message: `Unknown time zone "${tz}" (an IANA name such as Europe/Berlin)`, code: 'invalid_timezone' }]);
}

/** The buckets of a series with their counts: the zone's days touched by [from, to), or the UTC hours. */
const TIMESERIES = {
  day: statement(
    'analytics_timeseries_day',
    `with b as (
    select (d::timestamp at time zone $4) as start, d::date as day
    from generate_series(($2::timestamptz at time zone $4)::date, (($3::timestamptz - interval '1 microsecond') at time zone $4)::date, interval '1 day') d
  ),
  r as (
    select (h.hour at time zone $4)::date as day, h.metric, sum(h.count) as n from analytics_hourly h
    where h.project_id = $1 and h.hour >= (select min(start) from b) and h.hour < (select max(start) from b) + interval '26 hours'
    group by 1, 2
  )
  select b.start, to_char(b.day, 'YYYY-MM-DD') as local, r.metric, r.n::text as n from b left join r on r.day = b.day order by b.start`,
  ),
  hour: statement(
    'analytics_timeseries_hour',
    `with b as (
    select s as start from generate_series(date_trunc('hour', $2::timestamptz, 'UTC'), $3::timestamptz - interval '1 microsecond', interval '1 hour') s
  )
  select b.start, to_char(b.start at time zone $4, 'YYYY-MM-DD"T"HH24:MI') as local, h.metric, h.count::text as n
  from b left join analytics_hourly h on h.project_id = $1 and h.hour = b.start order by b.start`,
  ),
};

/**
 * Email metrics per hour or per day of the requested zone, from the hourly rollups (never a scan of emails or events),
 * every bucket present (zero when nothing happened). Days are the zone's calendar days, so a day across a daylight
 * saving change has 23 or 25 hours; hours are UTC hours labelled on the zone's clock (an hour of a zone whose offset
 * is not whole hours is the UTC hour it starts in). Default range: the last 30 days (days) or 48 hours (hours).
 */
export async function timeseries(em: EntityManager, projectId: string, q: TimeseriesQuery): Promise<Timeseries> {
  await assertTimezone(em, q.timezone);
  const to = q.to ?? new Date();
  const from = q.from ?? new Date(to.getTime() - (q.interval === 'day' ? 30 * 86_400_000 : 48 * 3_600_000));
  if (from.getTime() > to.getTime()) throw validationError([{ field: 'query.from', message: 'from must not be after to', code: 'invalid_range' }]);
  const span = (to.getTime() - from.getTime()) / (q.interval === 'day' ? 86_400_000 : 3_600_000);
  if (span > MAX_BUCKETS[q.interval] - 1) {
    throw validationError([{ field: 'query.from', message: `At most ${MAX_BUCKETS[q.interval]} ${q.interval}s per request`, code: 'range_too_large' }]);
  }
  const metrics = q.metrics?.length ? [...new Set(q.metrics)] : [...ANALYTICS_METRICS];
  if (from.getTime() === to.getTime()) {
    const none = Object.fromEntries(metrics.map((m) => [m, 0])) as Record<AnalyticsMetric, number>;
    return { interval: q.interval, timezone: q.timezone, from: from.toISOString(), to: to.toISOString(), metrics, data: [], totals: none };
  }
  // Buckets: the zone's days touched by [from, to), or the UTC hours; each with its start instant and local label.
  const rows = await sql(em).query<{ start: Date; local: string; metric: string | null; n: string | null }>(TIMESERIES[q.interval], [projectId, from, to, q.timezone]);
  const points = new Map<string, TimeseriesPoint>();
  const zero = () => Object.fromEntries(metrics.map((m) => [m, 0])) as Record<AnalyticsMetric, number>;
  const totals = zero();
  for (const r of rows) {
    const start = new Date(r.start).toISOString();
    let point = points.get(start);
    if (!point) {
      point = { start, local: r.local, values: zero() };
      points.set(start, point);
    }
    const m = r.metric as AnalyticsMetric | null;
    if (m && m in point.values) {
      point.values[m] += Number(r.n);
      totals[m] += Number(r.n);
    }
  }
  return { interval: q.interval, timezone: q.timezone, from: from.toISOString(), to: to.toISOString(), metrics, data: [...points.values()], totals };
}

const ANALYTICS_TOP_EVENTS = statement(
  'analytics_top_events',
  `select name, sum(count)::text as count from event_name_hourly
  where project_id = $1 and hour >= date_trunc('hour', $2::timestamptz, 'UTC') and hour < $3 and not system
  group by name order by sum(count) desc, name limit $4`,
);

/**
 * Tracked event names by count over [from, to) (UTC hours touched), most frequent first, from the hourly rollup
 * (service events, which it counts too, are left out).
 */
export async function topEvents(
  em: EntityManager,
  projectId: string,
  q: { from?: Date; to?: Date; limit: number },
): Promise<{ from: string; to: string; data: { name: string; count: number }[] }> {
  const to = q.to ?? new Date();
  const from = q.from ?? new Date(to.getTime() - 30 * 86_400_000);
  if (from.getTime() > to.getTime()) throw validationError([{ field: 'query.from', message: 'from must not be after to', code: 'invalid_range' }]);
  const rows = await sql(em).query<{ name: string; count: string }>(
    ANALYTICS_TOP_EVENTS,
    [projectId, from, to, q.limit],
  );
  return { from: from.toISOString(), to: to.toISOString(), data: rows.map((r) => ({ name: r.name, count: Number(r.count) })) };
}
