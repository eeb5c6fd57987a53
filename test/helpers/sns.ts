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
