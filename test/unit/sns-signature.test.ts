import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { loadConfig } from '../../domain/config';
import { makeCert, snsSign, type SnsFields } from '../helpers/sns';
import { AppError } from '../../domain/errors';
import { allowedAwsUrl, canonicalString, isValidSignature, parseSnsMessage, SnsVerifier, type SnsMessage } from '../../domain/webhooks/sns';
import { parseOurMessageId, parseSesReport } from '../../domain/webhooks/ses-reports';

// Plays Amazon SNS: an RSA key, a self-signed certificate (openssl) served over loopback HTTP, and signatures over
// the canonical string written out here from the SNS documentation, independently of the code under test.

type Fields = SnsFields;

const TOPIC = 'arn:aws:sns:us-east-1:123456789012:ses-reports';
const notification = (over: Fields = {}): Fields => ({
  Type: 'Notification',
  MessageId: 'a1b2c3d4-0000-4000-8000-000000000001',
  TopicArn: TOPIC,
  Subject: 'Amazon SES Email Event Notification',
  Message: JSON.stringify({ notificationType: 'Delivery', mail: {}, delivery: {} }),
  Timestamp: new Date().toISOString(),
  SignatureVersion: '2',
  SigningCertURL: 'https://sns.us-east-1.amazonaws.com/SimpleNotificationService-abc.pem',
  UnsubscribeURL: 'https://sns.us-east-1.amazonaws.com/?Action=Unsubscribe',
  Signature: 'eA==', // replaced by snsSign; enough for tests of parsing alone
  ...over,
});
const parse = (fields: Fields): SnsMessage => parseSnsMessage(JSON.stringify(fields));

function expectAppError(fn: () => unknown, status: number, code: string) {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(AppError);
    expect([(err as AppError).statusCode, (err as AppError).code]).toEqual([status, code]);
    return;
  }
  throw new Error(`expected ${status} ${code}, nothing was thrown`);
}
async function expectRejects(p: Promise<unknown>, status: number, code: string) {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(AppError);
  expect([(err as AppError).statusCode, (err as AppError).code]).toEqual([status, code]);
}

const signer = makeCert('signer');
const other = makeCert('other');

describe('SNS canonical string and signature', () => {
  test('a Notification signs Message, MessageId, Subject, Timestamp, TopicArn, Type in that order', () => {
    const msg = parse(notification({ Message: 'hello\nworld', Subject: 'S', Timestamp: '2026-01-01T00:00:00.000Z' }));
    expect(canonicalString(msg)).toBe(
      `Message\nhello\nworld\nMessageId\na1b2c3d4-0000-4000-8000-000000000001\nSubject\nS\nTimestamp\n2026-01-01T00:00:00.000Z\nTopicArn\n${TOPIC}\nType\nNotification\n`,
    );
  });

  test('a Notification without Subject (absent or null) leaves Subject out of the signed string', () => {
    const at = '2026-01-01T00:00:00.000Z';
    const absent = parse(notification({ Subject: undefined, Timestamp: at }));
    const nulled = parseSnsMessage(JSON.stringify({ ...notification({ Timestamp: at }), Subject: null }));
    expect(canonicalString(absent)).not.toContain('Subject');
    expect(canonicalString(nulled)).toBe(canonicalString(absent));
  });

  test('confirmations sign Message, MessageId, SubscribeURL, Timestamp, Token, TopicArn, Type', () => {
    for (const Type of ['SubscriptionConfirmation', 'UnsubscribeConfirmation']) {
      const msg = parse({ ...notification({ Type, Subject: undefined, UnsubscribeURL: undefined }), Token: 'tok', SubscribeURL: 'https://sns.us-east-1.amazonaws.com/?Action=ConfirmSubscription' });
      expect(canonicalString(msg)).toBe(
        `Message\n${msg.Message}\nMessageId\n${msg.MessageId}\nSubscribeURL\nhttps://sns.us-east-1.amazonaws.com/?Action=ConfirmSubscription\n` +
          `Timestamp\n${msg.Timestamp}\nToken\ntok\nTopicArn\n${TOPIC}\nType\n${Type}\n`,
      );
    }
  });

  test.each(['1', '2'])('SignatureVersion %s verifies with the signing key and fails with another key', (version) => {
    const msg = parse(snsSign(notification({ SignatureVersion: version }), signer.key));
    expect(isValidSignature(msg, signer.pub)).toBe(true);
    expect(isValidSignature(msg, other.pub)).toBe(false);
  });

  test('a SHA1 signature presented as SignatureVersion 2 (and vice versa) fails', () => {
    const v1 = snsSign(notification({ SignatureVersion: '1' }), signer.key);
    const v2 = snsSign(notification({ SignatureVersion: '2' }), signer.key);
    expect(isValidSignature(parse({ ...v1, SignatureVersion: '2' }), signer.pub)).toBe(false);
    expect(isValidSignature(parse({ ...v2, SignatureVersion: '1' }), signer.pub)).toBe(false);
  });

  test.each(['Message', 'MessageId', 'Subject', 'Timestamp', 'TopicArn'])('changing the signed field %s breaks the signature', (field) => {
    const signed = snsSign(notification(), signer.key);
    const changed = field === 'Timestamp' ? new Date(Date.now() - 1000).toISOString() : `${signed[field]}x`;
    expect(isValidSignature(parse({ ...signed, [field]: changed }), signer.pub)).toBe(false);
  });

  test('fields outside the canonical string (UnsubscribeURL) may differ; garbage signatures fail', () => {
    const signed = snsSign(notification(), signer.key);
    expect(isValidSignature(parse({ ...signed, UnsubscribeURL: 'https://elsewhere/' }), signer.pub)).toBe(true);
    expect(isValidSignature(parse({ ...signed, Signature: 'not base64 at all!' }), signer.pub)).toBe(false);
    expect(isValidSignature(parse({ ...signed, Signature: Buffer.from('short').toString('base64') }), signer.pub)).toBe(false);
  });
});

describe('parseSnsMessage: anything that is not an SNS envelope is a 400', () => {
  test.each([
    ['not JSON', '{"Type":', 'INVALID_JSON'],
    ['a JSON array', '[]', 'BAD_REQUEST'],
    ['an unknown Type', JSON.stringify(notification({ Type: 'Other' })), 'BAD_REQUEST'],
    ['no Signature', JSON.stringify(notification({ Signature: undefined })), 'BAD_REQUEST'],
    ['SignatureVersion 3', JSON.stringify({ ...notification({ SignatureVersion: '3' }) }), 'BAD_REQUEST'],
    ['a bad Timestamp', JSON.stringify({ ...notification({ Timestamp: 'yesterday' }) }), 'BAD_REQUEST'],
    ['a confirmation without SubscribeURL', JSON.stringify({ ...notification({ Type: 'SubscriptionConfirmation' }), Token: 't' }), 'BAD_REQUEST'],
    ['a raw (unenveloped) SES message', JSON.stringify({ notificationType: 'Delivery', mail: {} }), 'BAD_REQUEST'],
  ])('%s', (_name, body, code) => expectAppError(() => parseSnsMessage(body), 400, code));
});

describe('certificate and subscribe URLs', () => {
  const pattern = loadConfig({ DATABASE_URL: 'postgres://x' }).sns.urlPattern;
  test.each([
    'https://sns.us-east-1.amazonaws.com/SimpleNotificationService-0000000000000000000000.pem',
    'https://sns.eu-central-1.amazonaws.com/?Action=ConfirmSubscription&TopicArn=arn&Token=t',
    'https://sns.cn-north-1.amazonaws.com.cn/SimpleNotificationService-1.pem',
    'https://SNS.US-EAST-1.AMAZONAWS.COM/cert.pem', // hosts are case-insensitive; the URL is normalized first
  ])('the default pattern accepts %s', (url) => expect(allowedAwsUrl(url, pattern)).not.toBeNull());

  test.each([
    'http://sns.us-east-1.amazonaws.com/cert.pem',
    'https://sns.us-east-1.amazonaws.com.evil.example/cert.pem',
    'https://evil.example/sns.us-east-1.amazonaws.com/cert.pem',
    'https://sns.us-east-1.amazonaws.com@evil.example/cert.pem',
    'https://user:pw@sns.us-east-1.amazonaws.com/cert.pem',
    'https://sns.us-east-1.amazonaws.com:8443/cert.pem',
    'https://s3.us-east-1.amazonaws.com/cert.pem',
    'https://evil.example/#https://sns.us-east-1.amazonaws.com/',
    'file:///etc/ssl/cert.pem',
    'data:text/plain,-----BEGIN CERTIFICATE-----',
    'not a url',
  ])('the default pattern refuses %s', (url) => expect(allowedAwsUrl(url, pattern)).toBeNull());

  test('a backslash cannot split the checked host from the fetched one: the normalized URL is what is fetched', () => {
    expect(allowedAwsUrl('https://sns.us-east-1.amazonaws.com\\@evil.example/x', pattern)).toBe('https://sns.us-east-1.amazonaws.com/@evil.example/x');
  });

  test('a bad SNS_CERT_URL_PATTERN stops the start; SNS_TOPIC_ARNS is a trimmed comma-separated list', () => {
    expect(() => loadConfig({ DATABASE_URL: 'postgres://x', SNS_CERT_URL_PATTERN: '(' })).toThrow(/SNS_CERT_URL_PATTERN: not a regular expression/);
    expect(loadConfig({ DATABASE_URL: 'postgres://x', SNS_TOPIC_ARNS: ' arn:a , arn:b,' }).sns.topicArns).toEqual(['arn:a', 'arn:b']);
    expect(loadConfig({ DATABASE_URL: 'postgres://x' }).sns.topicArns).toEqual([]);
  });
});

describe('SnsVerifier against a local certificate server', () => {
  let server: http.Server;
  let base: string;
  const hits: string[] = [];
  const expired = makeCert('expired', 1);

  beforeAll(async () => {
    server = http.createServer((req, res) => {
      hits.push(req.url!);
      if (req.url === '/signer.pem') return void setTimeout(() => res.end(signer.pem), 50); // slow enough for concurrent requests to overlap
      if (req.url === '/expired.pem') return void res.end(expired.pem);
      if (req.url === '/garbage.pem') return void res.end('not a certificate');
      if (req.url === '/broken.pem') return void res.writeHead(500).end();
      if (req.url === '/hang.pem') return; // never answers
      if (req.url === '/redirect.pem') return void res.writeHead(302, { location: '/signer.pem' }).end();
      res.writeHead(404).end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
    });

  const verifier = (topicArns: string[] = []) => new SnsVerifier({ topicArns, urlPattern: /^http:\/\/127\.0\.0\.1:\d+\//, httpTimeoutMs: 500 });
  const signed = (over: Fields = {}) => parse(snsSign(notification({ SigningCertURL: `${base}/signer.pem`, ...over }), signer.key));

  test('verifies a genuine message and fetches each certificate once, also for concurrent messages', async () => {
    const v = verifier();
    const before = hits.length;
    await Promise.all([v.verify(signed()), v.verify(signed({ MessageId: 'second' })), v.verify(signed({ SignatureVersion: '1' }))]);
    await v.verify(signed({ MessageId: 'third' }));
    expect(v.fetches).toBe(1);
    expect(hits.slice(before)).toEqual(['/signer.pem']);
  });

  test('a message signed by another key is 403 INVALID_SIGNATURE', async () => {
    const forged = parse(snsSign(notification({ SigningCertURL: `${base}/signer.pem` }), other.key));
    await expectRejects(verifier().verify(forged), 403, 'INVALID_SIGNATURE');
  });

  test('an off-pattern certificate URL is 403 INVALID_CERT_URL and is never fetched', async () => {
    const before = hits.length;
    const msg = parse(snsSign(notification({ SigningCertURL: `${base.replace('127.0.0.1', 'localhost')}/signer.pem` }), signer.key));
    await expectRejects(verifier().verify(msg), 403, 'INVALID_CERT_URL');
    expect(hits.length).toBe(before);
  });

  test('a topic outside SNS_TOPIC_ARNS is 403 TOPIC_NOT_ALLOWED before any fetch; a listed one passes', async () => {
    const before = hits.length;
    await expectRejects(verifier(['arn:aws:sns:us-east-1:123456789012:other']).verify(signed()), 403, 'TOPIC_NOT_ALLOWED');
    expect(hits.length).toBe(before);
    await expect(verifier(['arn:aws:sns:us-east-1:123456789012:other', TOPIC]).verify(signed())).resolves.toBeUndefined();
  });

  test('a missing or unparsable certificate is 403; a failing, hanging or redirecting certificate host is 503 and not cached', async () => {
    const v = verifier();
    await expectRejects(v.verify(signed({ SigningCertURL: `${base}/missing.pem` })), 403, 'INVALID_CERT_URL');
    await expectRejects(v.verify(signed({ SigningCertURL: `${base}/garbage.pem` })), 403, 'INVALID_CERT_URL');
    await expectRejects(v.verify(signed({ SigningCertURL: `${base}/broken.pem` })), 503, 'SERVICE_UNAVAILABLE');
    const started = Date.now();
    await expectRejects(v.verify(signed({ SigningCertURL: `${base}/hang.pem` })), 503, 'SERVICE_UNAVAILABLE');
    expect(Date.now() - started).toBeLessThan(3_000);
    await expectRejects(v.verify(signed({ SigningCertURL: `${base}/redirect.pem` })), 503, 'SERVICE_UNAVAILABLE');
    const fetched = v.fetches;
    await expectRejects(v.verify(signed({ SigningCertURL: `${base}/broken.pem` })), 503, 'SERVICE_UNAVAILABLE');
    expect(v.fetches).toBe(fetched + 1);
  });

  test('a certificate past its validity is refused', async () => {
    const msg = parse(snsSign(notification({ SigningCertURL: `${base}/expired.pem` }), expired.key));
    const v = verifier();
    await expect(v.verify(msg)).resolves.toBeUndefined();
    await expectRejects(v.verify(msg, Date.now() + 2 * 86_400_000), 403, 'INVALID_SIGNATURE');
  });

  test('a genuine message older than the dedupe retention is refused (a replay could otherwise apply twice)', async () => {
    const old = signed({ Timestamp: new Date(Date.now() - 40 * 86_400_000).toISOString() });
    await expectRejects(verifier().verify(old), 403, 'MESSAGE_EXPIRED');
    await expect(verifier().verify(signed({ Timestamp: new Date(Date.now() - 3 * 86_400_000).toISOString() }))).resolves.toBeUndefined();
  });

  test('confirmSubscription fetches only a SubscribeURL on the pattern, and a failure is 503', async () => {
    const v = verifier();
    await expectRejects(v.confirmSubscription({ SubscribeURL: 'https://evil.example/confirm' }), 403, 'INVALID_SUBSCRIBE_URL');
    await expectRejects(v.confirmSubscription({ SubscribeURL: `${base}/not-there` }), 503, 'SERVICE_UNAVAILABLE');
    await expect(v.confirmSubscription({ SubscribeURL: `${base}/signer.pem` })).resolves.toBeUndefined();
  });
});

describe('SES reports', () => {
  const id = '0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b';
  test.each([
    [`<${id}@mail.example.com>`, { emailId: id, messageId: `<${id}@mail.example.com>` }],
    [`${id}@Mail.Example.COM`, { emailId: id, messageId: `<${id}@mail.example.com>` }],
    [` <${id.toUpperCase()}@mail.example.com> `, { emailId: id, messageId: `<${id}@mail.example.com>` }],
    ['<custom-message-ID@example.com>', null],
    ['custom-message-ID', null],
    [`<${id}@a@b>`, null],
    [null, null],
  ])('Message-ID %p -> %p', (header, expected) => expect(parseOurMessageId(header)).toEqual(expected));

  test('the Message-ID comes from commonHeaders, else from the headers list (any case)', () => {
    const common = parseSesReport(JSON.stringify({ notificationType: 'Delivery', mail: { commonHeaders: { messageId: '<a@b>' }, headers: [{ name: 'Message-ID', value: '<c@d>' }] }, delivery: {} }));
    expect(common?.messageIdHeader).toBe('<a@b>');
    const listed = parseSesReport(JSON.stringify({ eventType: 'Bounce', mail: { headers: [{ name: 'message-id', value: '<c@d>' }] }, bounce: { bounceType: 'Transient' } }));
    expect(listed).toMatchObject({ kind: 'Bounce', messageIdHeader: '<c@d>' });
  });

  test('other messages on the topic are not reports; a report without its part is a 400', () => {
    expect(parseSesReport('plain text published to the topic')).toBeNull();
    expect(parseSesReport(JSON.stringify({ notificationType: 'AmazonSnsSubscriptionSucceeded', message: 'ok' }))).toBeNull();
    expect(parseSesReport(JSON.stringify({ eventType: 'Open', mail: {}, open: {} }))).toBeNull();
    expectAppError(() => parseSesReport(JSON.stringify({ notificationType: 'Complaint', mail: {} })), 400, 'BAD_REQUEST');
    expectAppError(() => parseSesReport(JSON.stringify({ notificationType: 'Bounce', bounce: { bounceType: 'Permanent' } })), 400, 'BAD_REQUEST');
  });
});
