import { LruCache } from '../cache/lru';
import { X509Certificate, verify as verifySignature, type KeyObject } from 'node:crypto';
import { z } from 'zod';
import { AppError, badRequest, forbidden, serviceUnavailable } from '../errors';

/**
 * Amazon SNS HTTP(S) deliveries: the message format, its signature (SignatureVersion 1 = SHA1withRSA,
 * 2 = SHA256withRSA over the canonical string of the SNS documentation), the signing-certificate checks and the
 * subscription confirmation. Nothing here trusts a field of a message before its signature has been verified,
 * except the SigningCertURL, which is only fetched when it matches the configured pattern.
 */

/** Processed message ids are kept this long; older messages are refused so a replay can never apply twice. */
export const SNS_MESSAGE_RETENTION_MS = 30 * 86_400_000;
/** SNS gives up retrying long before this, so a genuine message is never this old. */
const SNS_MESSAGE_MAX_AGE_MS = SNS_MESSAGE_RETENTION_MS - 86_400_000;

const common = {
  MessageId: z.string().min(1).max(255),
  TopicArn: z.string().min(1).max(1024),
  Message: z.string(),
  Timestamp: z.string().refine((t) => !Number.isNaN(Date.parse(t)), 'must be an ISO timestamp'),
  SignatureVersion: z.enum(['1', '2']),
  Signature: z.string().min(1).max(4096),
  SigningCertURL: z.string().min(1).max(2048),
};

const SnsMessageSchema = z.discriminatedUnion('Type', [
  z.object({
    ...common,
    Type: z.literal('Notification'),
    // Absent (or null) when the publisher gave no subject; then it is not part of the signed string either.
    Subject: z.string().nullish(),
    UnsubscribeURL: z.string().optional(),
  }),
  z.object({
    ...common,
    Type: z.enum(['SubscriptionConfirmation', 'UnsubscribeConfirmation']),
    Token: z.string().min(1),
    SubscribeURL: z.string().min(1).max(4096),
  }),
]);

export type SnsMessage = z.infer<typeof SnsMessageSchema>;

/** Parses the body SNS posts (JSON, sent as text/plain); 400 when it is not an SNS message. */
export function parseSnsMessage(text: string): SnsMessage {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new AppError(400, 'INVALID_JSON', 'The request body is not valid JSON', { suggestion: 'This endpoint accepts Amazon SNS HTTP(S) deliveries only.' });
  }
  const parsed = SnsMessageSchema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw badRequest(
      `Not an Amazon SNS message: ${issue.path.join('.') || '(body)'}: ${issue.message}`,
      'Raw message delivery must be off for this subscription: the SNS envelope carries the signature.',
    );
  }
  return parsed.data;
}

/** The string SNS signs: `key\nvalue\n` for the message's signed fields, in this (alphabetical) order. */
export function canonicalString(msg: SnsMessage): string {
  const fields: [string, string | null | undefined][] =
    msg.Type === 'Notification'
      ? [['Message', msg.Message], ['MessageId', msg.MessageId], ['Subject', msg.Subject], ['Timestamp', msg.Timestamp], ['TopicArn', msg.TopicArn], ['Type', msg.Type]]
      : [['Message', msg.Message], ['MessageId', msg.MessageId], ['SubscribeURL', msg.SubscribeURL], ['Timestamp', msg.Timestamp], ['Token', msg.Token], ['TopicArn', msg.TopicArn], ['Type', msg.Type]];
  return fields
    .filter((f): f is [string, string] => typeof f[1] === 'string')
    .map(([k, v]) => `${k}\n${v}\n`)
    .join('');
}

/** True when `Signature` is the signature of the canonical string by `key` with the algorithm of `SignatureVersion`. */
export function isValidSignature(msg: SnsMessage, key: KeyObject): boolean {
  const algorithm = msg.SignatureVersion === '1' ? 'sha1' : 'sha256';
  const signature = Buffer.from(msg.Signature, 'base64');
  if (signature.length === 0) return false;
  try {
    return verifySignature(algorithm, Buffer.from(canonicalString(msg), 'utf8'), key, signature);
  } catch {
    return false; // e.g. a key that is not RSA
  }
}

/**
 * The URL to fetch when `raw` is an http(s) URL matching `pattern`, else null. The pattern is tested against the
 * parsed and re-serialized URL, the very string that is fetched, so tricks such as `user@host`, backslashes or
 * percent-encoded hosts cannot make the checked text and the fetched host differ.
 */
export function allowedAwsUrl(raw: string, pattern: RegExp): string | null {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return null;
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return null;
  if (url.username || url.password) return null;
  return pattern.test(url.href) ? url.href : null;
}

export interface SnsOptions {
  /** Allowed TopicArns; empty = any. */
  topicArns: string[];
  /** What SigningCertURL and SubscribeURL must match. */
  urlPattern: RegExp;
  /** Bound on fetching a certificate or confirming a subscription. */
  httpTimeoutMs: number;
}

const MAX_CERT_BYTES = 64 * 1024;
const MAX_CACHED_CERTS = 100;

/** A certificate's public key and its validity window (ms since the epoch). */
interface CachedKey {
  key: KeyObject;
  validFrom: number;
  validTo: number;
}

class FetchFailure extends Error {
  constructor(message: string, readonly retryable: boolean) {
    super(message);
  }
}

async function readCapped(res: Response, maxBytes: number): Promise<string> {
  const reader = res.body?.getReader();
  if (!reader) return '';
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > maxBytes) {
      await reader.cancel();
      throw new FetchFailure(`larger than ${maxBytes} bytes`, false);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/**
 * Verifies SNS messages and confirms subscriptions. One instance per process: it caches the signing certificates'
 * public keys by URL (AWS publishes a rotated certificate under a new URL), and concurrent requests for the same
 * certificate share one fetch. Failed fetches are not cached.
 */
export class SnsVerifier {
  private readonly keys = new LruCache<Promise<CachedKey>>({ maxEntries: MAX_CACHED_CERTS, maxWeight: MAX_CACHED_CERTS });
  /** Certificate fetches made (for operators' logs and tests of the cache). */
  fetches = 0;

  constructor(private readonly opts: SnsOptions) {}

  /** Throws 403 unless the message comes from an allowed topic and is signed by the certificate it names. */
  async verify(msg: SnsMessage, now = Date.now()): Promise<void> {
    if (this.opts.topicArns.length > 0 && !this.opts.topicArns.includes(msg.TopicArn)) {
      throw forbidden('TOPIC_NOT_ALLOWED', `Topic ${msg.TopicArn} is not accepted here`, 'Add it to SNS_TOPIC_ARNS.');
    }
    const certUrl = allowedAwsUrl(msg.SigningCertURL, this.opts.urlPattern);
    if (!certUrl) {
      throw forbidden('INVALID_CERT_URL', 'SigningCertURL is not an Amazon SNS certificate URL', 'Only messages signed by Amazon SNS are accepted.');
    }
    const { key } = await this.publicKey(certUrl, now);
    if (!isValidSignature(msg, key)) throw forbidden('INVALID_SIGNATURE', 'The SNS message signature is not valid');
    // Checked after the signature: only then is the Timestamp known to be the one SNS wrote.
    if (now - Date.parse(msg.Timestamp) > SNS_MESSAGE_MAX_AGE_MS) {
      throw forbidden('MESSAGE_EXPIRED', `The SNS message is older than ${SNS_MESSAGE_MAX_AGE_MS / 86_400_000} days`);
    }
  }

  /** Confirms a verified SubscriptionConfirmation by fetching its SubscribeURL (only an AWS URL, as for certificates). */
  async confirmSubscription(msg: { SubscribeURL: string }): Promise<void> {
    const url = allowedAwsUrl(msg.SubscribeURL, this.opts.urlPattern);
    if (!url) throw forbidden('INVALID_SUBSCRIBE_URL', 'SubscribeURL is not an Amazon SNS URL');
    let res: Response;
    try {
      res = await fetch(url, { redirect: 'error', signal: AbortSignal.timeout(this.opts.httpTimeoutMs) });
      await readCapped(res, MAX_CERT_BYTES).catch(() => '');
    } catch (err) {
      throw serviceUnavailable(`The subscription could not be confirmed: ${(err as Error).message}`);
    }
    if (!res.ok) throw serviceUnavailable(`The subscription could not be confirmed: SNS answered ${res.status}`);
  }

  private async publicKey(url: string, now: number): Promise<CachedKey> {
    let pending = this.keys.get(url);
    if (!pending) {
      const fetching = this.fetchKey(url);
      pending = fetching;
      this.keys.set(url, fetching, 1);
      void fetching.catch(() => this.keys.delete(url, fetching));
    }
    let entry: CachedKey;
    try {
      entry = await pending;
    } catch (err) {
      if (err instanceof FetchFailure && !err.retryable) throw forbidden('INVALID_CERT_URL', `The signing certificate is unusable: ${err.message}`);
      throw serviceUnavailable(`The signing certificate could not be fetched: ${(err as Error).message}`);
    }
    if (now < entry.validFrom || now > entry.validTo) {
      this.keys.delete(url);
      throw forbidden('INVALID_SIGNATURE', 'The signing certificate is not valid now (expired or not yet valid)');
    }
    return entry;
  }

  private async fetchKey(url: string): Promise<CachedKey> {
    this.fetches++;
    // No redirects: the pattern was checked on this URL, not on wherever a redirect would lead.
    const res = await fetch(url, { redirect: 'error', signal: AbortSignal.timeout(this.opts.httpTimeoutMs) });
    if (!res.ok) {
      await res.body?.cancel();
      // A 4xx names a certificate that does not exist (anyone can put such a URL in a message): not worth a retry.
      throw new FetchFailure(`the certificate URL answered ${res.status}`, res.status >= 500);
    }
    const pem = await readCapped(res, MAX_CERT_BYTES);
    let cert: X509Certificate;
    try {
      cert = new X509Certificate(pem);
    } catch {
      throw new FetchFailure('not an X.509 certificate', false);
    }
    return { key: cert.publicKey, validFrom: Date.parse(cert.validFrom), validTo: Date.parse(cert.validTo) };
  }
}
