import fs from 'node:fs';
import path from 'node:path';
import { startEmbeddedPostgres } from './postgres';
import { startTemporalDevServer } from './temporal-server';
import { startMailbox } from './mailbox';
import { startProcess, waitForPort, type ManagedProcess } from './process';
import { initOrm, migrate } from '../../domain/orm';
import { Connection, Client } from '@temporalio/client';
import { buildRuntime, isCompiled } from '../build';

export const ROOT = path.resolve(__dirname, '..', '..');

export interface StackOptions {
  /** Where embedded services keep data and logs. */
  dataDir: string;
  /** Keep Postgres and Temporal data across runs (npm start) or throw it away (tests). */
  persistent: boolean;
  ports: { postgres: number; temporal: number; temporalUi?: number; smtp: number; mailboxWeb: number };
  log: (msg: string) => void;
}

export interface Infrastructure {
  /** Environment for the API and the worker: DATABASE_URL, TEMPORAL_ADDRESS, SMTP_URL. */
  env: Record<string, string>;
  urls: { temporalUi?: string; mailbox?: string };
  stop(): Promise<void>;
}

/**
 * Starts what is not configured: Postgres when DATABASE_URL is unset, the Temporal dev server when TEMPORAL_ADDRESS
 * is unset, MailDev when SMTP_URL is unset. Then applies the migrations.
 */
export async function startInfrastructure(opts: StackOptions, given: NodeJS.ProcessEnv = process.env): Promise<Infrastructure> {
  fs.mkdirSync(opts.dataDir, { recursive: true });
  const stops: (() => Promise<void>)[] = [];
  const env: Record<string, string> = {};
  const urls: Infrastructure['urls'] = {};
  const stop = async () => {
    for (const s of stops.reverse()) await s().catch((err) => opts.log(`stop failed: ${(err as Error).message}`));
  };
  try {
    const tasks: Promise<void>[] = [];
    if (given.DATABASE_URL) env.DATABASE_URL = given.DATABASE_URL;
    else {
      // Postgres first, on its own: the Temporal dev server takes free ports for its internal services as it starts,
      // and one of them could be the port chosen for Postgres a moment earlier.
      opts.log(`starting Postgres on 127.0.0.1:${opts.ports.postgres} (data in ${path.join(opts.dataDir, 'postgres')})`);
      const pg = await startEmbeddedPostgres({
        dataDir: path.join(opts.dataDir, 'postgres'),
        port: opts.ports.postgres,
        database: 'mailwright',
        persistent: opts.persistent,
      });
      stops.push(pg.stop);
      env.DATABASE_URL = pg.url;
    }
    if (given.TEMPORAL_ADDRESS) env.TEMPORAL_ADDRESS = given.TEMPORAL_ADDRESS;
    else {
      tasks.push(
        (async () => {
          opts.log(`starting the Temporal dev server on 127.0.0.1:${opts.ports.temporal}`);
          const temporal = await startTemporalDevServer({
            port: opts.ports.temporal,
            uiPort: opts.ports.temporalUi,
            dbFile: opts.persistent ? path.join(opts.dataDir, 'temporal.db') : undefined,
            logFile: path.join(opts.dataDir, 'temporal.log'),
            log: opts.log,
          });
          stops.push(temporal.stop);
          env.TEMPORAL_ADDRESS = temporal.address;
          urls.temporalUi = temporal.uiUrl;
        })(),
      );
    }
    if (given.SMTP_URL) env.SMTP_URL = given.SMTP_URL;
    else {
      tasks.push(
        (async () => {
          const mailbox = await startMailbox({
            smtpPort: opts.ports.smtp,
            webPort: opts.ports.mailboxWeb,
            logFile: path.join(opts.dataDir, 'maildev.log'),
          });
          stops.push(mailbox.stop);
          env.SMTP_URL = mailbox.smtpUrl;
          urls.mailbox = mailbox.webUrl;
        })(),
      );
    }
    const results = await Promise.allSettled(tasks);
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason ?? new Error('a service of the stack did not start (no reason given)');
    const orm = await initOrm(env.DATABASE_URL!, 2);
    try {
      const applied = await migrate(orm);
      if (applied.length) opts.log(`applied migrations: ${applied.join(', ')}`);
    } finally {
      await orm.close();
    }
  } catch (err) {
    await stop();
    throw err;
  }
  return { env, urls, stop };
}

/**
 * V8 flags of the worker process (package.json's `worker` and `serve:worker` scripts have the same; a unit test checks):
 * - semi-spaces of at most 8 MB. The main thread once needed 32 MB for the garbage of nodemailer's per-message streams
 *   (issue 14); campaign messages now go to the socket as they come from the render threads (issue 28), and the
 *   smaller young generation keeps the worker's memory down (BENCHMARKS.md › Campaign send).
 * - the old generation may grow to twice what survived the last full collection before the next one starts. V8's own
 *   factor left the main thread's 75 MB heap about 25 MB of room, so a sending worker ran a full (concurrent) marking
 *   of it every second or two, about 0.3 s of background marking each: 9-10 in a 30,000-message send, 4-5 with this
 *   (V8's helper threads, 0.083 ms of CPU a digest before, 0.051-0.059 after; BENCHMARKS.md › Issue 28, sixth stop).
 * - one helper thread for V8 (garbage collection, compilation), where Node starts four whatever the machine. A sending
 *   worker keeps every core busy (its main thread and a render thread a core), so more helpers only wait for a core.
 *   On two cores the helpers' CPU fell by 0.007-0.011 ms a message; 30,000 digests took 5% less of the worker's CPU in
 *   seven pairs out of seven, 100,000 within the host's swing; two helpers saved nothing (BENCHMARKS.md › Issue 28,
 *   seventeenth stop).
 */
export const WORKER_V8_FLAGS = ['--max-semi-space-size=8', '--heap-growing-percent=100', '--v8-pool-size=1'];

/** `MAILWRIGHT_RUN_FROM=typescript` starts the API, the worker and the inbound server through tsx instead of compiled. */
const fromTypescript = () => process.env.MAILWRIGHT_RUN_FROM === 'typescript';

/**
 * The compiled runtime (scripts/build.ts) this process starts its children from, in .build/<pid>: built on the first
 * start, from the working tree as it is then, so a change is always in the next run (about a second). Handed down in
 * MAILWRIGHT_RUNTIME_DIR (a test file reuses its global setup's), removed when this process exits; one left by a
 * process that was killed, or by a Jest test file (its sandbox's exit handlers do not run), goes at the next build.
 */
function runtimeDir(): string {
  const given = process.env.MAILWRIGHT_RUNTIME_DIR;
  if (given && fs.existsSync(path.join(given, 'temporal', 'worker.js'))) return given;
  const parent = path.join(ROOT, '.build');
  fs.mkdirSync(parent, { recursive: true });
  for (const name of fs.readdirSync(parent)) if (/^\d+$/.test(name) && !alive(Number(name))) fs.rmSync(path.join(parent, name), { recursive: true, force: true });
  const dir = path.join(parent, String(process.pid));
  fs.rmSync(dir, { recursive: true, force: true });
  buildRuntime(dir);
  process.env.MAILWRIGHT_RUNTIME_DIR = dir;
  process.once('exit', () => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Runs an entry point (api/server.ts, temporal/worker.ts) in its own Node process: compiled to JavaScript with plain
 * Node, as the image runs it (`npm run serve:*`); test-only entries, and everything with MAILWRIGHT_RUN_FROM=typescript,
 * through tsx. `sourceMaps` (default true): stack traces name the TypeScript lines (--enable-source-maps). The
 * benchmarks turn it off, as the image's scripts do: with it, Node parses the source map of every module it loads,
 * 25-30 MB of a sending worker's RSS (BENCHMARKS.md › Issue 28, fourteenth stop).
 */
export function startTsProcess(
  name: string,
  entry: string,
  env: Record<string, string>,
  out: { logFile?: string; prefixOutput?: boolean; nodeArgs?: string[]; sourceMaps?: boolean },
): ManagedProcess {
  const v8Flags = entry === 'temporal/worker.ts' ? WORKER_V8_FLAGS : [];
  const program = isCompiled(entry) && !fromTypescript() ? [...(out.sourceMaps === false ? [] : ['--enable-source-maps']), path.join(runtimeDir(), entry.replace(/\.ts$/, '.js'))] : ['--import', 'tsx', path.join(ROOT, entry)];
  return startProcess(name, process.execPath, [...v8Flags, ...(out.nodeArgs ?? []), ...program], {
    cwd: ROOT,
    env: { ...process.env, ...env, MAILWRIGHT_ROLE: name },
    ...out,
  });
}

export async function waitForHttp(url: string, timeoutMs: number): Promise<void> {
  const u = new URL(url);
  await waitForPort(u.hostname, Number(u.port), timeoutMs, url);
}

/** Waits until `pollers` workers poll the task queue, so a caller never races the workers' start. */
export async function waitForWorker(address: string, taskQueue: string, timeoutMs: number, pollers = 1, type: 'workflow' | 'activity' = 'workflow'): Promise<void> {
  const connection = await Connection.connect({ address });
  const client = new Client({ connection });
  const deadline = Date.now() + timeoutMs;
  try {
    for (;;) {
      const res = await client.workflowService.describeTaskQueue({ namespace: 'default', taskQueue: { name: taskQueue }, taskQueueType: type === 'workflow' ? 1 : 2 });
      if (new Set((res.pollers ?? []).map((p) => p.identity)).size >= pollers) return;
      if (Date.now() > deadline) throw new Error(`Fewer than ${pollers} worker(s) polled ${taskQueue} within ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 250));
    }
  } finally {
    await connection.close();
  }
}
