import { randomUUID, type KeyObject } from 'node:crypto';
import { api } from '../helpers/api';
import { closeDb, db, waitForEmailStatus } from '../helpers/db';
import { addVerifiedDomain, createTestProject, uniqueDomain, type TestProject } from '../helpers/fixtures';
import { makeCert, snsSign as signAsSns, startFakeSns, type SnsFields } from '../helpers/sns';
import { stackEnv } from '../stack-env';

// The test plays Amazon SNS: its own RSA key and self-signed certificate (openssl), served from a loopback HTTP
// server that the test stack accepts (SNS_CERT_URL_PATTERN in test/global-setup.ts), and messages signed over the
// canonical string exactly as SNS signs them. The emails are real: sent through /v1/send and the SMTP capture server.

const TOPIC = 'arn:aws:sns:us-east-1:123456789012:mailwright-ses';
const impostor = makeCert('impostor');

type Fields = SnsFields;
/** The fake SNS (test/helpers/sns.ts): its certificate, the paths it served, notifications signed by its key. */
let sns: Awaited<ReturnType<typeof startFakeSns>>;
const snsSign = (msg: Fields, key: KeyObject = sns.signer.key): Fields => signAsSns(msg, key);

let project: TestProject;
let domain: string;

beforeAll(async () => {
  sns = await startFakeSns({ topic: TOPIC, apiUrl: stackEnv().apiUrl });
  project = await createTestProject();
  domain = uniqueDomain();
  await addVerifiedDomain(project.projectId, domain);
});
afterAll(async () => {
  await closeDb();
  await sns.stop();
});
beforeEach(() => {
  sns.hits.length = 0;
});

const rcpt = () => `rcpt-${randomUUID().slice(0, 8)}@example.com`;

/** A real email, sent through /v1/send and accepted by the SMTP server (status SENT). */
async function sentEmail(opts: { subscribed?: boolean } = {}): Promise<{ emailId: string; contactId: string; to: string }> {
  const to = rcpt();
  const res = await api('POST', '/v1/send', {
    key: project.secretKey,
    body: { to, from: `news@${domain}`, subject: 'Hello', body: '<p>Hi</p>', ...(opts.subscribed === undefined ? {} : { subscribed: opts.subscribed }) },
  });
  expect(res.status).toBe(200);
  const { email: emailId, contact } = res.body.data.emails[0];
  await waitForEmailStatus(emailId, 'SENT');
  return { emailId, contactId: contact.id, to };
}

/** An SES identity notification about one email, carrying our Message-ID the way SES reports original headers. */
const sesReport = (kind: 'Delivery' | 'Bounce' | 'Complaint', messageId: string, to: string, part: Record<string, unknown>) => sns.sesReport(kind, messageId, to, part, `news@${domain}`);
const notification = (message: string, over: Fields = {}, key?: KeyObject) => sns.notification(message, over, key);
const post = (body: Fields | string) => sns.post(body);

async function emailEvents(emailId: string): Promise<{ name: string; data: any }[]> {
  const { rows } = await db().query('select name, data from events where email_id = $1 order by id', [emailId]);
  return rows;
}
const emailRow = async (emailId: string) => (await db().query('select * from emails where id = $1', [emailId])).rows[0];
const processed = async (snsMessageId: string) => (await db().query('select 1 from sns_messages where message_id = $1', [snsMessageId])).rowCount;

describe('POST /webhooks/sns: SES reports', () => {
  test('Delivery: SENT -> DELIVERED with delivered_at and the receiving server reply, and email.delivered', async () => {
    const { emailId, to } = await sentEmail();
    const deliveredAt = new Date(Date.now() - 5_000).toISOString();
    const msg = notification(
      sesReport('Delivery', `<${emailId}@${domain}>`, to, {
        timestamp: deliveredAt,
        recipients: [to],
        processingTimeMillis: 546,
        reportingMTA: 'a8-70.smtp-out.amazonses.com',
        smtpResponse: '250 ok:  Message 64111812 accepted',
        remoteMtaIp: '127.0.2.0',
      }),
    );
    const res = await post(msg);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ outcome: 'applied', emailId, events: ['email.delivered'] });

    const row = await emailRow(emailId);
    expect(row.status).toBe('DELIVERED');
    expect(row.smtp_response).toBe('250 ok:  Message 64111812 accepted');
    expect(new Date(row.delivered_at).toISOString()).toBe(deliveredAt);
    const events = await emailEvents(emailId);
    expect(events.map((e) => e.name)).toEqual(['email.sent', 'email.delivered']);
    expect(events[1]!.data).toMatchObject({ smtpResponse: '250 ok:  Message 64111812 accepted', reportingMTA: 'a8-70.smtp-out.amazonses.com', processingTimeMillis: 546 });

    const view = await api('GET', `/emails/${emailId}`, { key: project.secretKey });
    expect(view.body).toMatchObject({ status: 'DELIVERED', deliveredAt });
  });

  test('Bounce Permanent: BOUNCED with email.bounced carrying bounceType, subType and diagnosticCode; a later Delivery never downgrades it', async () => {
    const { emailId, to } = await sentEmail();
    const res = await post(
      notification(
        sesReport('Bounce', `<${emailId}@${domain}>`, to, {
          bounceType: 'Permanent',
          bounceSubType: 'General',
          bouncedRecipients: [{ emailAddress: to, status: '5.1.1', action: 'failed', diagnosticCode: 'smtp; 550 5.1.1 user unknown' }],
          timestamp: new Date().toISOString(),
          feedbackId: 'feedback-1',
          reportingMTA: 'dns; email.example.com',
        }),
      ),
    );
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ outcome: 'applied', events: ['email.bounced'] });
    const row = await emailRow(emailId);
    expect(row.status).toBe('BOUNCED');
    expect(row.smtp_response).toBe('smtp; 550 5.1.1 user unknown');
    const bounced = (await emailEvents(emailId)).filter((e) => e.name === 'email.bounced');
    expect(bounced).toHaveLength(1);
    expect(bounced[0]!.data).toMatchObject({ bounceType: 'Permanent', bounceSubType: 'General', diagnosticCode: 'smtp; 550 5.1.1 user unknown', status: '5.1.1' });
    expect(bounced[0]!.data.transient).toBeUndefined();

    const late = await post(notification(sesReport('Delivery', `<${emailId}@${domain}>`, to, { timestamp: new Date().toISOString(), smtpResponse: '250 ok' })));
    expect(late.status).toBe(200);
    expect(late.body).toMatchObject({ outcome: 'unchanged', events: [] });
    expect((await emailRow(emailId)).status).toBe('BOUNCED');
    expect((await emailEvents(emailId)).map((e) => e.name)).toEqual(['email.sent', 'email.bounced']);
  });

  test('a permanent bounce after a delivery report ends as BOUNCED (the receiver accepted, then bounced)', async () => {
    const { emailId, to } = await sentEmail();
    await post(notification(sesReport('Delivery', `<${emailId}@${domain}>`, to, { timestamp: new Date().toISOString(), smtpResponse: '250 ok' })));
    const res = await post(notification(sesReport('Bounce', `<${emailId}@${domain}>`, to, { bounceType: 'Permanent', bounceSubType: 'Suppressed', bouncedRecipients: [{ emailAddress: to }] })));
    expect(res.body).toMatchObject({ outcome: 'applied', events: ['email.bounced'] });
    expect((await emailRow(emailId)).status).toBe('BOUNCED');
    expect((await emailEvents(emailId)).map((e) => e.name)).toEqual(['email.sent', 'email.delivered', 'email.bounced']);
  });

  test('Bounce Transient: email.bounced with transient: true, and the status stays SENT', async () => {
    const { emailId, to } = await sentEmail();
    const res = await post(
      notification(
        sesReport('Bounce', `<${emailId}@${domain}>`, to, {
          bounceType: 'Transient',
          bounceSubType: 'MailboxFull',
          bouncedRecipients: [{ emailAddress: to, status: '4.2.2', diagnosticCode: 'smtp; 452 4.2.2 mailbox full' }],
        }),
      ),
    );
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ outcome: 'applied', events: ['email.bounced'] });
    expect((await emailRow(emailId)).status).toBe('SENT');
    const bounced = (await emailEvents(emailId)).filter((e) => e.name === 'email.bounced');
    expect(bounced.map((e) => e.data)).toEqual([
      expect.objectContaining({ bounceType: 'Transient', bounceSubType: 'MailboxFull', diagnosticCode: 'smtp; 452 4.2.2 mailbox full', transient: true }),
    ]);
  });

  test('Complaint: email.complained, and the contact is unsubscribed with one contact.unsubscribed (via complaint), also after a second complaint', async () => {
    const { emailId, contactId, to } = await sentEmail({ subscribed: true });
    expect((await db().query('select subscribed from contacts where id = $1', [contactId])).rows[0].subscribed).toBe(true);
    const complaint = () =>
      notification(
        sesReport('Complaint', `<${emailId}@${domain}>`, to, {
          complainedRecipients: [{ emailAddress: to }],
          complaintFeedbackType: 'abuse',
          userAgent: 'AnyCompany Feedback Loop (V0.01)',
          arrivalDate: new Date().toISOString(),
          timestamp: new Date().toISOString(),
          feedbackId: 'complaint-1',
        }),
        { SignatureVersion: '1' }, // SHA1withRSA, as SNS still signs by default
      );
    const first = await post(complaint());
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ outcome: 'applied', events: ['email.complained', 'contact.unsubscribed'] });
    const second = await post(complaint()); // another SNS message: recorded, but the contact is already unsubscribed
    expect(second.body).toMatchObject({ outcome: 'applied', events: ['email.complained'] });

    expect((await db().query('select subscribed from contacts where id = $1', [contactId])).rows[0].subscribed).toBe(false);
    const { rows } = await db().query(
      `select name, data from events where contact_id = $1 and name in ('email.complained', 'contact.unsubscribed') order by id`,
      [contactId],
    );
    expect(rows.map((r) => r.name)).toEqual(['email.complained', 'contact.unsubscribed', 'email.complained']);
    expect(rows[0].data).toMatchObject({ complaintFeedbackType: 'abuse', userAgent: 'AnyCompany Feedback Loop (V0.01)' });
    expect(rows[1].data).toEqual({ via: 'complaint' });
    expect((await emailRow(emailId)).status).toBe('SENT'); // a complaint says nothing about delivery status
  });

  test('the same SNS MessageId twice, or three times at once, records once', async () => {
    const { emailId, to } = await sentEmail();
    // A transient bounce records an event every time it is applied, so a missed de-duplication would show.
    const msg = notification(sesReport('Bounce', `<${emailId}@${domain}>`, to, { bounceType: 'Transient', bouncedRecipients: [{ emailAddress: to }] }));
    const results = await Promise.all([post(msg), post(msg), post(msg)]);
    expect(results.map((r) => r.status)).toEqual([200, 200, 200]);
    expect(results.map((r) => r.body.outcome).sort()).toEqual(['applied', 'duplicate', 'duplicate']);
    const again = await post(msg);
    expect(again.body).toEqual({ outcome: 'duplicate', emailId, events: [] });
    expect((await emailEvents(emailId)).filter((e) => e.name === 'email.bounced')).toHaveLength(1);
    expect(await processed(msg.MessageId!)).toBe(1);
  });

  test('a report of an email not yet recorded as SENT answers 503 (SNS retries) and records nothing; the retry applies', async () => {
    const { emailId, to } = await sentEmail();
    // The relay can report before our own write of SENT commits: put the email back in that moment.
    await db().query(`update emails set status = 'SENDING' where id = $1`, [emailId]);
    const msg = notification(sesReport('Delivery', `<${emailId}@${domain}>`, to, { timestamp: new Date().toISOString(), smtpResponse: '250 ok' }));
    const early = await post(msg);
    expect(early.status).toBe(503);
    expect(early.body.error.code).toBe('SERVICE_UNAVAILABLE');
    expect(await processed(msg.MessageId!)).toBe(0);
    expect((await emailRow(emailId)).status).toBe('SENDING');

    await db().query(`update emails set status = 'SENT' where id = $1`, [emailId]);
    const retried = await post(msg);
    expect(retried.body).toMatchObject({ outcome: 'applied', events: ['email.delivered'] });
    expect((await emailRow(emailId)).status).toBe('DELIVERED');
  });

  test('unknown Message-IDs are a 200 no-op: foreign ids, unknown uuids, and our uuid under another domain', async () => {
    const { emailId, to } = await sentEmail();
    for (const messageId of ['<custom-message-ID@example.com>', `<${randomUUID()}@${domain}>`, `<${emailId}@elsewhere.example>`]) {
      const msg = notification(sesReport('Delivery', messageId, to, { timestamp: new Date().toISOString(), smtpResponse: '250 ok' }));
      const res = await post(msg);
      expect([res.status, res.body]).toEqual([200, { outcome: 'unknown_email', events: [] }]);
      expect(await processed(msg.MessageId!)).toBe(0);
    }
    expect((await emailRow(emailId)).status).toBe('SENT');
    expect((await emailEvents(emailId)).map((e) => e.name)).toEqual(['email.sent']);
  });

  test('a genuine notification that is not an SES report is acknowledged and ignored', async () => {
    const res = await post(notification(JSON.stringify({ notificationType: 'AmazonSnsSubscriptionSucceeded', message: 'Set up' })));
    expect([res.status, res.body]).toEqual([200, { outcome: 'not_a_report', events: [] }]);
  });
});

describe('POST /webhooks/sns: authenticity and format', () => {
  const expectError = (res: Awaited<ReturnType<typeof post>>, status: number, code: string) => {
    expect(res.status).toBe(status);
    expect(res.body).toMatchObject({ success: false, error: { code, statusCode: status, requestId: expect.any(String) }, timestamp: expect.any(String) });
  };

  test('a bad signature is 403 INVALID_SIGNATURE and records nothing', async () => {
    const { emailId, to } = await sentEmail();
    const genuine = notification(sesReport('Delivery', `<${emailId}@${domain}>`, to, { smtpResponse: '250 ok' }));
    const byImpostor = notification(sesReport('Delivery', `<${emailId}@${domain}>`, to, { smtpResponse: '250 ok' }), {}, impostor.key);
    expectError(await post(byImpostor), 403, 'INVALID_SIGNATURE');
    // A genuine signature over another message body: the report was altered after signing.
    const altered = { ...genuine, Message: sesReport('Bounce', `<${emailId}@${domain}>`, to, { bounceType: 'Permanent', bouncedRecipients: [] }) };
    expectError(await post(altered), 403, 'INVALID_SIGNATURE');

    expect((await emailRow(emailId)).status).toBe('SENT');
    expect((await emailEvents(emailId)).map((e) => e.name)).toEqual(['email.sent']);
    expect(await processed(byImpostor.MessageId!)).toBe(0);
    expect(await processed(genuine.MessageId!)).toBe(0);
  });

  test('a SigningCertURL off the pattern is 403 INVALID_CERT_URL, and is never fetched', async () => {
    const { emailId, to } = await sentEmail();
    const port = new URL(sns.base).port;
    for (const certUrl of [`http://localhost:${port}/SimpleNotificationService-test.pem`, 'https://sns.evil.example/cert.pem']) {
      const res = await post(notification(sesReport('Delivery', `<${emailId}@${domain}>`, to, { smtpResponse: '250 ok' }), { SigningCertURL: certUrl }));
      expectError(res, 403, 'INVALID_CERT_URL');
    }
    expect(sns.hits).toEqual([]);
    expect((await emailRow(emailId)).status).toBe('SENT');
  });

  test('SubscriptionConfirmation: verified, then confirmed by fetching SubscribeURL; an off-pattern SubscribeURL is refused unfetched', async () => {
    const token = randomUUID().replace(/-/g, '');
    const subscribeUrl = `${sns.base}/?Action=ConfirmSubscription&TopicArn=${encodeURIComponent(TOPIC)}&Token=${token}`;
    const confirmation = (url: string) =>
      snsSign({
        Type: 'SubscriptionConfirmation',
        MessageId: randomUUID(),
        Token: token,
        TopicArn: TOPIC,
        Message: `You have chosen to subscribe to the topic ${TOPIC}.\nTo confirm the subscription, visit the SubscribeURL included in this message.`,
        SubscribeURL: url,
        Timestamp: new Date().toISOString(),
        SignatureVersion: '1',
        SigningCertURL: `${sns.base}/SimpleNotificationService-test.pem`,
      });
    const res = await post(confirmation(subscribeUrl));
    expect([res.status, res.body]).toEqual([200, { outcome: 'confirmed', events: [] }]);
    expect(sns.hits.filter((h) => h.startsWith('/?Action=ConfirmSubscription'))).toEqual([`/?Action=ConfirmSubscription&TopicArn=${encodeURIComponent(TOPIC)}&Token=${token}`]);

    sns.hits.length = 0;
    expectError(await post(confirmation(`http://localhost:${new URL(sns.base).port}/?Action=ConfirmSubscription&Token=${token}`)), 403, 'INVALID_SUBSCRIBE_URL');
    expect(sns.hits.filter((h) => h.startsWith('/?Action'))).toEqual([]);

    // A forged confirmation (signed by another key) never makes us call out.
    sns.hits.length = 0;
    expectError(await post(snsSign({ ...confirmation(subscribeUrl), Signature: undefined }, impostor.key)), 403, 'INVALID_SIGNATURE');
    expect(sns.hits.filter((h) => h.startsWith('/?Action'))).toEqual([]);
  });

  test('an UnsubscribeConfirmation is verified and acknowledged', async () => {
    const res = await post(
      snsSign({
        Type: 'UnsubscribeConfirmation',
        MessageId: randomUUID(),
        Token: 'tok',
        TopicArn: TOPIC,
        Message: 'You have chosen to deactivate subscription',
        SubscribeURL: `${sns.base}/?Action=ConfirmSubscription&Token=tok`,
        Timestamp: new Date().toISOString(),
        SignatureVersion: '2',
        SigningCertURL: `${sns.base}/SimpleNotificationService-test.pem`,
      }),
    );
    expect([res.status, res.body]).toEqual([200, { outcome: 'unsubscribed', events: [] }]);
    expect(sns.hits.filter((h) => h.startsWith('/?Action'))).toEqual([]);
  });

  test('the signing certificate was downloaded once for the whole file: the API caches it by URL', () => {
    expect(sns.certFetches()).toBe(1);
  });

  test('malformed bodies are 400, never 500', async () => {
    expectError(await post('{"Type": "Notification", '), 400, 'INVALID_JSON');
    expectError(await post(''), 400, 'INVALID_JSON');
    expectError(await post(JSON.stringify({ hello: 'world' })), 400, 'BAD_REQUEST');
    expectError(await post(JSON.stringify({ notificationType: 'Delivery', mail: {}, delivery: {} })), 400, 'BAD_REQUEST'); // raw delivery: no envelope
    const json = await api('POST', '/webhooks/sns', { body: { Type: 'Notification' } }); // application/json works the same
    expectError(json, 400, 'BAD_REQUEST');
    // Signed correctly, but the SES report inside lacks its part.
    expectError(await post(notification(JSON.stringify({ notificationType: 'Bounce', mail: {} }))), 400, 'BAD_REQUEST');
  });
});
