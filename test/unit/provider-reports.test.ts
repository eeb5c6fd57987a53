import { createHmac, generateKeyPairSync, randomBytes, sign } from 'node:crypto';
import { loadConfig } from '../../domain/config';
import { AppError } from '../../domain/errors';
import { verifyMailgun, verifyPostmark, verifySendgrid, verifyStandardWebhook } from '../../domain/webhooks/provider-signatures';
import { readSendgridEvents } from '../../domain/webhooks/sendgrid-reports';
import { readMailgunEvent } from '../../domain/webhooks/mailgun-reports';
import { readPostmarkRecord } from '../../domain/webhooks/postmark-reports';
import { readResendEvent } from '../../domain/webhooks/resend-reports';

// The providers' request formats written out here from their documentation, independently of the code under test;
// the stack test (test/integration/provider-webhooks.test.ts) posts them to the API and checks what they change.

/** What `fn` throws (undefined when it returns), for matching an AppError's status and code. */
function thrown(fn: () => unknown): unknown {
  try {
    fn();
  } catch (err) {
    return err;
  }
  return undefined;
}
const expectAppError = (fn: () => unknown, statusCode: number, code: string) => {
  const err = thrown(fn);
  expect(err).toBeInstanceOf(AppError);
  expect(err).toMatchObject({ statusCode, code });
};

const OURS = '<01a21c35-4b96-774b-920f-4a2e1eb3ca5e@news.example.com>';
const MINUTE = 60_000;
const headersOf = (h: Record<string, string>) => (name: string) => Object.entries(h).find(([k]) => k.toLowerCase() === name)?.[1];

describe('signatures', () => {
  const now = Date.UTC(2026, 10, 27, 9, 0, 0);
  const ts = String(now / 1000);

  test('SendGrid: ECDSA P-256 over timestamp + body, base64 DER; the key as SendGrid shows it (base64 SPKI) or PEM', () => {
    const { publicKey, privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const body = '[{"event":"delivered","sg_event_id":"e1"}]';
    const signature = sign('sha256', Buffer.from(ts + body), { key: privateKey, dsaEncoding: 'der' }).toString('base64');
    const headers = headersOf({ 'X-Twilio-Email-Event-Webhook-Signature': signature, 'X-Twilio-Email-Event-Webhook-Timestamp': ts });
    for (const text of [publicKey.export({ format: 'der', type: 'spki' }).toString('base64'), String(publicKey.export({ format: 'pem', type: 'spki' }))]) {
      const key = loadConfig({ DATABASE_URL: 'postgres://x/y', SENDGRID_WEBHOOK_PUBLIC_KEY: text }).reportWebhooks.sendgrid!.publicKey;
      expect(() => verifySendgrid(headers, body, key, 5 * MINUTE, now)).not.toThrow();
      expectAppError(() => verifySendgrid(headers, body.replace('delivered', 'bounce'), key, 5 * MINUTE, now), 403, 'INVALID_SIGNATURE');
      expectAppError(() => verifySendgrid(headers, body, key, 5 * MINUTE, now + 6 * MINUTE), 403, 'MESSAGE_EXPIRED');
      expectAppError(() => verifySendgrid(headersOf({}), body, key, 5 * MINUTE, now), 401, 'UNAUTHORIZED');
    }
  });

  test('SENDGRID_WEBHOOK_PUBLIC_KEY must be a P-256 public key, POSTMARK_WEBHOOK_USER and _PASSWORD go together, RESEND_WEBHOOK_SECRET decodes', () => {
    const rsa = generateKeyPairSync('rsa', { modulusLength: 1024 }).publicKey.export({ format: 'der', type: 'spki' }).toString('base64');
    expect(() => loadConfig({ DATABASE_URL: 'postgres://x/y', SENDGRID_WEBHOOK_PUBLIC_KEY: rsa })).toThrow(/SENDGRID_WEBHOOK_PUBLIC_KEY: must be an ECDSA P-256/);
    expect(() => loadConfig({ DATABASE_URL: 'postgres://x/y', SENDGRID_WEBHOOK_PUBLIC_KEY: 'bm90IGEga2V5' })).toThrow(/SENDGRID_WEBHOOK_PUBLIC_KEY: not a public key/);
    expect(() => loadConfig({ DATABASE_URL: 'postgres://x/y', POSTMARK_WEBHOOK_USER: 'hooks' })).toThrow(/POSTMARK_WEBHOOK_PASSWORD: POSTMARK_WEBHOOK_USER and POSTMARK_WEBHOOK_PASSWORD go together/);
    expect(() => loadConfig({ DATABASE_URL: 'postgres://x/y', RESEND_WEBHOOK_SECRET: 'whsec_c2hvcnQ=' })).toThrow(/RESEND_WEBHOOK_SECRET/);
    const secret = randomBytes(24);
    expect(loadConfig({ DATABASE_URL: 'postgres://x/y', RESEND_WEBHOOK_SECRET: `whsec_${secret.toString('base64')}` }).reportWebhooks.resend!.secret.equals(secret)).toBe(true);
    expect(loadConfig({ DATABASE_URL: 'postgres://x/y' }).reportWebhooks).toMatchObject({ sendgrid: undefined, mailgun: undefined, postmark: undefined, resend: undefined, toleranceMs: 5 * MINUTE });
  });

  test('Mailgun: hex HMAC-SHA256 of timestamp + token with the signing key', () => {
    const key = 'key-0123456789abcdef';
    const token = randomBytes(25).toString('hex');
    const signature = createHmac('sha256', key).update(ts + token).digest('hex');
    expect(() => verifyMailgun({ timestamp: ts, token, signature }, key, 5 * MINUTE, now)).not.toThrow();
    expectAppError(() => verifyMailgun({ timestamp: ts, token: `${token}0`, signature }, key, 5 * MINUTE, now), 403, 'INVALID_SIGNATURE');
    expectAppError(() => verifyMailgun({ timestamp: ts, token, signature }, key, 5 * MINUTE, now - 6 * MINUTE), 403, 'MESSAGE_EXPIRED');
    expectAppError(() => verifyMailgun(undefined, key, 5 * MINUTE, now), 401, 'UNAUTHORIZED');
  });

  test('Postmark: HTTP Basic credentials', () => {
    const creds = { user: 'hooks', password: 'a long password' };
    expect(() => verifyPostmark(`Basic ${Buffer.from('hooks:a long password').toString('base64')}`, creds)).not.toThrow();
    expectAppError(() => verifyPostmark(`Basic ${Buffer.from('hooks:a long passwore').toString('base64')}`, creds), 403, 'INVALID_SIGNATURE');
    expectAppError(() => verifyPostmark('Bearer abc', creds), 401, 'UNAUTHORIZED');
  });

  test('Standard Webhooks: base64 HMAC of id.timestamp.body with the decoded secret; any v1 entry may match', () => {
    const secret = randomBytes(24);
    const body = '{"type":"email.delivered","data":{}}';
    const good = createHmac('sha256', secret).update(`msg_1.${ts}.${body}`).digest('base64');
    const h = (signature: string) => headersOf({ 'svix-id': 'msg_1', 'svix-timestamp': ts, 'svix-signature': signature });
    expect(verifyStandardWebhook(h(`v1,${good}`), body, secret, 5 * MINUTE, now)).toBe('msg_1');
    expect(verifyStandardWebhook(h(`v1,AAAA v1,${good}`), body, secret, 5 * MINUTE, now)).toBe('msg_1');
    expectAppError(() => verifyStandardWebhook(h(`v2,${good}`), body, secret, 5 * MINUTE, now), 403, 'INVALID_SIGNATURE');
    expectAppError(() => verifyStandardWebhook(h(`v1,${good}`), `${body} `, secret, 5 * MINUTE, now), 403, 'INVALID_SIGNATURE');
    expectAppError(() => verifyStandardWebhook(h(`v1,${good}`), body, secret, 5 * MINUTE, now + 6 * MINUTE), 403, 'MESSAGE_EXPIRED');
    // The Standard Webhooks header names work as Svix's do.
    const std = headersOf({ 'webhook-id': 'msg_1', 'webhook-timestamp': ts, 'webhook-signature': `v1,${good}` });
    expect(verifyStandardWebhook(std, body, secret, 5 * MINUTE, now)).toBe('msg_1');
  });
});

describe('reading events', () => {
  test('SendGrid: dropped suppresses only for an address reason, blocked and deferred count nothing, sg_message_id before its first dot', () => {
    const base = { email: 'a@example.com', timestamp: 1_700_000_000, 'smtp-id': OURS, sg_message_id: 'Q1A2B3.filterdrecv-1.0' };
    const events = readSendgridEvents(
      JSON.stringify([
        { ...base, event: 'dropped', sg_event_id: 'd1', reason: 'Bounced Address' },
        { ...base, event: 'dropped', sg_event_id: 'd2', reason: 'Spam Content (if enabled)' },
        { ...base, event: 'bounce', sg_event_id: 'b1', type: 'blocked', reason: '554 5.7.1 blocked' },
        { ...base, event: 'deferred', sg_event_id: 'f1', response: '421 try later' },
        { ...base, event: 'group_unsubscribe', sg_event_id: 'u1' },
        { ...base, event: 'click', sg_event_id: 'c1' },
        { event: 'bounce' },
      ]),
    );
    expect(events).toEqual([
      expect.objectContaining({ eventId: 'd1', providerMessageId: 'Q1A2B3', messageIdHeader: OURS, effect: expect.objectContaining({ kind: 'bounced', permanent: true, suppression: 'hard_bounce' }) }),
      expect.objectContaining({ eventId: 'd2', effect: expect.not.objectContaining({ suppression: expect.anything() }) }),
      expect.objectContaining({ eventId: 'b1', effect: { kind: 'bounced', permanent: false, bounceSubType: 'blocked', diagnosticCode: '554 5.7.1 blocked', status: undefined, timestamp: '2023-11-14T22:13:20.000Z' } }),
      expect.objectContaining({ eventId: 'f1', effect: expect.objectContaining({ kind: 'bounced', permanent: false, bounceSubType: 'deferred' }) }),
      expect.objectContaining({ eventId: 'u1', effect: { kind: 'unsubscribed', detail: 'group_unsubscribe' } }),
      { skipped: 'ignored', type: 'click', eventId: 'c1' },
      { skipped: 'invalid', type: 'bounce', detail: 'sg_event_id: Invalid input: expected string, received undefined' },
    ]);
    expect((events[1] as { effect: { permanent: boolean } }).effect.permanent).toBe(true);
    expectAppError(() => readSendgridEvents('{"event":"delivered"}'), 400, 'BAD_REQUEST');
    expectAppError(() => readSendgridEvents('not json'), 400, 'BAD_REQUEST');
  });

  test('Mailgun: a temporary failure counts as a soft bounce unless it is greylisting or an ESP block', () => {
    const data = (reason: string) => ({ id: 'e1', event: 'failed', severity: 'temporary', reason, recipient: 'a@example.com', message: { headers: { 'message-id': OURS.slice(1, -1) } } });
    expect(readMailgunEvent(data('generic'))).toMatchObject({ messageIdHeader: OURS.slice(1, -1), effect: { kind: 'bounced', permanent: false, suppression: 'soft_bounce' } });
    expect(readMailgunEvent(data('greylisted'))).toMatchObject({ effect: { kind: 'bounced', permanent: false } });
    expect(readMailgunEvent(data('greylisted'))).not.toMatchObject({ effect: { suppression: expect.anything() } });
    expect(readMailgunEvent({ ...data('bounce'), severity: 'permanent' })).toMatchObject({ effect: { permanent: true, suppression: 'hard_bounce' } });
    expect(readMailgunEvent({ id: 'o1', event: 'opened' })).toEqual({ skipped: 'ignored', type: 'opened', eventId: 'o1' });
    expect(readMailgunEvent(undefined)).toMatchObject({ skipped: 'invalid', type: '(none)' });
  });

  test('Postmark: the bounce type from TypeCode when Type is absent; non-bounces ignored; our Message-ID found in the content, not the bounce\'s own', () => {
    const rec = (over: Record<string, unknown>) => JSON.stringify({ RecordType: 'Bounce', ID: 42, MessageID: 'pm-1', Email: 'a@example.com', ...over });
    expect(readPostmarkRecord(rec({ TypeCode: 100000 }))).toMatchObject({ eventId: 'Bounce:42', type: 'Bounce/BadEmailAddress', effect: { permanent: true, suppression: 'hard_bounce' } });
    expect(readPostmarkRecord(rec({ Type: 'SoftBounce' }))).toMatchObject({ effect: { permanent: false, suppression: 'soft_bounce' } });
    expect(readPostmarkRecord(rec({ Type: 'Blocked' }))).not.toMatchObject({ effect: { suppression: expect.anything() } });
    expect(readPostmarkRecord(rec({ Type: 'AutoResponder', TypeCode: 64 }))).toEqual({ skipped: 'ignored', type: 'Bounce/AutoResponder', eventId: 'Bounce:42' });
    expect(readPostmarkRecord(rec({ Type: 'SpamComplaint', RecordType: 'SpamComplaint' }))).toMatchObject({ eventId: 'SpamComplaint:42', effect: { kind: 'complained' } });
    expect(readPostmarkRecord(rec({ TypeCode: 512, RecordType: 'SpamComplaint' }))).toMatchObject({ type: 'SpamComplaint/SpamComplaint', effect: { kind: 'complained' } });
    const content = `Message-ID: <dsn-1@mx.example>\r\n\r\nMessage-ID: <not-a-uuid@news.example.com>\r\nMessage-ID: ${OURS}\r\n`;
    expect(readPostmarkRecord(rec({ Type: 'HardBounce', Content: content }))).toMatchObject({ messageIdHeader: OURS, providerMessageId: 'pm-1' });
    expect(readPostmarkRecord(JSON.stringify({ RecordType: 'SubscriptionChange', MessageID: 'pm-1', Recipient: 'a@example.com', SuppressSending: false }))).toMatchObject({ skipped: 'ignored' });
    expect(readPostmarkRecord(JSON.stringify({ RecordType: 'Delivery', Recipient: 'a@example.com' }))).toEqual({ skipped: 'invalid', type: 'Delivery', detail: 'MessageID is missing' });
    expect(readPostmarkRecord(JSON.stringify({ RecordType: 'Open', MessageID: 'pm-1' }))).toEqual({ skipped: 'ignored', type: 'Open' });
  });

  test('Resend: email.bounced is permanent unless its bounce says Transient (counted for a mailbox subtype) or Undetermined', () => {
    const ev = (bounce?: Record<string, unknown>) => JSON.stringify({ type: 'email.bounced', created_at: '2026-11-27T09:00:00Z', data: { email_id: 're-1', to: ['a@example.com'], ...(bounce ? { bounce } : {}) } });
    expect(readResendEvent(ev(), 'msg_1')).toMatchObject({ eventId: 'msg_1', providerMessageId: 're-1', recipient: 'a@example.com', effect: { permanent: true, suppression: 'hard_bounce' } });
    expect(readResendEvent(ev({ type: 'Transient', subType: 'MailboxFull' }), 'msg_1')).toMatchObject({ effect: { permanent: false, suppression: 'soft_bounce' } });
    expect(readResendEvent(ev({ type: 'Transient', subType: 'ContentRejected' }), 'msg_1')).not.toMatchObject({ effect: { suppression: expect.anything() } });
    expect(readResendEvent(ev({ type: 'Undetermined' }), 'msg_1')).not.toMatchObject({ effect: { suppression: expect.anything() } });
    expect(readResendEvent(JSON.stringify({ type: 'email.opened', data: {} }), 'msg_2')).toEqual({ skipped: 'ignored', type: 'email.opened', eventId: 'msg_2' });
  });
});
