// `npm start`: the whole service on embedded defaults, for a laptop. Production runs `npm run serve:api` and
// `npm run serve:worker` against external Postgres, Temporal and SMTP instead (see README and docker-compose.yml).
import path from 'node:path';
import { startInfrastructure, startTsProcess, waitForHttp, ROOT } from './services/stack';
import { initOrm } from '../domain/orm';
import { seedDevData, DEV_DOMAIN } from './dev-seed';
import type { ManagedProcess } from './services/process';

const reset = process.argv.includes('--reset-keys');
const num = (v: string | undefined, d: number) => (v ? Number(v) : d);
const log = (msg: string) => console.log(`[mailwright] ${msg}`);

async function main() {
  const port = num(process.env.PORT, 3000);
  const infra = await startInfrastructure({
    dataDir: path.join(ROOT, '.data'),
    persistent: true,
    ports: {
      postgres: num(process.env.EMBEDDED_PG_PORT, 5433),
      temporal: num(process.env.TEMPORAL_PORT, 7233),
      temporalUi: num(process.env.TEMPORAL_UI_PORT, 8233),
      smtp: num(process.env.MAILDEV_SMTP_PORT, 1025),
      mailboxWeb: num(process.env.MAILDEV_WEB_PORT, 1080),
    },
    log,
  });
  const children: ManagedProcess[] = [];
  let stopping = false;
  const shutdown = async (code: number) => {
    if (stopping) return;
    stopping = true;
    log('stopping...');
    await Promise.all(children.map((c) => c.stop()));
    await infra.stop();
    log('stopped');
    process.exit(code);
  };
  process.on('SIGINT', () => void shutdown(0));
  process.on('SIGTERM', () => void shutdown(0));

  const orm = await initOrm(infra.env.DATABASE_URL!, 2);
  const seed = await seedDevData(orm, reset);
  await orm.close();

  const env = { ...infra.env, PORT: String(port) };
  for (const [name, entry] of [['api', 'api/server.ts'], ['worker', 'temporal/worker.ts'], ['inbound', 'api/inbound.ts']] as const) {
    const child = startTsProcess(name, entry, env, { prefixOutput: true });
    void child.exited.then((code) => {
      if (!stopping) {
        log(`${name} exited with code ${code}; stopping everything`);
        void shutdown(1);
      }
    });
    children.push(child);
  }
  const api = `http://localhost:${port}`;
  await waitForHttp(`http://127.0.0.1:${port}`, 60_000);

  const lines = [
    '',
    'Mailwright is running.',
    `  API                ${api}`,
    `  API docs           ${api}/docs   (OpenAPI: ${api}/openapi.json)`,
    infra.urls.temporalUi ? `  Temporal Web UI    ${infra.urls.temporalUi}` : `  Temporal           ${infra.env.TEMPORAL_ADDRESS}`,
    infra.urls.mailbox ? `  Mailbox (MailDev)  ${infra.urls.mailbox}` : `  SMTP relay         ${infra.env.SMTP_URL}`,
    `  Inbound SMTP       ${process.env.INBOUND_SMTP_HOST ?? '127.0.0.1'}:${process.env.INBOUND_SMTP_PORT ?? '2525'}   (bounces, reports, unsubscribes, replies)`,
    '',
    `  Dashboard login    ${seed.email}${seed.password ? ` / ${seed.password}` : ' (password printed on first start; `npm start -- --reset-keys` resets it)'}`,
  ];
  if (seed.keys) {
    lines.push(
      `  Public key         ${seed.keys.publicKey}`,
      `  Secret key         ${seed.keys.secretKey}`,
      '  (shown once; `npm start -- --reset-keys` rotates both and prints the new ones)',
      '',
      'Try it:',
      `  curl -s ${api}/v1/send -H 'Authorization: Bearer ${seed.keys.secretKey}' -H 'Content-Type: application/json' \\`,
      `    -d '{"to":"you@example.com","from":"hello@${DEV_DOMAIN}","subject":"Hello","body":"<p>Hi {{ email }}</p>"}'`,
    );
  } else {
    lines.push('  API keys           unchanged (run `npm start -- --reset-keys` to rotate and print them)');
  }
  lines.push('', 'Ctrl-C stops everything; data stays in .data/.', '');
  console.log(lines.join('\n'));
}

main().catch((err) => {
  console.error(`[mailwright] failed to start: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
