import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync, spawnSync } from 'node:child_process';
import { startProcess, waitForPort } from './process';
import { SA, SEARCH_ATTRIBUTE_CLI_ARGS } from '../../temporal/search-attributes';

/** The CLI release that builds with `go install` (later tags carry a `replace` directive). */
const TEMPORAL_CLI_VERSION = 'v1.5.1';

/** Where tools built with `go install` are cached: ~/.cache/mailwright/bin (the Temporal CLI, stripe-mock). */
export function temporalCacheDir(): string {
  const base = process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache');
  return path.join(base, 'mailwright', 'bin');
}

export function onPath(cmd: string): string | undefined {
  const r = spawnSync('sh', ['-c', `command -v ${cmd}`], { encoding: 'utf8' });
  const found = r.stdout.trim();
  return r.status === 0 && found ? found : undefined;
}

/**
 * Finds the `temporal` CLI: $TEMPORAL_CLI_PATH, then PATH, then the cache, then builds it into the cache with
 * Go when Go is installed. Returns undefined when none works (the caller may then try the SDK's download).
 */
export function resolveTemporalBinary(log: (msg: string) => void = console.log): string | undefined {
  const explicit = process.env.TEMPORAL_CLI_PATH;
  if (explicit) {
    if (!fs.existsSync(explicit)) throw new Error(`TEMPORAL_CLI_PATH=${explicit} does not exist`);
    return explicit;
  }
  const fromPath = onPath('temporal');
  if (fromPath) return fromPath;
  const cached = path.join(temporalCacheDir(), 'temporal');
  if (fs.existsSync(cached)) return cached;
  const go = onPath('go');
  if (!go) return undefined;
  log(`Building the Temporal CLI ${TEMPORAL_CLI_VERSION} with Go into ${temporalCacheDir()} (once; a few minutes)...`);
  fs.mkdirSync(temporalCacheDir(), { recursive: true });
  execFileSync(go, ['install', `github.com/temporalio/cli/cmd/temporal@${TEMPORAL_CLI_VERSION}`], {
    stdio: 'inherit',
    env: { ...process.env, GOBIN: temporalCacheDir(), GOFLAGS: '-mod=mod' },
  });
  return fs.existsSync(cached) ? cached : undefined;
}

const TEMPORAL_INSTALL_HELP = [
  'No Temporal CLI found. Install one of:',
  `  - Go, then run again (Mailwright builds github.com/temporalio/cli/cmd/temporal@${TEMPORAL_CLI_VERSION} once), or`,
  '  - the `temporal` CLI on your PATH (https://docs.temporal.io/cli), or',
  '  - set TEMPORAL_CLI_PATH to the binary, or TEMPORAL_ADDRESS to a running Temporal server.',
].join('\n');

export interface RunningTemporal {
  address: string;
  uiUrl?: string;
  stop(): Promise<void>;
}

/** Starts `temporal server start-dev` with Mailwright's search attributes registered. */
export async function startTemporalDevServer(opts: {
  port: number;
  uiPort?: number;
  dbFile?: string;
  logFile?: string;
  namespace?: string;
  log?: (msg: string) => void;
}): Promise<RunningTemporal> {
  const log = opts.log ?? console.log;
  const ip = '127.0.0.1';
  const namespace = opts.namespace ?? 'default';
  const binary = resolveTemporalBinary(log);
  if (!binary) return startWithSdkDownload(opts, namespace);
  const args = ['server', 'start-dev', '--ip', ip, '--port', String(opts.port), '--namespace', namespace, '--log-level', 'warn'];
  if (opts.uiPort) args.push('--ui-ip', ip, '--ui-port', String(opts.uiPort));
  else args.push('--headless');
  if (opts.dbFile) args.push('--db-filename', opts.dbFile);
  for (const sa of SEARCH_ATTRIBUTE_CLI_ARGS) args.push('--search-attribute', sa);
  const proc = startProcess('temporal', binary, args, { logFile: opts.logFile });
  const failed = proc.exited.then((code) => {
    throw new Error(`temporal dev server exited early (code ${code}); see ${opts.logFile ?? 'its output'}`);
  });
  await Promise.race([waitForPort(ip, opts.port, 60_000, 'the Temporal dev server'), failed]);
  failed.catch(() => undefined);
  return {
    address: `${ip}:${opts.port}`,
    uiUrl: opts.uiPort ? `http://localhost:${opts.uiPort}` : undefined,
    stop: () => proc.stop(),
  };
}

/** Last resort where the machine is online: the SDK downloads and runs a dev server binary itself. */
async function startWithSdkDownload(
  opts: { port: number; uiPort?: number; dbFile?: string },
  namespace: string,
): Promise<RunningTemporal> {
  let testing: typeof import('@temporalio/testing');
  try {
    testing = await import('@temporalio/testing');
  } catch {
    throw new Error(TEMPORAL_INSTALL_HELP);
  }
  try {
    const env = await testing.TestWorkflowEnvironment.createLocal({
      server: {
        executable: { type: 'cached-download' },
        ip: '127.0.0.1',
        port: opts.port,
        namespace,
        ui: Boolean(opts.uiPort),
        uiPort: opts.uiPort,
        dbFilename: opts.dbFile,
        searchAttributes: Object.values(SA),
      },
    });
    return {
      address: `127.0.0.1:${opts.port}`,
      uiUrl: opts.uiPort ? `http://localhost:${opts.uiPort}` : undefined,
      stop: () => env.teardown(),
    };
  } catch (err) {
    throw new Error(`${TEMPORAL_INSTALL_HELP}\n(The SDK's download also failed: ${(err as Error).message})`, { cause: err });
  }
}
