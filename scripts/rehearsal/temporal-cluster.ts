// The real Temporal server for the rehearsal: built with `go install` at the versions docker-compose.yml runs,
// cached beside the CLI (~/.cache/mailwright/bin), its Postgres schemas applied by its own schema tool.
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { stringify } from 'yaml';
import { onPath, temporalCacheDir } from '../services/temporal-server';
import { startProcess, waitForPort, type ManagedProcess } from '../services/process';

/** What `go install` builds, and the name it is cached under (`<name>-<version>`, so a new version builds anew). */
interface GoTool {
  name: string;
  module: string;
  /** The package path inside the module; `go install` names the binary after its last element. */
  pkg: string;
  version: string;
}

export const temporalServerTool = (version: string): GoTool => ({ name: 'temporal-server', module: 'go.temporal.io/server', pkg: 'cmd/server', version });
export const temporalSqlTool = (version: string): GoTool => ({ name: 'temporal-sql-tool', module: 'go.temporal.io/server', pkg: 'cmd/tools/sql', version });
export const temporalUiTool = (version: string): GoTool => ({ name: 'temporal-ui-server', module: 'github.com/temporalio/ui-server/v2', pkg: 'cmd/server', version });

/** Docker image tags carry no `v`; Go module versions do. */
export const goVersion = (imageTag: string) => (imageTag.startsWith('v') ? imageTag : `v${imageTag}`);

function requireGo(): string {
  const go = onPath('go');
  if (!go) throw new Error('The rehearsal builds the Temporal server with Go (https://go.dev/dl/); no `go` on PATH.');
  return go;
}

/** Returns the cached binary, building it once with `go install <module>/<pkg>@<version>` (minutes of CPU). */
export function resolveGoTool(tool: GoTool, log: (msg: string) => void): string {
  const target = path.join(temporalCacheDir(), `${tool.name}-${tool.version}`);
  if (fs.existsSync(target)) return target;
  const go = requireGo();
  // Each build gets a GOBIN of its own: the server and the UI server both come out of `go install` named `server`.
  fs.mkdirSync(temporalCacheDir(), { recursive: true });
  const gobin = fs.mkdtempSync(path.join(temporalCacheDir(), `.build-${tool.name}-`));
  try {
    log(`building ${tool.module}/${tool.pkg}@${tool.version} with Go into ${temporalCacheDir()} (once; several minutes)...`);
    execFileSync(go, ['install', `${tool.module}/${tool.pkg}@${tool.version}`], { stdio: 'inherit', env: { ...process.env, GOBIN: gobin, GOFLAGS: '-mod=mod' } });
    fs.renameSync(path.join(gobin, path.basename(tool.pkg)), target);
  } finally {
    fs.rmSync(gobin, { recursive: true, force: true });
  }
  return target;
}

/** The module's source in the Go module cache (`go mod download -json`, which fetches it when missing). */
export function goModuleDir(module: string, version: string): string {
  const out = execFileSync(requireGo(), ['mod', 'download', '-json', `${module}@${version}`], { encoding: 'utf8', env: { ...process.env, GOFLAGS: '-mod=mod' } });
  const dir = (JSON.parse(out) as { Dir?: string; Error?: string }).Dir;
  if (!dir) throw new Error(`go mod download ${module}@${version} gave no folder: ${out}`);
  return dir;
}

export interface SqlStore {
  plugin: string;
  host: string;
  port: number;
  user: string;
  password: string;
}

/**
 * What the auto-setup image of docker-compose.yml does before it starts the server: creates the `temporal` and
 * `temporal_visibility` databases and applies their schemas with the schema tool (`setup-schema -v 0.0`, then
 * `update-schema -d` over the versioned folder of the server's release). Returns the commands it ran.
 */
export function applyTemporalSchemas(opts: { sqlTool: string; schemaRoot: string; store: SqlStore; log: (msg: string) => void }): string[][] {
  const { store } = opts;
  const base = ['--plugin', store.plugin, '--ep', store.host, '-p', String(store.port), '-u', store.user, '--pw', store.password];
  const ran: string[][] = [];
  const run = (args: string[]) => {
    ran.push([path.basename(opts.sqlTool), ...args]);
    execFileSync(opts.sqlTool, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  };
  for (const [db, folder] of [['temporal', 'temporal'], ['temporal_visibility', 'visibility']] as const) {
    const versioned = path.join(opts.schemaRoot, folder, 'versioned');
    if (!fs.existsSync(versioned)) throw new Error(`no schema folder ${versioned}`);
    opts.log(`schema tool: database ${db} (${path.relative(path.dirname(path.dirname(opts.schemaRoot)), versioned)})`);
    run([...base, '--db', db, 'create']);
    run([...base, '--db', db, 'setup-schema', '-v', '0.0']);
    run([...base, '--db', db, 'update-schema', '-d', versioned]);
  }
  return ran;
}

/** Loopback ports of the server's four services (frontend gRPC and HTTP, membership, internal gRPC). */
export interface TemporalPorts {
  frontend: number;
  frontendHttp: number;
  frontendMembership: number;
  history: number;
  historyMembership: number;
  matching: number;
  matchingMembership: number;
  worker: number;
  workerMembership: number;
}

/**
 * The server's configuration: the auto-setup image's template (docker/config_template.yaml of the release) with its
 * defaults for DB=postgres12 (4 history shards, SQL visibility in `temporal_visibility`), bound to 127.0.0.1.
 */
export function temporalServerConfig(
  store: SqlStore,
  ports: TemporalPorts,
  numHistoryShards = 4,
  tuning: { dynamicConfigFile?: string; pprofPort?: number } = {},
): string {
  const ip = '127.0.0.1';
  const sql = (databaseName: string, maxConns: number) => ({
    sql: {
      pluginName: store.plugin,
      databaseName,
      connectAddr: `${store.host}:${store.port}`,
      connectProtocol: 'tcp',
      user: store.user,
      password: store.password,
      maxConns,
      maxIdleConns: maxConns,
      maxConnLifetime: '1h',
    },
  });
  const rpc = (grpcPort: number, membershipPort: number, httpPort?: number) => ({ rpc: { grpcPort, membershipPort, bindOnIP: ip, ...(httpPort ? { httpPort } : {}) } });
  return stringify({
    log: { stdout: true, level: 'warn' },
    persistence: {
      numHistoryShards,
      defaultStore: 'default',
      visibilityStore: 'visibility',
      datastores: { default: sql('temporal', 20), visibility: sql('temporal_visibility', 10) },
    },
    global: { membership: { maxJoinDuration: '30s', broadcastAddress: ip }, pprof: { port: tuning.pprofPort ?? 0 } },
    services: {
      frontend: rpc(ports.frontend, ports.frontendMembership, ports.frontendHttp),
      matching: rpc(ports.matching, ports.matchingMembership),
      history: rpc(ports.history, ports.historyMembership),
      worker: rpc(ports.worker, ports.workerMembership),
    },
    clusterMetadata: {
      enableGlobalNamespace: false,
      failoverVersionIncrement: 10,
      masterClusterName: 'active',
      currentClusterName: 'active',
      clusterInformation: {
        active: { enabled: true, initialFailoverVersion: 1, rpcName: 'frontend', rpcAddress: `${ip}:${ports.frontend}`, httpAddress: `${ip}:${ports.frontendHttp}` },
      },
    },
    dcRedirectionPolicy: { policy: 'noop' },
    // The file startTemporalServer writes into its config folder (an absolute path), when a run tunes the server.
    ...(tuning.dynamicConfigFile ? { dynamicConfigClient: { filepath: tuning.dynamicConfigFile, pollInterval: '60s' } } : {}),
  });
}

/** Starts `temporal-server start` on a config folder written for it; resolves once the frontend accepts connections. */
export async function startTemporalServer(opts: { binary: string; dir: string; config: string; dynamicConfig?: Record<string, unknown>; port: number; logFile: string }): Promise<ManagedProcess> {
  fs.mkdirSync(path.join(opts.dir, 'config'), { recursive: true });
  fs.writeFileSync(path.join(opts.dir, 'config', 'rehearsal.yaml'), opts.config);
  // Dynamic config values as the server reads them: each key a list of { value, constraints } (none: global).
  if (opts.dynamicConfig) {
    const entries = Object.entries(opts.dynamicConfig).map(([k, value]) => [k, [{ value, constraints: {} }]]);
    fs.writeFileSync(path.join(opts.dir, 'config', 'dynamicconfig.yaml'), stringify(Object.fromEntries(entries)));
  }
  const proc = startProcess('temporal-server', opts.binary, ['--root', opts.dir, '--config', 'config', '--env', 'rehearsal', '--allow-no-auth', 'start'], { logFile: opts.logFile });
  await untilReady(proc, waitForPort('127.0.0.1', opts.port, 120_000, 'the Temporal server'), opts.logFile);
  return proc;
}

/** Temporal Web UI (the ui-server of docker-compose.yml's `temporal-ui` image) on loopback. */
export async function startTemporalUi(opts: { binary: string; dir: string; temporalAddress: string; port: number; logFile: string }): Promise<ManagedProcess> {
  fs.mkdirSync(path.join(opts.dir, 'config'), { recursive: true });
  fs.writeFileSync(
    path.join(opts.dir, 'config', 'rehearsal.yaml'),
    stringify({ temporalGrpcAddress: opts.temporalAddress, host: '127.0.0.1', port: opts.port, publicPath: '', enableUi: true, defaultNamespace: 'default', cors: { allowOrigins: [] } }),
  );
  const proc = startProcess('temporal-ui', opts.binary, ['--root', opts.dir, '--config', 'config', '--env', 'rehearsal', 'start'], { logFile: opts.logFile });
  await untilReady(proc, waitForPort('127.0.0.1', opts.port, 60_000, 'Temporal Web UI'), opts.logFile);
  return proc;
}

async function untilReady(proc: ManagedProcess, ready: Promise<void>, logFile: string): Promise<void> {
  const failed = proc.exited.then((code) => {
    throw new Error(`${proc.name} exited early (code ${code}); see ${logFile}`);
  });
  try {
    await Promise.race([ready, failed]);
  } catch (err) {
    await proc.stop();
    throw err;
  }
  failed.catch(() => undefined);
}
