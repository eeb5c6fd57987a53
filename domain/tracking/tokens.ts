import { hash, hkdfSync, timingSafeEqual } from 'node:crypto';
import { uuidString, writeUuid } from '../ids';

/**
 * Signed tokens for the public tracking and subscription links. A token is base64url(payload || mac):
 *
 *   payload = version (1 byte) | kind (1 byte) | id (16 bytes, a UUID) | for clicks: the target URL (UTF-8);
 *             for contact links composed into an email: that email's id (16 bytes)
 *   mac     = HMAC-SHA256(key, payload), first 16 bytes
 *
 * A contact token names the email it was composed for, so an unsubscribe is attributed to that email (and its
 * campaign) with one signature per recipient; contact tokens without it, sent before, keep verifying.
 *
 * The key is derived from APP_SECRET with HKDF-SHA256 under its own label, so it is independent of the DKIM sealing
 * key (SecretBox) derived from the same secret. Tokens carry everything needed to act (the email or contact id, the
 * URL), so verifying one needs no lookup; they do not expire, because unsubscribe links must keep working for as long
 * as the mail exists. Changing APP_SECRET invalidates every link already sent.
 */

const VERSION = 1;
const MAC_BYTES = 16;
const ID_BYTES = 16;
const HEADER_BYTES = 2;
/** Longer tokens are refused before any work (a click token carries its URL). */
export const MAX_TOKEN_CHARS = 8192;
const KEY_LABEL = 'mailwright/link-tokens/v1';

const KINDS = { open: 1, click: 2, contact: 3 } as const;
export type TokenKind = keyof typeof KINDS;

export type TokenPayload =
  | { kind: 'open'; emailId: string }
  | { kind: 'click'; emailId: string; url: string }
  | { kind: 'contact'; contactId: string; emailId?: string };

type PayloadOf<K extends TokenKind> = Extract<TokenPayload, { kind: K }>;

const BASE64URL_RE = /^[A-Za-z0-9_-]+$/;

/** SHA-256's block: HMAC pads its key to this. */
const BLOCK_BYTES = 64;

/** The scratch buffer's first size; a token longer than it fits grows it. */
const SCRATCH_BYTES = 4096;

export class LinkTokens {
  /** The key XOR ipad (RFC 2104), a block, computed once. */
  private readonly innerPad: Buffer;
  /** The key XOR opad, then room for the inner hash: the second hash's input, rewritten in place by each MAC (synchronous). */
  private readonly outerBlock: Buffer;
  /**
   * Where sign builds a token: the inner pad, then the payload, then its MAC; the token is its base64url from the
   * payload on. Signing is synchronous, so one buffer serves every token, and `views[n]` (its first n octets, what the
   * inner hash reads) is made once per length: a token costs no Buffer of its own.
   */
  private scratch: Buffer = Buffer.alloc(0);
  private views: Buffer[] = [];
  /** The id whose octets are in the scratch after the header (a message signs several tokens for its one email id). */
  private scratchId = '';

  constructor(appSecret: string) {
    if (!appSecret) throw new Error('LinkTokens needs a secret');
    const key = Buffer.from(hkdfSync('sha256', Buffer.from(appSecret, 'utf8'), Buffer.alloc(0), KEY_LABEL, 32));
    this.innerPad = Buffer.alloc(BLOCK_BYTES, 0x36);
    this.outerBlock = Buffer.alloc(BLOCK_BYTES + 32, 0x5c);
    for (let i = 0; i < key.length; i++) {
      this.innerPad[i]! ^= key[i]!;
      this.outerBlock[i]! ^= key[i]!;
    }
    this.grow(SCRATCH_BYTES);
  }

  sign(payload: TokenPayload): string {
    const id = payload.kind === 'contact' ? payload.contactId : payload.emailId;
    const rest = BLOCK_BYTES + HEADER_BYTES + ID_BYTES;
    // A URL is at most three octets a UTF-16 unit.
    const most = rest + (payload.kind === 'click' ? 3 * payload.url.length : ID_BYTES) + MAC_BYTES;
    if (most > this.scratch.length) this.grow(most);
    const buf = this.scratch;
    buf[BLOCK_BYTES] = VERSION;
    buf[BLOCK_BYTES + 1] = KINDS[payload.kind];
    if (id !== this.scratchId) {
      // Forgotten first: an id that is not a UUID throws having written part of itself.
      this.scratchId = '';
      writeUuid(id, buf, BLOCK_BYTES + HEADER_BYTES);
      this.scratchId = id;
    }
    let macAt = rest;
    if (payload.kind === 'click') macAt += buf.write(payload.url, rest, 'utf8');
    else if (payload.kind === 'contact' && payload.emailId !== undefined) {
      writeUuid(payload.emailId, buf, rest);
      macAt += ID_BYTES;
    }
    this.macInto(this.view(macAt), buf, macAt);
    return buf.toString('base64url', BLOCK_BYTES, macAt + MAC_BYTES);
  }

  /** A scratch of at least `bytes` octets, the inner pad at its start. */
  private grow(bytes: number): void {
    this.scratch = Buffer.alloc(Math.max(bytes, 2 * this.scratch.length));
    this.innerPad.copy(this.scratch, 0);
    this.views = [];
    this.scratchId = '';
  }

  /** The scratch's first `length` octets. */
  private view(length: number): Buffer {
    return (this.views[length] ??= this.scratch.subarray(0, length));
  }

  /** The payload when `token` is a genuine token of `kind`, else null (malformed, forged, altered or another kind). */
  verify<K extends TokenKind>(token: string, kind: K): PayloadOf<K> | null {
    if (typeof token !== 'string' || token.length > MAX_TOKEN_CHARS || !BASE64URL_RE.test(token)) return null;
    const raw = Buffer.from(token, 'base64url');
    // Only the canonical spelling: otherwise two strings (differing in unused trailing bits) would name one token.
    if (raw.length < HEADER_BYTES + ID_BYTES + MAC_BYTES || raw.toString('base64url') !== token) return null;
    const body = raw.subarray(0, raw.length - MAC_BYTES);
    if (!timingSafeEqual(raw.subarray(raw.length - MAC_BYTES), this.mac(body))) return null;
    if (body[0] !== VERSION || body[1] !== KINDS[kind]) return null;
    const id = uuidString(body.subarray(HEADER_BYTES, HEADER_BYTES + ID_BYTES));
    const rest = body.subarray(HEADER_BYTES + ID_BYTES);
    switch (kind) {
      case 'open':
        return rest.length === 0 ? ({ kind, emailId: id } as PayloadOf<K>) : null;
      case 'contact':
        if (rest.length === 0) return { kind, contactId: id } as PayloadOf<K>;
        return rest.length === ID_BYTES ? ({ kind, contactId: id, emailId: uuidString(rest) } as PayloadOf<K>) : null;
      default:
        return rest.length > 0 ? ({ kind, emailId: id, url: rest.toString('utf8') } as PayloadOf<K>) : null;
    }
  }

  /**
   * HMAC-SHA256 (RFC 2104) of `body`, first MAC_BYTES: H(K ^ opad || H(K ^ ipad || body)) with the padded keys made
   * once and two one-shot hashes, which costs about half of a `createHmac` object per token (a campaign message signs
   * a dozen: its links, the open pixel, the contact's links). The same bytes as createHmac (unit test).
   */
  private mac(body: Buffer): Buffer {
    const out = Buffer.allocUnsafe(MAC_BYTES);
    this.macInto(Buffer.concat([this.innerPad, body]), out, 0);
    return out;
  }

  /**
   * The MAC of a body given as the inner pad followed by it (sign builds it that way in the token's own buffer),
   * written into `out` at `at`. The hashes come back as 'binary' (latin1) strings, one octet a character: a Buffer result costs
   * an ArrayBuffer each, and that made the two hashes more than twice as dear (BENCHMARKS.md › Issue 28, fifth stop).
   */
  private macInto(padded: Buffer, out: Buffer, at: number): void {
    this.outerBlock.write(hash('sha256', padded, 'binary'), BLOCK_BYTES, 'latin1');
    out.write(hash('sha256', this.outerBlock, 'binary'), at, MAC_BYTES, 'latin1');
  }
}

const bySecret = new Map<string, LinkTokens>();

/** One LinkTokens per secret (the key derivation runs once). */
export function linkTokens(appSecret: string): LinkTokens {
  let tokens = bySecret.get(appSecret);
  if (!tokens) {
    tokens = new LinkTokens(appSecret);
    bySecret.set(appSecret, tokens);
  }
  return tokens;
}
