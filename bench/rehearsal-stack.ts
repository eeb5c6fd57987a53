import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Pool } from 'pg';
import { startRehearsal } from '../scripts/rehearsal/stack';
import { composeService } from '../scripts/rehearsal/compose';
import { waitForWorker } from '../scripts/services/stack';
import { campaignShareQueue } from '../temporal/definitions';
import type { BenchStackOptions } from './stack';

/**
 * `STACK=rehearsal`: a benchmark on the production rehearsal (README › Production rehearsal) instead of the dev stack:
 * the real Temporal server on Postgres, two APIs behind the loopback balancer (`apiUrl`), the benchmark's workers or WORKERS (compose's
 * two by default), the inbound server, each process with NODE_ENV=production and compose's environment. What the dev
 * stack sets for benchmarks goes the ways compose allows: a variable compose reads (CAMPAIGN_PARTITIONS, LOG_LEVEL)
 * as one, the rest as the rehearsal's extra settings. Node flags for the workers (WORKER_NODE_ARGS) go in their
 * NODE_OPTIONS, since compose's command is `npm run serve:worker`. REHEARSAL_SHARDS and REHEARSAL_DYNAMIC_CONFIG (JSON of
 * key: value) tune the Temporal server for a run.
 */
export async function startRehearsalBenchStack(opts: BenchStackOptions) {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'mailwright-bench-rehearsal-'));
  const vars: Record<string, string> = { SMTP_URL: opts.smtpUrl, LOG_LEVEL: 'warn' };
  // The API rate limit is off, as on the dev stack (BENCH_RATE_LIMIT_PER_MINUTE turns it on).
  const extraEnv: Record<string, string> = { RATE_LIMIT_PER_MINUTE: process.env.BENCH_RATE_LIMIT_PER_MINUTE ?? '0', INBOUND_RATE_PER_MINUTE: '1000000' };
  const workerEnv: Record<string, string> = {};
  const composed = (v: Record<string, string>) => composeService('worker', { PUBLIC_URL: 'x', JWT_SECRET: 'x', APP_SECRET: 'x', ...v }).environment;
  for (const [k, v] of Object.entries(opts.workerEnv ?? {})) {
    if (!(k in composed(vars))) workerEnv[k] = v;
    else if (composed({ ...vars, [k]: v })[k] === v) vars[k] = v;
    else throw new Error(`docker-compose.yml sets ${k} without a variable of that name; the rehearsal cannot change it`);
  }
  // Node refuses `--cpu-prof` there: WORKER_NODE_ARGS='--require ./bench/cpu-profile-preload.js' with PROFILE_MATCH and
  // PROFILE_DIR (passed on) profiles the workers instead.
  const profile = Object.fromEntries(['PROFILE_MATCH', 'PROFILE_DIR'].filter((k) => process.env[k]).map((k) => [k, process.env[k]!]));
  const nodeOptions = (args?: string[]): Record<string, string> => (args?.length ? { NODE_OPTIONS: args.join(' '), ...profile } : {});
  const dynamicConfig = process.env.REHEARSAL_DYNAMIC_CONFIG ? (JSON.parse(process.env.REHEARSAL_DYNAMIC_CONFIG) as Record<string, unknown>) : undefined;
  const r = await startRehearsal({
    dataDir,
    vars,
    extraEnv,
    roleEnv: { worker: { ...workerEnv, ...nodeOptions(opts.workerNodeArgs) }, api: nodeOptions(opts.apiNodeArgs) },
    workers: opts.workers ?? (process.env.WORKERS ? Number(process.env.WORKERS) : undefined),
    ui: false,
    temporal: {
      numHistoryShards: process.env.REHEARSAL_SHARDS ? Number(process.env.REHEARSAL_SHARDS) : undefined,
      dynamicConfig,
      pprofPort: process.env.REHEARSAL_PPROF_PORT ? Number(process.env.REHEARSAL_PPROF_PORT) : undefined,
    },
    postgresSettings: process.env.REHEARSAL_PG_SETTINGS?.split(' ').filter(Boolean),
    log: (m) => console.log(`[rehearsal] ${m}`),
    onUnexpectedExit: (name, code) => console.error(`[rehearsal] ${name} exited with code ${code} (its log: ${path.join(dataDir, `${name}.log`)})`),
  });
  const names = r.processes().map((p) => p.name);
  const workerNames = names.filter((n) => n.startsWith('worker'));
  const db = new Pool({ connectionString: r.databaseUrl, max: 2 });
  const stop = async () => {
    await db.end();
    await r.stop();
    if (!process.env.KEEP_BENCH_DATA) fs.rmSync(dataDir, { recursive: true, force: true });
  };
  try {
    // As on the dev stack: every worker polls the share queue too before a run is measured.
    await waitForWorker(r.temporalAddress, campaignShareQueue('mailwright'), 60_000, workerNames.length, 'activity');
  } catch (err) {
    await stop();
    throw err;
  }
  const pids = () => Object.fromEntries(r.processes().map((p) => [p.name, p.pid!]));
  return {
    stack: 'rehearsal' as const,
    apiUrl: r.apiUrl,
    db,
    dataDir,
    stop,
    // The first API and every worker, for what a benchmark reads of one process (RSS); pids() names them all.
    api: r.process(names.find((n) => n.startsWith('api'))!),
    workers: workerNames.map((n) => r.process(n)),
    inbound: r.process('inbound'),
    inboundPort: r.inboundSmtpPort,
    databaseUrl: r.databaseUrl,
    temporalAddress: r.temporalAddress,
    pids,
  };
}

