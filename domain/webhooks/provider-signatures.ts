import { createHash, createHmac, timingSafeEqual, verify as verifySignature, type KeyObject } from 'node:crypto';
import { AppError, forbidden } from '../errors';

/**
 * How each relay signs its webhook requests, checked before anything in a request is read:
 * - SendGrid (signed Event Webhook): ECDSA P-256 / SHA-256 over `timestamp + body`, base64 DER in
 *   `X-Twilio-Email-Event-Webhook-Signature`, the timestamp (seconds) in `X-Twilio-Email-Event-Webhook-Timestamp`;
 * - Mailgun: hex HMAC-SHA256 with the webhook signing key over `timestamp + token`, in the body's `signature` object
 *   (it does not cover the event, so the token is spent once: domain/webhooks/provider-reports.ts);
 * - Postmark: HTTP Basic credentials set on the webhook (no signature, no timestamp);
 * - Resend (Standard Webhooks, as Svix signs): base64 HMAC-SHA256 with the secret's bytes over `id.timestamp.body`,
 *   `v1,<signature>` entries separated by spaces in `svix-signature` (or `webhook-signature`).
 * Missing credentials: 401; credentials that do not verify: 403 INVALID_SIGNATURE; a signed timestamp further than
 * the tolerance from now (either way): 403 MESSAGE_EXPIRED.
 */

const missing = (what: string, headers?: Record<string, string>) => new AppError(401, 'UNAUTHORIZED', `The request carries no ${what}`, { headers });
const invalid = (what: string) => forbidden('INVALID_SIGNATURE', `The ${what} does not verify for this request`);

/** Refuses a signed timestamp (ms) further than `toleranceMs` from `now`; only called once its signature verified. */
function assertFresh(timestampMs: number, toleranceMs: number, now: number): void {
  if (!Number.isFinite(timestampMs) || Math.abs(now - timestampMs) > toleranceMs) {
    throw forbidden('MESSAGE_EXPIRED', `The signed timestamp is more than ${Math.round(toleranceMs / 1000)} s away from now`, 'Check the clock of this server; a replayed request is refused.');
  }
}

/** Seconds since the epoch as the providers write them (digits only) -> ms; NaN otherwise. */
const seconds = (text: string | undefined): number => (text && /^\d{1,12}$/.test(text) ? Number(text) * 1000 : NaN);

function equalText(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** A header's value (the first when repeated). */
type HeaderGetter = (name: string) => string | undefined;

export function verifySendgrid(headers: HeaderGetter, rawBody: string, publicKey: KeyObject, toleranceMs: number, now = Date.now()): void {
  const signature = headers('x-twilio-email-event-webhook-signature');
  const timestamp = headers('x-twilio-email-event-webhook-timestamp');
  if (!signature || !timestamp) throw missing('X-Twilio-Email-Event-Webhook-Signature and -Timestamp headers (turn on the signed Event Webhook)');
  let ok: boolean;
  try {
    ok = verifySignature('sha256', Buffer.from(timestamp + rawBody, 'utf8'), { key: publicKey, dsaEncoding: 'der' }, Buffer.from(signature, 'base64'));
  } catch {
    ok = false; // a signature that is not DER
  }
  if (!ok) throw invalid('X-Twilio-Email-Event-Webhook-Signature');
  assertFresh(seconds(timestamp), toleranceMs, now);
}

export interface MailgunSignature {
  timestamp: string;
  token: string;
  signature: string;
}

export function verifyMailgun(sig: Partial<MailgunSignature> | undefined, signingKey: string, toleranceMs: number, now = Date.now()): asserts sig is MailgunSignature {
  if (!sig || typeof sig.timestamp !== 'string' || typeof sig.token !== 'string' || typeof sig.signature !== 'string') throw missing('Mailgun `signature` object');
  const expected = createHmac('sha256', signingKey).update(sig.timestamp + sig.token).digest('hex');
  if (!equalText(expected, sig.signature.toLowerCase())) throw invalid('Mailgun signature');
  assertFresh(seconds(sig.timestamp), toleranceMs, now);
}

export function verifyPostmark(authorization: string | undefined, credentials: { user: string; password: string }): void {
  const m = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(authorization ?? '');
  if (!m) throw missing('HTTP Basic credentials', { 'WWW-Authenticate': 'Basic realm="postmark-webhook"' });
  // Compared as digests: equal lengths, so the comparison takes the same time whatever was sent.
  const digest = (text: string) => createHash('sha256').update(text).digest();
  const sent = digest(Buffer.from(m[1]!, 'base64').toString('utf8'));
  if (!timingSafeEqual(sent, digest(`${credentials.user}:${credentials.password}`))) throw invalid('HTTP Basic credentials');
}

/** Standard Webhooks / Svix; returns the message id (`svix-id`), the same on every retry of the message. */
export function verifyStandardWebhook(headers: HeaderGetter, rawBody: string, secret: Buffer, toleranceMs: number, now = Date.now()): string {
  const id = headers('svix-id') ?? headers('webhook-id');
  const timestamp = headers('svix-timestamp') ?? headers('webhook-timestamp');
  const signatures = headers('svix-signature') ?? headers('webhook-signature');
  if (!id || !timestamp || !signatures) throw missing('svix-id, svix-timestamp and svix-signature headers');
  const expected = createHmac('sha256', secret).update(`${id}.${timestamp}.${rawBody}`).digest('base64');
  const ok = signatures
    .split(' ')
    .map((entry) => entry.split(','))
    .some(([version, value]) => version === 'v1' && value !== undefined && equalText(value, expected));
  if (!ok) throw invalid('svix-signature');
  assertFresh(seconds(timestamp), toleranceMs, now);
  return id;
}
