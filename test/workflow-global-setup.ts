import { resolveTemporalTestServer, TEMPORAL_TEST_SERVER_HELP } from '../scripts/services/temporal-test-server';

/**
 * The workflow tier's global setup: finds (or fetches once, with Maven) the time-skipping Temporal test server and
 * hands its path to the test files as TEMPORAL_TEST_SERVER_PATH. Without one, the tests that need it are skipped.
 */
export default function globalSetup(): void {
  const log = (msg: string) => process.stdout.write(`[workflow tier] ${msg}\n`);
  const started = Date.now();
  const server = resolveTemporalTestServer(log);
  if (server) {
    process.env.TEMPORAL_TEST_SERVER_PATH = server;
    if (Date.now() - started > 1_000) log(`Temporal test server ready in ${((Date.now() - started) / 1000).toFixed(1)} s: ${server}`);
  } else {
    log(`No time-skipping Temporal test server: the tests that need one are skipped; to run them, ${TEMPORAL_TEST_SERVER_HELP}.`);
  }
}
