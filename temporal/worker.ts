import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { NativeConnection, Worker, Runtime, makeTelemetryFilterString } from '@temporalio/worker';
import { config } from '../domain/config';
import { initOrm } from '../domain/orm';
import { logger } from '../domain/logger';
import { createSmtpTransport } from '../domain/mail/transport';
import { createSmtpPipelinePool } from '../domain/mail/smtp-pipeline';
import { createActivities } from './activities';
import { createRenderPool } from '../domain/campaigns/render-pool';
import { createMjmlThread } from '../domain/rendering/mjml-thread';
import { compileMjmlWith } from '../domain/rendering/render';
import { TemporalGateway } from './client';
import { campaignShareQueue } from './definitions';
import { buildRegistry } from '../domain/registry';
import { EventDispatcher, DEFAULT_RETRY } from '../domain/events/event-dispatcher';
import { enableProcessMetrics, sampleOutboxRows } from '../domain/metrics';
import { databaseCheck, type HealthCheck } from '../domain/health';
import { startMetricsServer } from '../api/metrics-server';
import { temporalConnectionOptions } from './connection';

/**
 * Bundles the workflow code in a short-lived child process and returns the file: webpack's memory is the child's and
 * goes with it, instead of staying in the worker's heap. The child runs the same kind of file with the same Node flags:
 * bundle-workflows.ts through tsx, or bundle-workflows.js beside a compiled worker (scripts/build.ts).
 */
async function bundleWorkflowsInChild(): Promise<string> {
  const out = path.join(os.tmpdir(), `mailwright-workflows-${process.pid}-${Date.now()}.js`);
  await promisify(execFile)(process.execPath, [...process.execArgv, path.join(__dirname, `bundle-workflows${path.extname(__filename)}`), out]);
  return out;
}

/** Builds a worker for the configured task queue with the real activities. */
export async function createWorker() {
  const cfg = config();
  Runtime.install({
    logger: {
      log: (level, message, meta) => logger[level === 'WARN' ? 'warn' : level === 'ERROR' ? 'error' : level === 'DEBUG' || level === 'TRACE' ? 'debug' : 'info']({ ...meta }, message),
      trace: (m, meta) => logger.trace(meta ?? {}, m),
      debug: (m, meta) => logger.debug(meta ?? {}, m),
      info: (m, meta) => logger.info(meta ?? {}, m),
      warn: (m, meta) => logger.warn(meta ?? {}, m),
      error: (m, meta) => logger.error(meta ?? {}, m),
    },
    telemetryOptions: { logging: { filter: makeTelemetryFilterString({ core: 'WARN' }), forward: {} } },
  });
  const bundle = await bundleWorkflowsInChild();
  const orm = await initOrm(cfg.database.url, cfg.database.poolMax);
  const transport = createSmtpTransport(cfg.smtp.url, cfg.smtp.poolSize);
  const campaignSmtp = createSmtpPipelinePool(cfg.smtp.url, cfg.smtp.poolSize);
  const renderPool = createRenderPool(cfg.campaigns.renderThreads, cfg.database.url);
  // MJML in a thread that ends when idle, so this process's main thread never holds MJML (mjml-thread.ts).
  const mjmlThread = createMjmlThread();
  compileMjmlWith(mjmlThread.compile);
  const connection = await NativeConnection.connect(temporalConnectionOptions(cfg.temporal));
  const gateway = await TemporalGateway.connect(cfg.temporal);
  const activities = createActivities({ orm, transport, campaignSmtp, config: cfg, renderPool, temporal: () => gateway });
  const worker = await Worker.create({
    connection,
    namespace: cfg.temporal.namespace,
    taskQueue: cfg.temporal.taskQueue,
    workflowBundle: { codePath: bundle },
    activities,
    maxConcurrentActivityTaskExecutions: 100,
    maxConcurrentWorkflowTaskExecutions: 100,
  });
  // Campaign shares on a queue of their own with a few slots per worker: a worker polls only while it holds fewer
  // than CAMPAIGN_SHARES_PER_WORKER, so the other shares go to the other workers that poll (README: Production).
  const shareWorker = await Worker.create({
    connection,
    namespace: cfg.temporal.namespace,
    taskQueue: campaignShareQueue(cfg.temporal.taskQueue),
    activities: { sendCampaignPartition: activities.sendCampaignPartition },
    maxConcurrentActivityTaskExecutions: cfg.campaigns.sharesPerWorker,
  });
  const close = async () => {
    transport.close();
    campaignSmtp.close();
    await renderPool.close();
    await mjmlThread.close();
    fs.rmSync(bundle, { force: true });
    await orm.close();
    await gateway.close();
    await connection.close();
  };
  const health: Record<string, HealthCheck> = {
    database: databaseCheck(orm),
    temporal: (timeoutMs) => gateway.ping(timeoutMs),
    // Polling its task queue; INITIALIZED before run(), STOPPING/DRAINING on shutdown, FAILED after a fatal error.
    worker: async () => {
      for (const w of [worker, shareWorker]) if (w.getState() !== 'RUNNING') throw new Error(`worker of ${w.options.taskQueue} state ${w.getState()}`);
    },
  };
  return { worker, shareWorker, close, health, connection };
}

/**
 * Runs both workers until SIGINT/SIGTERM (the SDK's handlers shut down every worker of the process and drain their
 * tasks). One that fails stops the other, so the process ends instead of half-serving.
 */
async function runWorkers(workers: Worker[]): Promise<void> {
  const runs = workers.map((w) => w.run());
  try {
    await Promise.all(runs);
  } catch (err) {
    for (const w of workers) if (w.getState() === 'RUNNING') w.shutdown();
    await Promise.allSettled(runs);
    throw err;
  }
}

/**
 * The worker's listener for GET /metrics and GET /health (WORKER_METRICS_PORT). A port already taken (a second worker
 * on the same host with the same settings) is logged, not fatal: the worker's work matters more than its metrics.
 */
async function startWorkerMetrics(health: Record<string, HealthCheck>, cfg = config()) {
  const { workerPort, host, token } = cfg.metrics;
  if (!workerPort) return undefined;
  try {
    return await startMetricsServer({ name: 'worker', host, port: workerPort, token, health });
  } catch (err) {
    logger.error({ err, host, port: workerPort }, 'worker metrics listener could not start (WORKER_METRICS_PORT); running without it');
    return undefined;
  }
}

/**
 * The event outbox's dispatcher for the consumers of the process registry. Once the worker exists, the automations
 * consumer starts runs over the worker's own connection, so they start eagerly on this worker (TemporalGateway
 * .overWorkerConnection); before that, over a connection of its own.
 */
function createEventDispatcher(workerConnection: () => NativeConnection | undefined, cfg = config()): EventDispatcher {
  const { outbox } = cfg.events;
  let eager: TemporalGateway | undefined;
  // The consumer's own client, connected at its first use (events flow before Temporal is needed).
  let gateway: Promise<TemporalGateway> | undefined;
  const automationControl = () => {
    const native = workerConnection();
    if (native) return Promise.resolve((eager ??= TemporalGateway.overWorkerConnection(native, cfg.temporal)));
    gateway ??= TemporalGateway.connect(cfg.temporal).catch((err: unknown) => {
      gateway = undefined;
      throw err;
    });
    return gateway;
  };
  return new EventDispatcher(cfg.database.url, buildRegistry(cfg, { automationControl, webhookControl: automationControl }).consumers.list(), {
    pollIntervalMs: outbox.pollIntervalMs,
    batchSize: outbox.batchSize,
    retry: { ...DEFAULT_RETRY, maxAttempts: outbox.maxAttempts },
  });
}

async function main() {
  // Events flow while the worker bundles its workflows.
  const started: { connection?: NativeConnection } = {};
  const dispatcher = createEventDispatcher(() => started.connection);
  await dispatcher.start();
  enableProcessMetrics();
  sampleOutboxRows(() => dispatcher.backlog());
  const { worker, shareWorker, close, health, connection } = await createWorker();
  started.connection = connection;
  const metrics = await startWorkerMetrics(health);
  const gateway = await TemporalGateway.connect(config().temporal);
  await gateway.ensureEmailSweeperSchedule();
  await gateway.ensureSegmentRecomputeSchedule(config().segments.recomputeSweepIntervalMs);
  await gateway.ensureReputationSchedule(config().reputation.checkIntervalMs);
  await gateway.ensureBounceMailboxSchedule(config().bounceMailbox?.pollMs);
  await gateway.close();
  logger.info({ taskQueue: config().temporal.taskQueue }, 'worker started');
  await runWorkers([worker, shareWorker]);
  await metrics?.close();
  await dispatcher.stop();
  await close();
  logger.info('worker stopped');
}

if (require.main === module) {
  main().catch((err) => {
    logger.fatal({ err }, 'worker failed');
    process.exit(1);
  });
}
