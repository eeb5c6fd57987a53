import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { ImapFlow } from 'imapflow';
import { Client, Connection } from '@temporalio/client';
import { api } from '../helpers/api';
import { closeDb, db, waitForEmailStatus } from '../helpers/db';
import { expectStatus } from '../helpers/automations';
import { addVerifiedDomain, createTestProject } from '../helpers/fixtures';
import { OwnStack } from '../helpers/own-stack';
import { waitFor, within } from '../helpers/wait';
import { startDovecot, type RunningDovecot } from '../helpers/dovecot';
import { startSmtpCapture } from '../support/smtp-capture';
import { loadConfig } from '../../domain/config';
import { unsubscribeAddress } from '../../domain/inbound/return-path';
import { BOUNCE_MAILBOX_SCHEDULE_ID } from '../../temporal/definitions';
import type { BounceMailboxPoll } from '../../domain/inbound/bounce-mailbox';

/**
 * The bounce mailbox against a real IMAP server (Debian's Dovecot, a private instance): a relay that rewrote the
 * envelope sender leaves its DSNs and ARF reports in the operator's mailbox; the `bounce-mailbox` schedule's poll
 * stores each, hands it to the inbound processing (`inbound-mail` workflows), and moves it to the processed folder.
 * The mailbox's reports carry no signed return path (the domain's return path is not active, as for a relay that
 * bounces to a mailbox), so they are proven by the returned original: a signed `u-` unsubscribe address in its
 * headers, else our Message-ID together with the email's recipient as the failed one.
 *
 * The restart: the worker is started with BOUNCE_MAILBOX_TEST_CRASH_FILE (honoured only with NODE_ENV=test); when
 * that file exists, the poll kills its own process (SIGKILL) after storing half of a batch, before handing any of it
 * on or moving it. A new worker takes the poll's retried activity, and every message is processed exactly once.
 * Run with `npx jest --runInBand --selectProjects mta --runTestsByPath test/mta/bounce-mailbox.test.ts`.
 */

let stack: OwnStack;
let dovecot: RunningDovecot;
let capture: Awaited<ReturnType<typeof startSmtpCapture>>;
let temporal: Client;
let secretKey: string;
let projectId: string;
let domain: string;
let appSecret: string;
const crashFile = path.join(os.tmpdir(), `mw-bounce-mailbox-crash-${process.pid}`);

beforeAll(async () => {
  [capture, dovecot] = await Promise.all([startSmtpCapture(), startDovecot()]);
  const mailboxEnv = {
    BOUNCE_MAILBOX_HOST: dovecot.host,
    BOUNCE_MAILBOX_PORT: String(dovecot.port),
    BOUNCE_MAILBOX_TLS: 'off',
    BOUNCE_MAILBOX_USER: dovecot.user,
    BOUNCE_MAILBOX_PASSWORD: dovecot.password,
    BOUNCE_MAILBOX_FOLDER: 'INBOX',
    BOUNCE_MAILBOX_PROCESSED_FOLDER: 'Processed',
    // The test triggers every poll itself.
    BOUNCE_MAILBOX_POLL_SECONDS: '86400',
  };
  stack = await OwnStack.start({ name: 'bounce-mailbox', env: { SMTP_URL: capture.smtpUrl, ...mailboxEnv }, workerEnv: { BOUNCE_MAILBOX_TEST_CRASH_FILE: crashFile } });
  temporal = new Client({ connection: await Connection.connect({ address: stack.temporalAddress }) });
  appSecret = loadConfig({ ...process.env, DATABASE_URL: stack.databaseUrl }).appSecret;
  const project = await createTestProject('bounce mailbox');
  secretKey = project.secretKey;
  projectId = project.projectId;
  domain = `mbx-${randomUUID().slice(0, 8)}.example.test`;
  await addVerifiedDomain(projectId, domain);
}, 900_000);

afterAll(async () => {
  fs.rmSync(crashFile, { force: true });
  await closeDb();
  await temporal?.connection.close();
  await stack?.stop();
  await capture?.stop();
  await dovecot?.stop();
});

/** An IMAP session of the test's own (the operator's mail client, or the relay's delivery agent). */
async function withImap<T>(fn: (client: ImapFlow) => Promise<T>): Promise<T> {
  const client = new ImapFlow({ host: dovecot.host, port: dovecot.port, secure: false, doSTARTTLS: false, auth: { user: dovecot.user, pass: dovecot.password }, logger: false });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.logout();
  }
}

async function folderCount(folder: string): Promise<number> {
  return withImap(async (c) => {
    await c.mailboxCreate(folder);
    const status = await c.status(folder, { messages: true });
    if (!status) throw new Error(`no STATUS for ${folder}`);
    return status.messages ?? 0;
  });
}

/** Sends one email through the API; resolves with its id, recipient and the header block the relay received. */
async function sendEmail(): Promise<{ emailId: string; to: string; headers: string; messageId: string }> {
  const to = `reader-${randomUUID().slice(0, 8)}@elsewhere.test`;
  const res = expectStatus(await api('POST', '/v1/send', { key: secretKey, body: { to, from: `news@${domain}`, subject: 'Our news', body: '<p>Hello</p>' } }), 200);
  const emailId: string = res.data.emails[0].email;
  await waitForEmailStatus(emailId, 'SENT', 60_000);
  const captured = capture.messages.find((m) => m.to.includes(to));
  if (!captured) throw new Error(`the relay got no message for ${to}`);
  const raw = captured.raw.toString('utf8');
  const headers = raw.slice(0, raw.search(/\r?\n\r?\n/));
  const messageId = /^message-id:\s*(<[^>]+>)/im.exec(headers)![1]!;
  return { emailId, to, headers, messageId };
}

let seq = 0;

/**
 * A report as a relay's delivery agent leaves it in its bounce mailbox: from the null sender to the relay's own
 * envelope sender (not our return path), a `multipart/report` returning the original's headers.
 */
function report(o: { from: string; subject: string; reportType: 'delivery-status' | 'feedback-report'; fields: string[]; originalHeaders: string }): Buffer {
  const boundary = `r${++seq}.relay.example`;
  return Buffer.from(
    [
      'Return-Path: <>',
      'Delivered-To: bounces@relay.example',
      `Date: ${new Date().toUTCString()}`,
      `From: ${o.from}`,
      'To: bounces@relay.example',
      `Subject: ${o.subject}`,
      `Message-ID: <report-${seq}-${randomUUID()}@relay.example>`,
      'MIME-Version: 1.0',
      `Content-Type: multipart/report; report-type=${o.reportType}; boundary="${boundary}"`,
      '',
      `--${boundary}`,
      'Content-Type: text/plain; charset=us-ascii',
      '',
      'A report about a message you sent.',
      '',
      `--${boundary}`,
      `Content-Type: message/${o.reportType}`,
      '',
      ...o.fields,
      '',
      `--${boundary}`,
      'Content-Type: text/rfc822-headers',
      '',
      o.originalHeaders.replace(/\r?\n/g, '\r\n'),
      '',
      `--${boundary}--`,
      '',
    ].join('\r\n'),
  );
}

/** A Postfix-shaped DSN: one failed recipient with its status and the remote server's reply. */
const dsn = (o: { finalRecipient: string; status: string; diagnostic: string; originalHeaders: string }): Buffer =>
  report({
    from: 'MAILER-DAEMON@relay.example (Mail Delivery System)',
    subject: 'Undelivered Mail Returned to Sender',
    reportType: 'delivery-status',
    fields: ['Reporting-MTA: dns; relay.example', '', `Final-Recipient: rfc822; ${o.finalRecipient}`, 'Action: failed', `Status: ${o.status}`, `Diagnostic-Code: smtp; ${o.diagnostic}`],
    originalHeaders: o.originalHeaders,
  });

/** An ARF complaint from a provider's feedback loop, forwarded to the relay's bounce mailbox. */
const arf = (o: { originalRcptTo: string; originalHeaders: string }): Buffer =>
  report({
    from: 'Feedback Loop <fbl@provider.example>',
    subject: 'Complaint about a message',
    reportType: 'feedback-report',
    fields: ['Feedback-Type: abuse', 'User-Agent: ProviderFBL/2.1', 'Version: 1', `Original-Rcpt-To: <${o.originalRcptTo}>`, 'Reporting-MTA: dns; fbl.provider.example'],
    originalHeaders: o.originalHeaders,
  });

async function append(messages: Buffer[]): Promise<void> {
  await withImap(async (c) => {
    for (const m of messages) await c.append('INBOX', m);
  });
}

/** The ids of the poll runs so far (`bounce-mailbox-<time>`), newest first. */
async function pollRuns(): Promise<string[]> {
  const ids: string[] = [];
  for await (const wf of temporal.workflow.list({ query: `WorkflowType = 'bounceMailboxPoll'` })) ids.push(wf.workflowId);
  return ids.sort().reverse();
}

/** Triggers the schedule and resolves with the id of the new poll run. */
async function triggerPoll(): Promise<string> {
  const before = new Set(await pollRuns());
  await temporal.schedule.getHandle(BOUNCE_MAILBOX_SCHEDULE_ID).trigger();
  const deadline = Date.now() + 30_000;
  for (;;) {
    const fresh = (await pollRuns()).find((id) => !before.has(id));
    if (fresh) return fresh;
    if (Date.now() > deadline) throw new Error('the schedule started no poll');
    await new Promise((r) => setTimeout(r, 300));
  }
}

async function pollResult(workflowId: string, timeoutMs = 90_000): Promise<BounceMailboxPoll> {
  return within(temporal.workflow.getHandle(workflowId).result() as Promise<BounceMailboxPoll>, timeoutMs, `poll ${workflowId} did not finish`);
}

async function events(emailId: string): Promise<{ name: string; data: Record<string, unknown> }[]> {
  return (await db().query(`select name, data from events where email_id = $1 and name in ('email.bounced', 'email.complained') order by created_at`, [emailId])).rows;
}

async function inboundRows(emailId: string) {
  return (await db().query(`select source, status, kind, source_ref from inbound_messages where email_id = $1`, [emailId])).rows;
}

test('GET /config says the bounce mailbox is on; the worker made its schedule', async () => {
  expect((await api('GET', '/config')).body.bounceMailbox).toBe(true);
  const desc = await temporal.schedule.getHandle(BOUNCE_MAILBOX_SCHEDULE_ID).describe();
  expect(desc.action).toMatchObject({ type: 'startWorkflow', workflowType: 'bounceMailboxPoll', workflowId: 'bounce-mailbox' });
});

test('mailbox DSNs and ARF reports, proven by the returned original, bounce, suppress and record events; forgeries change nothing; each message is moved once', async () => {
  const [byMessageId, byToken, complained, forged] = [await sendEmail(), await sendEmail(), await sendEmail(), await sendEmail()];
  // The relay gave the second email a Message-ID of its own, but kept our List-Unsubscribe with its signed address.
  const rewritten = byToken.headers
    .replace(/^message-id:.*$/im, `Message-ID: <relay-${randomUUID()}@relay.example>`)
    .concat(`\nList-Unsubscribe: <mailto:${unsubscribeAddress(byToken.emailId, `bounces.${domain}`, appSecret)}>`);
  const messages = [
    dsn({ finalRecipient: byMessageId.to, status: '5.1.1', diagnostic: '550 5.1.1 <x>: Recipient address rejected: User unknown', originalHeaders: byMessageId.headers }),
    dsn({ finalRecipient: 'someone-else@elsewhere.test', status: '5.1.1', diagnostic: '550 5.1.1 User unknown', originalHeaders: rewritten }),
    arf({ originalRcptTo: complained.to, originalHeaders: complained.headers }),
    // Our Message-ID, but a recipient that is not the email's: not proof.
    dsn({ finalRecipient: 'victim@elsewhere.test', status: '5.1.1', diagnostic: '550 5.1.1 User unknown', originalHeaders: forged.headers }),
  ];
  await append(messages);
  const processedBefore = await folderCount('Processed');

  const run = await triggerPoll();
  expect(run).toMatch(/^bounce-mailbox-/);
  const result = await pollResult(run);
  expect(result).toMatchObject({ stored: 4, duplicates: 0, moved: 4, tooLarge: 0 });
  expect(result.workflowIds).toHaveLength(1);
  expect(result.workflowIds[0]).toMatch(/^inbound-mail\//);
  expect(await folderCount('INBOX')).toBe(0);
  expect(await folderCount('Processed')).toBe(processedBefore + 4);

  const first = await waitForEmailStatus(byMessageId.emailId, 'BOUNCED', 60_000);
  expect(first.error).toMatch(/hard, 5\.1\.1/);
  await waitForEmailStatus(byToken.emailId, 'BOUNCED', 60_000);
  for (const e of [byMessageId, byToken]) {
    expect(await events(e.emailId)).toEqual([{ name: 'email.bounced', data: expect.objectContaining({ source: 'dsn', bounceType: 'Permanent', status: '5.1.1' }) }]);
    const { rows } = await db().query(`select reason, source, email_id from suppressions where project_id = $1 and email = $2`, [projectId, e.to]);
    expect(rows).toEqual([{ reason: 'hard_bounce', source: 'dsn', email_id: e.emailId }]);
    expect(await inboundRows(e.emailId)).toEqual([{ source: 'imap', status: 'PROCESSED', kind: 'bounce', source_ref: expect.stringMatching(new RegExp(`^${dovecot.user}@127\\.0\\.0\\.1:${dovecot.port}/INBOX/\\d+/\\d+$`)) }]);
  }
  const complaint = await waitFor('the complaint', async () => {
    const ev = await events(complained.emailId);
    return ev.length ? ev : undefined;
  });
  expect(complaint).toEqual([{ name: 'email.complained', data: expect.objectContaining({ source: 'arf', complaintFeedbackType: 'abuse' }) }]);
  const { rows: complaintSuppression } = await db().query(`select reason, source from suppressions where project_id = $1 and email = $2`, [projectId, complained.to]);
  expect(complaintSuppression).toEqual([{ reason: 'complaint', source: 'arf' }]);

  // The forged one was processed (recorded as unmatched) and changed nothing.
  const forgedRow = await waitFor('the forged report processed', async () => {
    const { rows } = await db().query(`select status, kind, outcome->>'outcome' as outcome from inbound_messages where source = 'imap' and status = 'PROCESSED' and outcome->'summary'->>'messageId' like '<report-%' and email_id is null`);
    return rows.length ? rows : undefined;
  });
  expect(forgedRow).toEqual([{ status: 'PROCESSED', kind: 'bounce', outcome: 'unmatched' }]);
  expect((await db().query(`select status from emails where id = $1`, [forged.emailId])).rows).toEqual([{ status: 'SENT' }]);
  expect((await db().query(`select 1 from suppressions where project_id = $1 and email in ($2, 'victim@elsewhere.test')`, [projectId, forged.to])).rows).toEqual([]);
  expect(await events(forged.emailId)).toEqual([]);

  // The same message delivered to the mailbox again (a new UID, the same bytes) is stored once and applied once.
  await append([messages[0]!]);
  const again = await pollResult(await triggerPoll());
  expect(again).toMatchObject({ stored: 0, duplicates: 1, moved: 1, workflowIds: [] });
  expect(await folderCount('INBOX')).toBe(0);
  expect(await events(byMessageId.emailId)).toHaveLength(1);
  expect(await inboundRows(byMessageId.emailId)).toHaveLength(1);
}, 300_000);

test('a worker killed in the middle of a poll (after storing, before handing on and moving) loses nothing and processes nothing twice', async () => {
  const sent = [await sendEmail(), await sendEmail(), await sendEmail(), await sendEmail()];
  await append(sent.map((e) => dsn({ finalRecipient: e.to, status: '5.1.1', diagnostic: '550 5.1.1 User unknown', originalHeaders: e.headers })));
  const rowsBefore = Number((await db().query(`select count(*) from inbound_messages where source = 'imap'`)).rows[0].count);

  fs.writeFileSync(crashFile, 'crash at the next poll');
  const worker = stack.worker!;
  const run = await triggerPoll();
  await within(worker.exited, 60_000, 'the worker did not hit the crash point');
  expect(fs.existsSync(crashFile)).toBe(false);
  // Killed after half the batch was stored: two rows, none handed on, nothing moved.
  const { rows: half } = await db().query(`select status, workflow_id from inbound_messages where source = 'imap' order by received_at offset $1`, [rowsBefore]);
  expect(half).toEqual([
    { status: 'RECEIVED', workflow_id: null },
    { status: 'RECEIVED', workflow_id: null },
  ]);
  expect(await folderCount('INBOX')).toBe(4);

  // A new worker: the same poll's activity is retried (its heartbeat timed out) and finishes the job.
  await stack.startWorker();
  const result = await pollResult(run, 120_000);
  expect(result).toMatchObject({ stored: 2, duplicates: 2, moved: 4 });
  expect(await folderCount('INBOX')).toBe(0);
  for (const e of sent) {
    await waitForEmailStatus(e.emailId, 'BOUNCED', 60_000);
    expect(await events(e.emailId)).toEqual([{ name: 'email.bounced', data: expect.objectContaining({ source: 'dsn', status: '5.1.1' }) }]);
    expect(await inboundRows(e.emailId)).toEqual([{ source: 'imap', status: 'PROCESSED', kind: 'bounce', source_ref: expect.any(String) }]);
    const { rows } = await db().query(`select reason from suppressions where project_id = $1 and email = $2`, [projectId, e.to]);
    expect(rows).toEqual([{ reason: 'hard_bounce' }]);
  }
  expect(Number((await db().query(`select count(*) from inbound_messages where source = 'imap'`)).rows[0].count)).toBe(rowsBefore + 4);
  // And a later poll finds nothing left to do.
  expect(await pollResult(await triggerPoll())).toMatchObject({ stored: 0, duplicates: 0, moved: 0 });
}, 400_000);
