import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { createApp, buildRoutes } from '../../api/app';
import { openApiDocument } from '../../api/system/routes';
import type { ApiDeps, AppContext } from '../../api/context';
import { enforceRateLimit } from '../../api/middleware/rate-limit';
import { startMetricsServer } from '../../api/metrics-server';
import { loadConfig } from '../../domain/config';
import { runHealthChecks } from '../../domain/health';
import { httpRequests, rateLimitRefusals, smtpErrorReason } from '../../domain/metrics';
import type { RateLimiter } from '../../domain/rate-limit/rate-limiter';

/** The API built from its configuration alone (no services): enough for routes that touch none. */
function appDeps(env: Record<string, string> = {}): ApiDeps {
  return { config: loadConfig({ DATABASE_URL: 'postgres://unused/metrics', NODE_ENV: 'test', ...env }) } as ApiDeps;
}

async function serve(deps: ApiDeps): Promise<{ url: string; close: () => Promise<void> }> {
  const server = http.createServer(createApp(deps).callback());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

const routeValues = async () => new Set((await httpRequests.get()).values.map((v) => String(v.labels.route)));

describe('HTTP request metrics', () => {
  test('the route label is the matched route template; paths no route serves share the one value `unmatched` (bounded cardinality)', async () => {
    const app = await serve(appDeps());
    try {
      for (let i = 0; i < 3; i++) expect((await fetch(`${app.url}/config`)).status).toBe(200);
      const before = (await httpRequests.get()).values.length;
      const unknown = Array.from({ length: 5 }, () => `/no-such-route-${randomUUID()}/${randomUUID()}`);
      for (const p of unknown) expect((await fetch(`${app.url}${p}`)).status).toBe(404);
      // A made-up method neither adds a series of its own.
      expect((await fetch(`${app.url}/config`, { method: 'PROPPATCH' })).status).toBe(405);

      const values = (await httpRequests.get()).values;
      const routes = await routeValues();
      expect(routes).toContain('/config');
      expect(routes).toContain('unmatched');
      expect([...routes].filter((r) => r.includes('no-such-route'))).toEqual([]);
      // Five distinct unknown paths: one new series (GET unmatched 404), and one for the made-up method (OTHER, 405).
      expect(values.length - before).toBeLessThanOrEqual(2);
      const unmatched404 = values.find((v) => v.labels.route === 'unmatched' && v.labels.status === '404' && v.labels.method === 'GET');
      expect(unmatched404?.value).toBeGreaterThanOrEqual(5);
      expect(values.find((v) => v.labels.method === 'OTHER')?.labels).toEqual({ method: 'OTHER', route: 'unmatched', status: '405' });
      expect(values.find((v) => v.labels.route === '/config' && v.labels.status === '200')?.value).toBeGreaterThanOrEqual(3);
    } finally {
      await app.close();
    }
  });

  test('a route with parameters is labelled by its template, not by the values in the path', async () => {
    const app = await serve(appDeps());
    try {
      // GET /t/o/:token answers the pixel for any token (an invalid one too), without services.
      for (let i = 0; i < 3; i++) await fetch(`${app.url}/t/o/${randomUUID()}`);
      const routes = await routeValues();
      expect(routes).toContain('/t/o/:token');
      expect([...routes].filter((r) => /[0-9a-f]{8}-[0-9a-f]{4}/.test(r))).toEqual([]);
    } finally {
      await app.close();
    }
  });
});

describe('GET /metrics on the API port', () => {
  test('outside production without METRICS_TOKEN: served, in the Prometheus text format', async () => {
    const app = await serve(appDeps());
    try {
      const res = await fetch(`${app.url}/metrics`);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
      const text = await res.text();
      expect(text).toContain('# TYPE mailwright_http_requests_total counter');
      expect(text).toContain('# TYPE mailwright_workflow_starts_total counter');
    } finally {
      await app.close();
    }
  });

  test('with METRICS_TOKEN: 401 without the bearer token or with a wrong one, 200 with it', async () => {
    const token = 'metrics-token-0123456789';
    const app = await serve(appDeps({ METRICS_TOKEN: token }));
    try {
      const none = await fetch(`${app.url}/metrics`);
      expect(none.status).toBe(401);
      expect(((await none.json()) as { error: { code: string } }).error.code).toBe('UNAUTHORIZED');
      expect((await fetch(`${app.url}/metrics`, { headers: { authorization: 'Bearer wrong-token-0123456789' } })).status).toBe(401);
      expect((await fetch(`${app.url}/metrics`, { headers: { authorization: `Bearer ${token}` } })).status).toBe(200);
    } finally {
      await app.close();
    }
  });

  test('not served on the API port (nor documented) with METRICS_PORT set, or in production without a token', () => {
    const documented = (env: Record<string, string>) => {
      const deps = appDeps(env);
      return '/metrics' in (openApiDocument(buildRoutes(deps), deps) as { paths: Record<string, unknown> }).paths;
    };
    expect(documented({})).toBe(true);
    expect(documented({ METRICS_PORT: '9465' })).toBe(false);
    expect(documented({ METRICS_PORT: '0' })).toBe(false);
    const production = { NODE_ENV: 'production', JWT_SECRET: 'x'.repeat(32), APP_SECRET: 'y'.repeat(32), PUBLIC_URL: 'https://mail.example.com' };
    expect(documented(production)).toBe(false);
    expect(documented({ ...production, METRICS_TOKEN: 'metrics-token-0123456789' })).toBe(true);
    expect(appDeps(production).config.metrics.unservedInProduction).toBe(true);
  });

  test('WORKER_METRICS_PORT: 9464 by default; 0 or empty turns the worker listener off; empty metrics settings are unset', () => {
    expect(appDeps().config.metrics.workerPort).toBe(9464);
    expect(appDeps({ WORKER_METRICS_PORT: '0' }).config.metrics.workerPort).toBeUndefined();
    expect(appDeps({ WORKER_METRICS_PORT: '' }).config.metrics.workerPort).toBeUndefined();
    expect(appDeps().config.metrics.host).toBe('127.0.0.1');
    // Empty, as `${METRICS_TOKEN:-}` in a compose file gives it: unset.
    expect(appDeps({ METRICS_TOKEN: '', METRICS_HOST: '', METRICS_PORT: '' }).config.metrics).toMatchObject({ token: undefined, host: '127.0.0.1', apiPort: undefined, onApiPort: true });
  });
});

test('a 429 refusal is counted by route template', async () => {
  const limiter = {
    policy: { limit: 1, windowMs: 60_000 },
    consume: async () => ({ allowed: false, limit: 1, remaining: 0, resetSeconds: 30, retryAfterSeconds: 30 }),
  } as unknown as RateLimiter;
  const ctx = { set: () => undefined, _matchedRoute: '/contacts/:id' } as unknown as AppContext;
  const before = (await rateLimitRefusals.get()).values.find((v) => v.labels.route === '/contacts/:id')?.value ?? 0;
  await expect(enforceRateLimit(ctx, limiter, 'project')).rejects.toMatchObject({ code: 'RATE_LIMIT_EXCEEDED' });
  expect((await rateLimitRefusals.get()).values.find((v) => v.labels.route === '/contacts/:id')?.value).toBe(before + 1);
});

test.each([
  [{ responseCode: 550 }, '5xx'],
  [{ responseCode: 451 }, '4xx'],
  [{ code: 'ECONNECTION' }, 'ECONNECTION'],
  [{ code: 'ETIMEDOUT' }, 'ETIMEDOUT'],
  [{ code: 'user@example.com' }, 'other'],
  [new Error('boom'), 'other'],
])('SMTP failure %j has the reason label %s (a closed set)', (err, reason) => {
  expect(smtpErrorReason(err)).toBe(reason);
});

describe('health checks', () => {
  test('each dependency is reported; one that fails or does not answer in time makes the report unavailable, saying which', async () => {
    const report = await runHealthChecks(
      {
        up: async () => undefined,
        refused: async () => {
          throw Object.assign(new Error('connect ECONNREFUSED 10.0.0.5:5432'), { code: 'ECONNREFUSED' });
        },
        hanging: () => new Promise(() => undefined),
      },
      50,
    );
    expect(report).toEqual({
      status: 'unavailable',
      checks: {
        up: { ok: true, latencyMs: expect.any(Number) },
        refused: { ok: false, latencyMs: expect.any(Number), error: 'failed (ECONNREFUSED)' },
        hanging: { ok: false, latencyMs: expect.any(Number), error: 'no answer within 50 ms' },
      },
    });
    // Internals (addresses) stay in the log, out of the answer.
    expect(JSON.stringify(report)).not.toContain('10.0.0.5');
    expect((await runHealthChecks({ up: async () => undefined })).status).toBe('ok');
  });
});

describe('the separate metrics listener (METRICS_PORT, WORKER_METRICS_PORT)', () => {
  test('serves /metrics behind its token, /health with its checks (503 when one fails), and nothing else', async () => {
    const token = 'metrics-token-0123456789';
    let healthy = true;
    const listener = await startMetricsServer({
      name: 'test',
      host: '127.0.0.1',
      port: 0,
      token,
      health: {
        database: async () => {
          if (!healthy) throw new Error('down');
        },
      },
    });
    const url = `http://127.0.0.1:${(listener.server.address() as AddressInfo).port}`;
    try {
      expect((await fetch(`${url}/metrics`)).status).toBe(401);
      const metrics = await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${token}` } });
      expect(metrics.status).toBe(200);
      expect(await metrics.text()).toContain('mailwright_smtp_send_duration_seconds');
      const up = await fetch(`${url}/health`);
      expect(up.status).toBe(200);
      expect(await up.json()).toEqual({ status: 'ok', checks: { database: { ok: true, latencyMs: expect.any(Number) } } });
      healthy = false;
      const down = await fetch(`${url}/health`);
      expect(down.status).toBe(503);
      expect(await down.json()).toEqual({ status: 'unavailable', checks: { database: { ok: false, latencyMs: expect.any(Number), error: 'failed' } } });
      expect((await fetch(`${url}/other`)).status).toBe(404);
      expect((await fetch(`${url}/metrics`, { method: 'POST' })).status).toBe(405);
    } finally {
      await listener.close();
    }
  });
});
