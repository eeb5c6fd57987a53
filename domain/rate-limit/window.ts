/**
 * Window arithmetic of the per-project API rate limit: a sliding window approximated from two fixed windows.
 *
 * Time is cut into fixed windows of `windowMs` aligned to the epoch (so every process agrees on them). The usage at
 * `now` is the previous window's count weighted by the share of it still inside the sliding window, plus the current
 * window's count: `previous * (1 - elapsed / windowMs) + current`. A request is admitted while that estimate plus the
 * request stays within the limit. A plain fixed window would let a client spend its budget twice across a window
 * boundary (2x the limit in a few seconds); an exact sliding log would cost memory per request. Two counters per
 * project cost nothing and are off by at most the unevenness of traffic inside the previous window.
 */

export interface WindowPolicy {
  /** Requests per window. */
  limit: number;
  windowMs: number;
}

/** What a process knows about one project at one moment (its own unsynced requests included). */
export interface WindowCounts {
  /** Index of the current fixed window (`floor(now / windowMs)`). */
  window: number;
  /** Requests counted in the current window. */
  current: number;
  /** Requests counted in the previous window. */
  previous: number;
}

export const windowIndex = (nowMs: number, windowMs: number): number => Math.floor(nowMs / windowMs);

/** Share of the current fixed window already elapsed, in [0, 1). */
export function elapsedFraction(nowMs: number, window: number, windowMs: number): number {
  return Math.min(Math.max((nowMs - window * windowMs) / windowMs, 0), 1);
}

/** The sliding-window usage estimate. */
export function estimate(counts: WindowCounts, nowMs: number, windowMs: number): number {
  return counts.previous * (1 - elapsedFraction(nowMs, counts.window, windowMs)) + counts.current;
}

/** Whether one more request fits the budget. */
export function fits(counts: WindowCounts, nowMs: number, policy: WindowPolicy): boolean {
  return estimate(counts, nowMs, policy.windowMs) + 1 <= policy.limit + 1e-9;
}

/** Requests still available now (after the ones counted), rounded down. */
export function remaining(counts: WindowCounts, nowMs: number, policy: WindowPolicy): number {
  return Math.max(0, Math.floor(policy.limit - estimate(counts, nowMs, policy.windowMs) + 1e-9));
}

/**
 * Milliseconds from `now` until one more request fits, assuming no other request arrives meanwhile. 0 when it fits
 * now. Within the current window the previous window's weight decays; when the current window alone is full, the
 * wait runs into the next window, where the current count becomes the decaying previous one.
 */
export function msUntilNextFits(counts: WindowCounts, nowMs: number, policy: WindowPolicy): number {
  const { limit, windowMs } = policy;
  if (fits(counts, nowMs, policy)) return 0;
  const start = counts.window * windowMs;
  const room = limit - 1 - counts.current;
  if (room >= 0) {
    // previous * (1 - t / windowMs) <= room  <=>  t >= windowMs * (1 - room / previous); previous > 0 here.
    const at = start + windowMs * (1 - room / counts.previous);
    return Math.max(0, Math.ceil(at - nowMs));
  }
  // In the next window: current * (1 - t / windowMs) <= limit - 1.
  const at = start + windowMs + windowMs * (1 - (limit - 1) / counts.current);
  return Math.max(0, Math.ceil(at - nowMs));
}

/** Milliseconds until the current fixed window ends: then the previous window's requests stop counting at all. */
export function msUntilWindowEnds(counts: WindowCounts, nowMs: number, windowMs: number): number {
  return Math.max(0, (counts.window + 1) * windowMs - nowMs);
}

/**
 * Requests a process may admit before its counts are written to Postgres and the others' are read back. Every
 * process can overshoot the shared budget by at most this much, so the whole deployment by at most
 * `processes * allowance`: the traffic the limit allows during one sync interval, at least one request.
 */
export function localAllowance(policy: WindowPolicy, syncIntervalMs: number): number {
  return Math.max(1, Math.ceil((policy.limit * syncIntervalMs) / policy.windowMs - 1e-9));
}

/** Whole seconds for a header: rounded up, so a client that waits that long is not refused again for rounding. */
export const toHeaderSeconds = (ms: number, min = 0): number => Math.max(min, Math.ceil(ms / 1000));
