import type { EntityManager } from '@mikro-orm/postgresql';
import type { QueryResultRow } from 'pg';
import { sql } from '../db/sql';
import { validationError } from '../errors';
import {
  ACTIVITY_TYPES,
  ACTIVITY_TYPE_NAMES,
  CAMPAIGN_END_TYPE,
  activityTypeOfEvent,
  eventTypeFilterSql,
  eventTypeSql,
  sourcesOf,
  type ActivityType,
} from './activity-types';

/**
 * The activity feed (domain/activity/activity-types.ts): events, campaign starts and ends, automation steps, newest
 * first. Each source is read newest first through an index (events by project and time, or by contact, or by campaign;
 * campaigns by start and end; steps by project or automation), `limit + 1` rows each, and merged here; the cursor is
 * the last item's (time, key), so each source resumes exactly after it. The counts come from the rollups.
 */

export interface ActivityItem {
  id: string;
  type: ActivityType;
  occurredAt: string;
  /** The event name, the campaign name, or the step type. */
  name: string;
  contactId: string | null;
  emailId: string | null;
  campaignId: string | null;
  automationId: string | null;
  executionId: string | null;
  data: Record<string, unknown>;
}

export interface ActivityQuery {
  limit: number;
  cursor?: string;
  types?: string[];
  contactId?: string;
  campaignId?: string;
  automationId?: string;
  from?: Date;
  to?: Date;
}

interface Row extends QueryResultRow {
  /** Microseconds since the epoch, as text (exact; a JS Date has milliseconds only). */
  us: string;
  key: string;
  type: ActivityType;
  name: string;
  contact_id: string | null;
  email_id: string | null;
  campaign_id: string | null;
  automation_id: string | null;
  execution_id: string | null;
  data: Record<string, unknown> | null;
}

function encodeCursor(r: Row): string {
  return Buffer.from(JSON.stringify(['a1', r.us, r.key])).toString('base64url');
}

function decodeCursor(cursor: string | undefined): { us: string; key: string } | undefined {
  if (!cursor) return undefined;
  try {
    const v = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as unknown;
    if (Array.isArray(v) && v.length === 3 && v[0] === 'a1' && typeof v[1] === 'string' && /^-?\d{1,18}$/.test(v[1]) && typeof v[2] === 'string' && v[2].length <= 100 && !v[2].includes('\u0000')) {
      return { us: v[1], key: v[2] };
    }
  } catch {
    // falls through to the error below
  }
  throw validationError([{ field: 'query.cursor', message: 'Invalid cursor: pass the `cursor` value of the previous page unchanged', code: 'invalid_cursor' }]);
}

const US = (col: string) => `(extract(epoch from ${col}) * 1000000)::bigint::text`;
const AT = (param: string) => `('epoch'::timestamptz + ${param}::bigint * interval '1 microsecond')`;

/** Keys compare byte-wise (one order for every source: event ids, `c:` and `s:` keys). */
const KEY = (expr: string) => `(${expr}) collate "C"`;

class Params {
  readonly values: unknown[] = [];
  add(v: unknown): string {
    this.values.push(v);
    return `$${this.values.length}`;
  }
}

/** The conditions every source shares: the time range and the cursor position, over its time and key expressions. */
function common(p: Params, q: ActivityQuery, after: { us: string; key: string } | undefined, at: string, key: string): string[] {
  const where: string[] = [];
  if (q.from) where.push(`${at} >= ${p.add(q.from)}`);
  if (q.to) where.push(`${at} < ${p.add(q.to)}`);
  if (after) where.push(`(${at}, ${KEY(key)}) < (${AT(p.add(after.us))}, ${p.add(after.key)})`);
  return where;
}

function eventsSql(q: FeedQuery, types: readonly string[], after: ActivityCursor, limit: number): [string, unknown[]] | undefined {
  if (q.automationId) return undefined;
  const p = new Params();
  const where = [`e.project_id = ${p.add(q.projectId)}`, ...common(p, q, after, 'e.created_at', 'e.id::text')];
  if (q.contactId) where.push(`e.contact_id = ${p.add(q.contactId)}`);
  if (q.campaignId) where.push(`e.campaign_id = ${p.add(q.campaignId)}`);
  const typeFilter = eventTypeFilterSql('e', types);
  // Service events of no activity type (none today) are left out.
  where.push(typeFilter ?? `${eventTypeSql('e')} is not null`);
  return [
    `select ${US('e.created_at')} as us, e.id::text as key, ${eventTypeSql('e')} as type, e.name, e.contact_id, e.email_id, e.campaign_id,
            null::uuid as automation_id, null::uuid as execution_id, e.data
     from events e where ${where.join(' and ')}
     order by e.created_at desc, e.id desc limit ${p.add(limit)}`,
    p.values,
  ];
}

function campaignsSql(q: FeedQuery, types: readonly string[], after: ActivityCursor, limit: number): [string, unknown[]] | undefined {
  if (q.automationId || q.contactId) return undefined;
  const started = types.includes('campaign.started');
  const ends = Object.entries(CAMPAIGN_END_TYPE).filter(([, t]) => types.includes(t)).map(([status]) => status);
  const p = new Params();
  const project = p.add(q.projectId);
  const campaign = q.campaignId ? p.add(q.campaignId) : undefined;
  const arm = (at: string, key: string, type: string, extra: string) => {
    const where = [`c.project_id = ${project}`, `${at} is not null`, ...common(p, q, after, at, key), extra];
    if (campaign) where.push(`c.id = ${campaign}`);
    return `(select ${US(at)} as us, ${key} as key, ${type} as type, c.name, null::uuid as contact_id, null::uuid as email_id, c.id as campaign_id,
                    null::uuid as automation_id, null::uuid as execution_id,
                    jsonb_build_object('status', c.status, 'audienceSize', c.audience_size, 'statusReason', c.status_reason) as data
             from campaigns c where ${where.join(' and ')} order by ${at} desc, ${KEY(key)} desc limit ${p.add(limit)})`;
  };
  const arms: string[] = [];
  if (started) arms.push(arm('c.started_at', `'c:' || c.id::text || ':1'`, `'campaign.started'`, 'true'));
  if (ends.length) {
    const endType = `(case c.status ${Object.entries(CAMPAIGN_END_TYPE).map(([s, t]) => `when '${s}' then '${t}'`).join(' ')} end)`;
    arms.push(arm('c.finished_at', `'c:' || c.id::text || ':2'`, endType, `c.status = any(${p.add(ends)}::text[])`));
  }
  if (arms.length === 0) return undefined;
  return [arms.join(' union all '), p.values];
}

function stepsSql(q: FeedQuery, types: readonly string[], after: ActivityCursor, limit: number): [string, unknown[]] | undefined {
  if (q.campaignId || !types.includes('automation.step')) return undefined;
  const p = new Params();
  const key = `'s:' || s.execution_id::text || ':' || lpad(s.seq::text, 10, '0')`;
  const where = [`s.project_id = ${p.add(q.projectId)}`, ...common(p, q, after, 's.finished_at', key)];
  if (q.automationId) where.push(`s.automation_id = ${p.add(q.automationId)}`);
  if (q.contactId) where.push(`x.contact_id = ${p.add(q.contactId)}`);
  return [
    `select ${US('s.finished_at')} as us, ${key} as key, 'automation.step' as type, s.type as name, x.contact_id, null::uuid as email_id,
            null::uuid as campaign_id, s.automation_id, s.execution_id, s.outcome || jsonb_build_object('stepId', s.step_id, 'seq', s.seq) as data
     from automation_execution_steps s join automation_executions x on x.id = s.execution_id
     where ${where.join(' and ')}
     order by s.finished_at desc, ${KEY(key)} desc limit ${p.add(limit)}`,
    p.values,
  ];
}

type ActivityCursor = { us: string; key: string } | undefined;
type FeedQuery = ActivityQuery & { projectId: string };

const newer = (a: Row, b: Row) => {
  const d = BigInt(a.us) - BigInt(b.us);
  if (d !== 0n) return d > 0n ? -1 : 1;
  return a.key === b.key ? 0 : Buffer.compare(Buffer.from(a.key), Buffer.from(b.key)) > 0 ? -1 : 1;
};

function present(r: Row): ActivityItem {
  const ms = Number(BigInt(r.us) / 1000n);
  return {
    id: r.key,
    type: r.type,
    occurredAt: new Date(ms).toISOString(),
    name: r.name,
    contactId: r.contact_id,
    emailId: r.email_id,
    campaignId: r.campaign_id,
    automationId: r.automation_id,
    executionId: r.execution_id,
    data: r.data ?? {},
  };
}

/** One page of the feed, newest first. */
/**
 * How many items the feed holds for these filters (the first page's `total`). Events by contact or campaign are
 * counted through their indexes; otherwise from the hourly rollup for the whole hours of the range and from the events
 * index for the part-hours at its ends (so it follows the `analytics` consumer, about a second behind the feed).
 * Campaign starts and ends and automation steps are counted directly.
 */
async function activityTotal(em: EntityManager, q: FeedQuery, types: readonly string[]): Promise<number> {
  const sources = sourcesOf(types);
  const counts: Promise<number>[] = [];
  const one = async (text: string, values: unknown[]) => Number((await sql(em).query<{ n: string }>(text, values))[0]?.n ?? 0);
  const typeFilter = eventTypeFilterSql('e', types) ?? `${eventTypeSql('e')} is not null`;
  const eventsIn = (from: Date | undefined, to: Date | undefined, extra: string[] = [], extraValues: unknown[] = []) => {
    const p = new Params();
    const where = [`e.project_id = ${p.add(q.projectId)}`, typeFilter];
    if (from) where.push(`e.created_at >= ${p.add(from)}`);
    if (to) where.push(`e.created_at < ${p.add(to)}`);
    for (const [i, cond] of extra.entries()) where.push(cond.replace('?', p.add(extraValues[i])));
    return one(`select count(*)::text as n from events e where ${where.join(' and ')}`, p.values);
  };
  if (sources.has('event') && !q.automationId) {
    if (q.contactId || q.campaignId) {
      counts.push(eventsIn(q.from, q.to, q.contactId ? ['e.contact_id = ?'] : ['e.campaign_id = ?'], [q.contactId ?? q.campaignId]));
    } else {
      // Whole hours from the rollup: [first whole hour at or after `from`, the hour `to` falls in).
      const lo = q.from ? ceilHour(q.from) : undefined;
      const hi = q.to ? floorHour(q.to) : undefined;
      counts.push(
        (async () => {
          if (lo && hi && lo.getTime() >= hi.getTime()) return eventsIn(q.from, q.to); // within one hour: the index alone
          const rows = await sql(em).query<{ name: string; system: boolean; n: string }>(
            `select name, bool_or(system) as system, sum(count)::text as n from event_name_hourly
             where project_id = $1 and ($2::timestamptz is null or hour >= $2) and ($3::timestamptz is null or hour < $3) group by name`,
            [q.projectId, lo ?? null, hi ?? null],
          );
          let n = 0;
          for (const r of rows) {
            const type = activityTypeOfEvent(r.name, r.system);
            if (type && types.includes(type)) n += Number(r.n);
          }
          const [head, tail] = await Promise.all([q.from && lo ? eventsIn(q.from, lo) : 0, q.to && hi ? eventsIn(hi, q.to) : 0]);
          return n + head + tail;
        })(),
      );
    }
  }
  if (sources.has('campaign') && !q.contactId && !q.automationId) {
    const p = new Params();
    const project = p.add(q.projectId);
    const campaign = q.campaignId ? ` and id = ${p.add(q.campaignId)}` : '';
    const range = (col: string) => `${q.from ? ` and ${col} >= ${p.add(q.from)}` : ''}${q.to ? ` and ${col} < ${p.add(q.to)}` : ''}`;
    const arms: string[] = [];
    if (types.includes('campaign.started')) arms.push(`(select count(*) from campaigns where project_id = ${project} and started_at is not null${campaign}${range('started_at')})`);
    const ends = Object.entries(CAMPAIGN_END_TYPE).filter(([, t]) => types.includes(t)).map(([s]) => s);
    if (ends.length) arms.push(`(select count(*) from campaigns where project_id = ${project} and finished_at is not null and status = any(${p.add(ends)}::text[])${campaign}${range('finished_at')})`);
    if (arms.length) counts.push(one(`select (${arms.join(' + ')})::text as n`, p.values));
  }
  if (sources.has('automation') && types.includes('automation.step') && !q.campaignId) {
    const p = new Params();
    const where = [`s.project_id = ${p.add(q.projectId)}`];
    if (q.automationId) where.push(`s.automation_id = ${p.add(q.automationId)}`);
    if (q.contactId) where.push(`s.execution_id in (select id from automation_executions where contact_id = ${p.add(q.contactId)})`);
    if (q.from) where.push(`s.finished_at >= ${p.add(q.from)}`);
    if (q.to) where.push(`s.finished_at < ${p.add(q.to)}`);
    counts.push(one(`select count(*)::text as n from automation_execution_steps s where ${where.join(' and ')}`, p.values));
  }
  return (await Promise.all(counts)).reduce((a, b) => a + b, 0);
}

export async function activityFeed(em: EntityManager, projectId: string, q: ActivityQuery): Promise<{ data: ActivityItem[]; cursor: string | null; hasMore: boolean; total: number }> {
  checkRange(q.from, q.to);
  const after = decodeCursor(q.cursor);
  const types = q.types?.length ? q.types : ACTIVITY_TYPE_NAMES;
  const fq: FeedQuery = { ...q, projectId };
  const sources = sourcesOf(types);
  const statements = [
    sources.has('event') ? eventsSql(fq, types, after, q.limit + 1) : undefined,
    sources.has('campaign') ? campaignsSql(fq, types, after, q.limit + 1) : undefined,
    sources.has('automation') ? stepsSql(fq, types, after, q.limit + 1) : undefined,
  ].filter((s): s is [string, unknown[]] => s !== undefined);
  const [pages, total] = await Promise.all([Promise.all(statements.map(([text, values]) => sql(em).query<Row>(text, values))), after ? 0 : activityTotal(em, fq, types)]);
  const rows = pages.flat().sort(newer);
  const hasMore = rows.length > q.limit;
  const page = rows.slice(0, q.limit);
  return { data: page.map(present), cursor: hasMore ? encodeCursor(page[page.length - 1]!) : null, hasMore, total };
}

function checkRange(from: Date | undefined, to: Date | undefined): void {
  if (from && to && from.getTime() > to.getTime()) throw validationError([{ field: 'query.from', message: 'from must not be after to', code: 'invalid_range' }]);
}

const HOUR = 3_600_000;
const floorHour = (d: Date) => new Date(Math.floor(d.getTime() / HOUR) * HOUR);
const ceilHour = (d: Date) => new Date(Math.ceil(d.getTime() / HOUR) * HOUR);

/** Counts per type over a window of whole UTC hours: from the start of `from`'s hour to the end of `to`'s. */
export async function activityStats(
  em: EntityManager,
  projectId: string,
  q: { from?: Date; to?: Date },
): Promise<{ from: string; to: string; total: number; counts: Record<ActivityType, number> }> {
  const toIn = q.to ?? new Date();
  const fromIn = q.from ?? new Date(toIn.getTime() - 30 * 86_400_000);
  checkRange(fromIn, toIn);
  const from = floorHour(fromIn);
  const to = ceilHour(toIn.getTime() === from.getTime() ? new Date(toIn.getTime() + 1) : toIn);
  const counts = Object.fromEntries(ACTIVITY_TYPE_NAMES.map((t) => [t, 0])) as Record<ActivityType, number>;
  const [names, campaigns, steps] = await Promise.all([
    sql(em).query<{ name: string; system: boolean; n: string }>(
      `select name, bool_or(system) as system, sum(count)::text as n from event_name_hourly where project_id = $1 and hour >= $2 and hour < $3 group by name`,
      [projectId, from, to],
    ),
    campaignCounts(em, projectId, from, to),
    sql(em).query<{ n: string }>(`select count(*)::text as n from automation_execution_steps where project_id = $1 and finished_at >= $2 and finished_at < $3`, [projectId, from, to]),
  ]);
  for (const r of names) {
    const type = activityTypeOfEvent(r.name, r.system);
    if (type) counts[type] += Number(r.n);
  }
  for (const [type, n] of Object.entries(campaigns)) counts[type as ActivityType] += n;
  counts['automation.step'] += Number(steps[0]!.n);
  const total = Object.values(counts).reduce((a, b) => a + b, 0);
  return { from: from.toISOString(), to: to.toISOString(), total, counts };
}

/** Campaign starts and ends in [from, to). */
async function campaignCounts(em: EntityManager, projectId: string, from: Date, to: Date): Promise<Partial<Record<ActivityType, number>>> {
  const rows = await sql(em).query<{ type: ActivityType; n: string }>(
    `select 'campaign.started' as type, count(*)::text as n from campaigns where project_id = $1 and started_at >= $2 and started_at < $3
     union all
     select (case status ${Object.entries(CAMPAIGN_END_TYPE).map(([s, t]) => `when '${s}' then '${t}'`).join(' ')} end), count(*)::text
     from campaigns where project_id = $1 and finished_at >= $2 and finished_at < $3 and status = any($4::text[]) group by status`,
    [projectId, from, to, Object.keys(CAMPAIGN_END_TYPE)],
  );
  return Object.fromEntries(rows.map((r) => [r.type, Number(r.n)]));
}

/**
 * How many activity items happened since `since` (up to now): whole hours from the rollup, the rest of `since`'s
 * own hour counted from the events index, campaigns and steps counted directly.
 */
export async function activityRecentCount(em: EntityManager, projectId: string, since: Date): Promise<{ since: string; count: number }> {
  const now = new Date();
  if (since.getTime() > now.getTime()) return { since: since.toISOString(), count: 0 };
  const nextHour = ceilHour(new Date(since.getTime() + 1));
  const [rollup, partial, campaigns, steps] = await Promise.all([
    sql(em).query<{ name: string; system: boolean; n: string }>(
      `select name, bool_or(system) as system, sum(count)::text as n from event_name_hourly where project_id = $1 and hour >= $2 group by name`,
      [projectId, nextHour],
    ),
    sql(em).query<{ name: string; system: boolean; n: string }>(
      `select name, bool_or(source = 'SYSTEM') as system, count(*)::text as n from events
       where project_id = $1 and created_at >= $2 and created_at < $3 group by name`,
      [projectId, since, nextHour],
    ),
    campaignCounts(em, projectId, since, new Date('9999-12-31T00:00:00Z')),
    sql(em).query<{ n: string }>(`select count(*)::text as n from automation_execution_steps where project_id = $1 and finished_at >= $2`, [projectId, since]),
  ]);
  let count = Number(steps[0]!.n) + Object.values(campaigns).reduce((a, b) => a + b, 0);
  for (const r of [...rollup, ...partial]) if (activityTypeOfEvent(r.name, r.system)) count += Number(r.n);
  return { since: since.toISOString(), count };
}

export interface UpcomingItem {
  type: 'campaign.scheduled' | 'automation.wake';
  at: string;
  campaignId: string | null;
  automationId: string | null;
  executionId: string | null;
  contactId: string | null;
  /** The campaign's name, or the step the run waits in. */
  name: string | null;
  data: Record<string, unknown>;
}

/** Scheduled campaigns and automation runs with a timed wake-up (a delay, a wait's timeout), soonest first. */
export async function activityUpcoming(em: EntityManager, projectId: string, limit: number): Promise<{ data: UpcomingItem[] }> {
  const [campaigns, runs] = await Promise.all([
    sql(em).query<{ at: Date; id: string; name: string }>(
      `select scheduled_at as at, id, name from campaigns where project_id = $1 and status = 'SCHEDULED' and scheduled_at is not null order by scheduled_at, id limit $2`,
      [projectId, limit],
    ),
    sql(em).query<{ at: Date; id: string; automation_id: string; contact_id: string; step_id: string | null; waiting_event: string | null; status: string; step_name: string | null; step_type: string | null }>(
      `select x.next_wake_at as at, x.id, x.automation_id, x.contact_id, x.current_step_id as step_id, x.waiting_event, x.status, st.name as step_name, st.type as step_type
       from automation_executions x left join automation_steps st on st.id = x.current_step_id
       where x.project_id = $1 and x.next_wake_at is not null and x.status in ('RUNNING', 'WAITING')
       order by x.next_wake_at, x.id limit $2`,
      [projectId, limit],
    ),
  ]);
  const items: UpcomingItem[] = [
    ...campaigns.map((c) => ({ type: 'campaign.scheduled' as const, at: c.at.toISOString(), campaignId: c.id, automationId: null, executionId: null, contactId: null, name: c.name, data: {} })),
    ...runs.map((r) => ({
      type: 'automation.wake' as const,
      at: r.at.toISOString(),
      campaignId: null,
      automationId: r.automation_id,
      executionId: r.id,
      contactId: r.contact_id,
      name: r.step_name ?? r.step_type,
      data: { stepId: r.step_id, stepType: r.step_type, waitingEvent: r.waiting_event, status: r.status },
    })),
  ];
  items.sort((a, b) => a.at.localeCompare(b.at) || (a.campaignId ?? a.executionId ?? '').localeCompare(b.campaignId ?? b.executionId ?? ''));
  return { data: items.slice(0, limit) };
}

export function activityTypes(): { type: ActivityType; source: string; description: string }[] {
  return ACTIVITY_TYPES.map((t) => ({ type: t.type, source: t.source, description: t.description }));
}
