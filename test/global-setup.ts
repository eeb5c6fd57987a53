import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startInfrastructure, startTsProcess, waitForHttp, waitForWorker } from '../scripts/services/stack';
import { freePort, waitForPort, type ManagedProcess } from '../scripts/services/process';
import type { TestStackEnv } from './stack-env';
import { startSmtpCapture } from './support/smtp-capture';
import { startDnsServer } from './support/dns-server';
import { startControlServer } from './support/control-server';
import { resolveStripeMockBinary } from '../scripts/services/stripe-mock';
import { TEST_SERVICE_SETTINGS, TEST_SYSTEM_EMAIL_FROM } from './stack-settings';

declare global {
  var __MAILWRIGHT_STACK__: { stop(): Promise<void> } | undefined;
}

/**
 * Starts the real stack once for the whole run: Postgres, the Temporal dev server, an SMTP capture server, then the
 * API and the worker as separate processes, compiled, as `npm run serve:api` and `npm run serve:worker` run in production.
 */
export default async function globalSetup(): Promise<void> {
  const started = Date.now();
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'mailwright-test-'));
  fs.chmodSync(dataDir, 0o755); // Postgres runs as the postgres user when we are root; it must reach its folder
  const log = (msg: string) => process.stdout.write(`[test stack] ${msg}\n`);
  // Built here, once per machine, rather than in billing.test.ts's set-up: a first build downloads Go modules, which
  // must not count against a test's time limit.
  resolveStripeMockBinary(log);
  const [pgPort, temporalPort] = await Promise.all([freePort(), freePort()]);
  const capture = await startSmtpCapture();
  const dns = await startDnsServer();
  const infra = await startInfrastructure(
    { dataDir, persistent: false, ports: { postgres: pgPort, temporal: temporalPort, smtp: 0, mailboxWeb: 0 }, log },
    { SMTP_URL: capture.smtpUrl },
  );
  // Chosen once the Temporal dev server has taken the free ports its internal services use.
  const [apiPort, workerMetricsPort, inboundPort, inboundMetricsPort] = await Promise.all([freePort(), freePort(), freePort(), freePort()]);
  const env = {
    ...infra.env,
    NODE_ENV: 'test',
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'warn',
    PORT: String(apiPort),
    // Links in mail (tracking, unsubscribe) point at the API; tests follow them.
    PUBLIC_URL: `http://127.0.0.1:${apiPort}`,
    TEMPORAL_TASK_QUEUE: 'mailwright',
    // Sender domains: the loopback DNS server.
    DNS_SERVERS: dns.server,
    ...TEST_SERVICE_SETTINGS,
    // The worker sends account emails from this sender.
    SYSTEM_EMAIL_FROM: TEST_SYSTEM_EMAIL_FROM,
    // Uploaded images on local disk in the stack's folder (uploads-s3.test.ts starts an API of its own on S3).
    UPLOADS_DIR: path.join(dataDir, 'uploads'),
    // The worker's GET /metrics and GET /health (metrics.test.ts); the API serves its own on PORT.
    WORKER_METRICS_PORT: String(workerMetricsPort),
    // The inbound SMTP server (inbound-mail.test.ts delivers bounces, reports and replies to it over SMTP).
    INBOUND_SMTP_PORT: String(inboundPort),
    INBOUND_METRICS_PORT: String(inboundMetricsPort),
  };
  const startWorker = () => startTsProcess('worker', 'temporal/worker.ts', env, { logFile: path.join(dataDir, 'worker.log') });
  const startApi = () => startTsProcess('api', 'api/server.ts', env, { logFile: path.join(dataDir, 'api.log') });
  const startInbound = () => startTsProcess('inbound', 'api/inbound.ts', env, { logFile: path.join(dataDir, 'inbound.log') });
  const children: ManagedProcess[] = [startApi(), startWorker(), startInbound()];
  // Control for crash tests: `POST <workerControlUrl>/restart` kills the worker (SIGKILL, like a crash: no draining)
  // and starts a new one, answering once the new process is spawned; `POST <workerControlUrl>/restart-api` does the
  // same to the API and answers once the new one serves HTTP. Loopback only.
  const crash = async (which: 0 | 1) => {
    const child = children[which]!;
    child.child.kill('SIGKILL');
    await child.exited;
    if (which === 1) children[1] = startWorker();
    else {
      children[0] = startApi();
      await waitForHttp(`http://127.0.0.1:${apiPort}`, 60_000);
    }
  };
  const control = await startControlServer({ '/restart': () => crash(1), '/restart-api': () => crash(0) });
  const stop = async () => {
    await control.stop();
    await Promise.all(children.map((c) => c.stop()));
    await infra.stop();
    await capture.stop();
    await dns.stop();
    if (!process.env.KEEP_TEST_DATA) fs.rmSync(dataDir, { recursive: true, force: true });
  };
  globalThis.__MAILWRIGHT_STACK__ = { stop };
  try {
    await waitForHttp(`http://127.0.0.1:${apiPort}`, 90_000);
    await waitForWorker(infra.env.TEMPORAL_ADDRESS!, 'mailwright', 120_000);
    await waitForPort('127.0.0.1', inboundPort, 60_000, 'the inbound SMTP server');
  } catch (err) {
    log(`stack failed to start; logs in ${dataDir}`);
    await stop();
    throw err;
  }
  const stack: TestStackEnv = {
    apiUrl: `http://127.0.0.1:${apiPort}`,
    databaseUrl: infra.env.DATABASE_URL!,
    temporalAddress: infra.env.TEMPORAL_ADDRESS!,
    mailboxUrl: capture.httpUrl,
    dnsServer: dns.server,
    dnsControlUrl: dns.controlUrl,
    workerControlUrl: control.url,
    workerMetricsUrl: `http://127.0.0.1:${workerMetricsPort}`,
    inboundSmtpPort: inboundPort,
    inboundMetricsUrl: `http://127.0.0.1:${inboundMetricsPort}`,
    dataDir,
  };
  process.env.MAILWRIGHT_TEST_STACK = JSON.stringify(stack);
  log(`ready in ${((Date.now() - started) / 1000).toFixed(1)} s (logs in ${dataDir})`);
}
