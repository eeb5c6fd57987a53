import path from 'node:path';
import { startTsProcess, waitForHttp } from '../../scripts/services/stack';
import { freePort, type ManagedProcess } from '../../scripts/services/process';
import { stackEnv } from '../stack-env';

/**
 * A second API process on the test stack's Postgres and Temporal, with settings of its own (a small rate-limit budget,
 * S3 storage, ...), answering once it serves HTTP. The caller stops it.
 */
export async function startExtraApi(name: string, env: Record<string, string>): Promise<{ url: string; process: ManagedProcess }> {
  const stack = stackEnv();
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const child = startTsProcess(
    name,
    'api/server.ts',
    {
      NODE_ENV: 'test',
      LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'warn',
      DATABASE_URL: stack.databaseUrl,
      TEMPORAL_ADDRESS: stack.temporalAddress,
      TEMPORAL_TASK_QUEUE: 'mailwright',
      DNS_SERVERS: stack.dnsServer,
      PORT: String(port),
      PUBLIC_URL: url,
      ...env,
    },
    { logFile: path.join(stack.dataDir, `${name}.log`) },
  );
  await waitForHttp(url, 90_000);
  return { url, process: child };
}
