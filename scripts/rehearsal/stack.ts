// The production rehearsal (README › Production rehearsal): docker-compose.yml's services on one machine without
// containers, in the order compose starts them, each with the command and environment compose gives it.
import fs from 'node:fs';
import path from 'node:path';
import crypto from 'node:crypto';
import net from 'node:net';
import { execFileSync } from 'node:child_process';
import { Connection } from '@temporalio/client';
import { composeService, imageTag, oneMachineEnv, translateAddresses } from './compose';
import { readImageRecipe, type ImageRecipe } from './dockerfile';
import { startBalancer, type Balancer } from './balancer';
import {
  applyTemporalSchemas,
  goModuleDir,
  goVersion,
  resolveGoTool,
  startTemporalServer,
  startTemporalUi,
  temporalServerConfig,
  temporalServerTool,
  temporalSqlTool,
  temporalUiTool,
  type SqlStore,
  type TemporalPorts,
} from './temporal-cluster';
import { createOwnerAndDatabase, startEmbeddedPostgres } from '../services/postgres';
import { startMailbox } from '../services/mailbox';
import { resolveTemporalBinary, temporalCacheDir } from '../services/temporal-server';
import { freePort, signal, startProcess, waitForPort, type ManagedProcess } from '../services/process';
import { ROOT, waitForHttp, waitForWorker } from '../services/stack';
import { SA } from '../../temporal/search-attributes';

/** The app services of docker-compose.yml, in the order they start (migrate runs to completion first). */
type AppRole = 'api' | 'worker' | 'inbound';

export interface RehearsalOptions {
  dataDir: string;
  /** What `docker compose` reads from the shell or `.env` (PUBLIC_URL, secrets, SMTP_URL, ...). Missing secrets are generated. */
  vars?: Record<string, string>;
  /**
   * Settings docker-compose.yml leaves at the code's defaults, set for this run (the test tier's short intervals). A
   * key compose sets is refused: those change only through compose's own variables.
   */
  extraEnv?: Record<string, string>;
  /** Like `extraEnv`, for one role's processes only (a benchmark's NODE_OPTIONS for the workers, say). */
  roleEnv?: Partial<Record<AppRole, Record<string, string>>>;
  /** The Temporal server's history shards (default: the auto-setup image's 4) and dynamic config (none by default). */
  temporal?: { numHistoryShards?: number; dynamicConfig?: Record<string, unknown>; pprofPort?: number };
  /** Postgres settings beyond the image's defaults (`name=value`), for a benchmark's measurements. */
  postgresSettings?: string[];
  /** API processes behind the loopback balancer (default 2; compose runs one, a deployment puts several behind its balancer). */
  apis?: number;
  /** Worker processes (default: compose's `deploy.replicas` of the worker). */
  workers?: number;
  /** Temporal Web UI (default true). */
  ui?: boolean;
  /** The balancer's port, the API's public address (default: a free one). */
  apiPort?: number;
  log?: (msg: string) => void;
  /** Given, before anything starts, the function that stops whatever has started (for a Ctrl-C during the start). */
  onStarting?: (stop: () => Promise<void>) => void;
  /** Called when an app process exits without being asked to (not by `restart`). */
  onUnexpectedExit?: (name: string, code: number | null) => void;
}

interface AppProcess {
  name: string;
  role: AppRole;
  port?: number;
  metricsPort: number;
  env: Record<string, string>;
  argv: string[];
  proc: ManagedProcess;
}

export interface Rehearsal {
  /** The balancer in front of the APIs. */
  apiUrl: string;
  apiUrls: string[];
  databaseUrl: string;
  temporalAddress: string;
  temporalUiUrl?: string;
  smtpUrl: string;
  mailboxUrl?: string;
  workerMetricsUrls: string[];
  inboundSmtpPort: number;
  inboundMetricsUrl: string;
  appDir: string;
  /** The jobs run before the services, in order, for the banner and README. */
  jobs: string[];
  processes(): { name: string; pid?: number; port?: number; metricsPort: number }[];
  /** The app process of that name as it runs now (a `restart` replaces it). */
  process(name: string): ManagedProcess;
  balancerCounts(): number[];
  /** Stops Postgres (a fast shutdown: every session ends) for `downMs`, then starts it again; nothing else restarts. */
  restartPostgres(downMs: number): Promise<void>;
  /** Kills a process with SIGKILL (a crash: no draining) and starts it again; an API is back once it serves. */
  restart(name: string): Promise<void>;
  stop(): Promise<void>;
}

const IP = '127.0.0.1';

export async function startRehearsal(opts: RehearsalOptions): Promise<Rehearsal> {
  const log = opts.log ?? ((m: string) => console.log(`[rehearsal] ${m}`));
  const dataDir = path.resolve(opts.dataDir);
  fs.mkdirSync(dataDir, { recursive: true });
  fs.chmodSync(dataDir, 0o755); // Postgres runs as the postgres user when we are root; it must reach its folder
  const stops: (() => Promise<void>)[] = [];
  const stopAll = async () => {
    for (const s of stops.splice(0).reverse()) await s().catch((err: unknown) => log(`stop failed: ${(err as Error).message}`));
  };
  opts.onStarting?.(stopAll);
  const jobs: string[] = [];
  try {
    // 1. Binaries, and the image's production dependencies (both cached after the first run).
    const { serverVersion, serverBin, sqlTool, uiBin, cli, recipe, depsDir } = prepareRehearsal({ ui: opts.ui !== false, log });
    // 2. The image: the Dockerfile's files over its installed dependencies.
    const appDir = buildAppDir(path.join(dataDir, 'app'), recipe, depsDir);
    jobs.push(`image: ${recipe.install.join(' ')} (in ${path.relative(dataDir, appDir) || appDir})`);

    // 3. Postgres, with the user and database compose's postgres service creates.
    const pgPort = await freePort();
    const pgService = composeService('postgres', opts.vars ?? {});
    log(`starting Postgres on ${IP}:${pgPort}`);
    const pg = await startEmbeddedPostgres({ dataDir: path.join(dataDir, 'postgres'), port: pgPort, database: 'postgres', persistent: false, settings: opts.postgresSettings });
    stops.push(pg.stop);
    // The user and database compose's postgres image creates from POSTGRES_USER, POSTGRES_PASSWORD and POSTGRES_DB.
    const pgEnv = pgService.environment;
    await createOwnerAndDatabase(`postgres://postgres:postgres@${IP}:${pgPort}/postgres`, pgEnv.POSTGRES_USER!, pgEnv.POSTGRES_PASSWORD ?? '', pgEnv.POSTGRES_DB ?? pgEnv.POSTGRES_USER!);
    const temporalPorts = await freePorts<keyof TemporalPorts>(['frontend', 'frontendHttp', 'frontendMembership', 'history', 'historyMembership', 'matching', 'matchingMembership', 'worker', 'workerMembership']);
    const addresses = { 'postgres:5432': `${IP}:${pgPort}`, 'temporal:7233': `${IP}:${temporalPorts.frontend}` };
    const temporalAddress = addresses['temporal:7233'];

    // 4. Temporal: schemas by the schema tool, then the server, the default namespace and the search attributes.
    const temporalEnv = composeService('temporal', opts.vars ?? {}).environment;
    const [storeHost, storePort] = translateAddresses(`${temporalEnv.POSTGRES_SEEDS}:${temporalEnv.DB_PORT}`, addresses).split(':');
    const store: SqlStore = { plugin: temporalEnv.DB!, host: storeHost!, port: Number(storePort), user: temporalEnv.POSTGRES_USER!, password: temporalEnv.POSTGRES_PWD! };
    const schemaRoot = path.join(goModuleDir('go.temporal.io/server', serverVersion), 'schema', 'postgresql', 'v12');
    for (const cmd of applyTemporalSchemas({ sqlTool, schemaRoot, store, log })) jobs.push(`schema: ${cmd.map((a, i) => (cmd[i - 1] === '--pw' ? '***' : a)).join(' ')}`);
    log(`starting the Temporal server ${serverVersion} on ${temporalAddress} (postgres12 persistence and visibility)`);
    const server = await startTemporalServer({
      binary: serverBin,
      dir: path.join(dataDir, 'temporal'),
      config: temporalServerConfig(store, temporalPorts, opts.temporal?.numHistoryShards, {
        dynamicConfigFile: opts.temporal?.dynamicConfig ? path.join(dataDir, 'temporal', 'config', 'dynamicconfig.yaml') : undefined,
        pprofPort: opts.temporal?.pprofPort,
      }),
      dynamicConfig: opts.temporal?.dynamicConfig,
      port: temporalPorts.frontend,
      logFile: path.join(dataDir, 'temporal.log'),
    });
    stops.push(() => server.stop());
    const cliArgs = ['operator', 'namespace', 'create', '--address', temporalAddress, '--namespace', 'default', '--retention', '24h'];
    await retry(() => {
      try {
        execFileSync(cli, cliArgs, { stdio: 'pipe' });
      } catch (err) {
        // A try that timed out on its side may have registered it: then the next one finds it there.
        if (!/already (exists|registered)/i.test(String((err as { stderr?: Buffer }).stderr ?? ''))) throw err;
      }
    }, 60_000);
    jobs.push(`namespace: temporal ${cliArgs.join(' ')}`);
    await runSearchAttributeJob(cli, addresses, dataDir, temporalAddress, log);
    jobs.push('search attributes: the temporal-search-attributes job of docker-compose.yml');

    let temporalUiUrl: string | undefined;
    if (uiBin) {
      const uiPort = await freePort();
      const uiEnv = composeService('temporal-ui', opts.vars ?? {}).environment;
      const ui = await startTemporalUi({ binary: uiBin, dir: path.join(dataDir, 'temporal-ui'), temporalAddress: translateAddresses(uiEnv.TEMPORAL_ADDRESS!, addresses), port: uiPort, logFile: path.join(dataDir, 'temporal-ui.log') });
      stops.push(() => ui.stop());
      temporalUiUrl = `http://${IP}:${uiPort}`;
    }

    // 5. The SMTP relay: the caller's (SMTP_URL) or MailDev.
    const vars: Record<string, string> = { ...opts.vars };
    let mailboxUrl: string | undefined;
    if (!vars.SMTP_URL) {
      const [smtpPort, webPort] = [await freePort(), await freePort()];
      const mailbox = await startMailbox({ smtpPort, webPort, logFile: path.join(dataDir, 'maildev.log') });
      stops.push(mailbox.stop);
      vars.SMTP_URL = mailbox.smtpUrl;
      mailboxUrl = mailbox.webUrl;
    }
    const apiPort = opts.apiPort ?? (await freePort());
    vars.PUBLIC_URL ??= `http://${IP}:${apiPort}`;
    vars.JWT_SECRET ??= crypto.randomBytes(24).toString('base64url');
    vars.APP_SECRET ??= crypto.randomBytes(24).toString('base64url');

    // 6. The app services: the migration job to completion, then APIs, workers and the inbound server.
    const inboundPort = await freePort();
    const appProcessEnv = async (role: AppRole | 'migrate', port?: number) => {
      const metricsPort = await freePort();
      const svc = composeService(role, { ...vars, METRICS_PORT: String(metricsPort), WORKER_METRICS_PORT: String(metricsPort), INBOUND_METRICS_PORT: String(metricsPort) });
      const extra = { ...opts.extraEnv, ...(role === 'migrate' ? {} : opts.roleEnv?.[role]) };
      const env = oneMachineEnv(svc, addresses, { PORT: String(port ?? 0), INBOUND_SMTP_PORT: String(inboundPort) }, extra);
      return { svc, env: { ...baseEnv(), ...recipe.env, ...env }, metricsPort };
    };
    const migrate = await appProcessEnv('migrate');
    log(`migration job: ${migrate.svc.argv.join(' ')}`);
    const migrateLog = path.join(dataDir, 'migrate.log');
    const migration = startProcess('migrate', migrate.svc.argv[0]!, migrate.svc.argv.slice(1), { cwd: appDir, env: migrate.env, logFile: migrateLog, detached: true });
    const migrateCode = await migration.exited;
    if (migrateCode !== 0) throw new Error(`the migration job exited with code ${migrateCode}: ${tail(migrateLog)}`);
    jobs.push(`migrate: ${migrate.svc.argv.join(' ')}`);

    const apis = opts.apis ?? 2;
    const workers = opts.workers ?? composeService('worker', vars).replicas;
    const apps: AppProcess[] = [];
    let stopping = false;
    const spawnApp = (app: Omit<AppProcess, 'proc'>): AppProcess => {
      const proc = startProcess(app.name, app.argv[0]!, app.argv.slice(1), { cwd: appDir, env: app.env, logFile: path.join(dataDir, `${app.name}.log`), detached: true });
      const started: AppProcess = { ...app, proc };
      void proc.exited.then((code) => {
        if (!stopping && apps.includes(started)) opts.onUnexpectedExit?.(app.name, code);
      });
      return started;
    };
    stops.push(async () => {
      stopping = true;
      await Promise.all(apps.map((a) => a.proc.stop()));
    });
    const plan: [AppRole, number][] = [['api', apis], ['worker', workers], ['inbound', 1]];
    for (const [role, count] of plan) {
      for (let i = 1; i <= count; i++) {
        const port = role === 'api' ? await freePort() : role === 'inbound' ? inboundPort : undefined;
        const { svc, env, metricsPort } = await appProcessEnv(role, port);
        apps.push(spawnApp({ name: count > 1 ? `${role}-${i}` : role, role, port, metricsPort, env, argv: svc.argv }));
      }
    }
    log(`started ${apps.map((a) => a.name).join(', ')} (${apps[0]!.argv.join(' ')}, ...); waiting for them`);
    const apiApps = apps.filter((a) => a.role === 'api');
    const balancer: Balancer = await startBalancer(apiApps.map((a) => ({ host: IP, port: a.port! })), apiPort);
    stops.push(() => balancer.stop());
    await Promise.all([
      ...apiApps.map((a) => waitForHttp(`http://${IP}:${a.port}`, 120_000)),
      waitForPort(IP, inboundPort, 120_000, 'the inbound SMTP server'),
      waitForWorker(temporalAddress, apps[0]!.env.TEMPORAL_TASK_QUEUE ?? 'mailwright', 180_000, workers),
    ]);

    return {
      apiUrl: `http://${IP}:${balancer.port}`,
      apiUrls: apiApps.map((a) => `http://${IP}:${a.port}`),
      databaseUrl: migrate.env.DATABASE_URL!,
      temporalAddress,
      temporalUiUrl,
      smtpUrl: vars.SMTP_URL,
      mailboxUrl,
      workerMetricsUrls: apps.filter((a) => a.role === 'worker').map((a) => `http://${IP}:${a.metricsPort}`),
      inboundSmtpPort: inboundPort,
      inboundMetricsUrl: `http://${IP}:${apps.find((a) => a.role === 'inbound')!.metricsPort}`,
      appDir,
      jobs,
      processes: () => apps.map((a) => ({ name: a.name, pid: a.proc.child.pid, port: a.port, metricsPort: a.metricsPort })),
      process(name) {
        const app = apps.find((a) => a.name === name);
        if (!app) throw new Error(`no process ${name} (have ${apps.map((a) => a.name).join(', ')})`);
        return app.proc;
      },
      balancerCounts: () => balancer.counts(),
      restartPostgres: (downMs) => pg.restart(downMs),
      async restart(name) {
        const i = apps.findIndex((a) => a.name === name);
        if (i < 0) throw new Error(`no process ${name} (have ${apps.map((a) => a.name).join(', ')})`);
        const old = apps[i]!;
        apps.splice(i, 1, { ...old }); // the old entry leaves `apps` first, so its exit is not unexpected
        signal(old.proc.child, 'SIGKILL', true);
        await old.proc.exited;
        // npm's exit is not its node process's: until the whole group is gone, the old API may still accept on its
        // port, and the wait below would take that for the new one.
        await groupGone(old.proc.child.pid!, 10_000);
        apps[i] = spawnApp(old);
        if (old.role === 'api') await waitForHttp(`http://${IP}:${old.port}`, 120_000);
      },
      stop: stopAll,
    };
  } catch (err) {
    log(`failed; logs in ${dataDir}`);
    await stopAll();
    throw err;
  }
}

/**
 * What a container's process has besides its environment: PATH and HOME (npm needs both), nothing of ours; PATH
 * without the repository's node_modules/.bin that `npm run rehearsal` puts first (dev tools the image does not have).
 */
function baseEnv(): Record<string, string> {
  const keep = ['HOME', 'TMPDIR', 'LANG', 'TZ'];
  const env = Object.fromEntries(keep.filter((k) => process.env[k] !== undefined).map((k) => [k, process.env[k]!]));
  const pathDirs = (process.env.PATH ?? '').split(path.delimiter).filter((d) => d && !d.split(path.sep).includes('node_modules'));
  return { ...env, PATH: pathDirs.join(path.delimiter) };
}

/**
 * What a rehearsal needs before it starts anything, built once and cached in ~/.cache/mailwright (`npm run rehearsal --
 * --build` does only this): the Temporal server and its schema tool at the version of compose's auto-setup and
 * admin-tools images, Web UI's server at the version of its image, the CLI that runs the search-attribute job, and the
 * image's production dependencies.
 */
export function prepareRehearsal(opts: { ui: boolean; log: (msg: string) => void }) {
  const { log } = opts;
  const serverVersion = goVersion(imageTag(composeService('temporal', {})));
  const serverBin = resolveGoTool(temporalServerTool(serverVersion), log);
  const sqlTool = resolveGoTool(temporalSqlTool(goVersion(imageTag(composeService('temporal-search-attributes', {})))), log);
  const uiBin = opts.ui ? resolveGoTool(temporalUiTool(goVersion(imageTag(composeService('temporal-ui', {})))), log) : undefined;
  const cli = resolveTemporalBinary(log);
  if (!cli) throw new Error('the rehearsal needs the Temporal CLI for its search-attribute job (install Go, or put `temporal` on PATH)');
  const recipe = readImageRecipe();
  return { serverVersion, serverBin, sqlTool, uiBin, cli, recipe, depsDir: installProductionDependencies(recipe, log) };
}

/**
 * Runs the Dockerfile's install command on the manifests it copies first, once per lockfile, in
 * ~/.cache/mailwright/rehearsal-deps/<hash> (a minute or two the first time); returns that folder.
 */
function installProductionDependencies(recipe: ImageRecipe, log: (msg: string) => void): string {
  const manifests = recipe.copies.slice(0, recipe.copiesBeforeInstall).flatMap((c) => c.sources);
  // Keyed by what decides node_modules: the lockfile, and of package.json its dependency fields (a new script does not).
  const hash = crypto.createHash('sha256');
  for (const m of manifests) {
    const text = fs.readFileSync(path.join(ROOT, m), 'utf8');
    const pkg = path.basename(m) === 'package.json' ? (JSON.parse(text) as Record<string, unknown>) : undefined;
    hash.update(m).update(pkg ? JSON.stringify([pkg.dependencies, pkg.devDependencies, pkg.optionalDependencies, pkg.overrides, pkg.engines]) : text);
  }
  hash.update(recipe.install.join(' '));
  const depsDir = path.join(path.dirname(temporalCacheDir()), 'rehearsal-deps', hash.digest('hex').slice(0, 16));
  if (!fs.existsSync(path.join(depsDir, '.complete'))) {
    const building = `${depsDir}.building-${process.pid}`;
    fs.rmSync(building, { recursive: true, force: true });
    fs.mkdirSync(building, { recursive: true });
    for (const m of manifests) fs.copyFileSync(path.join(ROOT, m), path.join(building, path.basename(m)));
    log(`installing production dependencies: ${recipe.install.join(' ')} (once per package-lock.json, in ${depsDir})`);
    execFileSync(recipe.install[0]!, recipe.install.slice(1), { cwd: building, stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, ...recipe.env } });
    fs.writeFileSync(path.join(building, '.complete'), '');
    fs.rmSync(depsDir, { recursive: true, force: true });
    fs.renameSync(building, depsDir);
    pruneDeps(path.dirname(depsDir), depsDir);
  }
  const now = new Date();
  fs.utimesSync(path.join(depsDir, '.complete'), now, now); // marks it used, for pruneDeps
  return depsDir;
}

/**
 * The app folder as the Dockerfile builds the image: its COPY sources from the repository, node_modules linked, then
 * the npm scripts it runs (`npm run build`: the compiled dist/ the services run).
 */
function buildAppDir(appDir: string, recipe: ImageRecipe, depsDir: string): string {
  fs.rmSync(appDir, { recursive: true, force: true });
  fs.mkdirSync(appDir, { recursive: true });
  for (const copy of recipe.copies) {
    for (const source of copy.sources) {
      const dest = copy.dest.endsWith('/') ? path.join(appDir, copy.dest, path.basename(source)) : path.join(appDir, copy.dest);
      fs.mkdirSync(path.dirname(dest), { recursive: true });
      fs.cpSync(path.join(ROOT, source), dest, { recursive: true });
    }
  }
  fs.symlinkSync(path.join(depsDir, 'node_modules'), path.join(appDir, 'node_modules'));
  for (const argv of recipe.scripts) execFileSync(argv[0]!, argv.slice(1), { cwd: appDir, stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, ...recipe.env } });
  return appDir;
}

/** Removes the installs of other lockfiles not used for a day (about 460 MB each); a rehearsal running on one keeps it. */
function pruneDeps(root: string, keep: string): void {
  for (const name of fs.readdirSync(root)) {
    const dir = path.join(root, name);
    if (dir === keep || name.includes('.building-')) continue;
    const marker = path.join(dir, '.complete');
    if (!fs.existsSync(marker) || Date.now() - fs.statSync(marker).mtimeMs > 86_400_000) fs.rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Runs docker-compose.yml's temporal-search-attributes job as written (its shell loop over the CLI), with the CLI on
 * PATH and the server's address for `temporal:7233`; then checks every attribute Mailwright's workflows carry exists,
 * since the job ignores failures (`|| true`) and a namespace just created may not be visible to it for a few seconds.
 */
async function runSearchAttributeJob(cli: string, addresses: Record<string, string>, dataDir: string, temporalAddress: string, log: (msg: string) => void): Promise<void> {
  const job = composeService('temporal-search-attributes', {});
  const binDir = path.join(dataDir, 'bin');
  fs.mkdirSync(binDir, { recursive: true });
  fs.rmSync(path.join(binDir, 'temporal'), { force: true });
  fs.symlinkSync(cli, path.join(binDir, 'temporal'));
  const argv = job.argv.map((a) => translateAddresses(a, addresses));
  const connection = await Connection.connect({ address: temporalAddress });
  try {
    const want = Object.values(SA).map((k) => k.name);
    await retry(async () => {
      execFileSync(argv[0]!, argv.slice(1), { stdio: 'pipe', env: { ...baseEnv(), PATH: `${binDir}:${process.env.PATH}` } });
      const res = await connection.operatorService.listSearchAttributes({ namespace: 'default' });
      const missing = want.filter((n) => !(n in (res.customAttributes ?? {})));
      if (missing.length) throw new Error(`search attributes missing after the job: ${missing.join(', ')}`);
    }, 60_000);
    log(`search attributes: ${want.join(', ')}`);
  } finally {
    await connection.close();
  }
}

/** Resolves once no process of group `pgid` is left (or after `timeoutMs`). */
async function groupGone(pgid: number, timeoutMs: number): Promise<void> {
  for (const deadline = Date.now() + timeoutMs; Date.now() < deadline; await new Promise((r) => setTimeout(r, 50))) {
    try {
      process.kill(-pgid, 0);
    } catch {
      return;
    }
  }
}

async function retry<T>(fn: () => T | Promise<T>, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await fn();
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, 1_000));
    }
  }
}

/**
 * Free loopback ports below 32768: the server records its membership ports in a smallint column (cluster_membership),
 * and the kernel hands out ephemeral ports above it.
 */
async function freePorts<K extends string>(names: K[]): Promise<Record<K, number>> {
  const out = {} as Record<K, number>;
  const taken = new Set<number>();
  for (const n of names) {
    for (;;) {
      const port = 20_000 + crypto.randomInt(12_000);
      if (!taken.has(port) && (await canListen(port))) {
        taken.add(port);
        out[n] = port;
        break;
      }
    }
  }
  return out;
}

function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, IP, () => srv.close(() => resolve(true)));
  });
}

function tail(file: string): string {
  return fs.existsSync(file) ? fs.readFileSync(file, 'utf8').trim().split('\n').slice(-15).join('\n') : '(no output)';
}
