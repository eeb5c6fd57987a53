import { logger } from '../logger';
import type { RateLimitStore, SyncRow } from './rate-limit.store';
import {
  fits,
  localAllowance,
  msUntilNextFits,
  msUntilWindowEnds,
  remaining,
  toHeaderSeconds,
  windowIndex,
  type WindowCounts,
  type WindowPolicy,
} from './window';

/** The answer for one request, with what the RateLimit headers say. */
export interface RateLimitDecision {
  allowed: boolean;
  limit: number;
  /** Requests left now, this one counted. */
  remaining: number;
  /** RateLimit-Reset: seconds until the window ends, or, with nothing left, until the next request fits. */
  resetSeconds: number;
  /** Retry-After of a refused request, in seconds. */
  retryAfterSeconds?: number;
}

export interface RateLimiterOptions extends WindowPolicy {
  /** How often counts are written to and read from the store. */
  syncIntervalMs?: number;
  /** How often windows no process needs any more are deleted. */
  cleanupIntervalMs?: number;
  now?: () => number;
}

/** Default sync interval: four round trips a second per process, whatever the traffic. */
export const RATE_LIMIT_SYNC_INTERVAL_MS = 250;
/** Windows younger than this are never deleted, so processes running with another window length (a rolling
 *  config change) never delete each other's live rows. */
const MIN_RETENTION_MS = 5 * 60_000;

interface ProjectState {
  window: number;
  /** The current window's shared count as of the last sync (our synced requests included). */
  synced: number;
  /** The previous window's count: shared as last read, plus what we had not synced when the window ended. */
  previous: number;
  /** Admitted in `window`, not sent yet. */
  pending: number;
  /** Admitted in `window - 1`, not sent yet. */
  carry: number;
  /** Sent by the sync in progress. */
  inflight: { window: number; delta: number }[];
  /** Requests waiting for a sync (this process used its allowance); answered in order. */
  waiters: ((d: RateLimitDecision) => void)[];
  /** Asked since the last sync: the next sync reads its counts back even without a delta. */
  touched: boolean;
  lastSeenMs: number;
}

/**
 * The per-project API budget, shared by every API process through Postgres without a database round trip per
 * request. Each process counts locally per project and fixed window, and every `syncIntervalMs` writes all its counts
 * in one statement that also returns the shared totals, on which it decides until the next sync. A process admits at
 * most `allowance` requests per project that the others cannot see yet; past that, requests wait for an immediate
 * sync (one in flight per process, answering all waiters), so the deployment exceeds the budget by at most
 * `processes * allowance` whatever the traffic, while a project far from its limit never waits. Requests refused
 * are not counted. When the store fails, the process decides on what it knows (its own counts and the last shared
 * ones) without waiting, and says so in the log: the limiter never fails a request because of the database.
 */
export class RateLimiter {
  readonly policy: WindowPolicy;
  /** Requests per project one process may admit that the other processes have not seen. */
  readonly allowance: number;
  private readonly syncIntervalMs: number;
  private readonly cleanupIntervalMs: number;
  private readonly now: () => number;
  private readonly states = new Map<string, ProjectState>();
  private running?: Promise<void>;
  private again = false;
  private degraded = false;
  private timer?: NodeJS.Timeout;
  private lastCleanupMs: number;
  private stopped = false;

  constructor(
    private readonly store: RateLimitStore,
    opts: RateLimiterOptions,
  ) {
    this.policy = { limit: opts.limit, windowMs: opts.windowMs };
    this.syncIntervalMs = opts.syncIntervalMs ?? RATE_LIMIT_SYNC_INTERVAL_MS;
    this.cleanupIntervalMs = opts.cleanupIntervalMs ?? 60_000;
    this.now = opts.now ?? Date.now;
    this.allowance = localAllowance(this.policy, this.syncIntervalMs);
    this.lastCleanupMs = this.now();
  }

  /** Starts the periodic sync (and the periodic deletion of old windows). */
  start(): void {
    this.timer ??= setInterval(() => this.tick(), this.syncIntervalMs);
    this.timer.unref();
  }

  /** Writes what is left, answers whoever waits, and closes the store. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    while (this.running) await this.running;
    if ([...this.states.values()].some((s) => s.pending > 0 || s.carry > 0)) await this.sync();
    this.degraded = true; // nothing will sync any more: answer the rest locally
    this.drain([...this.states.values()]);
    await this.store.close();
  }

  /** Counts one request of the project, or refuses it. Synchronous unless the process must sync first. */
  consume(projectId: string): RateLimitDecision | Promise<RateLimitDecision> {
    const now = this.now();
    let s = this.states.get(projectId);
    if (!s) {
      s = { window: windowIndex(now, this.policy.windowMs), synced: 0, previous: 0, pending: 0, carry: 0, inflight: [], waiters: [], touched: false, lastSeenMs: now };
      this.states.set(projectId, s);
    } else this.roll(s, now);
    s.touched = true;
    s.lastSeenMs = now;
    if (s.waiters.length === 0) {
      const decision = this.decide(s, now);
      if (decision) return decision;
    }
    const state = s;
    return new Promise<RateLimitDecision>((resolve) => {
      state.waiters.push(resolve);
      this.requestSync();
    });
  }

  /** Runs one sync now (or waits for the one running); resolves once it is done. */
  async sync(): Promise<void> {
    this.requestSync();
    while (this.running) await this.running;
  }

  private tick(): void {
    this.requestSync();
    const now = this.now();
    if (now - this.lastCleanupMs >= this.cleanupIntervalMs) {
      this.lastCleanupMs = now;
      void this.deleteOldWindows(now);
    }
  }

  /** Deletes windows older than the previous one of every process. */
  async deleteOldWindows(now = this.now()): Promise<void> {
    try {
      await this.store.deleteBefore(now - Math.max(2 * this.policy.windowMs, MIN_RETENTION_MS));
    } catch (err) {
      logger.warn({ err }, 'rate limit: deleting old windows failed');
    }
  }

  private counts(s: ProjectState): WindowCounts {
    return { window: s.window, current: s.synced + this.unsynced(s), previous: s.previous };
  }

  /** This process's requests of the current window the others cannot see yet. */
  private unsynced(s: ProjectState): number {
    let n = s.pending;
    for (const f of s.inflight) if (f.window === s.window) n += f.delta;
    return n;
  }

  /** Moves the state to the window of `now`: the current count becomes the previous one. */
  private roll(s: ProjectState, now: number): void {
    const w = windowIndex(now, this.policy.windowMs);
    if (w === s.window) return;
    if (w === s.window + 1) {
      s.previous = s.synced + this.unsynced(s);
      s.carry = s.pending;
    } else {
      s.previous = 0;
      s.carry = 0;
    }
    s.synced = 0;
    s.pending = 0;
    s.window = w;
  }

  /** A decision, or undefined when the request must wait for a sync (allowance used, budget maybe left). */
  private decide(s: ProjectState, now: number): RateLimitDecision | undefined {
    const counts = this.counts(s);
    if (!fits(counts, now, this.policy)) {
      const retryAfterSeconds = toHeaderSeconds(msUntilNextFits(counts, now, this.policy), 1);
      return { allowed: false, limit: this.policy.limit, remaining: 0, resetSeconds: retryAfterSeconds, retryAfterSeconds };
    }
    if (!this.degraded && !this.stopped && this.unsynced(s) >= this.allowance) return undefined;
    s.pending++;
    const after = { ...counts, current: counts.current + 1 };
    const left = remaining(after, now, this.policy);
    const resetMs = left > 0 ? msUntilWindowEnds(after, now, this.policy.windowMs) : msUntilNextFits(after, now, this.policy);
    return { allowed: true, limit: this.policy.limit, remaining: left, resetSeconds: toHeaderSeconds(resetMs, 1) };
  }

  private requestSync(): void {
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = this.runSync()
      .catch((err: unknown) => logger.error({ err }, 'rate limit sync crashed'))
      .finally(() => {
        this.running = undefined;
        if (this.again) {
          this.again = false;
          this.requestSync();
        }
      });
  }

  private async runSync(): Promise<void> {
    const { windowMs } = this.policy;
    const now = this.now();
    const rows: SyncRow[] = [];
    const owners: { state: ProjectState; window: number }[] = [];
    for (const [projectId, s] of this.states) {
      this.roll(s, now);
      if (s.pending > 0 || s.carry > 0 || s.touched || s.waiters.length > 0) {
        s.inflight = [{ window: s.window, delta: s.pending }];
        rows.push({ projectId, windowStartMs: s.window * windowMs, delta: s.pending });
        owners.push({ state: s, window: s.window });
        if (s.carry > 0) {
          s.inflight.push({ window: s.window - 1, delta: s.carry });
          rows.push({ projectId, windowStartMs: (s.window - 1) * windowMs, delta: s.carry });
          owners.push({ state: s, window: s.window - 1 });
        }
        s.pending = 0;
        s.carry = 0;
        s.touched = false;
      } else if (now - s.lastSeenMs > 2 * windowMs) {
        this.states.delete(projectId); // idle for two windows: nothing it counted matters any more
      }
    }
    if (!rows.length) return;
    const states = [...new Set(owners.map((o) => o.state))];
    let results;
    try {
      results = await this.store.sync(rows, windowMs);
    } catch (err) {
      if (!this.degraded) logger.warn({ err }, 'rate limit sync failed; deciding on local counts until it works again');
      this.degraded = true;
      const at = this.now();
      for (const s of states) {
        this.roll(s, at);
        // Keep the counts for the next sync.
        for (const f of s.inflight) {
          if (f.window === s.window) s.pending += f.delta;
          else if (f.window === s.window - 1) s.carry += f.delta;
        }
        s.inflight = [];
      }
      this.drain(states);
      return;
    }
    if (this.degraded) logger.info('rate limit sync works again');
    this.degraded = false;
    const at = this.now();
    owners.forEach(({ state: s, window }, k) => {
      this.roll(s, at); // the window may have ended during the round trip
      const r = results[k]!;
      // Counts only grow within a window, so the larger of two readings is the fresher one.
      if (window === s.window) {
        s.synced = Math.max(s.synced, r.count);
        s.previous = Math.max(s.previous, r.previous);
      } else if (window === s.window - 1) {
        s.previous = Math.max(s.previous, r.count);
      }
    });
    for (const s of states) s.inflight = [];
    this.drain(states);
  }

  /** Answers waiting requests in order, as far as the counts now allow. */
  private drain(states: ProjectState[]): void {
    const now = this.now();
    for (const s of states) {
      if (!s.waiters.length) continue;
      this.roll(s, now);
      while (s.waiters.length) {
        const d = this.decide(s, now);
        if (!d) {
          this.requestSync();
          break;
        }
        s.waiters.shift()!(d);
      }
    }
  }
}
