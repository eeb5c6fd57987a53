import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { classifyInbound } from '../../domain/inbound/classify';
import { replyExcerpt, REPLY_EXCERPT_CHARS } from '../../domain/inbound/reply';
import { parseReturnPath, parseUnsubscribeAddress, parseUnsubscribeSubject, unsubscribeAddress, unsubscribeTokenFromSubject } from '../../domain/inbound/return-path';
import type { InboundEnvelope, InboundMessage } from '../../domain/inbound/inbound-message';

/**
 * The fixtures (test/fixtures/inbound) are written here from RFC 3464, RFC 5965, RFC 3834 and the bounce formats the
 * MTAs document; their return paths are signed with SECRET on 2026-11-20, so they verify at NOW.
 */
const FIXTURES = join(__dirname, '../fixtures/inbound');
const SECRET = 'unit-test-app-secret-0123456789-abcdef';
const NOW = new Date('2026-11-27T12:00:00Z');

const emailId = (n: number) => `019ab2c4-5e6f-7a00-8b00-${n.toString(16).padStart(12, '0')}`;
const ourMessageId = (n: number) => `<${emailId(n)}@shop.example>`;
const fixture = (name: string) => readFileSync(join(FIXTURES, name));
const toCrlf = (raw: Buffer) => Buffer.from(raw.toString('latin1').replace(/\r?\n/g, '\r\n'), 'latin1');

/** The envelope a bounce arrives with: the null sender, to the return path its To header names. */
function bounceEnvelope(raw: Buffer): InboundEnvelope {
  const to = /^To:\s*<?([^>\s]+)>?\s*$/im.exec(raw.toString('latin1'))?.[1] ?? 'postmaster@bounces.shop.example';
  return { mailFrom: '', rcptTo: [to] };
}

/** Classifies a fixture with LF and with CRLF line ends (as it comes over SMTP); both must read the same. */
async function classify(name: string, envelope?: InboundEnvelope): Promise<InboundMessage> {
  const raw = fixture(name);
  const env = envelope ?? bounceEnvelope(raw);
  const lf = await classifyInbound(raw, env);
  expect(await classifyInbound(toCrlf(raw), env)).toEqual(lf);
  return lf;
}

function asBounce(m: InboundMessage) {
  if (m.kind !== 'bounce') throw new Error(`expected a bounce, got ${m.kind}: ${JSON.stringify(m)}`);
  return m;
}

/** A message built in the test: headers (one a line) and a body. */
const mail = (headers: string[], body = '') => Buffer.from(`${headers.join('\r\n')}\r\n\r\n${body.replace(/\n/g, '\r\n')}`);
const DAEMON = 'From: MAILER-DAEMON@mx.example.net (Mail Delivery System)';
const PERSON_ENVELOPE: InboundEnvelope = { mailFrom: 'someone@example.com', rcptTo: ['hello@shop.example'] };
const NULL_ENVELOPE: InboundEnvelope = { mailFrom: '<>', rcptTo: ['b-x@bounces.shop.example'] };

describe('RFC 3464 delivery status notifications', () => {
  test.each([
    // file, email, recipient, action, status, hard/soft, transient, token in the report or original, remote MTA
    ['dsn-postfix-hard.eml', 0x01, 'alice@example.org', 'failed', '5.1.1', 'hard', false, true, 'mx1.example.org'],
    ['dsn-postfix-delayed.eml', 0x02, 'bruno@example.net', 'delayed', '4.4.1', 'soft', true, true, undefined],
    ['dsn-postfix-expired-soft.eml', 0x03, 'carla@example.com', 'failed', '4.2.2', 'soft', false, false, 'mx.example.com'],
    ['dsn-exim-hard.eml', 0x04, 'dario@example.org', 'failed', '5.1.1', 'hard', false, true, 'mx.example.org'],
    ['dsn-exim-delayed.eml', 0x05, 'eva@example.net', 'delayed', '4.7.1', 'soft', true, true, 'mx.example.net'],
    ['dsn-sendmail-hard.eml', 0x06, 'felix@example.org', 'failed', '5.1.1', 'hard', false, false, 'mx.example.org'],
    ['dsn-exchange-online-hard.eml', 0x07, 'gina@example.com', 'failed', '5.1.10', 'hard', false, false, undefined],
    ['dsn-gmail-hard.eml', 0x08, 'hana@example.org', 'failed', '5.1.1', 'hard', false, true, 'mx.example.org. (192.0.2.50, the server for the domain example.org.)'],
    ['dsn-gmail-delayed.eml', 0x09, 'ines@example.net', 'delayed', '4.2.2', 'soft', true, false, 'mx.example.net. (203.0.113.60, the server for the domain example.net.)'],
    ['dsn-yahoo-hard.eml', 0x0a, 'jonas@ymail.example', 'failed', '5.0.0', 'hard', false, false, undefined],
    ['dsn-nested-rfc822.eml', 0x0f, 'nora@example.org', 'failed', '5.7.1', 'hard', false, true, 'mx.example.org'],
    ['dsn-unterminated-boundary.eml', 0x10, 'omar@example.com', 'failed', '5.1.1', 'hard', false, false, undefined],
  ] as const)('%s: recipient, status, hard or soft, original Message-ID and return path', async (file, n, recipient, action, status, bounceType, transient, tokenFound, remoteMta) => {
    const raw = fixture(file);
    const m = asBounce(await classify(file));
    expect(m).toMatchObject({ format: 'rfc3464', bounceType, transient, originalMessageId: ourMessageId(n) });
    expect(m.recipients).toEqual([expect.objectContaining({ recipient, action, status })]);
    expect(m.recipients[0]!.remoteMta).toBe(remoteMta);
    expect(m.recipients[0]!.diagnosticCode).toBeTruthy();
    expect(m.summary).toContain(`${recipient}: ${action} ${status}`);
    // The envelope recipient names the email; where the report quotes the original envelope sender, that does too.
    expect(parseReturnPath(bounceEnvelope(raw).rcptTo[0]!, SECRET, NOW)).toMatchObject({ emailId: emailId(n) });
    if (tokenFound) expect(parseReturnPath(m.originalEnvelopeToken!, SECRET, NOW)).toMatchObject({ emailId: emailId(n) });
    else expect(m.originalEnvelopeToken).toBeUndefined();
  });

  test('the common fields are the report\'s own: its sender, subject, Message-ID and date', async () => {
    const m = await classify('dsn-postfix-hard.eml');
    expect(m).toMatchObject({
      from: { address: 'MAILER-DAEMON@mail.relay.example', name: 'Mail Delivery System' },
      subject: 'Undelivered Mail Returned to Sender',
      messageId: '<20261120093102.4XyZ1b2C3dz9sT@mail.relay.example>',
      date: '2026-11-20T09:31:02.000Z',
      reportingMta: 'mail.relay.example',
    });
    // A folded Diagnostic-Code is unfolded.
    expect(asBounce(m).recipients[0]!.diagnosticCode).toBe('550 5.1.1 <alice@example.org>: Recipient address rejected: User unknown in virtual mailbox table');
  });

  test('Exim states only the class (5.0.0, 4.0.0): the precise status comes from the quoted SMTP reply', async () => {
    expect(asBounce(await classify('dsn-exim-hard.eml')).recipients[0]!.status).toBe('5.1.1');
    expect(asBounce(await classify('dsn-exim-delayed.eml')).recipients[0]!.status).toBe('4.7.1');
  });

  test('a failed recipient with a 4.x.x status (queue expired on a full mailbox) is soft but not transient', async () => {
    expect(asBounce(await classify('dsn-postfix-expired-soft.eml'))).toMatchObject({ bounceType: 'soft', transient: false });
  });

  test('without a returned original, Gmail\'s X-Original-Message-ID names it', async () => {
    expect(asBounce(await classify('dsn-gmail-delayed.eml')).originalMessageId).toBe(ourMessageId(0x09));
  });

  test('a returned original that embeds another bounce: only the outer report and original count', async () => {
    const m = asBounce(await classify('dsn-nested-rfc822.eml'));
    expect(m.recipients.map((r) => r.recipient)).toEqual(['nora@example.org']);
    expect(m.originalMessageId).toBe(ourMessageId(0x0f));
    expect(JSON.stringify(m)).not.toMatch(/decoy|deepest|elsewhere/);
  });

  test('a DSN reporting only deliveries is no bounce', async () => {
    const raw = mail(
      [DAEMON, 'Subject: Successful Mail Delivery Report', 'MIME-Version: 1.0', 'Content-Type: multipart/report; report-type=delivery-status; boundary="b"'],
      '--b\nContent-Type: text/plain\n\nDelivered.\n--b\nContent-Type: message/delivery-status\n\nReporting-MTA: dns; mx.example.net\n\nFinal-Recipient: rfc822; a@example.org\nAction: delivered\nStatus: 2.0.0\n--b--\n',
    );
    expect(await classifyInbound(raw, NULL_ENVELOPE)).toMatchObject({ kind: 'unknown', reason: 'delivery_notification' });
  });

  test('several recipients: hard when any failed with 5.x.x, transient only when all are delayed', async () => {
    const report = (groups: string[]) =>
      mail(
        [DAEMON, 'Subject: Undelivered Mail Returned to Sender', 'MIME-Version: 1.0', 'Content-Type: multipart/report; report-type=delivery-status; boundary="b"'],
        `--b\nContent-Type: message/delivery-status\n\nReporting-MTA: dns; mx.example.net\n\n${groups.join('\n\n')}\n--b--\n`,
      );
    const failed = 'Final-Recipient: rfc822; a@example.org\nAction: failed\nStatus: 5.1.1';
    const delayed = 'Final-Recipient: rfc822; b@example.org\nAction: delayed\nStatus: 4.4.1';
    const delivered = 'Final-Recipient: rfc822; c@example.org\nAction: delivered\nStatus: 2.0.0';
    const both = asBounce(await classifyInbound(report([failed, delayed, delivered]), NULL_ENVELOPE));
    expect(both).toMatchObject({ bounceType: 'hard', transient: false });
    expect(both.recipients.map((r) => r.recipient)).toEqual(['a@example.org', 'b@example.org']);
    expect(await classifyInbound(report([delayed, delayed.replace('b@', 'd@')]), NULL_ENVELOPE)).toMatchObject({ bounceType: 'soft', transient: true });
  });

  test('missing fields are inferred: Status from Diagnostic-Code, Action from Status; RFC 6533 global DSNs are read too', async () => {
    const raw = mail(
      [DAEMON, 'Subject: Undeliverable', 'MIME-Version: 1.0', 'Content-Type: multipart/report; report-type=global-delivery-status; boundary="b"'],
      '--b\nContent-Type: message/global-delivery-status\n\nReporting-MTA: dns; mx.example.net\n\nFinal-Recipient: utf-8; <zoë@example.org>\nDiagnostic-Code: smtp; 550 5.1.1 unknown\n--b--\n',
    );
    const m = asBounce(await classifyInbound(raw, NULL_ENVELOPE));
    expect(m.recipients).toEqual([{ recipient: 'zoë@example.org', action: 'failed', status: '5.1.1', diagnosticCode: '550 5.1.1 unknown' }]);
  });

  test('a delivery-status report that names no recipient is read by its text', async () => {
    const raw = mail(
      [DAEMON, 'Subject: Undelivered Mail', 'MIME-Version: 1.0', 'Content-Type: multipart/report; report-type=delivery-status; boundary="b"'],
      '--b\nContent-Type: text/plain\n\n<a@example.org>: 550 5.1.1 user unknown\n--b\nContent-Type: message/delivery-status\n\nReporting-MTA: dns; mx.example.net\n--b--\n',
    );
    expect(asBounce(await classifyInbound(raw, NULL_ENVELOPE))).toMatchObject({ format: 'heuristic', recipients: [{ recipient: 'a@example.org', status: '5.1.1' }] });
  });

  test('a report is a report whatever else the message says (Auto-Submitted, a person\'s From, Re:)', async () => {
    const raw = fixture('dsn-postfix-hard.eml')
      .toString('latin1')
      .replace('From: MAILER-DAEMON@mail.relay.example (Mail Delivery System)', 'From: Alice <alice@example.org>\nIn-Reply-To: <x@y>')
      .replace('Subject: Undelivered Mail Returned to Sender', 'Subject: Re: Out of Office');
    expect(await classifyInbound(Buffer.from(raw, 'latin1'), PERSON_ENVELOPE)).toMatchObject({ kind: 'bounce', format: 'rfc3464', bounceType: 'hard' });
  });
});

describe('bounces without a delivery-status report', () => {
  test('qmail: recipient, status from the remote reply, the original from the copy below the marker', async () => {
    const m = asBounce(await classify('bounce-qmail-text.eml'));
    expect(m).toMatchObject({ format: 'heuristic', bounceType: 'hard', transient: false, originalMessageId: ourMessageId(0x0b) });
    expect(m.recipients).toEqual([
      { recipient: 'karl@example.com', action: 'failed', status: '5.1.1', diagnosticCode: 'Remote host said: 550 5.1.1 <karl@example.com>... No such user here' },
    ]);
    expect(parseReturnPath(m.originalEnvelopeToken!, SECRET, NOW)).toMatchObject({ emailId: emailId(0x0b) });
  });

  test('qmail: status words in the returned copy (versions, "550 customers", "mailbox full") are not read', async () => {
    const raw = fixture('bounce-qmail-text.eml')
      .toString('latin1')
      .replace('Remote host said: 550 5.1.1 <karl@example.com>... No such user here\n', '')
      .replace('192.0.2.77 does not like recipient.\n', '');
    // Without a reason in the explanation, only "This is a permanent error" is left to read.
    expect(asBounce(await classifyInbound(Buffer.from(raw, 'latin1'), NULL_ENVELOPE)).recipients[0]).toMatchObject({ recipient: 'karl@example.com', status: '5.0.0' });
  });

  test('old Exchange: "#5.1.1" in a text NDR, the recipient after "cannot be reached", the original from In-Reply-To', async () => {
    const m = asBounce(await classify('bounce-exchange-legacy-text.eml'));
    expect(m).toMatchObject({ format: 'heuristic', bounceType: 'hard', originalMessageId: ourMessageId(0x0c) });
    expect(m.recipients[0]).toMatchObject({ recipient: 'lena@corp.example', action: 'failed', status: '5.1.1' });
    expect(m.originalEnvelopeToken).toBeUndefined();
  });

  test.each([
    ['a full mailbox, no code', 'Your message to <a@example.org> could not be delivered:\nthe mailbox is full.', 'failed', '4.2.2', 'soft', false],
    ['an unknown user, no code', '<a@example.org>:\nSorry, no mailbox here by that name. (#5.1.1)', 'failed', '5.1.1', 'hard', false],
    ['"user unknown" only', '<a@example.org>:\nuser unknown', 'failed', '5.1.1', 'hard', false],
    ['an unknown domain', '<a@example.org>:\nHost or domain name not found. Name service error for name=example.org', 'failed', '5.1.2', 'hard', false],
    ['a basic reply code', '<a@example.org>:\nRemote host said: 554 delivery error: dd This user doesn\'t have a ymail.example account', 'failed', '5.0.0', 'hard', false],
    ['"permanent error" only', 'I was not able to deliver your message to <a@example.org>. This is a permanent error.', 'failed', '5.0.0', 'hard', false],
    ['a 4xx reply while still retrying', 'Delivery to a@example.org has been delayed.\n451 4.7.1 Greylisted. Delivery will continue to be attempted.', 'delayed', '4.7.1', 'soft', true],
    ['a delay notice without a code', 'This is a warning: your message has not yet been delivered to <a@example.org>. Will keep trying.', 'delayed', '4.0.0', 'soft', true],
    ['a 4xx reply after giving up', '<a@example.org>:\n452 4.2.2 Mailbox full. Giving up on the message.', 'failed', '4.2.2', 'soft', false],
  ] as const)('from MAILER-DAEMON: %s', async (_name, body, action, status, bounceType, transient) => {
    const m = asBounce(await classifyInbound(mail([DAEMON, 'Subject: failure notice'], body), NULL_ENVELOPE));
    expect(m).toMatchObject({ format: 'heuristic', bounceType, transient, recipients: [{ recipient: 'a@example.org', action, status }] });
  });

  test('IP addresses, versions and dates are no status codes', async () => {
    const body = 'Connected to 10.4.5.6 running MTA 2.5.1 on 5.6.2026; nothing else to report.';
    expect(await classifyInbound(mail([DAEMON, 'Subject: Notice'], body), NULL_ENVELOPE)).toMatchObject({ kind: 'unknown', reason: 'daemon_unrecognised' });
  });

  test('Postfix and Exim mark bounces Auto-Submitted: from a mail system that is still a bounce', async () => {
    const raw = mail([DAEMON, 'Subject: Undelivered Mail Returned to Sender', 'Auto-Submitted: auto-replied'], '<a@example.org>: 550 5.1.1 User unknown');
    expect(await classifyInbound(raw, NULL_ENVELOPE)).toMatchObject({ kind: 'bounce', format: 'heuristic', bounceType: 'hard' });
    const notice = mail([DAEMON, 'Subject: Your mailbox settings', 'Auto-Submitted: auto-generated'], 'Nothing went wrong.');
    expect(await classifyInbound(notice, NULL_ENVELOPE)).toMatchObject({ kind: 'auto-reply', reason: 'auto-submitted' });
  });

  test('the null sender alone is enough to read a bounce, a person\'s envelope is not', async () => {
    const raw = mail(['From: Mail System <system@mx.example.net>', 'Subject: Returned mail'], '<a@example.org>: 550 5.1.1 User unknown');
    expect(await classifyInbound(raw, NULL_ENVELOPE)).toMatchObject({ kind: 'bounce', format: 'heuristic' });
    expect(await classifyInbound(raw, PERSON_ENVELOPE)).toMatchObject({ kind: 'unknown', reason: 'not_a_reply' });
  });

  test('a person forwarding a bounce is not a bounce, whatever the envelope sender', async () => {
    const raw = fixture('forwarded-bounce-from-person.eml');
    expect(await classify('forwarded-bounce-from-person.eml', { mailFrom: 'uma@example.com', rcptTo: ['support@shop.example'] })).toMatchObject({
      kind: 'unknown',
      reason: 'not_a_reply',
    });
    expect(await classifyInbound(raw, NULL_ENVELOPE)).toMatchObject({ kind: 'unknown', reason: 'not_a_reply' });
  });

  test('a return path quoted anywhere in a bounce\'s text is found (a forwarder\'s SRS address)', async () => {
    const token = 'b-agnlfrc6n55abcyaaaaaaaaaafissvpjurapam3w2cwzoos7';
    const raw = mail([DAEMON, 'Subject: failure notice'], `<a@example.org>: 550 5.1.1 unknown\n\nOriginal sender: SRS0=Ab12=TT=bounces.shop.example=${token}@fwd.example`);
    expect(await classifyInbound(raw, NULL_ENVELOPE)).toMatchObject({ kind: 'bounce', originalEnvelopeToken: token });
  });
});

describe('the signed unsubscribe address in a returned original (bounce mailbox reports: no return path left)', () => {
  const token = unsubscribeAddress(emailId(0x21), 'bounces.shop.example', SECRET).split('@')[0]!;
  const report = (reportType: string, reportPart: string, original: string) =>
    mail(
      [DAEMON, 'Subject: report', 'MIME-Version: 1.0', `Content-Type: multipart/report; report-type=${reportType}; boundary="r"`],
      `--r\nContent-Type: text/plain\n\nreport\n\n--r\nContent-Type: message/${reportType}\n\n${reportPart}\n\n--r\nContent-Type: text/rfc822-headers\n\n${original}\n\n--r--\n`,
    );
  const headers = `From: news@shop.example\nTo: ana@example.org\nMessage-ID: <relay-rewritten@relay.example>\nList-Unsubscribe: <mailto:${token}@bounces.shop.example>, <https://t.example/u/x>`;

  test('a DSN: found in the returned headers, and it verifies to the email', async () => {
    const m = asBounce(await classifyInbound(report('delivery-status', 'Reporting-MTA: dns; relay.example\n\nFinal-Recipient: rfc822; ana@example.org\nAction: failed\nStatus: 5.1.1', headers), NULL_ENVELOPE));
    expect(m.originalUnsubscribeToken).toBe(token);
    expect(parseUnsubscribeAddress(m.originalUnsubscribeToken!, SECRET)).toEqual({ emailId: emailId(0x21) });
    expect(m.originalEnvelopeToken).toBeUndefined();
  });

  test('an ARF report: found in the returned headers', async () => {
    expect(await classifyInbound(report('feedback-report', 'Feedback-Type: abuse\nOriginal-Rcpt-To: <ana@example.org>', headers), NULL_ENVELOPE)).toMatchObject({
      kind: 'complaint',
      originalUnsubscribeToken: token,
      originalRecipient: 'ana@example.org',
    });
  });

  test('only the returned original counts: a token in the report\'s own text is not taken', async () => {
    const m = asBounce(
      await classifyInbound(report('delivery-status', `Reporting-MTA: dns; relay.example\nX-Note: ${token}@bounces.shop.example\n\nFinal-Recipient: rfc822; ana@example.org\nAction: failed\nStatus: 5.1.1`, 'From: news@shop.example\nMessage-ID: <x@relay.example>'), NULL_ENVELOPE),
    );
    expect(m.originalUnsubscribeToken).toBeUndefined();
  });
});

describe('ARF complaints (RFC 5965)', () => {
  test('with the original message: feedback type, reporter, original recipient, Message-ID and return path', async () => {
    const m = await classify('arf-with-original.eml', { mailFrom: '', rcptTo: ['abuse@bounces.shop.example'] });
    expect(m).toMatchObject({
      kind: 'complaint',
      format: 'arf',
      feedbackType: 'abuse',
      userAgent: 'ProviderFBL/2.1',
      reportingMta: 'fbl.provider.example',
      sourceIp: '198.51.100.7',
      arrivalDate: 'Fri, 20 Nov 2026 17:00:00 +0000',
      originalRecipient: 'mia@provider.example',
      originalMessageId: ourMessageId(0x0d),
      hasOriginal: true,
    });
    if (m.kind !== 'complaint') throw new Error('not a complaint');
    expect(parseReturnPath(m.originalMailFrom!, SECRET, NOW)).toMatchObject({ emailId: emailId(0x0d) });
    expect(parseReturnPath(m.originalEnvelopeToken!, SECRET, NOW)).toMatchObject({ emailId: emailId(0x0d) });
  });

  test('without the original message: still a complaint, named by Original-Mail-From', async () => {
    const m = await classify('arf-without-original.eml', { mailFrom: '', rcptTo: ['abuse@bounces.shop.example'] });
    expect(m).toMatchObject({ kind: 'complaint', feedbackType: 'abuse', hasOriginal: false, userAgent: 'MailboxProvider-FBL/1.0' });
    if (m.kind !== 'complaint') throw new Error('not a complaint');
    expect(m.originalMessageId).toBeUndefined();
    expect(m.originalRecipient).toBeUndefined();
    expect(parseReturnPath(m.originalEnvelopeToken!, SECRET, NOW)).toMatchObject({ emailId: emailId(0x0e) });
  });

  const report = (feedback: string, reportType = 'feedback-report') =>
    mail(
      ['From: fbl@provider.example', 'Subject: report', 'MIME-Version: 1.0', `Content-Type: multipart/report; report-type=${reportType}; boundary="b"`],
      `--b\nContent-Type: text/plain\n\nreport\n${feedback ? `--b\nContent-Type: message/feedback-report\n\n${feedback}\n` : ''}--b--\n`,
    );

  test('not-spam and auth-failure reports are no complaints about a contact', async () => {
    expect(await classifyInbound(report('Feedback-Type: not-spam\nVersion: 1'), NULL_ENVELOPE)).toMatchObject({ kind: 'unknown', reason: 'feedback_not_complaint', detail: 'not-spam' });
    expect(await classifyInbound(report('Feedback-Type: auth-failure\nVersion: 1'), NULL_ENVELOPE)).toMatchObject({ kind: 'unknown', reason: 'feedback_not_complaint', detail: 'auth-failure' });
  });

  test('a feedback report without its report part, or another report type (read receipts), is unsupported', async () => {
    expect(await classifyInbound(report(''), NULL_ENVELOPE)).toMatchObject({ kind: 'unknown', reason: 'unsupported_report' });
    expect(await classifyInbound(report('', 'disposition-notification'), NULL_ENVELOPE)).toMatchObject({
      kind: 'unknown',
      reason: 'unsupported_report',
      detail: 'disposition-notification',
    });
  });

  test('a report without Feedback-Type, from a feedback loop, is abuse', async () => {
    expect(await classifyInbound(report('Version: 1\nUser-Agent: fbl/1'), NULL_ENVELOPE)).toMatchObject({ kind: 'complaint', feedbackType: 'abuse' });
  });
});

describe('auto-replies (RFC 3834 and out-of-office)', () => {
  test('Auto-Submitted: auto-replied is an auto-reply, never a bounce, even saying "mailbox is full" from the null sender', async () => {
    const m = await classify('auto-reply-auto-submitted.eml');
    expect(m).toMatchObject({
      kind: 'auto-reply',
      reason: 'auto-submitted',
      detail: 'auto-replied (vacation)',
      from: { address: 'olga@example.org', name: 'Olga Berg' },
      inReplyTo: ourMessageId(0x11),
    });
  });

  test('a vacation subject alone is enough, and beats the In-Reply-To that would make it a reply', async () => {
    const m = await classify('auto-reply-subject-only.eml', { mailFrom: 'lars@example.de', rcptTo: ['hello@shop.example'] });
    expect(m).toMatchObject({ kind: 'auto-reply', reason: 'subject', detail: 'Abwesenheitsnotiz: Ihre Bestellung wurde versandt', inReplyTo: ourMessageId(0x12) });
  });

  test.each([
    ['X-Autoreply: yes', 'x-autoreply'],
    ['X-Autorespond: Vacation', 'x-autoreply'],
    ['X-Autoresponder: on', 'x-autoreply'],
    ['Precedence: auto_reply', 'precedence'],
    ['Auto-Submitted: auto-generated', 'auto-submitted'],
  ])('header %s', async (header, reason) => {
    const raw = mail(['From: Ann <ann@example.org>', 'Subject: Re: Your order', 'In-Reply-To: <a@b>', header], 'Thanks for your message.');
    expect(await classifyInbound(raw, PERSON_ENVELOPE)).toMatchObject({ kind: 'auto-reply', reason });
  });

  test.each([
    'Automatic reply: Your order',
    'Out of Office: Your order',
    'Out of the office until Monday',
    'Auto: Your order',
    'AutoReply: Your order',
    '=?UTF-8?Q?R=C3=A9ponse_automatique_:_Votre_commande?=',
    'Abwesenheitsnotiz',
    'Automatische Antwort: Ihre Bestellung',
    'Respuesta automática: Su pedido',
    'On vacation until 30 November',
    'Jane Doe is out of the office.',
  ])('subject %s', async (subject) => {
    const raw = mail(['From: Ann <ann@example.org>', `Subject: ${subject}`, 'MIME-Version: 1.0', 'Content-Type: text/plain; charset=utf-8'], 'Away.');
    expect(await classifyInbound(raw, PERSON_ENVELOPE)).toMatchObject({ kind: 'auto-reply', reason: 'subject' });
  });

  test('"Auto-Submitted: no" and subjects that only mention holidays are a person\'s mail', async () => {
    for (const [header, subject] of [
      ['Auto-Submitted: no', 'Re: Your order'],
      ['X-Mailer: Example', 'Re: vacation plans'],
      ['X-Mailer: Example', 'Re: Out of office policy'],
    ]) {
      const raw = mail(['From: Ann <ann@example.org>', `Subject: ${subject}`, header], 'Sounds good.');
      expect(await classifyInbound(raw, PERSON_ENVELOPE)).toMatchObject({ kind: 'reply', excerpt: 'Sounds good.' });
    }
  });
});

describe('replies', () => {
  test('In-Reply-To, References, from, subject and the new text without the quote, attribution or signature', async () => {
    const m = await classify('reply-quoted.eml', { mailFrom: 'paul@example.net', rcptTo: ['hello@shop.example'] });
    expect(m).toEqual({
      kind: 'reply',
      from: { address: 'paul@example.net', name: 'Paul Weber' },
      subject: 'Re: Your order has shipped',
      messageId: '<CAF9x1y2z3-paul@mail.example.net>',
      date: '2026-11-20T17:30:00.000Z',
      inReplyTo: ourMessageId(0x13),
      references: [ourMessageId(0x10), ourMessageId(0x13)],
      excerpt: 'Hi, Yes please, send the blue one instead. Also, can you deliver on Saturday? Thanks, Paul',
    });
  });

  test('an HTML-only reply (Outlook): the text before its From/Sent block', async () => {
    expect(await classify('reply-html-only.eml', PERSON_ENVELOPE)).toMatchObject({
      kind: 'reply',
      subject: 'RE: Your invoice',
      excerpt: 'The invoice says 3 items but I only received 2 – could you check?',
    });
  });

  test('raw 8-bit UTF-8 headers are read as UTF-8, a stray Latin-1 byte does no harm, the German attribution is cut', async () => {
    expect(await classify('reply-8bit-headers.eml', PERSON_ENVELOPE)).toMatchObject({
      kind: 'reply',
      from: { address: 'juergen@example.de', name: 'Jürgen Müller' },
      subject: 'Re: Größe der Lieferung – passt das?',
      excerpt: 'Die Größe passt leider nicht, bitte eine Nummer größer.',
    });
  });

  test('broken base64 in the text and in an attachment: still a reply with what decodes', async () => {
    const m = await classify('reply-bad-base64.eml', PERSON_ENVELOPE);
    expect(m).toMatchObject({ kind: 'reply', inReplyTo: ourMessageId(0x15) });
    if (m.kind !== 'reply') throw new Error('not a reply');
    expect(m.excerpt).toMatch(/^Hello/);
  });

  test('a message from a person without reply markers is not a reply', async () => {
    const raw = mail(['From: Ann <ann@example.org>', 'Subject: Question'], 'Hello there.');
    expect(await classifyInbound(raw, PERSON_ENVELOPE)).toMatchObject({ kind: 'unknown', reason: 'not_a_reply', subject: 'Question' });
  });
});

describe('reply excerpts', () => {
  test.each([
    ['quoted lines are skipped, answers between them kept', 'Yes.\n> Do you want it?\nBlue.\n> Which colour?\n', 'Yes. Blue.'],
    ['"On … wrote:" and everything after', 'Fine by me.\n\nOn Mon, 1 Jan 2026 at 10:00, Shop <a@b.c> wrote:\nOld text', 'Fine by me.'],
    ['a wrapped attribution', 'Fine.\nOn Mon, 1 Jan 2026 at 10:00, Shop\n<a@b.c> wrote:\n> old', 'Fine.'],
    ['French', 'Merci.\nLe lun. 1 janv. 2026 à 10:00, Shop <a@b.c> a écrit :\n> vieux', 'Merci.'],
    ['Outlook\'s header block', 'Thanks!\n\nFrom: Shop <a@b.c>\nSent: Monday, January 1, 2026 10:00\nTo: me\nSubject: x\n\nOld text', 'Thanks!'],
    ['an Original Message separator', 'Ok.\n-----Original Message-----\nOld', 'Ok.'],
    ['a signature', 'See you.\n-- \nAnn\nCEO', 'See you.'],
    ['a mobile tagline', 'Yes\n\nSent from my iPhone\n\n> Old', 'Yes'],
    ['a sentence that starts with "On" and mentions writing', 'On Monday I wrote to support\nand nobody answered.', 'On Monday I wrote to support and nobody answered.'],
    ['nothing new', '> only a quote\n', ''],
    ['an empty body', '', ''],
  ])('%s', (_name, body, excerpt) => {
    expect(replyExcerpt(body)).toBe(excerpt);
  });

  test(`at most ${REPLY_EXCERPT_CHARS} characters, cut with an ellipsis and never inside a surrogate pair`, () => {
    const long = replyExcerpt('word '.repeat(200));
    expect(long.length).toBeLessThanOrEqual(REPLY_EXCERPT_CHARS);
    expect(long.endsWith('…')).toBe(true);
    for (let shift = 0; shift < 4; shift++) {
      const emoji = replyExcerpt(`${'a'.repeat(shift)}${'😀'.repeat(300)}`);
      expect(emoji.length).toBeLessThanOrEqual(REPLY_EXCERPT_CHARS);
      expect(emoji).not.toMatch(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])/);
    }
  });
});

describe('mail to the unsubscribe address', () => {
  test('is decided by the caller from the envelope; classify keeps the subject, whose token verifies', async () => {
    const m = await classify('unsubscribe-mailto.eml', { mailFrom: 'quinn@example.com', rcptTo: ['unsubscribe@shop.example'] });
    expect(m).toMatchObject({ kind: 'unknown', reason: 'not_a_reply', from: { address: 'quinn@example.com', name: 'Quinn Park' } });
    // The client folded the subject after "unsubscribe"; it is read back unfolded.
    expect(unsubscribeTokenFromSubject(m.subject)).toBe('AQMBmrLEAABwAIAAAAAAAMDeAZqyxF5vegCLAAAAAAAAICttX0Eq6MCrZ4CzQwm0A0Q');
    expect(parseUnsubscribeSubject(m.subject, SECRET)).toEqual({ contactId: '019ab2c4-0000-7000-8000-00000000c0de', emailId: emailId(0x20) });
  });
});

/** A deterministic PRNG (mulberry32), so a failure can be replayed. */
function prng(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const KINDS = ['bounce', 'complaint', 'auto-reply', 'reply', 'unknown'];

/** classifyInbound on hostile input: resolves (never rejects) with one of the kinds, and not by an internal error. */
async function survives(raw: Buffer, envelope: InboundEnvelope = NULL_ENVELOPE): Promise<InboundMessage> {
  const m = await classifyInbound(raw, envelope);
  expect(KINDS).toContain(m.kind);
  if (m.kind === 'unknown') expect(m.reason).not.toBe('internal_error');
  expect(() => JSON.stringify(m)).not.toThrow();
  return m;
}

describe('bad input never throws', () => {
  test('an empty message, or only white space', async () => {
    expect(await classify('empty.eml')).toEqual({ from: null, subject: '', messageId: null, date: null, inReplyTo: null, references: [], kind: 'unknown', reason: 'empty' });
    expect(await survives(Buffer.from(' \r\n\t\r\n'))).toMatchObject({ kind: 'unknown', reason: 'empty' });
  });

  test('random bytes', async () => {
    const random = prng(25);
    for (let i = 0; i < 60; i++) {
      const size = Math.floor(random() * (i < 50 ? 4096 : 65536));
      const raw = Buffer.from(Array.from({ length: size }, () => Math.floor(random() * 256)));
      await survives(raw);
    }
  });

  test('every fixture truncated and with bytes flipped', async () => {
    const random = prng(3464);
    for (const name of readdirSync(FIXTURES).filter((f) => f.endsWith('.eml'))) {
      const raw = fixture(name);
      for (let i = 0; i < 12 && raw.length; i++) {
        const mutated = Buffer.from(raw.subarray(0, Math.floor(random() * raw.length) + 1));
        for (let flips = Math.floor(random() * 8); flips > 0; flips--) mutated[Math.floor(random() * mutated.length)] = Math.floor(random() * 256);
        await survives(mutated);
      }
    }
  });

  test('1 MB in one header, folded or not: unparseable, quickly', async () => {
    const started = Date.now();
    expect(await survives(mail(['From: a@example.org', `X-Big: ${'a'.repeat(1024 * 1024)}`], 'body'))).toMatchObject({ kind: 'unknown', reason: 'unparseable' });
    expect(await survives(mail(['From: a@example.org', `Subject: ${'word\r\n '.repeat(200_000)}`], 'body'))).toMatchObject({ kind: 'unknown', reason: 'unparseable' });
    expect(Date.now() - started).toBeLessThan(5000);
  });

  test('multiparts nested 100 deep are read; 1,000 deep are refused as unparseable', async () => {
    const nested = (depth: number) => {
      let body = 'Content-Type: text/plain\r\n\r\nUser unknown, 550 5.1.1\r\n';
      for (let i = 0; i < depth; i++) body = `Content-Type: multipart/mixed; boundary="b${i}"\r\n\r\n--b${i}\r\n${body}--b${i}--\r\n`;
      return Buffer.from(`${DAEMON}\r\nSubject: failure notice\r\n${body}`);
    };
    expect(await survives(nested(100))).toMatchObject({ kind: 'bounce', recipients: [{ status: '5.1.1' }] });
    expect(await survives(nested(1000))).toMatchObject({ kind: 'unknown', reason: 'unparseable' });
  });

  test('thousands of parts are refused as unparseable', async () => {
    const parts = Array.from({ length: 2000 }, () => '--b\r\nContent-Type: text/plain\r\n\r\nx\r\n').join('');
    expect(await survives(mail(['From: a@example.org', 'Content-Type: multipart/mixed; boundary=b'], `${parts}--b--`))).toMatchObject({ reason: 'unparseable' });
  });

  test('oversized fields are bounded: summary, diagnostic, subject, references', async () => {
    const diag = `550 5.1.1 ${'x'.repeat(100_000)}`;
    const raw = mail(
      [DAEMON, `Subject: ${'s'.repeat(5000)}`, `References: ${Array.from({ length: 5000 }, (_, i) => `<r${i}@x>`).join(' ')}`, 'MIME-Version: 1.0', 'Content-Type: multipart/report; report-type=delivery-status; boundary="b"'],
      `--b\nContent-Type: message/delivery-status\n\nReporting-MTA: dns; x\n\nFinal-Recipient: rfc822; a@example.org\nAction: failed\nStatus: 5.1.1\nDiagnostic-Code: smtp; ${diag}\n--b--\n`,
    );
    const m = asBounce(await survives(raw));
    expect(m.summary.length).toBeLessThanOrEqual(500);
    expect(m.recipients[0]!.diagnosticCode!.length).toBeLessThanOrEqual(500);
    expect(m.subject.length).toBeLessThanOrEqual(998);
    expect(m.references).toHaveLength(100);
    expect(m.references[99]).toBe('<r4999@x>');
  });

  test('text built to make the patterns backtrack is read in bounded time', async () => {
    const started = Date.now();
    const bodies = [
      'delivery to '.repeat(6000),
      `following recipient ${'a'.repeat(60_000)}`,
      `${'On '.repeat(20_000)}wrote`,
      `${'550 '.repeat(15_000)}`,
      `${'b-'.repeat(30_000)}`,
      `<${'a.'.repeat(30_000)}@`,
    ];
    for (const body of bodies) {
      await survives(mail([DAEMON, 'Subject: failure notice'], body));
      await survives(mail(['From: Ann <ann@example.org>', 'Subject: Re: x', 'In-Reply-To: <a@b>'], body), PERSON_ENVELOPE);
    }
    expect(Date.now() - started).toBeLessThan(5000);
  });

  test('a Date that is no date is null (not the time of parsing)', async () => {
    expect(await survives(mail(['From: Ann <ann@example.org>', 'Date: yesterday-ish', 'Subject: Re: x'], 'hi'), PERSON_ENVELOPE)).toMatchObject({ date: null });
  });
});
