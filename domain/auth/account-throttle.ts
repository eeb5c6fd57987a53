import { createHash } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { fits, msUntilNextFits, toHeaderSeconds, windowIndex, type WindowPolicy } from '../rate-limit/window';
import { sql } from '../db/sql';

/** One budget a request draws on: what is counted (an account, a client address) and how many fit in the window. */
export interface ThrottleRule {
  /** E.g. `login:account:ada@example.com`; stored only as a SHA-256. */
  key: string;
  limit: number;
}

const RETENTION_MS = 24 * 3_600_000;

export type ThrottleDecision = { allowed: true } | { allowed: false; retryAfterSeconds: number };

/**
 * Counters for the dashboard's unauthenticated endpoints (failed logins, account emails asked for), in Postgres so
 * every API process shares them. The sliding-window arithmetic is the API rate limit's (domain/rate-limit/window.ts),
 * but counted exactly instead of batched: these requests are few, and a guesser must not get each process's
 * allowance for free. A request is counted first and refused, its count taken back, when that puts any of its
 * budgets over the limit, so concurrent attempts cannot overshoot, and refused requests are not counted.
 *
 * Counts commit on their own, outside the request's transaction: a failed login is exactly the request that rolls
 * back, and its count must stay (and the counter's row lock must not wait for a slow password check to end).
 */
export class AccountThrottle {
  private lastCleanupMs = 0;

  constructor(private readonly windowMs: number) {}

  /** The stored key: with the window length, so a changed window starts fresh instead of misreading old counts. */
  private hashes(rules: ThrottleRule[]): string {
    return `{${rules.map((r) => createHash('sha256').update(`${this.windowMs}:${r.key}`).digest('hex')).join(',')}}`;
  }

  private windowStart(window: number): string {
    return new Date(window * this.windowMs).toISOString();
  }

  /** Counts one request against every rule, or refuses it with the seconds until all of them have room again. */
  async hit(requestEm: EntityManager, rules: ThrottleRule[], now = Date.now()): Promise<ThrottleDecision> {
    const em = ownCommits(requestEm);
    await this.cleanup(em, now);
    const window = windowIndex(now, this.windowMs);
    const rows = await sql(em).query<{ i: number; count: number; previous: number }>(
      `with input as (select k, i from unnest($1::text[]) with ordinality as t(k, i)),
       up as (
         insert into login_throttle_windows as w (key, window_start, count)
         select k, $2::timestamptz, 1 from input order by k
         on conflict (key, window_start) do update set count = w.count + 1
         returning w.key, w.count)
       select input.i::int as i, up.count, coalesce(prev.count, 0)::int as previous
       from input join up on up.key = input.k
       left join login_throttle_windows prev on prev.key = input.k and prev.window_start = $3::timestamptz`,
      [this.hashes(rules), this.windowStart(window), this.windowStart(window - 1)],
    );
    let retryAfterMs = 0;
    for (const row of rows) {
      const policy: WindowPolicy = { limit: rules[row.i - 1]!.limit, windowMs: this.windowMs };
      // The usage before this request must leave room for it.
      const counts = { window, current: row.count - 1, previous: row.previous };
      if (!fits(counts, now, policy)) retryAfterMs = Math.max(retryAfterMs, msUntilNextFits(counts, now, policy), 1);
    }
    if (retryAfterMs === 0) return { allowed: true };
    await this.forgive(em, rules, now);
    return { allowed: false, retryAfterSeconds: toHeaderSeconds(retryAfterMs, 1) };
  }

  /** Takes back one request that `hit` counted (a login that succeeded is no failure). */
  async forgive(requestEm: EntityManager, rules: ThrottleRule[], now = Date.now()): Promise<void> {
    await sql(ownCommits(requestEm)).run(`update login_throttle_windows set count = count - 1 where key = any($1::text[]) and window_start = $2::timestamptz and count > 0`, [
      this.hashes(rules),
      this.windowStart(windowIndex(now, this.windowMs)),
    ]);
  }

  /**
   * Deletes windows that no longer count, at most once a minute per process. Kept a day at least, so a process with
   * another window length (a rolling configuration change) never deletes the windows the others still read.
   */
  private async cleanup(em: EntityManager, now: number): Promise<void> {
    if (now - this.lastCleanupMs < 60_000) return;
    this.lastCleanupMs = now;
    await sql(em).run(`delete from login_throttle_windows where window_start < $1::timestamptz`, [new Date(now - Math.max(2 * this.windowMs, RETENTION_MS)).toISOString()]);
  }
}

/** An EntityManager whose statements autocommit on a pooled connection, whatever transaction `em` is in. */
function ownCommits(em: EntityManager): EntityManager {
  return em.isInTransaction() ? em.fork() : em;
}
