import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { Pool } from 'pg';
import { startInfrastructure, startTsProcess, waitForHttp, waitForWorker } from '../scripts/services/stack';
import { freePort, waitForPort } from '../scripts/services/process';
import { campaignShareQueue } from '../temporal/definitions';
import { startRehearsalBenchStack } from './rehearsal-stack';

export interface BenchStackOptions {
  smtpUrl: string;
  apiNodeArgs?: string[];
  workerNodeArgs?: string[];
  workerEnv?: Record<string, string>;
  workers?: number;
  inbound?: boolean;
}

/**
 * The real stack for a benchmark run, in a throw-away folder: Postgres, Temporal, the API and the worker (the dev
 * stack: the Temporal CLI's dev server), or with `STACK=rehearsal` the production rehearsal (bench/rehearsal-stack.ts:
 * the real Temporal server on Postgres, two APIs behind the balancer, two workers, NODE_ENV=production).
 */
export async function startBenchStack(opts: BenchStackOptions) {
  if (process.env.STACK === 'rehearsal') return startRehearsalBenchStack(opts);
  if (process.env.STACK && process.env.STACK !== 'dev') throw new Error(`STACK is dev (the default) or rehearsal, not ${process.env.STACK}`);
  return startDevBenchStack(opts);
}

/** What a benchmark's report names by process: the dev stack's API and workers. */
async function startDevBenchStack(opts: BenchStackOptions) {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'mailwright-bench-'));
  fs.chmodSync(dataDir, 0o755);
  const [pg, temporal, smtp, web, apiPort, inboundPort] = await Promise.all([freePort(), freePort(), freePort(), freePort(), freePort(), freePort()]);
  const infra = await startInfrastructure(
    { dataDir, persistent: false, ports: { postgres: pg, temporal, smtp, mailboxWeb: web }, log: (m) => console.log(`[stack] ${m}`) },
    { SMTP_URL: opts.smtpUrl },
  );
  // The API rate limit is off: benchmarks measure throughput far above one project's budget.
  // BENCH_RATE_LIMIT_PER_MINUTE turns it on (e.g. very high, to measure the limiter's own cost).
  const env = {
    ...infra.env,
    NODE_ENV: 'test',
    LOG_LEVEL: 'warn',
    PORT: String(apiPort),
    RATE_LIMIT_PER_MINUTE: process.env.BENCH_RATE_LIMIT_PER_MINUTE ?? '0',
    INBOUND_SMTP_PORT: String(inboundPort),
    INBOUND_RATE_PER_MINUTE: '1000000',
    INBOUND_METRICS_PORT: '0',
  };
  // Compiled, without source maps: as the image's `npm run serve:*` scripts run them (scripts/services/stack.ts).
  const api = startTsProcess('api', 'api/server.ts', env, { logFile: path.join(dataDir, 'api.log'), nodeArgs: opts.apiNodeArgs, sourceMaps: false });
  const workers = Array.from({ length: opts.workers ?? 1 }, (_, i) =>
    startTsProcess(`worker${i ? `-${i + 1}` : ''}`, 'temporal/worker.ts', { ...env, ...opts.workerEnv }, { logFile: path.join(dataDir, `worker${i ? `-${i + 1}` : ''}.log`), nodeArgs: opts.workerNodeArgs, sourceMaps: false }),
  );
  // The inbound SMTP server, when the benchmark delivers mail to it (bench:inbound).
  const inbound = opts.inbound ? startTsProcess('inbound', 'api/inbound.ts', env, { logFile: path.join(dataDir, 'inbound.log'), sourceMaps: false }) : undefined;
  const apiUrl = `http://127.0.0.1:${apiPort}`;
  const db = new Pool({ connectionString: infra.env.DATABASE_URL, max: 2 });
  const stop = async () => {
    await db.end();
    await Promise.all([api.stop(), inbound?.stop(), ...workers.map((w) => w.stop())]);
    await infra.stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  };
  try {
    await waitForHttp(apiUrl, 60_000);
    if (inbound) await waitForPort('127.0.0.1', inboundPort, 60_000, 'the inbound SMTP server');
    // A run never measures a worker still starting (it bundles its workflows first): every one of them polls.
    if (workers.length) {
      await waitForWorker(infra.env.TEMPORAL_ADDRESS!, 'mailwright', 120_000, workers.length);
      await waitForWorker(infra.env.TEMPORAL_ADDRESS!, campaignShareQueue('mailwright'), 60_000, workers.length, 'activity');
    }
  } catch (err) {
    console.error(`the stack did not start; see the logs in ${dataDir}`);
    await stop();
    throw err;
  }
  // The app processes by the names the reports give them, for cpuByProcess (Postgres and Temporal go by command).
  const pids = () => {
    const named: Record<string, number> = { api: api.child.pid! };
    workers.forEach((w, i) => (named[`worker${i ? `-${i + 1}` : ''}`] = w.child.pid!));
    if (inbound) named.inbound = inbound.child.pid!;
    return named;
  };
  return { stack: 'dev' as const, apiUrl, db, dataDir, stop, api, workers, inbound, inboundPort, databaseUrl: infra.env.DATABASE_URL!, temporalAddress: infra.env.TEMPORAL_ADDRESS!, pids };
}

/** A user, a project and a verified sender domain; returns the secret key. */
export async function benchProject(apiUrl: string, db: Pool, domain: string): Promise<{ secretKey: string; publicKey: string; projectId: string }> {
  const post = async (p: string, body: unknown, cookie?: string) => {
    const res = await fetch(`${apiUrl}${p}`, { method: 'POST', headers: { 'content-type': 'application/json', ...(cookie ? { cookie } : {}) }, body: JSON.stringify(body) });
    if (!res.ok) throw new Error(`${p}: ${res.status} ${await res.text()}`);
    return res;
  };
  const signup = await post('/auth/signup', { email: `bench-${randomUUID()}@example.com`, password: 'benchmark password' });
  const cookie = signup.headers.getSetCookie()[0]!.split(';')[0]!;
  const project = (await (await post('/users/@me/projects', { name: 'Bench' }, cookie)).json()) as { id: string; keys: { secretKey: string; publicKey: string } };
  await db.query(`insert into domains (id, project_id, name, status, verified_at) values ($1, $2, $3, 'VERIFIED', now())`, [randomUUID(), project.id, domain]);
  return { secretKey: project.keys.secretKey, publicKey: project.keys.publicKey, projectId: project.id };
}
