// `npm run inbound`: the inbound SMTP server (README › Inbound mail), its own process beside the API and the worker.
import { config } from '../domain/config';
import { initOrm } from '../domain/orm';
import { logger } from '../domain/logger';
import { sql } from '../domain/db/sql';
import { enableProcessMetrics } from '../domain/metrics';
import { databaseCheck } from '../domain/health';
import { startInboundReceiver, type InboundReceiver } from '../domain/inbound/receiver';
import { pendingInbound, purgeInboundBytes } from '../domain/inbound/inbound.repository';
import { startInboundProcessing } from '../domain/inbound/inbound-start';
import { TemporalGateway } from '../temporal/client';
import { ProjectBatcher } from '../domain/project-batcher';
import { startMetricsServer } from './metrics-server';

/**
 * Messages per `inbound-mail` workflow, and how long the first of a batch waits for others. Nothing in inbound mail is
 * urgent to a quarter of a second, and a workflow costs Temporal and the worker more than the messages it applies
 * (BENCHMARKS.md › Inbound mail): under a flood, a batch fills before it times out.
 */
const BATCH_MAX = 200;
const BATCH_WAIT_MS = 250;
/** How often stored messages whose processing never started (Temporal away) are started, and old bytes dropped. */
const SWEEP_INTERVAL_MS = 30_000;
/** A message started this long ago and still RECEIVED is started again (its run was terminated, or never took). */
const RESTART_AFTER_MS = 15 * 60_000;

/** Starts the inbound server and its sweeper; resolves with the port and a function that stops both. */
export async function startInbound(): Promise<{ receiver: InboundReceiver; stop: () => Promise<void> }> {
  const cfg = config();
  const orm = await initOrm(cfg.database.url, 10);
  const db = sql(orm.em);
  const temporal = await TemporalGateway.connect(cfg.temporal);
  const start = async (ids: string[]) => {
    await startInboundProcessing(temporal, db, ids);
  };
  // The messages stored within BATCH_WAIT_MS of each other go to one workflow (a start and a workflow per message cost
  // Temporal and the worker more than the processing itself).
  const batcher = new ProjectBatcher<string>((_key, ids) => start(ids), { maxBatch: BATCH_MAX, maxWaitMs: BATCH_WAIT_MS });
  const receiver = await startInboundReceiver({ config: cfg, db, onStored: (id) => batcher.add('inbound', [id]) });
  const sweep = async () => {
    try {
      for (;;) {
        const ids = await pendingInbound(db, RESTART_AFTER_MS, BATCH_MAX);
        if (ids.length) await start(ids);
        if (ids.length < BATCH_MAX) break;
      }
      await purgeInboundBytes(db, cfg.inbound.retentionMs);
    } catch (err) {
      logger.warn({ err }, 'inbound sweep failed; retrying at the next one');
    }
  };
  void sweep();
  const timer = setInterval(() => void sweep(), SWEEP_INTERVAL_MS);
  timer.unref();
  const metrics = cfg.metrics.inboundPort
    ? await startMetricsServer({ name: 'inbound', host: cfg.metrics.host, port: cfg.metrics.inboundPort, token: cfg.metrics.token, health: { database: databaseCheck(orm) } }).catch((err: unknown) => {
        logger.error({ err, port: cfg.metrics.inboundPort }, 'inbound metrics listener could not start (INBOUND_METRICS_PORT); running without it');
        return undefined;
      })
    : undefined;
  logger.info({ host: cfg.inbound.host, port: receiver.port, mxHost: cfg.inbound.mxHost }, 'inbound SMTP server started');
  return {
    receiver,
    stop: async () => {
      clearInterval(timer);
      await receiver.close();
      await metrics?.close();
      await temporal.close();
      await orm.close();
    },
  };
}

if (require.main === module) {
  enableProcessMetrics();
  startInbound()
    .then(({ stop }) => {
      const shutdown = () => void stop().then(() => process.exit(0));
      process.on('SIGINT', shutdown);
      process.on('SIGTERM', shutdown);
    })
    .catch((err: unknown) => {
      logger.fatal({ err }, 'inbound server failed');
      process.exit(1);
    });
}
