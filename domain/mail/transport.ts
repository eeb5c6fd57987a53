import nodemailer, { type Transporter } from 'nodemailer';
import type SMTPPool from 'nodemailer/lib/smtp-pool';

/** A pooled SMTP transport for `SMTP_URL` (smtp:// or smtps://, credentials in the URL). */
export function createSmtpTransport(smtpUrl: string, poolSize: number): Transporter<SMTPPool.SentMessageInfo> {
  const url = new URL(smtpUrl);
  const options: SMTPPool.Options = {
    pool: true,
    host: url.hostname,
    port: Number(url.port) || (url.protocol === 'smtps:' ? 465 : 587),
    secure: url.protocol === 'smtps:',
    maxConnections: poolSize,
    maxMessages: Infinity,
    connectionTimeout: 10_000,
    greetingTimeout: 10_000,
    socketTimeout: 30_000,
    auth: url.username ? { user: decodeURIComponent(url.username), pass: decodeURIComponent(url.password) } : undefined,
    // Loopback capture servers (MailDev) offer no certificate; real relays keep full verification.
    tls: ['127.0.0.1', 'localhost', '::1'].includes(url.hostname) ? { rejectUnauthorized: false } : undefined,
    ignoreTLS: url.searchParams.get('ignoreTLS') === 'true',
  };
  return nodemailer.createTransport(options);
}
