import nodemailer, { type SendMailOptions, type Transporter } from 'nodemailer';
import type SMTPPool from 'nodemailer/lib/smtp-pool';
import { smtpErrorReason, smtpSendDuration, smtpSendErrors } from '../metrics';

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

/** `transport.sendMail`, measured: its duration by outcome and its failures by reason (README › Metrics and health). */
export async function sendMeasured<T>(transport: Transporter<T>, mail: SendMailOptions): Promise<T> {
  const end = smtpSendDuration.startTimer();
  try {
    const info = await transport.sendMail(mail);
    end({ outcome: 'sent' });
    return info;
  } catch (err) {
    const reason = smtpErrorReason(err);
    end({ outcome: reason === '5xx' ? 'rejected' : 'error' });
    smtpSendErrors.inc({ reason });
    throw err;
  }
}
