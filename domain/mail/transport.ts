import nodemailer, { type SendMailOptions, type Transporter } from 'nodemailer';
import type SMTPPool from 'nodemailer/lib/smtp-pool';
import { smtpErrorReason, smtpSendDuration, smtpSendErrors } from '../metrics';

/** The relay `SMTP_URL` names (smtp:// or smtps://, credentials in the URL), as both SMTP pools connect to it. */
export interface SmtpRelay {
  host: string;
  port: number;
  /** TLS from the first byte (smtps://, port 465 by default). */
  secure: boolean;
  /** `?ignoreTLS=true`: never STARTTLS. */
  ignoreTLS: boolean;
  /** Loopback capture servers (MailDev) offer no certificate worth checking; real relays keep full verification. */
  loopback: boolean;
  auth?: { user: string; pass: string };
}

export function smtpRelay(smtpUrl: string): SmtpRelay {
  const url = new URL(smtpUrl);
  const secure = url.protocol === 'smtps:';
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  return {
    host,
    port: Number(url.port) || (secure ? 465 : 587),
    secure,
    ignoreTLS: url.searchParams.get('ignoreTLS') === 'true',
    loopback: ['127.0.0.1', 'localhost', '::1'].includes(host),
    auth: url.username ? { user: decodeURIComponent(url.username), pass: decodeURIComponent(url.password) } : undefined,
  };
}

/** A pooled nodemailer transport for `SMTP_URL` (transactional and automation mail). */
export function createSmtpTransport(smtpUrl: string, poolSize: number): Transporter<SMTPPool.SentMessageInfo> {
  const relay = smtpRelay(smtpUrl);
  const options: SMTPPool.Options = {
    pool: true,
    host: relay.host,
    port: relay.port,
    secure: relay.secure,
    maxConnections: poolSize,
    maxMessages: Infinity,
    connectionTimeout: 10_000,
    greetingTimeout: 10_000,
    socketTimeout: 30_000,
    auth: relay.auth,
    tls: relay.loopback ? { rejectUnauthorized: false } : undefined,
    ignoreTLS: relay.ignoreTLS,
  };
  return nodemailer.createTransport(options);
}

/** `transport.sendMail`, measured (`measureSend`). */
export function sendMeasured<T>(transport: Transporter<T>, mail: SendMailOptions): Promise<T> {
  return measureSend(() => transport.sendMail(mail));
}

/** The metrics of one SMTP send that started at `startedAt` (performance.now()) and ended with `err` (null: sent). */
export function observeSend(startedAt: number, err: unknown): void {
  const seconds = (performance.now() - startedAt) / 1000;
  if (err === null) {
    smtpSendDuration.observe({ outcome: 'sent' }, seconds);
    return;
  }
  const reason = smtpErrorReason(err);
  smtpSendDuration.observe({ outcome: reason === '5xx' ? 'rejected' : 'error' }, seconds);
  smtpSendErrors.inc({ reason });
}

/** One SMTP send, measured: its duration by outcome and its failures by reason (README › Metrics and health). */
function measureSend<T>(send: () => Promise<T>): Promise<T> {
  const startedAt = performance.now();
  let pending: Promise<T>;
  try {
    pending = send();
  } catch (err) {
    pending = Promise.reject(err as Error);
  }
  // Reactions, not an async function: each promise pays Node's promise hooks.
  return pending.then(
    (result) => {
      observeSend(startedAt, null);
      return result;
    },
    (err: unknown) => {
      observeSend(startedAt, err ?? new Error('the send failed'));
      throw err;
    },
  );
}
