import http from 'node:http';
import { config } from '../domain/config';
import { initOrm } from '../domain/orm';
import { logger } from '../domain/logger';
import { TemporalGateway, MAX_DELIVERY_BATCH } from '../temporal/client';
import { workflowIds } from '../temporal/definitions';
import { EmailIntake } from '../domain/emails/email-intake';
import { ContactIntake } from '../domain/contacts/contact-intake';
import { createApp } from './app';
import { ChangeFeed } from '../domain/cache/change-feed';
import { createKeyLookupCache } from '../domain/projects/project.service';
import { createDomainStatusCache } from '../domain/domains/domain.service';
import { createTemplateCache } from '../domain/templates/template.service';
import { RateLimiter } from '../domain/rate-limit/rate-limiter';
import { PgRateLimitStore } from '../domain/rate-limit/rate-limit.store';
import { buildRegistry } from '../domain/registry';
import { enableProcessMetrics } from '../domain/metrics';
import { databaseCheck } from '../domain/health';
import { startMetricsServer } from './metrics-server';
import { createBillingCache } from '../domain/billing/billing.service';

/** Starts the HTTP API; resolves with a function that stops it gracefully. */
export async function startApi(): Promise<{ server: http.Server; stop: () => Promise<void> }> {
  const cfg = config();
  buildRegistry(cfg);
  const orm = await initOrm(cfg.database.url, cfg.database.poolMax);
  const temporal = await TemporalGateway.connect(cfg.temporal);
  const feed = new ChangeFeed(cfg.database.url);
  await feed.start();
  const intake = new EmailIntake(
    orm,
    { workflowIdFor: workflowIds.emailDelivery, start: (batch) => temporal.startEmailDelivery(batch) },
    { maxBatch: MAX_DELIVERY_BATCH, maxWaitMs: 40 },
  );
  const contactIntake = new ContactIntake(orm, { maxBatch: 100, maxWaitMs: 2 });
  const rateLimiter = cfg.rateLimit.limit > 0 ? new RateLimiter(new PgRateLimitStore(cfg.database.url), cfg.rateLimit) : undefined;
  rateLimiter?.start();
  const app = createApp({
    config: cfg,
    orm,
    temporal,
    intake,
    contactIntake,
    caches: { keys: createKeyLookupCache(feed), domains: createDomainStatusCache(feed), templates: createTemplateCache(feed), billing: createBillingCache(feed) },
    rateLimiter,
  });
  const server = http.createServer(app.callback());
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve) => server.listen(cfg.port, cfg.host, resolve));
  logger.info({ url: `http://${cfg.host}:${cfg.port}` }, 'api listening');
  enableProcessMetrics();
  const { metrics } = cfg;
  const metricsServer = metrics.apiPort
    ? await startMetricsServer({
        name: 'api',
        host: metrics.host,
        port: metrics.apiPort,
        token: metrics.token,
        health: { database: databaseCheck(orm), temporal: (timeoutMs) => temporal.ping(timeoutMs) },
      })
    : undefined;
  if (metrics.unservedInProduction) {
    logger.warn('GET /metrics is not served: in production the API port serves it only with METRICS_TOKEN set; or set METRICS_PORT for a listener of its own');
  }
  return {
    server,
    stop: async () => {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      const force = setTimeout(() => server.closeAllConnections(), 5_000);
      await closed;
      clearTimeout(force);
      await metricsServer?.close();
      intake.flushAll();
      contactIntake.flushAll();
      await rateLimiter?.stop();
      await feed.close();
      await temporal.close();
      await orm.close();
    },
  };
}

if (require.main === module) {
  startApi()
    .then(({ stop }) => {
      const shutdown = (signal: string) => {
        logger.info({ signal }, 'api stopping');
        stop().then(
          () => process.exit(0),
          (err) => {
            logger.error({ err }, 'api stop failed');
            process.exit(1);
          },
        );
      };
      process.once('SIGINT', () => shutdown('SIGINT'));
      process.once('SIGTERM', () => shutdown('SIGTERM'));
    })
    .catch((err) => {
      logger.fatal({ err }, 'api failed to start');
      process.exit(1);
    });
}
