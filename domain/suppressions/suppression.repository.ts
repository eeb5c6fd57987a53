import { statement, type Sql } from '../db/sql';
import { selectList } from '../db/rows';
import { SQL_UUIDV7 } from '../ids';
import { likeEscape } from '../pagination';
import type { SuppressionReason, SuppressionRow } from './suppression.entity';

/**
 * The SQL of the suppression list. The send paths do not call in here per recipient: they read an address's
 * suppression inside their own set-based statements, with `suppressedReasonSql` (the email intake's insert, the
 * delivery claim, a campaign's snapshot), and the statements that record bounces add `upsertSuppressionsSql` as a CTE,
 * so an email's BOUNCED and its address's suppression commit together.
 */

const COLUMNS = selectList<SuppressionRow>(['id', 'projectId', 'email', 'reason', 'source', 'detail', 'emailId', 'createdAt', 'updatedAt']);

/**
 * The reason an address is suppressed for, or null: a scalar subquery over the unique (project, email) index, for the
 * select list of a statement that handles a batch of emails. `email` must be normalized (emails and contacts store
 * it so).
 */
export function suppressedReasonSql(projectId: string, email: string): string {
  return `(select s.reason from suppressions s where s.project_id = ${projectId} and s.email = ${email})`;
}

/** Harder reasons first: the one kept when one statement suppresses an address twice. */
const REASON_RANK = `case reason when 'complaint' then 0 when 'hard_bounce' then 1 when 'manual' then 2 else 3 end`;

/**
 * Suppresses the addresses of `rows`, a select of `project_id uuid, email text, reason text, source text, detail text,
 * email_id uuid` (normalized emails), as an INSERT to use alone or as a CTE. The rule, in one place: an address is
 * suppressed once and keeps its first reason, except that a soft-bounce limit gives way to a hard bounce or a complaint
 * (the stronger reason is what a reader wants to see). An address twice in `rows` counts once, with its hardest reason
 * (ON CONFLICT may not touch a row twice in one statement). `returning` names what to return of the rows written.
 */
export function upsertSuppressionsSql(rows: string, returning = ''): string {
  return `insert into suppressions as s (id, project_id, email, reason, source, detail, email_id)
    select ${SQL_UUIDV7}, r.project_id, r.email, r.reason, r.source, r.detail, r.email_id
    from (select distinct on (r0.project_id, r0.email) * from (${rows}) r0 order by r0.project_id, r0.email, ${REASON_RANK}) r
    on conflict (project_id, email) do update
      set reason = excluded.reason, source = excluded.source, detail = excluded.detail, email_id = excluded.email_id, updated_at = now()
      where s.reason = 'soft_bounce_limit' and excluded.reason in ('hard_bounce', 'complaint')
    ${returning}`;
}

const SUPPRESSION_UPSERT = statement(
  'suppression_upsert',
  upsertSuppressionsSql(`select $1::uuid as project_id, $2::text as email, $3::text as reason, $4::text as source, $5::text as detail, $6::uuid as email_id`, 'returning s.id'),
);

export interface SuppressInput {
  projectId: string;
  /** Normalized. */
  email: string;
  reason: SuppressionReason;
  source: string;
  detail: string | null;
  emailId: string | null;
}

/** Suppresses one address; true when that changed the list (a new entry, or a soft-bounce limit made harder). */
export async function upsertSuppression(db: Sql, s: SuppressInput): Promise<boolean> {
  return (await db.run(SUPPRESSION_UPSERT, [s.projectId, s.email, s.reason, s.source, s.detail, s.emailId])) > 0;
}

const SUPPRESSIONS_UPSERT = statement(
  'suppressions_upsert',
  upsertSuppressionsSql(
    `select * from unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::uuid[]) as v(project_id, email, reason, source, detail, email_id)`,
  ),
);

/** Suppresses several addresses in one statement (a batch of bounces); returns how many entries that changed. */
export async function upsertSuppressions(db: Sql, rows: readonly SuppressInput[]): Promise<number> {
  if (rows.length === 0) return 0;
  const col = <K extends keyof SuppressInput>(k: K) => rows.map((r) => r[k]);
  return db.run(SUPPRESSIONS_UPSERT, [col('projectId'), col('email'), col('reason'), col('source'), col('detail'), col('emailId')]);
}

/**
 * Records one soft bounce and, when it makes `threshold` of different emails within `windowDays`, suppresses the
 * address (`soft_bounce_limit`). One statement: the project's expired soft bounces go, this one is added (once per
 * email), the address's bounces in the window are counted with it, and the suppression follows from the count.
 */
const SUPPRESSION_SOFT_BOUNCE = statement(
  'suppression_soft_bounce',
  `with expired as (
    delete from suppression_soft_bounces where project_id = $1 and created_at < now() - make_interval(days => $7)
  ),
  recorded as (
    insert into suppression_soft_bounces (project_id, email, email_id, source, detail) values ($1, $2, $3, $4, $5)
    on conflict do nothing
    returning project_id, email
  ),
  counted as (
    -- The statement's snapshot does not hold the row just added: it is the 1.
    select r.project_id, r.email, 1 + (select count(*)::int from suppression_soft_bounces b
        where b.project_id = r.project_id and b.email = r.email and b.created_at >= now() - make_interval(days => $7)) as n
    from recorded r
  ),
  suppressed as (
    ${upsertSuppressionsSql(
      `select project_id, email, 'soft_bounce_limit'::text as reason, $4::text as source, $8::text as detail, $3::uuid as email_id
       from counted where $6::int > 0 and n >= $6::int`,
      'returning s.id',
    )}
  )
  select (select n from counted) as count, exists (select 1 from suppressed) as suppressed`,
);

export interface SoftBounceInput {
  projectId: string;
  /** Normalized. */
  email: string;
  emailId: string;
  source: string;
  detail: string | null;
}

/** `count`: the address's soft bounces in the window with this one (null: this email's bounce was counted before). */
export async function insertSoftBounce(
  db: Sql,
  b: SoftBounceInput,
  policy: { threshold: number; windowDays: number; suppressionDetail: string },
): Promise<{ count: number | null; suppressed: boolean }> {
  const row = await db.one<{ count: number | null; suppressed: boolean }>(SUPPRESSION_SOFT_BOUNCE, [
    b.projectId,
    b.email,
    b.emailId,
    b.source,
    b.detail,
    policy.threshold,
    policy.windowDays,
    policy.suppressionDetail,
  ]);
  return { count: row?.count ?? null, suppressed: row?.suppressed ?? false };
}

export interface SuppressionFilter {
  reason?: SuppressionReason;
  /** Normalized: the one address. */
  email?: string;
  /** A case-insensitive substring of the address (wildcards literal). */
  search?: string;
}

/** A page of the list, newest first, from after the id `after`; `limit + 1` rows, so the caller can tell hasMore. */
export async function selectSuppressions(db: Sql, projectId: string, f: SuppressionFilter, page: { after?: string; limit: number }): Promise<SuppressionRow[]> {
  const { where, params } = filterSql(projectId, f);
  if (page.after) where.push(`id < $${params.push(page.after)}`);
  return db.query<SuppressionRow>(`select ${COLUMNS} from suppressions where ${where.join(' and ')} order by id desc limit $${params.push(page.limit + 1)}`, params);
}

export async function countSuppressions(db: Sql, projectId: string, f: SuppressionFilter): Promise<number> {
  const { where, params } = filterSql(projectId, f);
  const row = await db.one<{ n: string }>(`select count(*) as n from suppressions where ${where.join(' and ')}`, params);
  return Number(row?.n ?? 0);
}

function filterSql(projectId: string, f: SuppressionFilter): { where: string[]; params: unknown[] } {
  const params: unknown[] = [projectId];
  const where = ['project_id = $1'];
  if (f.reason) where.push(`reason = $${params.push(f.reason)}`);
  if (f.email) where.push(`email = $${params.push(f.email)}`);
  if (f.search) where.push(`email like $${params.push(`%${likeEscape(f.search)}%`)} escape '\\'`);
  return { where, params };
}

/**
 * Manual entries (`manual`, source `api`) for normalized, distinct `emails`: each address's entry after the call,
 * `isNew` for those it added. An address already suppressed keeps its entry as it is.
 */
export async function insertManualSuppressions(db: Sql, projectId: string, emails: string[], detail: string | null): Promise<(SuppressionRow & { isNew: boolean })[]> {
  const rows = await db.query<SuppressionRow & { isNew: boolean }>(
    `with added as (
       insert into suppressions (id, project_id, email, reason, source, detail)
       select ${SQL_UUIDV7}, $1, e.email, 'manual', 'api', $3 from unnest($2::text[]) as e(email)
       on conflict (project_id, email) do nothing
       returning ${COLUMNS}
     )
     select *, true as "isNew" from added
     union all
     -- The statement's snapshot: the entries that were there before it (never one it added).
     select ${COLUMNS}, false as "isNew" from suppressions where project_id = $1 and email = any($2::text[])`,
    [projectId, emails, detail],
  );
  // An entry a concurrent request added after this statement began is in neither half: read it now.
  const missing = emails.filter((e) => !rows.some((r) => r.email === e));
  if (missing.length) {
    rows.push(
      ...(await db.query<SuppressionRow & { isNew: boolean }>(`select ${COLUMNS}, false as "isNew" from suppressions where project_id = $1 and email = any($2::text[])`, [
        projectId,
        missing,
      ])),
    );
  }
  return rows;
}

/** Removes an address from the list, and the soft bounces counted for it (it starts afresh); the entry, or undefined. */
export async function deleteSuppression(db: Sql, projectId: string, email: string): Promise<SuppressionRow | undefined> {
  return db.one<SuppressionRow>(
    `with soft as (delete from suppression_soft_bounces where project_id = $1 and email = $2)
     delete from suppressions where project_id = $1 and email = $2 returning ${COLUMNS}`,
    [projectId, email],
  );
}
