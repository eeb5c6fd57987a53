/** What the global setup tells the test files (through the environment, which jest workers inherit). */
export interface TestStackEnv {
  apiUrl: string;
  databaseUrl: string;
  temporalAddress: string;
  mailboxUrl: string;
  /** The loopback DNS server (`127.0.0.1:<port>`) the API and worker use, and its control URL (test/support/dns-server.ts). */
  dnsServer: string;
  dnsControlUrl: string;
  /**
   * `POST <url>/restart` kills the worker process (SIGKILL) and starts a new one; `POST <url>/restart-api` does the
   * same to the API (test/global-setup.ts).
   */
  workerControlUrl: string;
  /** The worker's metrics listener (WORKER_METRICS_PORT): `GET /metrics`, `GET /health`. */
  workerMetricsUrl: string;
  /** The inbound SMTP server (api/inbound.ts) on 127.0.0.1, and its metrics listener (INBOUND_METRICS_PORT). */
  inboundSmtpPort: number;
  inboundMetricsUrl: string;
  dataDir: string;
}

export function stackEnv(): TestStackEnv {
  const raw = process.env.MAILWRIGHT_TEST_STACK;
  if (!raw) throw new Error('MAILWRIGHT_TEST_STACK is not set: run the tests with `npm test` (jest global setup starts the stack)');
  return JSON.parse(raw) as TestStackEnv;
}
