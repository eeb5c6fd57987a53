// `npm run bench:inbound`: inbound messages processed per second on the real stack (issue 25's target: 500/s). N sent
// emails are stored as the delivery records them; then a DSN for each is delivered over SMTP to the inbound server
// (api/inbound.ts) by CONNECTIONS clients, each sending its messages one after another on one session, as an MTA
// does; the worker's inbound-mail workflows classify and apply them. Measured: SMTP acceptance (250s per second) and
// processing (from the first DSN to the last email BOUNCED), and the CPU of each process. Loopback only; stops by
// itself. Options (env): MESSAGES (3000), CONNECTIONS (16), WORKER_NODE_ARGS (e.g. '--cpu-prof --cpu-prof-dir=/tmp/prof').
import { randomUUID } from 'node:crypto';
import { loadConfig } from '../domain/config';
import { uuidv7 } from '../domain/ids';
import { returnPathAddress } from '../domain/inbound/return-path';
import { openSmtp } from '../test/helpers/smtp-client';
import { benchProject, startBenchStack } from './stack';
import { cpuByProcess } from './proc';

const MESSAGES = Number(process.env.MESSAGES ?? 3000);
const CONNECTIONS = Number(process.env.CONNECTIONS ?? 16);

function dsn(to: string, returnPath: string): string {
  const boundary = randomUUID();
  return [
    `From: Mail Delivery System <MAILER-DAEMON@mta.test>`,
    `To: ${returnPath}`,
    `Subject: Undelivered Mail Returned to Sender`,
    `Date: ${new Date().toUTCString()}`,
    `Message-ID: <${randomUUID()}@mta.test>`,
    `Auto-Submitted: auto-replied`,
    `MIME-Version: 1.0`,
    `Content-Type: multipart/report; report-type=delivery-status; boundary="${boundary}"`,
    ``,
    `--${boundary}`,
    `Content-Type: text/plain; charset=us-ascii`,
    ``,
    `This is the mail system at host mta.test.`,
    ``,
    `<${to}>: host mx.example.com said: 550 5.1.1 User unknown`,
    ``,
    `--${boundary}`,
    `Content-Type: message/delivery-status`,
    ``,
    `Reporting-MTA: dns; mta.test`,
    `X-Postfix-Sender: rfc822; ${returnPath}`,
    ``,
    `Final-Recipient: rfc822; ${to}`,
    `Original-Recipient: rfc822;${to}`,
    `Action: failed`,
    `Status: 5.1.1`,
    `Remote-MTA: dns; mx.example.com`,
    `Diagnostic-Code: smtp; 550 5.1.1 User unknown`,
    ``,
    `--${boundary}`,
    `Content-Type: text/rfc822-headers`,
    ``,
    `Return-Path: <${returnPath}>`,
    `From: news@inbound.example.test`,
    `To: ${to}`,
    `Subject: Hello`,
    ``,
    `--${boundary}--`,
    ``,
  ].join('\r\n');
}

async function main() {
  const stack = await startBenchStack({
    smtpUrl: 'smtp://127.0.0.1:9',
    inbound: true,
    workerNodeArgs: process.env.WORKER_NODE_ARGS?.split(' ').filter(Boolean),
  });
  try {
    const domain = 'inbound.example.test';
    const { projectId } = await benchProject(stack.apiUrl, stack.db, domain);
    const secret = loadConfig({ ...process.env, DATABASE_URL: stack.databaseUrl }).appSecret;
    const emails = Array.from({ length: MESSAGES }, (_, i) => ({ id: uuidv7(), to: `user${i}@example.com` }));
    await stack.db.query(
      `with c as (insert into contacts (id, project_id, email, subscribed, data) select gen_random_uuid(), $1, t, true, '{}' from unnest($2::text[]) t returning id, email)
       insert into emails (id, project_id, contact_id, kind, to_email, from_email, subject, html, status, sent_at)
       select e.id, $1, c.id, 'TRANSACTIONAL', e.to_email, $3, 'Hello', '<p>x</p>', 'SENT', now()
       from unnest($4::uuid[], $2::text[]) as e(id, to_email) join c on c.email = e.to_email`,
      [projectId, emails.map((e) => e.to), `news@${domain}`, emails.map((e) => e.id)],
    );
    const pids = { api: stack.api.child.pid!, worker: stack.workers[0]!.child.pid!, inbound: stack.inbound!.child.pid! };
    const cpuBefore = cpuByProcess(pids);
    const t0 = Date.now();
    let next = 0;
    let refused = 0;
    await Promise.all(
      Array.from({ length: CONNECTIONS }, async () => {
        const s = await openSmtp(stack.inboundPort);
        for (let i = next++; i < MESSAGES; i = next++) {
          const e = emails[i]!;
          const rp = returnPathAddress(e.id, `bounces.${domain}`, secret);
          const codes = [(await s.command('MAIL FROM:<>')).code, (await s.command(`RCPT TO:<${rp}>`)).code, (await s.data(dsn(e.to, rp))).code];
          if (codes.some((c) => c !== 250)) refused++;
        }
        await s.close();
      }),
    );
    const acceptedMs = Date.now() - t0;
    for (;;) {
      const { rows } = await stack.db.query(`select count(*)::int as n from emails where project_id = $1 and status = 'BOUNCED'`, [projectId]);
      if (rows[0].n >= MESSAGES - refused) break;
      if (Date.now() - t0 > 600_000) throw new Error(`only ${rows[0].n} of ${MESSAGES} processed after 10 minutes`);
      await new Promise((r) => setTimeout(r, 100));
    }
    const processedMs = Date.now() - t0;
    const cpuAfter = cpuByProcess(pids);
    // The events' consumers (analytics, segments, automations: the outbox) finish after the last BOUNCED; their share.
    for (const t1 = Date.now(); Date.now() - t1 < 120_000; await new Promise((r) => setTimeout(r, 100))) {
      const { rows } = await stack.db.query(`select count(*)::int as n from event_outbox`);
      if (rows[0].n === 0) break;
    }
    const drainedMs = Date.now() - t0;
    const cpuDrained = cpuByProcess(pids);
    const { rows: runs } = await stack.db.query(`select count(distinct workflow_id)::int as n from inbound_messages`);
    const cpu = Object.fromEntries(Object.keys(cpuAfter).map((k) => [k, Math.round(((cpuAfter[k] ?? 0) - (cpuBefore[k] ?? 0)) * 10) / 10]));
    const { rows: events } = await stack.db.query(`select count(*)::int as n from events where project_id = $1 and name = 'email.bounced'`, [projectId]);
    console.log(
      JSON.stringify(
        {
          messages: MESSAGES,
          connections: CONNECTIONS,
          refused,
          acceptedPerSecond: Math.round(MESSAGES / (acceptedMs / 1000)),
          processedPerSecond: Math.round(MESSAGES / (processedMs / 1000)),
          acceptedSeconds: acceptedMs / 1000,
          processedSeconds: processedMs / 1000,
          bouncedEvents: events[0].n,
          workflows: runs[0].n,
          cpuSeconds: cpu,
          outboxDrainedSeconds: drainedMs / 1000,
          cpuSecondsOfTheOutboxAfter: Object.fromEntries(Object.keys(cpuDrained).map((k) => [k, Math.round(((cpuDrained[k] ?? 0) - (cpuAfter[k] ?? 0)) * 10) / 10])),
        },
        null,
        2,
      ),
    );
  } finally {
    await stack.stop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
