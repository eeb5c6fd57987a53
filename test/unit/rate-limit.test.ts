import { loadConfig } from '../../domain/config';
import { RateLimiter, type RateLimitDecision } from '../../domain/rate-limit/rate-limiter';
import type { RateLimitStore, SyncResult, SyncRow } from '../../domain/rate-limit/rate-limit.store';
import {
  elapsedFraction,
  estimate,
  fits,
  localAllowance,
  msUntilNextFits,
  msUntilWindowEnds,
  remaining,
  toHeaderSeconds,
  windowIndex,
  type WindowCounts,
  type WindowPolicy,
} from '../../domain/rate-limit/window';

const MIN = 60_000;
const policy = (limit: number, windowMs = MIN): WindowPolicy => ({ limit, windowMs });
const at = (window: number, fraction: number, windowMs = MIN) => window * windowMs + fraction * windowMs;

/** A small deterministic PRNG (mulberry32), so random cases are reproducible. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The counts as seen at a later moment without new requests (the window may have ended). */
function later(counts: WindowCounts, nowMs: number, windowMs: number): WindowCounts {
  const w = windowIndex(nowMs, windowMs);
  if (w === counts.window) return counts;
  if (w === counts.window + 1) return { window: w, current: 0, previous: counts.current };
  return { window: w, current: 0, previous: 0 };
}

describe('rate limit window arithmetic', () => {
  test('windows are aligned to the epoch and the elapsed share runs from 0 to 1', () => {
    expect(windowIndex(at(100, 0), MIN)).toBe(100);
    expect(windowIndex(at(100, 0.999), MIN)).toBe(100);
    expect(windowIndex(at(101, 0), MIN)).toBe(101);
    expect(elapsedFraction(at(100, 0.25), 100, MIN)).toBeCloseTo(0.25);
    expect(elapsedFraction(at(100, 0), 100, MIN)).toBe(0);
  });

  test.each([
    // previous, current, elapsed share -> estimate
    [0, 0, 0.5, 0],
    [0, 7, 0.9, 7],
    [100, 10, 0, 110],
    [100, 10, 0.25, 85],
    [100, 10, 0.5, 60],
    [100, 0, 0.99, 1],
  ])('estimate: previous %d, current %d, %d of the window elapsed -> %d', (previous, current, f, expected) => {
    expect(estimate({ window: 5, previous, current }, at(5, f), MIN)).toBeCloseTo(expected, 6);
  });

  test.each([
    // limit, previous, current, elapsed share -> fits one more, remaining
    [10, 0, 9, 0.5, true, 1],
    [10, 0, 10, 0.5, false, 0],
    [10, 10, 0, 0, false, 0],
    [10, 10, 0, 0.1, true, 1], // 9 counted: one more fits exactly
    [10, 10, 5, 0.5, false, 0], // 5 + 5
    [10, 10, 5, 0.55, false, 0], // 4.5 + 5: half a request left is none
    [10, 10, 5, 0.6, true, 1], // 4 + 5
    [1000, 0, 0, 0, true, 1000],
    [1, 0, 1, 0.99, false, 0],
  ])('limit %d, previous %d, current %d at %d: fits=%s remaining=%d', (limit, previous, current, f, fitsExpected, left) => {
    const counts = { window: 3, previous, current };
    expect(fits(counts, at(3, f), policy(limit))).toBe(fitsExpected);
    expect(remaining(counts, at(3, f), policy(limit))).toBe(left);
  });

  test('a fresh window admits exactly `limit` requests', () => {
    let counts: WindowCounts = { window: 7, previous: 0, current: 0 };
    let admitted = 0;
    while (fits(counts, at(7, 0.1), policy(20))) {
      counts = { ...counts, current: counts.current + 1 };
      admitted++;
    }
    expect(admitted).toBe(20);
    expect(remaining(counts, at(7, 0.1), policy(20))).toBe(0);
  });

  test('msUntilNextFits: the previous window decays inside the current one', () => {
    // limit 10, previous 10, current 5: 10 * (1 - t) <= 4 -> t >= 0.6 of the window.
    expect(msUntilNextFits({ window: 0, previous: 10, current: 5 }, at(0, 0), policy(10))).toBe(36_000);
    expect(msUntilNextFits({ window: 0, previous: 10, current: 5 }, at(0, 0.5), policy(10))).toBe(6_000);
    expect(msUntilNextFits({ window: 0, previous: 10, current: 5 }, at(0, 0.7), policy(10))).toBe(0);
  });

  test('msUntilNextFits: a full current window waits into the next one', () => {
    // current 10 of 10 at half the window: 30 s to the boundary, then 10 * (1 - t) <= 9 -> t >= 0.1 (6 s).
    expect(msUntilNextFits({ window: 0, previous: 0, current: 10 }, at(0, 0.5), policy(10))).toBe(36_000);
    // limit 1: the one request of this window must age out completely.
    expect(msUntilNextFits({ window: 0, previous: 0, current: 1 }, at(0, 0.5), policy(1))).toBe(90_000);
  });

  test('msUntilNextFits is exact: one millisecond earlier the request still does not fit (random cases)', () => {
    const rnd = prng(42);
    for (let i = 0; i < 2000; i++) {
      const windowMs = [1_000, 5_000, 60_000][i % 3]!;
      const limit = 1 + Math.floor(rnd() * 50);
      const counts: WindowCounts = { window: 1000, previous: Math.floor(rnd() * 2 * limit), current: Math.floor(rnd() * 1.5 * limit) };
      const now = at(1000, rnd() * 0.999, windowMs);
      const wait = msUntilNextFits(counts, now, { limit, windowMs });
      const p = { limit, windowMs };
      expect(fits(later(counts, now + wait, windowMs), now + wait, p)).toBe(true);
      if (wait > 0) expect(fits(later(counts, now + wait - 1, windowMs), now + wait - 1, p)).toBe(false);
      else expect(fits(counts, now, p)).toBe(true);
    }
  });

  test('msUntilWindowEnds and header seconds round up', () => {
    expect(msUntilWindowEnds({ window: 2, previous: 0, current: 0 }, at(2, 0.75), MIN)).toBe(15_000);
    expect(toHeaderSeconds(15_000)).toBe(15);
    expect(toHeaderSeconds(14_001)).toBe(15);
    expect(toHeaderSeconds(0, 1)).toBe(1);
  });

  test.each([
    // limit, window, sync interval -> allowance
    [1000, MIN, 250, 5], // 4.17 requests per sync interval, rounded up
    [20, 5_000, 250, 1],
    [20, MIN, 250, 1], // at least one
    [100_000_000, MIN, 250, 416_667],
    [600, MIN, 500, 5],
  ])('local allowance: %d per %d ms synced every %d ms -> %d', (limit, windowMs, interval, expected) => {
    expect(localAllowance({ limit, windowMs }, interval)).toBe(expected);
  });
});

describe('rate limit configuration', () => {
  const env = { DATABASE_URL: 'postgres://localhost/x' };
  test('defaults to 1000 requests per minute; 0 turns it off; the window is a duration in whole seconds', () => {
    expect(loadConfig(env).rateLimit).toEqual({ limit: 1000, windowMs: 60_000 });
    expect(loadConfig({ ...env, RATE_LIMIT_PER_MINUTE: '0' }).rateLimit.limit).toBe(0);
    expect(loadConfig({ ...env, RATE_LIMIT_PER_MINUTE: '20', RATE_LIMIT_WINDOW: '5s' }).rateLimit).toEqual({ limit: 20, windowMs: 5_000 });
    expect(() => loadConfig({ ...env, RATE_LIMIT_WINDOW: '1500ms' })).toThrow(/RATE_LIMIT_WINDOW: must be a whole number of seconds/);
    expect(() => loadConfig({ ...env, RATE_LIMIT_WINDOW: '500ms' })).toThrow(/RATE_LIMIT_WINDOW/);
    expect(() => loadConfig({ ...env, RATE_LIMIT_PER_MINUTE: '-1' })).toThrow(/RATE_LIMIT_PER_MINUTE/);
    expect(() => loadConfig({ ...env, RATE_LIMIT_PER_MINUTE: '2.5' })).toThrow(/RATE_LIMIT_PER_MINUTE/);
  });
});

/** Postgres's behaviour in memory: counts per project and window start, added up across limiters. */
class MemoryStore implements RateLimitStore {
  readonly counts = new Map<string, number>();
  failing = false;
  syncs = 0;
  deletedBefore: number[] = [];

  async sync(rows: SyncRow[], windowMs: number): Promise<SyncResult[]> {
    await new Promise((r) => setImmediate(r)); // a round trip: other requests run meanwhile
    if (this.failing) throw new Error('connection refused');
    this.syncs++;
    return rows.map((r) => {
      const key = `${r.projectId}|${r.windowStartMs}`;
      const count = (this.counts.get(key) ?? 0) + r.delta;
      if (r.delta > 0) this.counts.set(key, count);
      return { count, previous: this.counts.get(`${r.projectId}|${r.windowStartMs - windowMs}`) ?? 0 };
    });
  }

  async deleteBefore(cutoffMs: number): Promise<number> {
    this.deletedBefore.push(cutoffMs);
    let n = 0;
    for (const key of [...this.counts.keys()]) {
      if (Number(key.split('|')[1]) < cutoffMs) {
        this.counts.delete(key);
        n++;
      }
    }
    return n;
  }

  async close(): Promise<void> {}

  total(projectId: string, window: number, windowMs: number): number {
    return this.counts.get(`${projectId}|${window * windowMs}`) ?? 0;
  }
}

class Clock {
  constructor(public ms: number) {}
  now = () => this.ms;
}

const decided = (d: RateLimitDecision | Promise<RateLimitDecision>) => Promise.resolve(d);

describe('RateLimiter', () => {
  test('one process: exactly the limit per fresh window, remaining counts down, then 429 data with Retry-After', async () => {
    const clock = new Clock(at(1000, 0.5));
    const store = new MemoryStore();
    const limiter = new RateLimiter(store, { limit: 10, windowMs: MIN, now: clock.now });
    const answers: RateLimitDecision[] = [];
    for (let i = 0; i < 12; i++) answers.push(await decided(limiter.consume('p')));
    expect(answers.map((a) => a.allowed)).toEqual([...Array(10).fill(true), false, false]);
    expect(answers.slice(0, 10).map((a) => a.remaining)).toEqual([9, 8, 7, 6, 5, 4, 3, 2, 1, 0]);
    expect(answers[0]).toMatchObject({ limit: 10, resetSeconds: 30 }); // until the window ends
    // Nothing left: Reset and Retry-After say when the next request fits (boundary + 10% of the next window).
    expect(answers[9]!.resetSeconds).toBe(36);
    expect(answers[10]).toMatchObject({ allowed: false, remaining: 0, retryAfterSeconds: 36, resetSeconds: 36 });
    await limiter.sync();
    expect(store.total('p', 1000, MIN)).toBe(10); // refused requests are not counted
    // Another project has its own budget.
    expect(await decided(limiter.consume('q'))).toMatchObject({ allowed: true, remaining: 9 });
    await limiter.stop();
  });

  test('the budget comes back as the window slides, and fully after two windows', async () => {
    const clock = new Clock(at(1000, 0));
    const store = new MemoryStore();
    const limiter = new RateLimiter(store, { limit: 10, windowMs: MIN, now: clock.now });
    for (let i = 0; i < 10; i++) await decided(limiter.consume('p'));
    expect((await decided(limiter.consume('p'))).allowed).toBe(false);
    clock.ms = at(1001, 0.5); // previous window weighs 5
    const half: boolean[] = [];
    for (let i = 0; i < 7; i++) half.push((await decided(limiter.consume('p'))).allowed);
    expect(half).toEqual([true, true, true, true, true, false, false]);
    clock.ms = at(1003, 0); // two windows later nothing counts
    expect(await decided(limiter.consume('p'))).toMatchObject({ allowed: true, remaining: 9 });
    await limiter.stop();
  });

  test('past its local allowance a process waits for a sync instead of guessing', async () => {
    const clock = new Clock(at(1000, 0.1));
    const store = new MemoryStore();
    const limiter = new RateLimiter(store, { limit: 20, windowMs: 5_000, now: clock.now });
    expect(limiter.allowance).toBe(1);
    const first = limiter.consume('p');
    expect(first).not.toBeInstanceOf(Promise); // within the allowance: answered at once
    const second = limiter.consume('p');
    expect(second).toBeInstanceOf(Promise);
    expect(store.total('p', windowIndex(clock.ms, 5_000), 5_000)).toBe(0);
    expect(await second).toMatchObject({ allowed: true, remaining: 18 });
    expect(store.total('p', windowIndex(clock.ms, 5_000), 5_000)).toBe(1); // the first one was shared before
    await limiter.stop();
    expect(store.total('p', windowIndex(clock.ms, 5_000), 5_000)).toBe(2); // stop writes what is left
  });

  test.each([
    // processes, limit, window, seed
    [2, 20, 5_000, 1],
    [3, 20, 5_000, 2],
    [3, 1000, MIN, 3],
    [4, 100, MIN, 4],
    [2, 7, 1_000, 5],
  ])('%d processes sharing a budget of %d per %d ms stay within processes x allowance of it (seed %d)', async (n, limit, windowMs, seed) => {
    const rnd = prng(seed);
    const clock = new Clock(at(5000, 0.01, windowMs));
    const store = new MemoryStore();
    const limiters = Array.from({ length: n }, () => new RateLimiter(store, { limit, windowMs, now: clock.now }));
    const allowance = limiters[0]!.allowance;
    let admitted = 0;
    let refused = 0;
    // Concurrent bursts: every request of a burst is issued before any sync of it completes.
    for (let burst = 0; burst < 40; burst++) {
      const requests: Promise<RateLimitDecision>[] = [];
      const size = 1 + Math.floor(rnd() * limit * 0.3);
      for (let i = 0; i < size; i++) requests.push(decided(limiters[Math.floor(rnd() * n)]!.consume('p')));
      if (rnd() < 0.3) await Promise.all(limiters.map((l) => l.sync())); // a timer sync somewhere in between
      for (const d of await Promise.all(requests)) {
        if (d.allowed) admitted++;
        else refused++;
      }
    }
    for (const l of limiters) await l.stop();
    expect(refused).toBeGreaterThan(0);
    // A refusal means the shared count had reached the limit; admissions stop within the tolerance.
    expect(admitted).toBeGreaterThanOrEqual(limit);
    expect(admitted).toBeLessThanOrEqual(limit + n * allowance);
    expect(store.total('p', 5000, windowMs)).toBe(admitted);
  });

  test('a process starting late learns the previous window from the store before it admits past its allowance', async () => {
    const clock = new Clock(at(1000, 0.2));
    const store = new MemoryStore();
    const a = new RateLimiter(store, { limit: 10, windowMs: MIN, now: clock.now });
    for (let i = 0; i < 10; i++) await decided(a.consume('p'));
    await a.stop();
    clock.ms = at(1001, 0.1); // the previous window still weighs 9 of 10
    const b = new RateLimiter(store, { limit: 10, windowMs: MIN, now: clock.now });
    const answers = await Promise.all(Array.from({ length: 5 }, () => decided(b.consume('p'))));
    // One request within b's allowance of 1, then it knows: 9 + 1 = 10, full.
    expect(answers.filter((d) => d.allowed)).toHaveLength(1);
    await b.stop();
  });

  test('fails open: a failing store never fails a request, the process limits on its own counts, and syncs them later', async () => {
    const clock = new Clock(at(1000, 0.1));
    const store = new MemoryStore();
    store.failing = true;
    const limiter = new RateLimiter(store, { limit: 5, windowMs: 5_000, now: clock.now });
    const answers = await Promise.all(Array.from({ length: 8 }, () => decided(limiter.consume('p'))));
    expect(answers.map((d) => d.allowed)).toEqual([true, true, true, true, true, false, false, false]);
    store.failing = false;
    await limiter.sync();
    expect(store.total('p', windowIndex(clock.ms, 5_000), 5_000)).toBe(5);
    await limiter.stop();
  });

  test('old windows are deleted periodically, keeping the previous window and at least five minutes', async () => {
    jest.useFakeTimers({ now: at(1000, 0.5), doNotFake: ['setImmediate', 'nextTick', 'queueMicrotask'] });
    try {
      const store = new MemoryStore();
      const started = Date.now();
      const limiter = new RateLimiter(store, { limit: 10, windowMs: 5_000, cleanupIntervalMs: 60_000 });
      limiter.start();
      jest.advanceTimersByTime(59_000);
      expect(store.deletedBefore).toEqual([]);
      jest.advanceTimersByTime(1_500);
      expect(store.deletedBefore).toEqual([started + 60_000 - 5 * 60_000]); // by the tick at 60 s
      await limiter.stop();
      const long = new RateLimiter(store, { limit: 10, windowMs: 10 * 60_000 });
      await long.deleteOldWindows(1_000_000_000);
      expect(store.deletedBefore.at(-1)).toBe(1_000_000_000 - 20 * 60_000); // two windows when longer
      await long.stop();
    } finally {
      jest.useRealTimers();
    }
  });
});
