import path from 'node:path';
import { createHmac, generateKeyPairSync, randomBytes, randomUUID, sign, type KeyObject } from 'node:crypto';
import { api } from '../helpers/api';
import { closeDb, db, waitForEmailStatus } from '../helpers/db';
import { addVerifiedDomain, createTestProject, uniqueDomain, type TestProject } from '../helpers/fixtures';
import { stackEnv } from '../stack-env';
import { startTsProcess } from '../../scripts/services/stack';
import { freePort, waitForPort, type ManagedProcess } from '../../scripts/services/process';

// The test plays four relays. Their keys are made here: an ECDSA P-256 key pair (SendGrid), an HMAC signing key
// (Mailgun), HTTP Basic credentials (Postmark), a Standard Webhooks secret (Resend); an API process of the test's own
// gets the public halves in its environment, against the stack's database. Requests are signed exactly as each
// provider signs them. The emails are real: sent through the stack's /v1/send and SMTP capture server, whose reply
// (`250 Ok: queued as <id>`) gives each one a provider message id, as a relay's does.

const sendgridKeys = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const impostorKeys = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const mailgunKey = randomBytes(16).toString('hex');
const postmark = { user: 'postmark-hooks', password: randomBytes(12).toString('base64url') };
const resendSecret = randomBytes(24);
const resendSecretText = `whsec_${resendSecret.toString('base64')}`;

let proc: ManagedProcess;
let baseUrl: string;
let project: TestProject;
let domain: string;

beforeAll(async () => {
  project = await createTestProject();
  domain = uniqueDomain();
  await addVerifiedDomain(project.projectId, domain);
  const port = await freePort();
  const { databaseUrl, temporalAddress, dataDir } = stackEnv();
  proc = startTsProcess(
    'api-report-webhooks',
    'api/server.ts',
    {
      DATABASE_URL: databaseUrl,
      TEMPORAL_ADDRESS: temporalAddress,
      PORT: String(port),
      LOG_LEVEL: 'warn',
      NODE_ENV: 'test',
      // As SendGrid shows the verification key: base64 of the DER SubjectPublicKeyInfo.
      SENDGRID_WEBHOOK_PUBLIC_KEY: sendgridKeys.publicKey.export({ format: 'der', type: 'spki' }).toString('base64'),
      MAILGUN_WEBHOOK_SIGNING_KEY: mailgunKey,
      POSTMARK_WEBHOOK_USER: postmark.user,
      POSTMARK_WEBHOOK_PASSWORD: postmark.password,
      RESEND_WEBHOOK_SECRET: resendSecretText,
      REPORT_WEBHOOK_TOLERANCE: '5m',
      // Two soft bounces of different emails suppress an address (the default is 3).
      SUPPRESS_SOFT_BOUNCES: '2',
    },
    { logFile: path.join(dataDir, 'api-report-webhooks.log') },
  );
  await waitForPort('127.0.0.1', port, 60_000);
  baseUrl = `http://127.0.0.1:${port}`;
}, 90_000);
afterAll(async () => {
  await proc?.stop();
  await closeDb();
});

const rcpt = (prefix = 'rcpt') => `${prefix}-${randomUUID().slice(0, 8)}@example.com`;

interface Sent {
  emailId: string;
  contactId: string;
  to: string;
  messageId: string;
  /** The id the SMTP server's reply named (`queued as <id>`). */
  providerId: string;
}

/** A real email, sent through /v1/send and accepted by the SMTP server (status SENT). */
async function sentEmail(to = rcpt()): Promise<Sent> {
  const res = await api('POST', '/v1/send', { key: project.secretKey, body: { to, from: `news@${domain}`, subject: 'Hello', body: '<p>Hi</p>', subscribed: true } });
  expect(res.status).toBe(200);
  const { email: emailId, contact } = res.body.data.emails[0];
  const row = await waitForEmailStatus(emailId, 'SENT');
  expect(row.provider_message_id).toMatch(/^Q[0-9A-F]{8}\d+$/);
  return { emailId, contactId: contact.id, to, messageId: row.message_id, providerId: row.provider_message_id };
}

const emailRow = async (emailId: string) => (await db().query('select * from emails where id = $1', [emailId])).rows[0];
async function emailEvents(emailId: string): Promise<{ name: string; data: any }[]> {
  return (await db().query('select name, data from events where email_id = $1 order by id', [emailId])).rows;
}
const eventNames = async (emailId: string) => (await emailEvents(emailId)).map((e) => e.name);
async function suppression(email: string): Promise<{ reason: string; source: string } | undefined> {
  return (await db().query('select reason, source from suppressions where project_id = $1 and email = $2', [project.projectId, email.toLowerCase()])).rows[0];
}
const subscribed = async (contactId: string) => (await db().query('select subscribed from contacts where id = $1', [contactId])).rows[0].subscribed as boolean;
/** Everything a report could change about these emails: status, events, suppression, subscription. */
async function snapshot(emails: Sent[]): Promise<unknown> {
  return Promise.all(
    emails.map(async (e) => ({ status: (await emailRow(e.emailId)).status, events: await eventNames(e.emailId), suppressed: await suppression(e.to), subscribed: await subscribed(e.contactId) })),
  );
}

const post = (provider: string, raw: string, headers: Record<string, string>) => api('POST', `/webhooks/incoming/${provider}`, { baseUrl, raw, headers: { 'content-type': 'application/json', ...headers } });
const now = () => Math.floor(Date.now() / 1000);

// --- SendGrid: ECDSA over timestamp + body -------------------------------------------------------------------------

function sendgridPost(events: unknown[], opts: { key?: KeyObject; timestamp?: number; tamper?: (body: string) => string; headers?: Record<string, string> } = {}) {
  const body = JSON.stringify(events);
  const timestamp = String(opts.timestamp ?? now());
  const signature = sign('sha256', Buffer.from(timestamp + body), { key: opts.key ?? sendgridKeys.privateKey, dsaEncoding: 'der' }).toString('base64');
  return post('sendgrid', opts.tamper ? opts.tamper(body) : body, {
    'X-Twilio-Email-Event-Webhook-Signature': signature,
    'X-Twilio-Email-Event-Webhook-Timestamp': timestamp,
    ...opts.headers,
  });
}
const sgEvent = (event: string, e: Sent, extra: Record<string, unknown> = {}) => ({
  email: e.to,
  timestamp: now(),
  'smtp-id': e.messageId,
  event,
  sg_event_id: randomBytes(16).toString('base64'),
  sg_message_id: `${e.providerId}.filterdrecv-5645d9c87f-l8bsw-1-5F7E2C1B-3A.0`,
  ...extra,
});

describe('POST /webhooks/incoming/sendgrid', () => {
  test('a batch: delivered, bounce (found by sg_message_id alone), spamreport, deferred, unsubscribe, an event we do not use and an unreadable one, each applied', async () => {
    const [delivered, bounced, complained, deferred, unsubscribed] = await Promise.all([sentEmail(), sentEmail(), sentEmail(), sentEmail(), sentEmail()]);
    const deliveredEvent = sgEvent('delivered', delivered, { response: '250 2.0.0 OK accepted' });
    const events = [
      deliveredEvent,
      { ...sgEvent('bounce', bounced, { type: 'bounce', reason: '550 5.1.1 The email account does not exist', status: '5.1.1' }), 'smtp-id': '<14c5d75ce93.dfd.64b469@ismtpd-555>' },
      sgEvent('spamreport', complained),
      sgEvent('deferred', deferred, { response: '421 4.7.0 Try again later', attempt: '1' }),
      sgEvent('unsubscribe', unsubscribed),
      sgEvent('open', delivered, { useragent: 'Mozilla/5.0' }),
      { event: 'delivered', email: delivered.to }, // no sg_event_id: unreadable
    ];
    const res = await sendgridPost(events);
    expect(res.status).toBe(200);
    expect(res.body.received).toBe(7);
    expect(res.body.results.map((r: any) => [r.type, r.outcome, r.events])).toEqual([
      ['delivered', 'applied', ['email.delivered']],
      ['bounce', 'applied', ['email.bounced']],
      ['spamreport', 'applied', ['email.complained', 'contact.unsubscribed']],
      ['deferred', 'applied', ['email.bounced']],
      ['unsubscribe', 'applied', ['contact.unsubscribed']],
      ['open', 'ignored', []],
      ['delivered', 'invalid', []],
    ]);
    expect(res.body.results[1].emailId).toBe(bounced.emailId);

    const d = await emailRow(delivered.emailId);
    expect(d.status).toBe('DELIVERED');
    expect(d.smtp_response).toBe('250 2.0.0 OK accepted');
    expect((await emailEvents(delivered.emailId))[1]).toMatchObject({ name: 'email.delivered', data: { source: 'sendgrid', smtpResponse: '250 2.0.0 OK accepted', providerEventId: deliveredEvent.sg_event_id } });

    const b = await emailRow(bounced.emailId);
    expect(b.status).toBe('BOUNCED');
    expect(b.error).toBe('Bounced (bounce), reported by SendGrid');
    expect((await emailEvents(bounced.emailId))[1]!.data).toMatchObject({ source: 'sendgrid', bounceType: 'Permanent', diagnosticCode: '550 5.1.1 The email account does not exist', status: '5.1.1' });
    expect(await suppression(bounced.to)).toEqual({ reason: 'hard_bounce', source: 'sendgrid' });

    expect(await eventNames(complained.emailId)).toEqual(['email.sent', 'email.complained', 'contact.unsubscribed']);
    expect(await subscribed(complained.contactId)).toBe(false);
    expect(await suppression(complained.to)).toEqual({ reason: 'complaint', source: 'sendgrid' });

    // A deferral is recorded as a transient bounce; the email stays SENT and the address is not counted.
    expect((await emailRow(deferred.emailId)).status).toBe('SENT');
    expect((await emailEvents(deferred.emailId))[1]!.data).toMatchObject({ bounceType: 'Transient', transient: true, bounceSubType: 'deferred' });
    expect(await suppression(deferred.to)).toBeUndefined();
    expect((await db().query('select count(*)::int as n from suppression_soft_bounces where email_id = $1', [deferred.emailId])).rows[0].n).toBe(0);

    expect(await subscribed(unsubscribed.contactId)).toBe(false);
    expect(await suppression(unsubscribed.to)).toBeUndefined();
    const unsub = (await db().query(`select data, email_id from events where contact_id = $1 and name = 'contact.unsubscribed'`, [unsubscribed.contactId])).rows;
    expect(unsub).toEqual([{ data: { via: 'sendgrid', detail: 'unsubscribe' }, email_id: unsubscribed.emailId }]);
  });

  test('replay: the same batch posted again, as is or signed anew, is applied once', async () => {
    const [a, b] = await Promise.all([sentEmail(), sentEmail()]);
    const events = [sgEvent('delivered', a), sgEvent('bounce', b, { type: 'bounce', reason: '550 unknown user' })];
    expect((await sendgridPost(events)).status).toBe(200);
    const before = await snapshot([a, b]);
    for (const again of [await sendgridPost(events), await sendgridPost(events, { timestamp: now() - 60 })]) {
      expect(again.status).toBe(200);
      expect(again.body.results.map((r: any) => r.outcome)).toEqual(['duplicate', 'duplicate']);
    }
    expect(await snapshot([a, b])).toEqual(before);
    expect(await eventNames(a.emailId)).toEqual(['email.sent', 'email.delivered']);
  });

  test('forged, unsigned, tampered and stale batches change nothing', async () => {
    const e = await sentEmail();
    const events = [sgEvent('bounce', e, { type: 'bounce', reason: '550 unknown user' })];
    const before = await snapshot([e]);

    const forged = await sendgridPost(events, { key: impostorKeys.privateKey });
    expect(forged.status).toBe(403);
    expect(forged.body.error.code).toBe('INVALID_SIGNATURE');
    const tampered = await sendgridPost([sgEvent('delivered', e)], { tamper: (body) => body.replace('"delivered"', '"spamreport"') });
    expect(tampered.status).toBe(403);
    const unsigned = await post('sendgrid', JSON.stringify(events), {});
    expect(unsigned.status).toBe(401);
    expect(unsigned.body.error.code).toBe('UNAUTHORIZED');
    const stale = await sendgridPost(events, { timestamp: now() - 10 * 60 });
    expect(stale.status).toBe(403);
    expect(stale.body.error.code).toBe('MESSAGE_EXPIRED');
    const future = await sendgridPost(events, { timestamp: now() + 10 * 60 });
    expect(future.status).toBe(403);

    expect(await snapshot([e])).toEqual(before);
    // The same event, genuine and fresh, is still applied: nothing above spent it.
    expect((await sendgridPost(events)).body.results[0].outcome).toBe('applied');
  });

  test('an email of ours not recorded as sent yet: 503 for the batch to be retried, the other events applied once', async () => {
    const [pending, other] = await Promise.all([sentEmail(), sentEmail()]);
    await db().query(`update emails set status = 'SENDING' where id = $1`, [pending.emailId]);
    const events = [sgEvent('delivered', pending), sgEvent('delivered', other)];
    const res = await sendgridPost(events);
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('20');
    expect((await emailRow(other.emailId)).status).toBe('DELIVERED');
    expect(await eventNames(pending.emailId)).toEqual(['email.sent']);

    await db().query(`update emails set status = 'SENT' where id = $1`, [pending.emailId]);
    const retried = await sendgridPost(events);
    expect(retried.status).toBe(200);
    expect(retried.body.results.map((r: any) => r.outcome)).toEqual(['applied', 'duplicate']);
    expect((await emailRow(pending.emailId)).status).toBe('DELIVERED');
  });

  test('reports of messages that are not ours are acknowledged and ignored', async () => {
    const stranger = { ...sgEvent('bounce', { emailId: '', contactId: '', to: rcpt(), messageId: '<abc.def@elsewhere.example>', providerId: 'NotOurs123' }, { type: 'bounce' }) };
    // A Message-ID with one of our email ids but another domain is not ours either.
    const e = await sentEmail();
    const lookalike = { ...sgEvent('bounce', e, { type: 'bounce' }), 'smtp-id': `<${e.emailId}@elsewhere.example>`, sg_message_id: undefined };
    const res = await sendgridPost([stranger, lookalike]);
    expect(res.status).toBe(200);
    expect(res.body.results.map((r: any) => r.outcome)).toEqual(['unknown_email', 'unknown_email']);
    expect((await emailRow(e.emailId)).status).toBe('SENT');
  });
});

// --- Mailgun: HMAC over timestamp + token in the body ----------------------------------------------------------------

function mailgunPost(eventData: Record<string, unknown>, opts: { key?: string; timestamp?: number; token?: string } = {}) {
  const timestamp = String(opts.timestamp ?? now());
  const token = opts.token ?? randomBytes(25).toString('hex');
  const signature = createHmac('sha256', opts.key ?? mailgunKey).update(timestamp + token).digest('hex');
  return { token, res: post('mailgun', JSON.stringify({ signature: { timestamp, token, signature }, 'event-data': eventData }), {}) };
}
const mgEvent = (event: string, e: Sent, extra: Record<string, unknown> = {}) => ({
  id: randomBytes(12).toString('base64url'),
  event,
  timestamp: Date.now() / 1000,
  recipient: e.to,
  // Mailgun reports the Message-ID without its angle brackets.
  message: { headers: { 'message-id': e.messageId.replace(/^<|>$/g, ''), to: e.to, from: `news@${domain}`, subject: 'Hello' } },
  ...extra,
});

describe('POST /webhooks/incoming/mailgun', () => {
  test('delivered, failed (permanent / temporary), complained, unsubscribed; two soft bounces of different emails suppress the address', async () => {
    const softTo = rcpt('soft');
    const [delivered, hard, soft1, soft2, complained, unsubscribed] = await Promise.all([sentEmail(), sentEmail(), sentEmail(softTo), sentEmail(softTo), sentEmail(), sentEmail()]);
    const status = (code: number, message: string) => ({ 'delivery-status': { code, message, 'attempt-no': 1, description: '' } });
    const outcomes = [];
    for (const [data, e] of [
      [mgEvent('delivered', delivered, status(250, 'OK')), delivered],
      [mgEvent('failed', hard, { severity: 'permanent', reason: 'bounce', ...status(550, '5.1.1 No such user') }), hard],
      [mgEvent('failed', soft1, { severity: 'temporary', reason: 'generic', ...status(452, '4.2.2 Mailbox full') }), soft1],
      [mgEvent('complained', complained), complained],
      [mgEvent('unsubscribed', unsubscribed), unsubscribed],
    ] as const) {
      const res = await mailgunPost(data).res;
      expect(res.status).toBe(200);
      outcomes.push([res.body.results[0].outcome, res.body.results[0].emailId === e.emailId]);
    }
    expect(outcomes).toEqual(Array(5).fill(['applied', true]));
    expect((await emailRow(delivered.emailId)).status).toBe('DELIVERED');
    expect((await emailRow(delivered.emailId)).smtp_response).toBe('250 OK');
    expect((await emailRow(hard.emailId)).status).toBe('BOUNCED');
    expect(await suppression(hard.to)).toEqual({ reason: 'hard_bounce', source: 'mailgun' });
    expect((await emailRow(soft1.emailId)).status).toBe('SENT');
    expect((await emailEvents(soft1.emailId))[1]!.data).toMatchObject({ source: 'mailgun', bounceType: 'Transient', transient: true, diagnosticCode: '452 4.2.2 Mailbox full' });
    expect(await suppression(softTo)).toBeUndefined();
    expect(await suppression(complained.to)).toEqual({ reason: 'complaint', source: 'mailgun' });
    expect(await subscribed(complained.contactId)).toBe(false);
    expect(await subscribed(unsubscribed.contactId)).toBe(false);

    // A second report about the same email counts once; one about another email reaches SUPPRESS_SOFT_BOUNCES (2).
    await mailgunPost(mgEvent('failed', soft1, { severity: 'temporary', reason: 'generic' })).res;
    expect(await suppression(softTo)).toBeUndefined();
    await mailgunPost(mgEvent('failed', soft2, { severity: 'temporary', reason: 'generic' })).res;
    expect(await suppression(softTo)).toEqual({ reason: 'soft_bounce_limit', source: 'mailgun' });
  });

  test('replay: the same request again is a duplicate, and its token cannot carry another event', async () => {
    const [a, victim] = await Promise.all([sentEmail(), sentEmail()]);
    const data = mgEvent('delivered', a);
    const timestamp = now();
    const first = mailgunPost(data, { timestamp });
    expect((await first.res).body.results[0].outcome).toBe('applied');
    const before = await snapshot([a, victim]);
    const again = await mailgunPost(data, { timestamp, token: first.token }).res;
    expect(again.status).toBe(200);
    expect(again.body.results[0].outcome).toBe('duplicate');
    // Mailgun's signature covers the timestamp and token only: the spent token with another event changes nothing.
    const swapped = await mailgunPost(mgEvent('failed', victim, { severity: 'permanent', reason: 'bounce' }), { timestamp, token: first.token }).res;
    expect(swapped.status).toBe(200);
    expect(swapped.body.results[0].outcome).toBe('duplicate');
    expect(await snapshot([a, victim])).toEqual(before);
  });

  test('forged, unsigned and stale requests change nothing', async () => {
    const e = await sentEmail();
    const before = await snapshot([e]);
    const forged = await mailgunPost(mgEvent('failed', e, { severity: 'permanent' }), { key: 'not-the-signing-key' }).res;
    expect(forged.status).toBe(403);
    expect(forged.body.error.code).toBe('INVALID_SIGNATURE');
    const unsigned = await post('mailgun', JSON.stringify({ 'event-data': mgEvent('failed', e, { severity: 'permanent' }) }), {});
    expect(unsigned.status).toBe(401);
    const stale = await mailgunPost(mgEvent('failed', e, { severity: 'permanent' }), { timestamp: now() - 10 * 60 }).res;
    expect(stale.status).toBe(403);
    expect(stale.body.error.code).toBe('MESSAGE_EXPIRED');
    expect(await snapshot([e])).toEqual(before);
  });
});

// --- Postmark: HTTP Basic credentials ----------------------------------------------------------------------------

const basic = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
const postmarkPost = (record: Record<string, unknown>, authorization = basic(postmark.user, postmark.password)) =>
  post('postmark', JSON.stringify(record), authorization ? { Authorization: authorization } : {});
const pmBounce = (e: Sent, type: string, typeCode: number, extra: Record<string, unknown> = {}) => ({
  RecordType: 'Bounce',
  ID: Math.floor(Math.random() * 1e12),
  Type: type,
  TypeCode: typeCode,
  Name: type,
  MessageID: e.providerId,
  ServerID: 23,
  MessageStream: 'outbound',
  Description: 'The server was unable to deliver your message',
  Details: 'smtp;550 5.1.1 The email account that you tried to reach does not exist',
  Email: e.to,
  From: `news@${domain}`,
  BouncedAt: new Date().toISOString(),
  Inactive: true,
  ...extra,
});

describe('POST /webhooks/incoming/postmark', () => {
  test("Delivery, HardBounce, SoftBounce, SpamComplaint and SubscriptionChange, found by Postmark's MessageID; a bounce by our Message-ID in its content", async () => {
    const [delivered, hard, soft, complained, unsubscribed, byContent] = await Promise.all([sentEmail(), sentEmail(), sentEmail(), sentEmail(), sentEmail(), sentEmail()]);
    const records: [Record<string, unknown>, Sent, string[]][] = [
      [{ RecordType: 'Delivery', ServerID: 23, MessageStream: 'outbound', MessageID: delivered.providerId, Recipient: delivered.to, DeliveredAt: new Date().toISOString(), Details: 'Test delivery webhook details' }, delivered, ['email.delivered']],
      [pmBounce(hard, 'HardBounce', 1), hard, ['email.bounced']],
      [pmBounce(soft, 'SoftBounce', 4096, { Details: 'smtp;452 4.2.2 Mailbox full', Inactive: false }), soft, ['email.bounced']],
      [pmBounce(complained, 'SpamComplaint', 100001, { RecordType: 'SpamComplaint' }), complained, ['email.complained', 'contact.unsubscribed']],
      [{ RecordType: 'SubscriptionChange', MessageID: unsubscribed.providerId, Recipient: unsubscribed.to, ChangedAt: new Date().toISOString(), SuppressSending: true, SuppressionReason: 'ManualSuppression' }, unsubscribed, ['contact.unsubscribed']],
      [pmBounce(byContent, 'HardBounce', 1, { MessageID: randomUUID(), Content: `Return-Path: <>\r\nMessage-ID: <bounce-1@mx.example>\r\n\r\n--b\r\nContent-Type: message/rfc822-headers\r\n\r\nMessage-ID: ${byContent.messageId}\r\nSubject: Hello\r\n` }), byContent, ['email.bounced']],
    ];
    for (const [record, e, names] of records) {
      const res = await postmarkPost(record);
      expect(res.status).toBe(200);
      expect(res.body.results[0]).toMatchObject({ outcome: 'applied', emailId: e.emailId, events: names });
    }
    expect((await emailRow(delivered.emailId)).status).toBe('DELIVERED');
    expect((await emailRow(hard.emailId)).status).toBe('BOUNCED');
    expect(await suppression(hard.to)).toEqual({ reason: 'hard_bounce', source: 'postmark' });
    expect((await emailRow(soft.emailId)).status).toBe('SENT');
    expect((await db().query('select count(*)::int as n from suppression_soft_bounces where email_id = $1', [soft.emailId])).rows[0].n).toBe(1);
    expect(await suppression(complained.to)).toEqual({ reason: 'complaint', source: 'postmark' });
    expect(await subscribed(unsubscribed.contactId)).toBe(false);
    expect((await emailRow(byContent.emailId)).status).toBe('BOUNCED');
  });

  test('an AutoResponder is not a bounce: acknowledged and ignored', async () => {
    const e = await sentEmail();
    const res = await postmarkPost(pmBounce(e, 'AutoResponder', 64));
    expect(res.status).toBe(200);
    expect(res.body.results[0]).toMatchObject({ outcome: 'ignored', events: [] });
    expect(await eventNames(e.emailId)).toEqual(['email.sent']);
  });

  test('replay: the same record again is a duplicate and changes nothing', async () => {
    const e = await sentEmail();
    const record = pmBounce(e, 'HardBounce', 1);
    expect((await postmarkPost(record)).body.results[0].outcome).toBe('applied');
    const before = await snapshot([e]);
    const again = await postmarkPost(record);
    expect(again.status).toBe(200);
    expect(again.body.results[0].outcome).toBe('duplicate');
    expect(await snapshot([e])).toEqual(before);
  });

  test('wrong or missing credentials change nothing', async () => {
    const e = await sentEmail();
    const before = await snapshot([e]);
    const wrong = await postmarkPost(pmBounce(e, 'HardBounce', 1), basic(postmark.user, 'not-the-password'));
    expect(wrong.status).toBe(403);
    expect(wrong.body.error.code).toBe('INVALID_SIGNATURE');
    const none = await postmarkPost(pmBounce(e, 'HardBounce', 1), '');
    expect(none.status).toBe(401);
    expect(none.headers.get('www-authenticate')).toMatch(/^Basic /);
    expect(await snapshot([e])).toEqual(before);
  });
});

// --- Resend: Standard Webhooks (Svix) ------------------------------------------------------------------------------

function resendPost(event: Record<string, unknown>, opts: { secret?: Buffer; id?: string; timestamp?: number; extraSignatures?: string[] } = {}) {
  const body = JSON.stringify(event);
  const id = opts.id ?? `msg_${randomBytes(12).toString('hex')}`;
  const timestamp = String(opts.timestamp ?? now());
  const signature = createHmac('sha256', opts.secret ?? resendSecret).update(`${id}.${timestamp}.${body}`).digest('base64');
  return { id, res: post('resend', body, { 'svix-id': id, 'svix-timestamp': timestamp, 'svix-signature': [...(opts.extraSignatures ?? []), `v1,${signature}`].join(' ') }) };
}
const rsEvent = (type: string, e: Sent, data: Record<string, unknown> = {}) => ({
  type,
  created_at: new Date().toISOString(),
  data: { created_at: new Date().toISOString(), email_id: e.providerId, from: `news@${domain}`, to: [e.to], subject: 'Hello', ...data },
});

describe('POST /webhooks/incoming/resend', () => {
  test('email.delivered (by the Message-ID in its headers), email.bounced Permanent (by email_id), email.complained, email.delivery_delayed', async () => {
    const [delivered, bounced, complained, delayed] = await Promise.all([sentEmail(), sentEmail(), sentEmail(), sentEmail()]);
    const cases: [Record<string, unknown>, Sent, string[]][] = [
      [rsEvent('email.delivered', delivered, { email_id: randomUUID(), headers: [{ name: 'Message-ID', value: delivered.messageId }] }), delivered, ['email.delivered']],
      [rsEvent('email.bounced', bounced, { bounce: { type: 'Permanent', subType: 'General', message: 'The recipient does not exist' } }), bounced, ['email.bounced']],
      [rsEvent('email.complained', complained), complained, ['email.complained', 'contact.unsubscribed']],
      [rsEvent('email.delivery_delayed', delayed), delayed, ['email.bounced']],
    ];
    for (const [event, e, names] of cases) {
      const res = await resendPost(event).res;
      expect(res.status).toBe(200);
      expect(res.body.results[0]).toMatchObject({ outcome: 'applied', emailId: e.emailId, events: names });
    }
    expect((await emailRow(delivered.emailId)).status).toBe('DELIVERED');
    expect((await emailRow(bounced.emailId)).status).toBe('BOUNCED');
    expect(await suppression(bounced.to)).toEqual({ reason: 'hard_bounce', source: 'resend' });
    expect(await suppression(complained.to)).toEqual({ reason: 'complaint', source: 'resend' });
    expect((await emailRow(delayed.emailId)).status).toBe('SENT');
    expect(await suppression(delayed.to)).toBeUndefined();
  });

  test('replay: the same svix-id again (even signed anew) is a duplicate and changes nothing', async () => {
    const e = await sentEmail();
    const event = rsEvent('email.bounced', e, { bounce: { type: 'Permanent', subType: 'General', message: 'no such user' } });
    const first = resendPost(event);
    expect((await first.res).body.results[0].outcome).toBe('applied');
    const before = await snapshot([e]);
    const again = await resendPost(event, { id: first.id, timestamp: now() - 30 }).res;
    expect(again.status).toBe(200);
    expect(again.body.results[0].outcome).toBe('duplicate');
    expect(await snapshot([e])).toEqual(before);
  });

  test('forged, unsigned and stale requests change nothing; one valid signature among several is enough', async () => {
    const e = await sentEmail();
    const event = rsEvent('email.bounced', e, { bounce: { type: 'Permanent', subType: 'General' } });
    const before = await snapshot([e]);
    const forged = await resendPost(event, { secret: randomBytes(24) }).res;
    expect(forged.status).toBe(403);
    expect(forged.body.error.code).toBe('INVALID_SIGNATURE');
    const unsigned = await post('resend', JSON.stringify(event), {});
    expect(unsigned.status).toBe(401);
    const stale = await resendPost(event, { timestamp: now() - 10 * 60 }).res;
    expect(stale.status).toBe(403);
    expect(stale.body.error.code).toBe('MESSAGE_EXPIRED');
    expect(await snapshot([e])).toEqual(before);
    // During a secret rotation the provider signs with both: any one that verifies is enough.
    const rotated = await resendPost(event, { extraSignatures: ['v1,bm90IHRoZSBzaWduYXR1cmU='] }).res;
    expect(rotated.status).toBe(200);
    expect((await emailRow(e.emailId)).status).toBe('BOUNCED');
  });
});

describe('receivers that are off, and GET /config', () => {
  test("the stack's API sets no provider secret: every provider receiver answers 404 and /config lists only ses", async () => {
    for (const provider of ['sendgrid', 'mailgun', 'postmark', 'resend']) {
      const res = await api('POST', `/webhooks/incoming/${provider}`, { raw: '[]' });
      expect(res.status).toBe(404);
      expect(res.body.error.suggestion).toMatch(/README › Delivery reports by webhook/);
    }
    expect((await api('GET', '/config')).body.reportReceivers).toEqual(['ses']);
  });

  test('with their secrets set, /config lists every receiver', async () => {
    expect((await api('GET', '/config', { baseUrl })).body.reportReceivers).toEqual(['ses', 'sendgrid', 'mailgun', 'postmark', 'resend']);
  });
});
