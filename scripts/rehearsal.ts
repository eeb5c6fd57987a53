// `npm run rehearsal`: docker-compose.yml's production shape on this machine without containers (README › Production
// rehearsal). `-- --check` brings it up, prints the banner, checks the API answers through the balancer and stops;
// `-- --build` only builds what it needs (the Temporal binaries with Go, the production install) and exits.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { prepareRehearsal, startRehearsal, type Rehearsal } from './rehearsal/stack';

const check = process.argv.includes('--check');
const buildOnly = process.argv.includes('--build');
const log = (msg: string) => console.log(`[rehearsal] ${msg}`);

function banner(r: Rehearsal, dataDir: string): string {
  const procs = r.processes();
  return [
    '',
    'Mailwright production rehearsal is running (NODE_ENV=production, docker-compose.yml commands and environment).',
    `  API (balanced)     ${r.apiUrl}   -> ${r.apiUrls.join(', ')}`,
    `  Temporal           ${r.temporalAddress}   (real server, postgres12 persistence and SQL visibility)`,
    r.temporalUiUrl ? `  Temporal Web UI    ${r.temporalUiUrl}` : '  Temporal Web UI    off',
    `  Postgres           ${r.databaseUrl.replace(/:[^:@/]*@/, ':***@')}`,
    r.mailboxUrl ? `  Mailbox (MailDev)  ${r.mailboxUrl}   (SMTP ${r.smtpUrl})` : `  SMTP relay         ${r.smtpUrl}`,
    `  Inbound SMTP       127.0.0.1:${r.inboundSmtpPort}   (metrics ${r.inboundMetricsUrl})`,
    '  Processes',
    ...procs.map((p) => `    ${p.name.padEnd(10)} pid ${String(p.pid).padEnd(8)}${p.port ? ` port ${p.port}` : ''}   metrics ${p.metricsPort}`),
    '  Jobs run before them, in order',
    ...r.jobs.map((j) => `    ${j}`),
    '',
    `Logs and data in ${dataDir} (removed on exit). ${check ? '' : 'Ctrl-C stops everything.'}`,
    '',
  ].join('\n');
}

async function main() {
  if (buildOnly) {
    const built = prepareRehearsal({ ui: true, log });
    log(`ready: ${[built.serverBin, built.sqlTool, built.uiBin, built.cli, built.depsDir].join(', ')}`);
    return;
  }
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'mailwright-rehearsal-'));
  // Set as soon as the rehearsal starts anything, so Ctrl-C during the start stops what is up (the app processes lead
  // process groups of their own, which the terminal's SIGINT does not reach).
  let stopStack: (() => Promise<void>) | undefined;
  let stopping = false;
  const shutdown = async (code: number) => {
    if (stopping) return;
    stopping = true;
    log('stopping...');
    await stopStack?.();
    if (!process.env.KEEP_REHEARSAL_DATA) fs.rmSync(dataDir, { recursive: true, force: true });
    log('stopped');
    process.exit(code);
  };
  process.on('SIGINT', () => void shutdown(0));
  process.on('SIGTERM', () => void shutdown(0));
  const started = Date.now();
  const rehearsal = await startRehearsal({
    dataDir,
    onStarting: (stop) => (stopStack = stop),
    apiPort: process.env.PORT ? Number(process.env.PORT) : undefined,
    log,
    onUnexpectedExit: (name, code) => {
      log(`${name} exited with code ${code}; stopping everything (its log: ${path.join(dataDir, `${name}.log`)})`);
      process.env.KEEP_REHEARSAL_DATA = '1';
      void shutdown(1);
    },
  });
  console.log(banner(rehearsal, dataDir));
  log(`up in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  if (check) {
    for (let i = 0; i < rehearsal.apiUrls.length * 2; i++) {
      const res = await fetch(`${rehearsal.apiUrl}/health`, { headers: { connection: 'close' } });
      if (!res.ok) throw new Error(`GET /health through the balancer answered ${res.status}`);
    }
    log(`GET /health answered through the balancer (connections per API: ${rehearsal.balancerCounts().join(', ')})`);
    if (rehearsal.temporalUiUrl) {
      const ui = await fetch(rehearsal.temporalUiUrl);
      if (!ui.ok) throw new Error(`Temporal Web UI answered ${ui.status}`);
      log('Temporal Web UI answered');
    }
    await shutdown(0);
  }
}

main().catch((err: unknown) => {
  console.error(`[rehearsal] failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
  process.exit(1);
});
