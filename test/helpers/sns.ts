import { execFileSync } from 'node:child_process';
import { X509Certificate, generateKeyPairSync, sign, type KeyObject } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

// Tests play Amazon SNS: an RSA key with a self-signed certificate (openssl), and signatures over the canonical
// string written out here from the SNS documentation, independently of the code under test.

/** A key pair and its self-signed certificate; the files openssl needs are removed once it has run. */
export function makeCert(name: string, days = 2): { key: KeyObject; pem: string; pub: KeyObject } {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'sns-test-'));
  try {
    const keyPath = path.join(tmp, `${name}.key`);
    const certPath = path.join(tmp, `${name}.pem`);
    fs.writeFileSync(keyPath, privateKey.export({ type: 'pkcs8', format: 'pem' }));
    execFileSync('openssl', ['req', '-x509', '-new', '-key', keyPath, '-out', certPath, '-days', String(days), '-subj', '/CN=sns.test'], { stdio: 'pipe' });
    const pem = fs.readFileSync(certPath, 'utf8');
    return { key: privateKey, pem, pub: new X509Certificate(pem).publicKey };
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

export type SnsFields = Record<string, string | undefined>;

/** SNS's signature: SHA1withRSA (v1) or SHA256withRSA (v2) over `key\nvalue\n` of the signed fields, in order. */
export function snsSign(msg: SnsFields, key: KeyObject): SnsFields {
  const keys =
    msg.Type === 'Notification'
      ? ['Message', 'MessageId', 'Subject', 'Timestamp', 'TopicArn', 'Type']
      : ['Message', 'MessageId', 'SubscribeURL', 'Timestamp', 'Token', 'TopicArn', 'Type'];
  const text = keys.filter((k) => msg[k] !== undefined).map((k) => `${k}\n${msg[k]}\n`).join('');
  return { ...msg, Signature: sign(msg.SignatureVersion === '1' ? 'sha1' : 'sha256', Buffer.from(text, 'utf8'), key).toString('base64') };
}

/**
 * A fake Amazon SNS on loopback: serves its certificate (the test stack accepts loopback certificate URLs,
 * SNS_CERT_URL_PATTERN) and answers subscription confirmations; builds signed notifications carrying SES reports and
 * posts them to the API's /webhooks/sns as SNS does.
 */
export async function startFakeSns(opts: { topic?: string; apiUrl: string }) {
  const http = await import('node:http');
  const { randomUUID } = await import('node:crypto');
  const signer = makeCert('signer');
  const topic = opts.topic ?? 'arn:aws:sns:us-east-1:123456789012:mailwright-ses';
  /** Paths served, in order (a test may empty it): certificates and subscription confirmations. */
  const hits: string[] = [];
  let certFetches = 0;
  const server = http.createServer((req, res) => {
    hits.push(req.url!);
    if (req.url === '/SimpleNotificationService-test.pem') {
      certFetches++;
      return void res.end(signer.pem);
    }
    if (req.url?.startsWith('/?Action=ConfirmSubscription')) return void res.writeHead(200, { 'content-type': 'text/xml' }).end('<ConfirmSubscriptionResponse/>');
    res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const base = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;

  /** An SES identity notification about one email, carrying its Message-ID the way SES reports original headers. */
  const sesReport = (kind: 'Delivery' | 'Bounce' | 'Complaint', messageId: string, to: string, part: Record<string, unknown>, source = 'news@example.test'): string =>
    JSON.stringify({
      notificationType: kind,
      mail: {
        timestamp: new Date().toISOString(),
        messageId: `0100019${randomUUID().replace(/-/g, '')}-000000`,
        source,
        destination: [to],
        headersTruncated: false,
        headers: [{ name: 'Message-ID', value: messageId }],
        commonHeaders: { messageId, subject: 'Hello', to: [to] },
      },
      [kind.toLowerCase()]: part,
    });

  const notification = (message: string, over: SnsFields = {}, key: KeyObject = signer.key): SnsFields =>
    snsSign(
      {
        Type: 'Notification',
        MessageId: randomUUID(),
        TopicArn: topic,
        Subject: undefined,
        Message: message,
        Timestamp: new Date().toISOString(),
        SignatureVersion: '2',
        SigningCertURL: `${base}/SimpleNotificationService-test.pem`,
        UnsubscribeURL: `${base}/?Action=Unsubscribe`,
        ...over,
      },
      key,
    );

  /** Posts as SNS does: the JSON envelope with content-type text/plain. */
  const post = async (body: SnsFields | string): Promise<{ status: number; body: any; text: string }> => {
    const res = await fetch(`${opts.apiUrl}/webhooks/sns`, {
      method: 'POST',
      headers: { 'content-type': 'text/plain; charset=UTF-8', ...(typeof body === 'string' ? {} : { 'x-amz-sns-message-type': body.Type! }) },
      body: typeof body === 'string' ? body : JSON.stringify(body),
    });
    const text = await res.text();
    let parsed: any;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      parsed = undefined;
    }
    return { status: res.status, body: parsed, text };
  };

  return { base, topic, signer, hits, certFetches: () => certFetches, sesReport, notification, post, stop: () => new Promise<void>((r) => server.close(() => r())) };
}
