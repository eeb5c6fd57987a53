import type { MikroORM } from '@mikro-orm/postgresql';
import { logger } from './logger';
import { sql } from './db/sql';

/** How long one dependency may take to answer its check before it counts as down. */
const HEALTH_CHECK_TIMEOUT_MS = 2_000;

interface CheckResult {
  ok: boolean;
  latencyMs: number;
  /** Why the check failed, without internals (host names, addresses): those go to the log. */
  error?: string;
}

interface HealthReport<K extends string> {
  status: 'ok' | 'unavailable';
  checks: Record<K, CheckResult>;
}

/** A dependency check: resolves when the dependency answered, throws (or takes too long) when it is down. */
export type HealthCheck = (timeoutMs: number) => Promise<unknown>;

class CheckTimeout extends Error {}

/**
 * Runs the checks in parallel, each bounded by HEALTH_CHECK_TIMEOUT_MS; `unavailable` when any failed. The error
 * says whether the check timed out or failed (with a Node error code such as ECONNREFUSED when there is one).
 */
export async function runHealthChecks<K extends string>(checks: Record<K, HealthCheck>, timeoutMs = HEALTH_CHECK_TIMEOUT_MS): Promise<HealthReport<K>> {
  const entries = await Promise.all(
    (Object.entries(checks) as [K, HealthCheck][]).map(async ([name, check]): Promise<[K, CheckResult]> => {
      const started = performance.now();
      let timer: NodeJS.Timeout | undefined;
      try {
        const timeout = new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new CheckTimeout()), timeoutMs);
        });
        await Promise.race([check(timeoutMs), timeout]);
        return [name, { ok: true, latencyMs: Math.round(performance.now() - started) }];
      } catch (err) {
        const latencyMs = Math.round(performance.now() - started);
        if (err instanceof CheckTimeout) return [name, { ok: false, latencyMs, error: `no answer within ${timeoutMs} ms` }];
        logger.warn({ err, check: name }, 'health check failed');
        const code = (err as { code?: unknown }).code;
        return [name, { ok: false, latencyMs, error: typeof code === 'string' && /^[A-Z][A-Z0-9_]{1,40}$/.test(code) ? `failed (${code})` : 'failed' }];
      } finally {
        clearTimeout(timer);
      }
    }),
  );
  const results = Object.fromEntries(entries) as Record<K, CheckResult>;
  return { status: entries.every(([, r]) => r.ok) ? 'ok' : 'unavailable', checks: results };
}

/** Postgres answers `select 1` through the ORM's pool (so an exhausted pool shows too). */
export function databaseCheck(orm: MikroORM): HealthCheck {
  return () => sql(orm.em.fork()).run('select 1');
}
