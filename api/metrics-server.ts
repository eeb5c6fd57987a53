import http from 'node:http';
import { createHash, timingSafeEqual } from 'node:crypto';
import { logger } from '../domain/logger';
import { metricsText } from '../domain/metrics';
import { runHealthChecks, type HealthCheck } from '../domain/health';

/** Whether an Authorization header carries `Bearer <token>` (always, when no token is configured). Constant time. */
export function metricsAuthorized(authorization: string | undefined, token: string | undefined): boolean {
  if (!token) return true;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? '');
  if (!m) return false;
  const digest = (v: string) => createHash('sha256').update(v).digest();
  return timingSafeEqual(digest(m[1]!), digest(token));
}

interface MetricsServerOptions {
  host: string;
  port: number;
  /** Bearer token that GET /metrics requires (METRICS_TOKEN); none: open (the listener is the protection). */
  token?: string;
  /** Serves GET /health with these checks too (the worker, which has no other HTTP server). */
  health?: Record<string, HealthCheck>;
  /** Names the listener in logs. */
  name: string;
}

/**
 * A small HTTP listener for Prometheus (and for the worker, its health): `GET /metrics` in the text format, `GET
 * /health` when checks are given; everything else 404. Separate from the API's Koa app, so a scrape never passes
 * through the API's middleware and its port can stay private. Resolves once listening; `close` stops it.
 */
export async function startMetricsServer(opts: MetricsServerOptions): Promise<{ server: http.Server; close: () => Promise<void> }> {
  const server = http.createServer((req, res) => {
    void (async () => {
      const path = (req.url ?? '/').split('?')[0];
      if (req.method !== 'GET' && req.method !== 'HEAD') {
        res.writeHead(405, { Allow: 'GET, HEAD' }).end();
        return;
      }
      if (path === '/metrics') {
        if (!metricsAuthorized(req.headers.authorization, opts.token)) {
          res.writeHead(401, { 'WWW-Authenticate': 'Bearer realm="metrics"', 'Content-Type': 'text/plain' }).end('A bearer token (METRICS_TOKEN) is required\n');
          return;
        }
        const { contentType, body } = await metricsText();
        res.writeHead(200, { 'Content-Type': contentType, 'Cache-Control': 'no-store' }).end(req.method === 'HEAD' ? undefined : body);
        return;
      }
      if (path === '/health' && opts.health) {
        const report = await runHealthChecks(opts.health);
        res.writeHead(report.status === 'ok' ? 200 : 503, { 'Content-Type': 'application/json', 'Cache-Control': 'no-store' });
        res.end(req.method === 'HEAD' ? undefined : JSON.stringify(report));
        return;
      }
      res.writeHead(404, { 'Content-Type': 'text/plain' }).end(`Not found; this port serves GET /metrics${opts.health ? ' and GET /health' : ''}\n`);
    })().catch((err: unknown) => {
      logger.error({ err, listener: opts.name }, 'metrics listener failed to answer');
      if (!res.headersSent) res.writeHead(500);
      res.end();
    });
  });
  server.keepAliveTimeout = 65_000; // longer than Prometheus' idle connections, so a scrape never meets a closed one
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  logger.info({ url: `http://${opts.host}:${opts.port}/metrics`, listener: opts.name }, 'metrics listening');
  return {
    server,
    close: async () => {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      await closed;
    },
  };
}
