import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import nodemailer from 'nodemailer';
import { db, closeDb } from '../helpers/db';
import { projectWithDomain } from '../helpers/automations';
import { stackEnv } from '../stack-env';
import { loadConfig } from '../../domain/config';
import { sql } from '../../domain/db/sql';
import { initOrm, type MikroORM } from '../../domain/orm';
import { returnPathAddress } from '../../domain/inbound/return-path';
import { startInboundReceiver, type InboundReceiver } from '../../domain/inbound/receiver';

/**
 * STARTTLS on the inbound server when a certificate is configured (INBOUND_TLS_CERT, INBOUND_TLS_KEY): a receiver
 * started here with a self-signed certificate on the stack's database offers it, and a sender that insists on TLS
 * (nodemailer with requireTLS, as an MTA enforcing MTA-STS would) delivers a message that is stored; the stack's own
 * inbound server, started without a certificate, offers no STARTTLS, so the same sender is refused there.
 */

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'inbound-tls-'));
let orm: MikroORM;
let receiver: InboundReceiver;
const stored: string[] = [];
let domain: string;

beforeAll(async () => {
  const keyFile = path.join(tmp, 'inbound.key');
  const certFile = path.join(tmp, 'inbound.pem');
  fs.writeFileSync(keyFile, generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs8', format: 'pem' }));
  execFileSync('openssl', ['req', '-x509', '-new', '-key', keyFile, '-out', certFile, '-days', '2', '-subj', '/CN=mx.mailwright.test'], { stdio: 'pipe' });
  const config = loadConfig({
    ...process.env,
    DATABASE_URL: stackEnv().databaseUrl,
    INBOUND_SMTP_HOST: '127.0.0.1',
    INBOUND_SMTP_PORT: '0',
    INBOUND_TLS_CERT: certFile,
    INBOUND_TLS_KEY: keyFile,
  });
  orm = await initOrm(stackEnv().databaseUrl, 2);
  receiver = await startInboundReceiver({ config, db: sql(orm.em), onStored: async (id) => stored.push(id) });
  ({ domain } = await projectWithDomain('inbound tls'));
});
afterAll(async () => {
  await receiver?.close();
  await orm?.close();
  await closeDb();
  fs.rmSync(tmp, { recursive: true, force: true });
});

/** A sender that refuses to deliver in clear text. */
const strictSender = (port: number) =>
  nodemailer.createTransport({ host: '127.0.0.1', port, secure: false, requireTLS: true, tls: { rejectUnauthorized: false }, name: 'mta.test' });

const message = (to: string) => ({
  envelope: { from: '', to },
  raw: [`From: MAILER-DAEMON@mta.test`, `To: ${to}`, `Subject: Undelivered Mail Returned to Sender`, ``, `A bounce, over TLS.`, ``].join('\r\n'),
});

test('with a certificate the server offers STARTTLS, and a sender that requires TLS delivers over it: the message is stored', async () => {
  const rp = returnPathAddress('01930000-0000-7000-8000-000000000001', `bounces.${domain}`, loadConfig({ ...process.env, DATABASE_URL: stackEnv().databaseUrl }).appSecret);
  const info = await strictSender(receiver.port).sendMail(message(rp));
  expect(info.response).toMatch(/^250 .*Stored as ([0-9a-f-]{36})/);
  const id = /Stored as ([0-9a-f-]{36})/.exec(info.response)![1]!;
  expect(stored).toContain(id);
  // Stored durably before the 250 (the stack's inbound sweeper may already have started its processing).
  const { rows } = await db().query(`select rcpt_to from inbound_messages where id = $1`, [id]);
  expect(rows[0]).toEqual({ rcpt_to: [rp] });
});

test('without a certificate (the stack\'s inbound server) no STARTTLS is offered: a sender that requires TLS cannot deliver', async () => {
  const rp = returnPathAddress('01930000-0000-7000-8000-000000000002', `bounces.${domain}`, loadConfig({ ...process.env, DATABASE_URL: stackEnv().databaseUrl }).appSecret);
  await expect(strictSender(stackEnv().inboundSmtpPort).sendMail(message(rp))).rejects.toThrow(/STARTTLS/i);
});
