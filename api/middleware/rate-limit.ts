import type { AppContext } from '../context';
import { AppError } from '../../domain/errors';
import type { RateLimiter, RateLimitDecision } from '../../domain/rate-limit/rate-limiter';
import { rateLimitRefusals } from '../../domain/metrics';
import { routeLabel } from './metrics';

// The limiter is a long-lived dependency of the API process like the caches; declared here, next to its only user.
/**
 * RateLimit-* headers as in draft-ietf-httpapi-ratelimit-headers-06 (the separate-fields version clients parse
 * today): Limit and Remaining in requests, Reset in seconds (delta, not a timestamp, so client clocks do not
 * matter), Policy `<limit>;w=<window seconds>`.
 */
function rateLimitHeaders(d: RateLimitDecision, windowMs: number): Record<string, string> {
  return {
    'RateLimit-Limit': String(d.limit),
    'RateLimit-Remaining': String(d.remaining),
    'RateLimit-Reset': String(d.resetSeconds),
    'RateLimit-Policy': `${d.limit};w=${Math.round(windowMs / 1000)}`,
  };
}

const per = (windowMs: number) => (windowMs === 60_000 ? 'minute' : `${Math.round(windowMs / 1000)} seconds`);

/** Counts the request against its project's budget; 429 RATE_LIMIT_EXCEEDED with Retry-After when it is spent. */
export async function enforceRateLimit(ctx: AppContext, limiter: RateLimiter, projectId: string): Promise<void> {
  const d = await limiter.consume(projectId);
  const { windowMs } = limiter.policy;
  // Set before the handler runs, so every answer to the request carries them, errors included.
  ctx.set(rateLimitHeaders(d, windowMs));
  if (!d.allowed) {
    rateLimitRefusals.inc({ route: routeLabel(ctx) });
    throw new AppError(429, 'RATE_LIMIT_EXCEEDED', `Rate limit exceeded: this project may make ${d.limit} API requests per ${per(windowMs)}`, {
      suggestion: `Retry after ${d.retryAfterSeconds} s (the Retry-After header); RateLimit-Remaining on every response shows what is left. Batch work where the API allows it (up to 50 recipients per /v1/send call).`,
      headers: { 'Retry-After': String(d.retryAfterSeconds) },
    });
  }
}
