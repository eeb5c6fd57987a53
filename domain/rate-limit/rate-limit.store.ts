import { Pool } from 'pg';
import { logger } from '../logger';
import { sql, statement } from '../db/sql';

/** Requests one process counted for a project in one fixed window since its last sync. */
export interface SyncRow {
  projectId: string;
  /** Start of the fixed window, epoch ms. */
  windowStartMs: number;
  /** Requests to add (0: only read the counts back). */
  delta: number;
}

/** The shared counts after a sync, one per row asked, in the same order. */
export interface SyncResult {
  /** The window's count across all processes, this sync included. */
  count: number;
  /** The count of the window before it. */
  previous: number;
}

/** Where processes add up their counts: Postgres in production, memory in unit tests. */
export interface RateLimitStore {
  sync(rows: SyncRow[], windowMs: number): Promise<SyncResult[]>;
  /** Deletes windows that started before `cutoffMs`; returns how many. */
  deleteBefore(cutoffMs: number): Promise<number>;
  close(): Promise<void>;
}

// One statement per sync for every project of the process: add the deltas, read back the current and previous
// counts. Rows are inserted in key order so two processes syncing overlapping projects never deadlock. The final
// select reads the table as it was before the upsert (one snapshot per statement), so a row just written is read
// from the upsert's RETURNING instead.
const SYNC_SQL = `
with input as (
  select project_id, window_start, delta, i
  from unnest($1::uuid[], $2::timestamptz[], $3::int[]) with ordinality as t(project_id, window_start, delta, i)
), up as (
  insert into rate_limit_windows as w (project_id, window_start, count)
  select project_id, window_start, delta from input where delta > 0 order by project_id, window_start
  on conflict (project_id, window_start) do update set count = w.count + excluded.count
  returning w.project_id, w.window_start, w.count
)
select input.i::int as i, coalesce(up.count, cur.count, 0)::int as count, coalesce(prev.count, 0)::int as previous
from input
left join up on up.project_id = input.project_id and up.window_start = input.window_start
left join rate_limit_windows cur on cur.project_id = input.project_id and cur.window_start = input.window_start
left join rate_limit_windows prev on prev.project_id = input.project_id and prev.window_start = input.window_start - $4::interval`;

const RATE_LIMIT_SYNC = statement('rate_limit_sync', SYNC_SQL);

/**
 * The shared counts in the UNLOGGED table `rate_limit_windows` (a crash may empty it: budgets start over, which is
 * harmless). One connection of its own, so a sync never queues behind request queries in the ORM's pool; short
 * timeouts, because a sync nobody answers is treated as failed (the limiter then fails open).
 */
export class PgRateLimitStore implements RateLimitStore {
  private readonly pool: Pool;

  constructor(databaseUrl: string, opts: { timeoutMs?: number } = {}) {
    const timeoutMs = opts.timeoutMs ?? 1_000;
    // statement_timeout makes the server give up too (a lock wait); query_timeout covers a connection that went silent.
    this.pool = new Pool({
      connectionString: databaseUrl,
      max: 1,
      connectionTimeoutMillis: timeoutMs,
      statement_timeout: timeoutMs,
      query_timeout: timeoutMs + 500,
      application_name: 'mailwright-rate-limit',
    });
    // A dropped idle connection must not crash the process; the next sync reconnects.
    this.pool.on('error', (err) => logger.warn({ err }, 'rate limit connection lost'));
    // Nor one checked out when the server closes it (the pool listens on idle ones only); the sync in flight fails.
    this.pool.on('connect', (client) => client.on('error', (err) => logger.warn({ err }, 'rate limit connection lost')));
  }

  async sync(rows: SyncRow[], windowMs: number): Promise<SyncResult[]> {
    if (!rows.length) return [];
    const counted = await sql(this.pool).query<{ i: number; count: number; previous: number }>(
      RATE_LIMIT_SYNC,
      [rows.map((r) => r.projectId), rows.map((r) => new Date(r.windowStartMs).toISOString()), rows.map((r) => r.delta), `${windowMs} milliseconds`],
    );
    const out: SyncResult[] = rows.map(() => ({ count: 0, previous: 0 }));
    for (const r of counted) out[r.i - 1] = { count: r.count, previous: r.previous };
    return out;
  }

  async deleteBefore(cutoffMs: number): Promise<number> {
    return sql(this.pool).run('delete from rate_limit_windows where window_start < $1::timestamptz', [new Date(cutoffMs).toISOString()]);
  }

  async close(): Promise<void> {
    await this.pool.end();
  }
}
