import { randomUUID } from 'node:crypto';
import { loadConfig } from '../../domain/config';
import { uuidv7 } from '../../domain/ids';
import { returnPathAddress } from '../../domain/inbound/return-path';
import { deliver } from '../helpers/smtp-client';
import { pooled, useFaultStack, waitUntil } from './support';

/**
 * `kill -9` of the worker while bounces arrive: DSNs for 300 sent emails are delivered over SMTP to the inbound server
 * (8 connections at a time) and the worker is killed after a third of them, then started again after two thirds, so
 * messages arrive while no worker runs and others are in flight when it dies. Counted: every DSN was answered 250,
 * every email ends BOUNCED with exactly one `email.bounced`, and every stored message is PROCESSED once. Prints
 * `[fault inbound-kill]`.
 */

const EMAILS = 300;
const f = useFaultStack('inbound-kill');

test('kill -9 of the worker while DSNs arrive: none lost, each applied once', async () => {
  await f.stack.startInbound();
  const secret = loadConfig({ ...process.env, DATABASE_URL: f.stack.databaseUrl }).appSecret;
  const bounceHost = `bounces.${f.domain}`;
  const tag = randomUUID().slice(0, 8);
  // Sent emails, as the delivery records them (the sending itself is not what this test is about).
  const emails = Array.from({ length: EMAILS }, (_, i) => ({ id: uuidv7(), to: `${tag}-${i}@example.com` }));
  await f.db.query(
    `with c as (
       insert into contacts (id, project_id, email, subscribed, data)
       select gen_random_uuid(), $1, t, true, '{}' from unnest($2::text[]) t returning id, email
     )
     insert into emails (id, project_id, contact_id, kind, to_email, from_email, subject, html, status, message_id, sent_at)
     select e.id, $1, c.id, 'TRANSACTIONAL', e.to_email, $3, 'Hello', '<p>x</p>', 'SENT', '<' || e.id || '@' || $4 || '>', now()
     from unnest($5::uuid[], $2::text[]) as e(id, to_email) join c on c.email = e.to_email`,
    [f.project.projectId, emails.map((e) => e.to), `news@${f.domain}`, f.domain, emails.map((e) => e.id)],
  );
  const port = f.stack.inboundPort;
  const dsn = (e: { id: string; to: string }, rp: string) =>
    [
      `From: Mail Delivery System <MAILER-DAEMON@mta.test>`,
      `To: ${rp}`,
      `Subject: Undelivered Mail Returned to Sender`,
      `Message-ID: <${randomUUID()}@mta.test>`,
      `MIME-Version: 1.0`,
      `Content-Type: multipart/report; report-type=delivery-status; boundary="b"`,
      ``,
      `--b`,
      `Content-Type: text/plain`,
      ``,
      `<${e.to}>: User unknown`,
      `--b`,
      `Content-Type: message/delivery-status`,
      ``,
      `Reporting-MTA: dns; mta.test`,
      ``,
      `Final-Recipient: rfc822; ${e.to}`,
      `Action: failed`,
      `Status: 5.1.1`,
      `Diagnostic-Code: smtp; 550 5.1.1 User unknown`,
      `--b--`,
      ``,
    ].join('\r\n');
  let done = 0;
  const kills: string[] = [];
  let restarting: Promise<void> | undefined;
  const t0 = Date.now();
  const replies = await pooled(emails, 8, async (e) => {
    const rp = returnPathAddress(e.id, bounceHost, secret);
    const r = await deliver(port, '', [rp], dsn(e, rp));
    done++;
    if (done === Math.floor(EMAILS / 3)) {
      await f.stack.kill('worker');
      kills.push(`killed at ${done}`);
    }
    if (done === Math.floor((2 * EMAILS) / 3)) {
      restarting = f.stack.startWorker();
      kills.push(`restarted at ${done}`);
    }
    return r.data?.code;
  });
  await restarting;
  expect(replies.filter((c) => c !== 250)).toEqual([]);
  await waitUntil('every email BOUNCED', 180_000, async () => {
    const { rows } = await f.db.query(`select count(*)::int as n from emails where id = any($1::uuid[]) and status = 'BOUNCED'`, [emails.map((e) => e.id)]);
    return rows[0].n === EMAILS;
  });
  const events = await f.db.query(
    `select email_id, count(*)::int as n from events where name = 'email.bounced' and email_id = any($1::uuid[]) group by email_id`,
    [emails.map((e) => e.id)],
  );
  expect(events.rows.length).toBe(EMAILS);
  expect(events.rows.filter((r: { n: number }) => r.n !== 1)).toEqual([]);
  const stored = await f.db.query(`select status, count(*)::int as n from inbound_messages where email_id = any($1::uuid[]) group by status`, [emails.map((e) => e.id)]);
  expect(stored.rows).toEqual([{ status: 'PROCESSED', n: EMAILS }]);
  console.log(`[fault inbound-kill] ${EMAILS} DSNs answered 250, ${kills.join(', ')}; all ${EMAILS} BOUNCED once after ${((Date.now() - t0) / 1000).toFixed(1)} s`);
}, 600_000);
