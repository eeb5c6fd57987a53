import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startRehearsal } from '../scripts/rehearsal/stack';
import type { TestStackEnv } from './stack-env';
import { startSmtpCapture } from './support/smtp-capture';
import { startDnsServer } from './support/dns-server';
import { startControlServer } from './support/control-server';
import { TEST_SERVICE_SETTINGS, TEST_SYSTEM_EMAIL_FROM } from './stack-settings';

/**
 * The rehearsal tier (`npm run test:rehearsal`): the production rehearsal (`npm run rehearsal`: the real Temporal
 * server on Postgres, docker-compose.yml's jobs, two APIs behind a balancer, two workers, NODE_ENV=production) instead
 * of the development stack, with the test SMTP capture as the relay and the loopback DNS server; the stack tests of
 * jest.config.js's list then run against it through the same TestStackEnv.
 */
export default async function globalSetup(): Promise<void> {
  const started = Date.now();
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'mailwright-rehearsal-test-'));
  const log = (msg: string) => process.stdout.write(`[rehearsal tier] ${msg}\n`);
  const capture = await startSmtpCapture();
  const dns = await startDnsServer();
  const stopHelpers = async () => {
    await capture.stop();
    await dns.stop();
  };
  let rehearsal;
  try {
    rehearsal = await startRehearsal({
      dataDir,
      log,
      // What an operator puts in compose's .env; the rest of each service's environment is docker-compose.yml's.
      vars: {
        SMTP_URL: capture.smtpUrl,
        DNS_SERVERS: dns.server,
        LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'warn',
        SYSTEM_EMAIL_FROM: TEST_SYSTEM_EMAIL_FROM,
      },
      extraEnv: TEST_SERVICE_SETTINGS,
      // Web UI is for people; the tests do not use it.
      ui: false,
    });
  } catch (err) {
    await stopHelpers();
    throw err;
  }
  const r = rehearsal;
  // Crash tests kill the first worker (the second keeps polling) or the first API (the balancer skips it meanwhile);
  // the fault tests of test/rehearsal also stop Postgres for 8 s (`/restart-postgres`).
  const control = await startControlServer({
    '/restart': () => r.restart('worker-1'),
    '/restart-api': () => r.restart('api-1'),
    '/restart-postgres': () => r.restartPostgres(8_000),
  });
  globalThis.__MAILWRIGHT_STACK__ = {
    async stop() {
      await control.stop();
      await r.stop();
      await stopHelpers();
      log(`connections per API through the balancer: ${r.balancerCounts().join(', ')}`);
      if (!process.env.KEEP_TEST_DATA) fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
  const stack: TestStackEnv = {
    apiUrl: r.apiUrl,
    databaseUrl: r.databaseUrl,
    temporalAddress: r.temporalAddress,
    mailboxUrl: capture.httpUrl,
    dnsServer: dns.server,
    dnsControlUrl: dns.controlUrl,
    workerControlUrl: control.url,
    workerMetricsUrl: r.workerMetricsUrls[0]!,
    inboundSmtpPort: r.inboundSmtpPort,
    inboundMetricsUrl: r.inboundMetricsUrl,
    dataDir,
  };
  process.env.MAILWRIGHT_TEST_STACK = JSON.stringify(stack);
  log(`ready in ${((Date.now() - started) / 1000).toFixed(1)} s (logs in ${dataDir})`);
}
