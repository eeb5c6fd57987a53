import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { api } from '../helpers/api';
import { closeDb, db, waitForEmailStatus } from '../helpers/db';
import { expectStatus, projectWithDomain } from '../helpers/automations';
import { deliver } from '../helpers/smtp-client';
import type { TestProject } from '../helpers/fixtures';
import { stackEnv } from '../stack-env';
import { loadConfig } from '../../domain/config';
import { returnPathAddress, unsubscribeAddress } from '../../domain/inbound/return-path';
import { markInboundStarted, storeInbound } from '../../domain/inbound/inbound.repository';
import { processInboundBatch } from '../../domain/inbound/inbound-apply';
import { initOrm } from '../../domain/orm';
import { sql } from '../../domain/db/sql';
import { linkTokens } from '../../domain/tracking/tokens';

/**
 * Mail that comes back, over SMTP to the real inbound server (api/inbound.ts), processed by the real worker's
 * `inbound-mail/<id>` workflow: DSNs, an ARF report, the unsubscribe mailto:, an out-of-office and a reply, each
 * asserted on the email's state, the events and the stored message; and what the server refuses.
 */

const secret = loadConfig({ ...process.env, DATABASE_URL: stackEnv().databaseUrl }).appSecret;
const port = () => stackEnv().inboundSmtpPort;
let project: TestProject;
let domain: string;
let bounceHost: string;

beforeAll(async () => {
  ({ project, domain } = await projectWithDomain('inbound'));
  bounceHost = `bounces.${domain}`;
});
afterAll(closeDb);

/** A sent email of the project: its id, recipient, Message-ID and contact. */
async function sentEmail() {
  const to = `rcpt-${randomUUID().slice(0, 8)}@example.com`;
  const body = { to, from: `news@${domain}`, subject: 'Hello', body: '<p>Hello there</p>' };
  const res = expectStatus(await api('POST', '/v1/send', { key: project.secretKey, body }), 200);
  const id: string = res.data.emails[0].email;
  const row = await waitForEmailStatus(id, 'SENT');
  return { id, to, messageId: row.message_id as string, contactId: row.contact_id as string };
}

/** Waits until the stored inbound message `digestOf` names is processed; returns its row. */
async function processed(where: string, values: unknown[], timeoutMs = 30_000): Promise<Record<string, any>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { rows } = await db().query(`select * from inbound_messages where ${where} order by received_at desc limit 1`, values);
    if (rows[0]?.status === 'PROCESSED') return rows[0];
    if (Date.now() > deadline) throw new Error(`inbound message not processed: ${JSON.stringify(rows[0] ?? null)}`);
    await new Promise((r) => setTimeout(r, 150));
  }
}

const suppression = async (address: string) =>
  (await db().query<{ reason: string; source: string; email_id: string }>(`select reason, source, email_id from suppressions where project_id = $1 and email = $2`, [project.projectId, address])).rows;

const events = async (emailId: string) =>
  (await db().query<{ name: string; data: any }>(`select name, data from events where email_id = $1 order by created_at, id`, [emailId])).rows;

/** A Postfix-shaped DSN (RFC 3464) about `email`, to its return path. */
function postfixDsn(email: { to: string; messageId: string }, returnPath: string, opts: { action?: 'failed' | 'delayed'; status?: string; diagnostic?: string } = {}) {
  const boundary = `${randomUUID()}/mta.test`;
  const action = opts.action ?? 'failed';
  const status = opts.status ?? '5.1.1';
  return [
    `Return-Path: <>`,
    `Date: ${new Date().toUTCString()}`,
    `From: Mail Delivery System <MAILER-DAEMON@mta.test>`,
    `Subject: ${action === 'failed' ? 'Undelivered Mail Returned to Sender' : 'Delayed Mail (still being retried)'}`,
    `To: ${returnPath}`,
    `Auto-Submitted: auto-replied`,
    `MIME-Version: 1.0`,
    `Content-Type: multipart/report; report-type=delivery-status; boundary="${boundary}"`,
    `Message-Id: <${randomUUID()}@mta.test>`,
    ``,
    `--${boundary}`,
    `Content-Description: Notification`,
    `Content-Type: text/plain; charset=us-ascii`,
    ``,
    `This is the mail system at host mta.test.`,
    ``,
    `<${email.to}>: ${opts.diagnostic ?? 'host mx.example.com said: 550 5.1.1 User unknown'}`,
    ``,
    `--${boundary}`,
    `Content-Description: Delivery report`,
    `Content-Type: message/delivery-status`,
    ``,
    `Reporting-MTA: dns; mta.test`,
    `X-Postfix-Queue-ID: 4AB1C2D3E4`,
    `X-Postfix-Sender: rfc822; ${returnPath}`,
    `Arrival-Date: ${new Date().toUTCString()}`,
    ``,
    `Final-Recipient: rfc822; ${email.to}`,
    `Original-Recipient: rfc822;${email.to}`,
    `Action: ${action}`,
    `Status: ${status}`,
    `Remote-MTA: dns; mx.example.com`,
    `Diagnostic-Code: smtp; ${opts.diagnostic ?? '550 5.1.1 User unknown'}`,
    ``,
    `--${boundary}`,
    `Content-Description: Undelivered Message Headers`,
    ...returnedHeaders(email, boundary, returnPath),
  ].join('\r\n');
}

/** An ARF abuse report (RFC 5965) about `email`, quoting its return path, as a feedback loop sends it. */
function arfReport(email: { id: string; to: string; messageId: string }): string {
  const boundary = `arf-${randomUUID()}`;
  return [
    `From: Feedback Loop <fbl@isp.test>`,
    `To: abuse@${bounceHost}`,
    `Subject: FW: Hello`,
    `Date: ${new Date().toUTCString()}`,
    `Message-ID: <${randomUUID()}@isp.test>`,
    `MIME-Version: 1.0`,
    `Content-Type: multipart/report; report-type=feedback-report; boundary="${boundary}"`,
    ``,
    `--${boundary}`,
    `Content-Type: text/plain`,
    ``,
    `This is an email abuse report for an email message received from IP 192.0.2.1.`,
    ``,
    `--${boundary}`,
    `Content-Type: message/feedback-report`,
    ``,
    `Feedback-Type: abuse`,
    `User-Agent: ISP-FBL/1.0`,
    `Version: 1`,
    `Original-Mail-From: <${returnPathAddress(email.id, bounceHost, secret)}>`,
    `Original-Rcpt-To: <${email.to}>`,
    `Arrival-Date: ${new Date().toUTCString()}`,
    ``,
    `--${boundary}`,
    ...returnedHeaders(email, boundary),
  ].join('\r\n');
}

/** The last part of a report: the returned message's headers (with the return path it was sent with, if given). */
function returnedHeaders(email: { to: string; messageId: string }, boundary: string, returnPath?: string): string[] {
  return [
    `Content-Type: text/rfc822-headers`,
    ``,
    ...(returnPath ? [`Return-Path: <${returnPath}>`] : []),
    `From: news@${domain}`,
    `To: ${email.to}`,
    `Subject: Hello`,
    `Message-ID: ${email.messageId}`,
    ``,
    `--${boundary}--`,
    ``,
  ];
}

describe('bounces (DSN)', () => {
  test('a hard DSN to the return path marks the email BOUNCED with email.bounced (source dsn), once, however often it is delivered', async () => {
    const email = await sentEmail();
    const rp = returnPathAddress(email.id, bounceHost, secret);
    const dsn = postfixDsn(email, rp);
    const first = await deliver(port(), '', [rp], dsn);
    expect(first.mail.code).toBe(250);
    expect(first.rcpt.map((r) => r.code)).toEqual([250]);
    expect(first.data?.code).toBe(250);
    // The same bytes again (an MTA that lost our 250): stored once, processed once.
    const again = await deliver(port(), '', [rp], dsn);
    expect(again.data?.code).toBe(250);
    const row = await processed('email_id = $1', [email.id]);
    expect(row).toMatchObject({ kind: 'bounce', status: 'PROCESSED', project_id: project.projectId, contact_id: email.contactId });
    expect(row.outcome).toMatchObject({ kind: 'bounce', outcome: 'applied', detail: 'hard', events: ['email.bounced'] });
    const stored = await waitForEmailStatus(email.id, 'BOUNCED');
    expect(stored.error).toMatch(/hard, 5\.1\.1/);
    const evs = await events(email.id);
    expect(evs.filter((e) => e.name === 'email.bounced')).toEqual([
      {
        name: 'email.bounced',
        data: expect.objectContaining({ source: 'dsn', format: 'rfc3464', bounceType: 'Permanent', status: '5.1.1', action: 'failed', reportingMTA: 'mta.test', inboundId: row.id }),
      },
    ]);
    expect((await db().query(`select count(*)::int as n from inbound_messages where email_id = $1`, [email.id])).rows[0].n).toBe(1);
    // The address is suppressed: no send path mails it again.
    expect(await suppression(email.to)).toEqual([{ reason: 'hard_bounce', source: 'dsn', email_id: email.id }]);
    const again2 = expectStatus(await api('POST', '/v1/send', { key: project.secretKey, body: { to: email.to, from: `news@${domain}`, subject: 'Again', body: '<p>x</p>' } }), 200);
    expect(again2.data.emails[0]).toMatchObject({ status: 'SUPPRESSED' });
  });

  test('a delayed (4.x.x) DSN is a transient bounce: recorded, the email stays SENT', async () => {
    const email = await sentEmail();
    const rp = returnPathAddress(email.id, bounceHost, secret);
    const res = await deliver(port(), '', [rp], postfixDsn(email, rp, { action: 'delayed', status: '4.2.2', diagnostic: '452 4.2.2 Mailbox full' }));
    expect(res.data?.code).toBe(250);
    const row = await processed('email_id = $1', [email.id]);
    expect(row.outcome).toMatchObject({ kind: 'bounce', outcome: 'applied', detail: 'soft' });
    expect((await db().query(`select status from emails where id = $1`, [email.id])).rows[0].status).toBe('SENT');
    expect((await events(email.id)).find((e) => e.name === 'email.bounced')?.data).toMatchObject({ source: 'dsn', bounceType: 'Transient', transient: true });
    // A delay notice suppresses nothing and counts for nothing (the message may still arrive).
    expect(await suppression(email.to)).toEqual([]);
    expect((await db().query(`select count(*)::int as n from suppression_soft_bounces where email = $1`, [email.to])).rows[0].n).toBe(0);
  });

  test('a DSN faster than our own record of SENT waits (the run retries) and is applied once the email is SENT; a DSN beside it is not held back', async () => {
    const early = await sentEmail();
    const other = await sentEmail();
    // As if the relay's DSN came back before the delivery recorded its SMTP outcome.
    await db().query(`update emails set status = 'SENDING' where id = $1`, [early.id]);
    const rps = [returnPathAddress(early.id, bounceHost, secret), returnPathAddress(other.id, bounceHost, secret)];
    await Promise.all([deliver(port(), '', [rps[0]!], postfixDsn(early, rps[0]!)), deliver(port(), '', [rps[1]!], postfixDsn(other, rps[1]!))]);
    await waitForEmailStatus(other.id, 'BOUNCED');
    await new Promise((r) => setTimeout(r, 1500));
    expect((await db().query(`select status from inbound_messages where $1 = any(rcpt_to)`, [rps[0]])).rows[0].status).toBe('RECEIVED');
    await db().query(`update emails set status = 'SENT' where id = $1`, [early.id]);
    await waitForEmailStatus(early.id, 'BOUNCED', 30_000);
    expect((await events(early.id)).filter((e) => e.name === 'email.bounced')).toHaveLength(1);
  });

  test('a DSN that names an email only by Message-ID (no return path of ours) changes nothing: recorded as unmatched', async () => {
    const email = await sentEmail();
    const res = await deliver(port(), '', [`postmaster@${bounceHost}`], postfixDsn(email, `someone@${domain}`));
    expect(res.data?.code).toBe(250);
    const row = await processed(`rcpt_to = $1::text[]`, [[`postmaster@${bounceHost}`]]);
    expect(row.outcome).toMatchObject({ kind: 'bounce', outcome: 'unmatched' });
    expect((await db().query(`select status from emails where id = $1`, [email.id])).rows[0].status).toBe('SENT');
    expect((await events(email.id)).map((e) => e.name)).not.toContain('email.bounced');
  });
});

describe('a batch of inbound messages (one inbound-mail run), applied together', () => {
  test('two hard DSNs of one email, a message-level failure, an unproven DSN and a complaint: each as if applied one by one', async () => {
    // The batch is built here and applied by the activity's own function, so which messages share a run is certain.
    const [hard, soft, complained, bystander] = [await sentEmail(), await sentEmail(), await sentEmail(), await sentEmail()];
    await db().query(`update contacts set subscribed = true where id = $1`, [complained.contactId]);
    const rp = (e: { id: string }) => returnPathAddress(e.id, bounceHost, secret);
    const messages: { rcpt: string; raw: string }[] = [
      { rcpt: rp(hard), raw: postfixDsn(hard, rp(hard)) },
      { rcpt: rp(hard), raw: postfixDsn(hard, rp(hard), { status: '5.1.1', diagnostic: '550 5.1.1 No such user here' }) },
      { rcpt: rp(soft), raw: postfixDsn(soft, rp(soft), { status: '5.2.2', diagnostic: '552 5.2.2 Mailbox full' }) },
      // Names the bystander by Message-ID only: proves nothing.
      { rcpt: `postmaster@${bounceHost}`, raw: postfixDsn(bystander, `someone@${domain}`) },
      { rcpt: rp(complained), raw: arfReport(complained) },
    ];
    const orm = await initOrm(stackEnv().databaseUrl, 2);
    try {
      const ids: string[] = [];
      for (const m of messages) {
        const stored = await storeInbound(sql(orm.em), { mailFrom: '', rcptTo: [m.rcpt], remoteAddress: '127.0.0.1', helo: 'test', raw: Buffer.from(m.raw) });
        ids.push(stored.id);
      }
      // Claimed for a run of the test's own, so the inbound server's sweeper leaves them alone.
      await markInboundStarted(sql(orm.em), ids, `inbound-mail/test-${randomUUID()}`);
      const outcomes = await processInboundBatch(orm.em.fork(), loadConfig({ ...process.env, DATABASE_URL: stackEnv().databaseUrl }), ids);
      expect(outcomes.map((o) => [o.kind, o.outcome, o.events])).toEqual([
        ['bounce', 'applied', ['email.bounced']],
        ['bounce', 'unchanged', []],
        ['bounce', 'applied', ['email.bounced']],
        ['bounce', 'unmatched', []],
        ['complaint', 'applied', ['email.complained', 'contact.unsubscribed']],
      ]);
      // Applied again (a retried run): every message answers what it did, and nothing changes twice.
      expect(await processInboundBatch(orm.em.fork(), loadConfig({ ...process.env, DATABASE_URL: stackEnv().databaseUrl }), ids)).toMatchObject(outcomes);
    } finally {
      await orm.close();
    }
    const status = async (id: string) => (await db().query(`select status, error from emails where id = $1`, [id])).rows[0];
    expect(await status(hard.id)).toMatchObject({ status: 'BOUNCED' });
    expect((await events(hard.id)).filter((e) => e.name === 'email.bounced')).toHaveLength(1);
    expect(await suppression(hard.to)).toEqual([{ reason: 'hard_bounce', source: 'dsn', email_id: hard.id }]);
    // A full mailbox is about this message, not the address: BOUNCED, counted as a soft bounce, not suppressed (yet).
    expect(await status(soft.id)).toMatchObject({ status: 'BOUNCED' });
    expect(await suppression(soft.to)).toEqual([]);
    expect((await db().query(`select count(*)::int as n from suppression_soft_bounces where email = $1 and email_id = $2`, [soft.to, soft.id])).rows[0].n).toBe(1);
    expect(await status(bystander.id)).toMatchObject({ status: 'SENT' });
    expect(await suppression(complained.to)).toEqual([{ reason: 'complaint', source: 'arf', email_id: complained.id }]);
    expect((await db().query(`select subscribed from contacts where id = $1`, [complained.contactId])).rows[0].subscribed).toBe(false);
  });
});

describe('DSNs in the shapes real mail systems produce (test/fixtures/inbound), delivered over SMTP', () => {
  const fixture = (name: string) => fs.readFileSync(path.join(__dirname, '..', 'fixtures', 'inbound', name), 'latin1');
  /** The fixture about our email: its return path (every b-…@bounces.shop.example) is the email's own. */
  const about = (raw: string, rp: string) => raw.replace(/b-[a-z2-7]{48}@bounces\.shop\.example/gi, rp);
  test.each([
    ['dsn-postfix-hard.eml', 'hard'],
    ['dsn-exim-hard.eml', 'hard'],
    ['dsn-sendmail-hard.eml', 'hard'],
    ['dsn-exchange-online-hard.eml', 'hard'],
    ['dsn-gmail-hard.eml', 'hard'],
    ['dsn-yahoo-hard.eml', 'hard'],
    ['bounce-qmail-text.eml', 'hard'],
    ['bounce-exchange-legacy-text.eml', 'hard'],
    ['dsn-postfix-delayed.eml', 'soft'],
    ['dsn-exim-delayed.eml', 'soft'],
    ['dsn-gmail-delayed.eml', 'soft'],
    ['dsn-postfix-expired-soft.eml', 'soft'],
  ] as const)('%s: a %s bounce', async (name, kind) => {
    const email = await sentEmail();
    const rp = returnPathAddress(email.id, bounceHost, secret);
    const res = await deliver(port(), '', [rp], about(fixture(name), rp));
    expect(res.data?.code).toBe(250);
    const row = await processed('email_id = $1', [email.id]);
    expect(row.outcome).toMatchObject({ kind: 'bounce', outcome: 'applied', detail: kind, events: ['email.bounced'] });
    const status = (await db().query(`select status from emails where id = $1`, [email.id])).rows[0].status;
    expect(status).toBe(kind === 'hard' ? 'BOUNCED' : 'SENT');
    expect((await events(email.id)).find((e) => e.name === 'email.bounced')?.data).toMatchObject({ source: 'dsn', bounceType: kind === 'hard' ? 'Permanent' : 'Transient' });
  });

  test('an ARF report without the original, and a bounce with a nested message/rfc822, are applied by the quoted return path', async () => {
    for (const name of ['arf-without-original.eml', 'dsn-nested-rfc822.eml']) {
      const email = await sentEmail();
      const rp = returnPathAddress(email.id, bounceHost, secret);
      const raw = fixture(name).replace(/b-[a-z2-7]{48}@bounces\.(shop|elsewhere)\.example/gi, rp);
      expect((await deliver(port(), '', [`abuse@${bounceHost}`], raw)).data?.code).toBe(250);
      const row = await processed('email_id = $1', [email.id]);
      expect(row.outcome).toMatchObject({ outcome: 'applied', emailId: email.id });
    }
  });
});

test('an ARF complaint: email.complained (source arf) and the contact unsubscribed via complaint', async () => {
  const email = await sentEmail();
  await db().query(`update contacts set subscribed = true where id = $1`, [email.contactId]);
  const arf = arfReport(email);
  // Feedback loops send to the address the sender registered (abuse@ the bounce host), with our return path quoted.
  const res = await deliver(port(), `fbl@isp.test`, [`abuse@${bounceHost}`], arf);
  expect(res.data?.code).toBe(250);
  const row = await processed('email_id = $1', [email.id]);
  expect(row.outcome).toMatchObject({ kind: 'complaint', outcome: 'applied', detail: 'abuse' });
  const evs = await events(email.id);
  expect(evs.find((e) => e.name === 'email.complained')?.data).toMatchObject({ source: 'arf', complaintFeedbackType: 'abuse' });
  expect(evs.find((e) => e.name === 'contact.unsubscribed')?.data).toMatchObject({ via: 'complaint' });
  expect((await db().query(`select subscribed from contacts where id = $1`, [email.contactId])).rows[0].subscribed).toBe(false);
  expect(await suppression(email.to)).toEqual([{ reason: 'complaint', source: 'arf', email_id: email.id }]);
});

test('mail to the unsubscribe address unsubscribes the contact (via email), once, whatever the body says', async () => {
  const email = await sentEmail();
  await db().query(`update contacts set subscribed = true where id = $1`, [email.contactId]);
  const address = unsubscribeAddress(email.id, bounceHost, secret);
  const mail = (n: number) =>
    [`From: ${email.to}`, `To: ${address}`, `Subject: please stop`, `Message-ID: <${randomUUID()}-${n}@example.com>`, ``, `Yes, subscribe me to more!`, ``].join('\r\n');
  expect((await deliver(port(), email.to, [address], mail(1))).data?.code).toBe(250);
  const row = await processed(`rcpt_to = $1::text[]`, [[address]]);
  expect(row.outcome).toMatchObject({ kind: 'unsubscribe', outcome: 'applied', contactId: email.contactId, events: ['contact.unsubscribed'] });
  expect((await db().query(`select subscribed from contacts where id = $1`, [email.contactId])).rows[0].subscribed).toBe(false);
  const unsub = (await db().query(`select data from events where contact_id = $1 and name = 'contact.unsubscribed'`, [email.contactId])).rows;
  expect(unsub).toEqual([{ data: expect.objectContaining({ via: 'email', inboundId: row.id }) }]);
  // A second mail changes nothing more.
  expect((await deliver(port(), email.to, [address], mail(2))).data?.code).toBe(250);
  await new Promise((r) => setTimeout(r, 300));
  const second = await processed(`rcpt_to = $1::text[] and id <> $2`, [[address], row.id]);
  expect(second.outcome).toMatchObject({ kind: 'unsubscribe', outcome: 'unchanged' });
});

test('mail to unsubscribe@ the bounce host with the List-Unsubscribe subject (`unsubscribe <token>`) unsubscribes its contact', async () => {
  const email = await sentEmail();
  await db().query(`update contacts set subscribed = true where id = $1`, [email.contactId]);
  // The subject a marketing email's mailto: link asks for (tracking/links.ts), as a mail client sends it back.
  const token = linkTokens(secret).sign({ kind: 'contact', contactId: email.contactId, emailId: email.id });
  const to = `unsubscribe@${bounceHost}`;
  const raw = [`From: ${email.to}`, `To: ${to}`, `Subject: unsubscribe ${token}`, `Message-ID: <${randomUUID()}@example.com>`, ``, `.`, ``].join('\r\n');
  expect((await deliver(port(), email.to, [to], raw)).data?.code).toBe(250);
  const row = await processed(`contact_id = $1 and kind = 'unsubscribe'`, [email.contactId]);
  expect(row.outcome).toMatchObject({ outcome: 'applied' });
  expect((await db().query(`select subscribed from contacts where id = $1`, [email.contactId])).rows[0].subscribed).toBe(false);
  // A subject whose token is not ours unsubscribes nobody.
  const forged = [`From: x@example.com`, `To: ${to}`, `Subject: unsubscribe ${token.slice(0, -2)}xx`, `Message-ID: <${randomUUID()}@example.com>`, ``, `x`, ``].join('\r\n');
  expect((await deliver(port(), 'x@example.com', [to], forged)).data?.code).toBe(250);
  const unmatched = await processed(`mail_from = 'x@example.com' and kind = 'unsubscribe'`, []);
  expect(unmatched.outcome).toMatchObject({ outcome: 'unmatched' });
});

test('an out-of-office to the return path is an auto-reply, never a bounce; a reply naming our Message-ID becomes email.replied', async () => {
  const email = await sentEmail();
  const rp = returnPathAddress(email.id, bounceHost, secret);
  const ooo = [
    `From: ${email.to}`,
    `To: ${rp}`,
    `Subject: Out of Office: Hello`,
    `Auto-Submitted: auto-replied`,
    `In-Reply-To: ${email.messageId}`,
    `Message-ID: <${randomUUID()}@example.com>`,
    ``,
    `I am away until Monday.`,
    ``,
  ].join('\r\n');
  expect((await deliver(port(), '', [rp], ooo)).data?.code).toBe(250);
  const auto = await processed(`email_id = $1`, [email.id]);
  expect(auto.outcome).toMatchObject({ kind: 'auto-reply', outcome: 'applied', events: ['email.auto_replied'] });
  const reply = [
    `From: Reader <${email.to}>`,
    `To: replies@${bounceHost}`,
    `Subject: Re: Hello`,
    `In-Reply-To: ${email.messageId}`,
    `References: ${email.messageId}`,
    `Message-ID: <${randomUUID()}@example.com>`,
    ``,
    `Thanks, this is exactly what I needed.`,
    ``,
    `On Mon, 1 Jan 2026, news@${domain} wrote:`,
    `> Hello there`,
    ``,
  ].join('\r\n');
  expect((await deliver(port(), email.to, [`replies@${bounceHost}`], reply)).data?.code).toBe(250);
  await processed(`email_id = $1 and kind = 'reply'`, [email.id]);
  const evs = await events(email.id);
  expect(evs.map((e) => e.name)).toEqual(expect.arrayContaining(['email.auto_replied', 'email.replied']));
  expect(evs.map((e) => e.name)).not.toContain('email.bounced');
  expect(evs.find((e) => e.name === 'email.replied')?.data).toMatchObject({ from: email.to, subject: 'Re: Hello', excerpt: 'Thanks, this is exactly what I needed.' });
  expect((await db().query(`select status from emails where id = $1`, [email.id])).rows[0].status).toBe('SENT');
  // The activity feed shows both.
  const feed = expectStatus(await api('GET', `/activity?types=email.replied,email.auto_replied`, { key: project.secretKey }), 200);
  expect(feed.data.map((i: any) => i.type)).toEqual(expect.arrayContaining(['email.replied', 'email.auto_replied']));
});

describe('what the server refuses', () => {
  test('recipients outside the bounce hosts of verified domains (no open relay), forged and unknown local parts: 550', async () => {
    const email = await sentEmail();
    const rp = returnPathAddress(email.id, bounceHost, secret);
    const forged = `${rp.slice(0, 10)}${rp[10] === 'a' ? 'b' : 'a'}${rp.slice(11)}`;
    const res = await deliver(port(), 'x@example.org', [`someone@gmail.com`, `news@${domain}`, forged, `nobody@${bounceHost}`, `unsubscribe@bounces.unverified-${randomUUID().slice(0, 6)}.test`], 'Subject: x\r\n\r\nx\r\n');
    expect(res.rcpt.map((r) => r.code)).toEqual([550, 550, 550, 550, 550]);
    expect(res.rcpt[0]!.text).toMatch(/Relaying denied/);
    expect(res.rcpt[2]!.text).toMatch(/No such recipient/);
  });

  test('a message over the size limit is refused with 552 and stored nowhere', async () => {
    const email = await sentEmail();
    const rp = returnPathAddress(email.id, bounceHost, secret);
    const big = `Subject: big\r\n\r\n${'x'.repeat(998)}\r\n`.repeat(11 * 1024);
    const res = await deliver(port(), '', [rp], big);
    expect(res.data?.code).toBe(552);
    expect((await db().query(`select count(*)::int as n from inbound_messages where rcpt_to = $1::text[]`, [[rp]])).rows[0].n).toBe(0);
  });

  test('garbage is stored and recorded as unknown, and the server keeps serving', async () => {
    const email = await sentEmail();
    const rp = returnPathAddress(email.id, bounceHost, secret);
    const junk = Buffer.concat([Buffer.from('Content-Type: multipart/mixed; boundary="x"\r\n\r\n--x\r\nContent-Type: message/rfc822\r\n\r\n'), Buffer.from([0xff, 0xfe, 0x00, 0x80]), Buffer.from('\r\n--x')]);
    expect((await deliver(port(), '', [rp], junk)).data?.code).toBe(250);
    const row = await processed('email_id = $1 or ($2 = any(rcpt_to))', [email.id, rp]);
    expect(row.status).toBe('PROCESSED');
    expect((await db().query(`select status from emails where id = $1`, [email.id])).rows[0].status).toBe('SENT');
  });
});
