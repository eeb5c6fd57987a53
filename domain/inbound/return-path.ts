import { createHmac, hkdfSync, timingSafeEqual } from 'node:crypto';
import { uuidBytes, uuidString } from '../ids';
import { linkTokens, MAX_TOKEN_CHARS } from '../tracking/tokens';

/**
 * Signed addresses on a sender domain's bounce host, so that mail coming back names the email it is about and a
 * forged bounce, complaint or unsubscribe cannot touch a contact (issue 25).
 *
 *   local part = <kind>-<base32(payload || mac)>
 *   b- (return path, the envelope sender of one email): email id (16 bytes) | issue day (2 bytes) | mac (12 bytes)
 *   u- (unsubscribe, a List-Unsubscribe mailto: that needs no subject): email id (16 bytes) | mac (14 bytes)
 *   mac = HMAC-SHA256(key, kind letter || payload), truncated
 *
 * Both payloads are 30 bytes, 48 base32 characters: a multiple of five bytes leaves no padding bits, so each token
 * has exactly one spelling (per case) and the local part is 50 octets, under RFC 5321's 64. The alphabet is RFC 4648's,
 * lowercased: MTAs and mailbox software lowercase local parts (and RFC 5321 lets them treat case as they like), so
 * what we write is lowercase and what we read may be any case. A change of format takes a new kind letter, so
 * addresses already out keep their meaning.
 *
 * The key is derived from APP_SECRET with HKDF-SHA256 under a label of its own, independent of the link tokens and
 * the DKIM sealing key derived from the same secret. A return path expires (RETURN_PATH_MAX_AGE_DAYS) so a token
 * scraped from an old message's Return-Path stops working; the issue day costs two bytes and makes that checkable
 * without a lookup. An unsubscribe address never expires, like the unsubscribe links (tracking/tokens.ts).
 */

const TOKEN_BYTES = 30;
const ID_BYTES = 16;
const DAY_BYTES = 2;
const RETURN_PATH_KIND = 'b';
const UNSUBSCRIBE_KIND = 'u';
const KEY_LABEL = 'mailwright/return-path/v1';
const DAY_MS = 86_400_000;

/**
 * How long a return path stays valid. Bounces arrive within days (queue lifetimes are about five), but ARF reports
 * and late DSNs of forwarded mail can come weeks later; half a year covers them.
 */
export const RETURN_PATH_MAX_AGE_DAYS = 180;
/** A token dated up to a day ahead is accepted: workers' clocks may disagree around midnight UTC. */
const FUTURE_SKEW_DAYS = 1;

/** RFC 5321 § 4.5.3.1.1: the longest local part. */
const MAX_LOCAL_PART = 64;

const ALPHABET = 'abcdefghijklmnopqrstuvwxyz234567';
/** TOKEN_BYTES in base32. */
const TOKEN_RE = /^[a-z2-7]{48}$/;

type ReturnPathError = 'not_ours' | 'forged' | 'expired';
export type ReturnPathResult = { emailId: string; issuedAt: Date } | { error: ReturnPathError };
export type UnsubscribeAddressResult = { emailId: string } | { error: Exclude<ReturnPathError, 'expired'> };

const keys = new Map<string, Buffer>();

function keyFor(secret: string): Buffer {
  if (!secret) throw new Error('Return-path tokens need a secret');
  let key = keys.get(secret);
  if (!key) keys.set(secret, (key = Buffer.from(hkdfSync('sha256', Buffer.from(secret, 'utf8'), Buffer.alloc(0), KEY_LABEL, 32))));
  return key;
}

function mac(secret: string, kind: string, payload: Buffer, bytes: number): Buffer {
  return createHmac('sha256', keyFor(secret)).update(kind).update(payload).digest().subarray(0, bytes);
}

function base32(bytes: Buffer): string {
  let out = '';
  let bits = 0;
  let value = 0;
  for (const byte of bytes) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      out += ALPHABET[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
    value &= (1 << bits) - 1;
  }
  return out;
}

/** Decodes a token TOKEN_RE accepted to its TOKEN_BYTES. */
function unbase32(text: string): Buffer {
  const out = Buffer.alloc(TOKEN_BYTES);
  let bits = 0;
  let value = 0;
  let i = 0;
  for (const c of text) {
    value = ((value << 5) | ALPHABET.indexOf(c)) & 0xfff;
    bits += 5;
    if (bits >= 8) {
      out[i++] = (value >>> (bits - 8)) & 0xff;
      bits -= 8;
    }
  }
  return out;
}

const dayOf = (date: Date): number => Math.floor(date.getTime() / DAY_MS);

function sign(kind: string, payload: Buffer, secret: string): string {
  return `${kind}-${base32(Buffer.concat([payload, mac(secret, kind, payload, TOKEN_BYTES - payload.length)]))}`;
}

/**
 * The signed payload of `input` (an address, `<address>`, or a bare local part) when it is a token of `kind` with a
 * valid MAC. Anything that does not have the shape is not_ours before any HMAC is computed, so junk costs nothing.
 */
function verify(input: string, kind: string, payloadBytes: number, secret: string): Buffer | { error: 'not_ours' | 'forged' } {
  const local = localPart(input);
  if (local === null || local.length > MAX_LOCAL_PART || !local.startsWith(`${kind}-`)) return { error: 'not_ours' };
  const token = local.slice(kind.length + 1);
  if (!TOKEN_RE.test(token)) return { error: 'not_ours' };
  const raw = unbase32(token);
  const payload = raw.subarray(0, payloadBytes);
  if (!timingSafeEqual(raw.subarray(payloadBytes), mac(secret, kind, payload, TOKEN_BYTES - payloadBytes))) return { error: 'forged' };
  return payload;
}

/** The local part of an address (the part before its last `@`), lowercased; null for something too long to be one. */
function localPart(input: string): string | null {
  if (typeof input !== 'string' || input.length > 1024) return null;
  let s = input.trim();
  if (s.startsWith('<') && s.endsWith('>')) s = s.slice(1, -1).trim();
  const at = s.lastIndexOf('@');
  return (at === -1 ? s : s.slice(0, at)).toLowerCase();
}

/** The envelope sender (`MAIL FROM`) of email `emailId`: `b-<token>@<bounceHost>`, valid for RETURN_PATH_MAX_AGE_DAYS. */
export function returnPathAddress(emailId: string, bounceHost: string, secret: string, now: Date = new Date()): string {
  const day = Buffer.alloc(DAY_BYTES);
  day.writeUInt16BE(dayOf(now));
  return `${sign(RETURN_PATH_KIND, Buffer.concat([uuidBytes(emailId), day]), secret)}@${bounceHost.toLowerCase()}`;
}

/**
 * The email a return path names, from the envelope recipient of a bounce (an address or just its local part, any case).
 * `not_ours`: not the shape of one (another address on the host, a typo, a different kind); `forged`: the shape but
 * not our signature (or another APP_SECRET's); `expired`: ours, issued more than RETURN_PATH_MAX_AGE_DAYS before
 * `now` (or dated in the future, which a genuine token is not). `issuedAt` is midnight UTC of the issue day.
 */
export function parseReturnPath(address: string, secret: string, now: Date = new Date()): ReturnPathResult {
  const payload = verify(address, RETURN_PATH_KIND, ID_BYTES + DAY_BYTES, secret);
  if (!Buffer.isBuffer(payload)) return payload;
  const day = payload.readUInt16BE(ID_BYTES);
  const today = dayOf(now);
  if (day > today + FUTURE_SKEW_DAYS || today - day > RETURN_PATH_MAX_AGE_DAYS) return { error: 'expired' };
  return { emailId: uuidString(payload.subarray(0, ID_BYTES)), issuedAt: new Date(day * DAY_MS) };
}

/**
 * A `List-Unsubscribe` mailto: address for email `emailId` (`u-<token>@<host>`): mail to it unsubscribes the email's
 * contact whatever its subject says, for clients that drop or rewrite the subject of the mailto: link. The email names
 * the contact, so the address carries only the email id.
 */
export function unsubscribeAddress(emailId: string, host: string, secret: string): string {
  return `${sign(UNSUBSCRIBE_KIND, uuidBytes(emailId), secret)}@${host.toLowerCase()}`;
}

/** The email an unsubscribe address names (unsubscribeAddress), or why it names none. */
export function parseUnsubscribeAddress(address: string, secret: string): UnsubscribeAddressResult {
  const payload = verify(address, UNSUBSCRIBE_KIND, ID_BYTES, secret);
  return Buffer.isBuffer(payload) ? { emailId: uuidString(payload) } : payload;
}

const RETURN_PATH_IN_TEXT_RE = /(?<![a-z0-9.+_-])b-[a-z2-7]{48}(?![a-z0-9])/gi;

/**
 * Local parts in `text` shaped like our return paths, lowercased, first seen first, unverified (parseReturnPath decides).
 * A bounce whose envelope recipient lost the token (a forwarder, a provider that replies to the From) still quotes the
 * original envelope sender somewhere: a Return-Path or Received `envelope-from` of the original headers, Postfix's
 * X-Postfix-Sender, an ARF Original-Mail-From, an SRS-rewritten address (`SRS0=…=b-…@forwarder`).
 */
export function findReturnPathTokens(text: string, max = 5): string[] {
  const found: string[] = [];
  for (const match of text.matchAll(RETURN_PATH_IN_TEXT_RE)) {
    const token = match[0].toLowerCase();
    if (!found.includes(token)) found.push(token);
    if (found.length >= max) break;
  }
  return found;
}

const UNSUBSCRIBE_ADDRESS_IN_TEXT_RE = /(?<![a-z0-9.+_-])u-[a-z2-7]{48}(?![a-z0-9])/i;

/**
 * The first local part in `text` shaped like our unsubscribe address (unverified: parseUnsubscribeAddress decides): a
 * returned original's `List-Unsubscribe: <mailto:u-…@…>` names the email even when the relay rewrote its envelope sender.
 */
export function findUnsubscribeAddressToken(text: string): string | undefined {
  return UNSUBSCRIBE_ADDRESS_IN_TEXT_RE.exec(text)?.[0].toLowerCase();
}

/** The shortest contact token: version, kind and a contact id with its MAC (34 bytes) in base64url. */
const MIN_CONTACT_TOKEN_CHARS = 46;
/**
 * `unsubscribe <token>`, the subject our List-Unsubscribe mailto: asks for (tracking/links.ts › listUnsubscribeHeaders),
 * found anywhere in the subject: clients prefix `Re:`/`Fwd:`, and some leave it percent-encoded as it stood in the link.
 * The token is a link token (base64url, case matters), so unlike return paths it is taken as written.
 */
const UNSUBSCRIBE_SUBJECT_RE = new RegExp(`(?:^|[^A-Za-z0-9_-])unsubscribe(?:\\s|%20|\\+)+([A-Za-z0-9_-]{${MIN_CONTACT_TOKEN_CHARS},${MAX_TOKEN_CHARS}})(?![A-Za-z0-9_-])`, 'i');

/** The unverified token of an `unsubscribe <token>` subject, or null. */
export function unsubscribeTokenFromSubject(subject: string | null | undefined): string | null {
  if (typeof subject !== 'string' || subject.length > MAX_TOKEN_CHARS * 2) return null;
  return UNSUBSCRIBE_SUBJECT_RE.exec(subject)?.[1] ?? null;
}

/**
 * The contact (and the email it was composed for) that an `unsubscribe <token>` subject names, verified with the
 * link tokens' own check; null when the subject carries no genuine contact token.
 */
export function parseUnsubscribeSubject(subject: string | null | undefined, secret: string): { contactId: string; emailId?: string } | null {
  const token = unsubscribeTokenFromSubject(subject);
  const payload = token === null ? null : linkTokens(secret).verify(token, 'contact');
  if (!payload) return null;
  return payload.emailId === undefined ? { contactId: payload.contactId } : { contactId: payload.contactId, emailId: payload.emailId };
}
