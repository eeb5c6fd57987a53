import { createHmac, timingSafeEqual } from 'node:crypto';
import { promises as dns, type LookupAddress } from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import { isIP, type LookupFunction } from 'node:net';
import { performance } from 'node:perf_hooks';
import ipaddr from 'ipaddr.js';
import { caseInsensitive } from '../text';

/**
 * The HTTP caller of an automation's WEBHOOK step: one signed JSON POST, with no database or Temporal in sight, so
 * the activity that calls it only maps the outcome onto a retry decision (`WebhookError.retryable`).
 *
 * The URL is the project's, that is anyone's: without the address checks here a step could make the worker call the
 * cloud metadata service or an internal admin port. The checks apply to the very addresses connected to (each one
 * DNS answered, then handed to the socket by our own `lookup`), so a name that resolves to a public address when
 * checked and to 127.0.0.1 when connected (DNS rebinding) cannot slip through.
 */

const WEBHOOK_SIGNATURE_HEADER = 'Mailwright-Signature';
const WEBHOOK_ID_HEADER = 'Mailwright-Webhook-Id';
const WEBHOOK_TIMESTAMP_HEADER = 'Mailwright-Timestamp';
const USER_AGENT = 'Mailwright-Webhooks/1';

const DEFAULT_TIMEOUT_MS = 10_000;
/** Serialized payload limit: a step's payload is a contact and an event, far below this. */
export const MAX_WEBHOOK_BODY_BYTES = 256 * 1024;
/** Response bytes read before hanging up: small answers end normally, a receiver streaming megabytes is cut off. */
const MAX_RESPONSE_BYTES = 64 * 1024;
/** What is kept of the response body for the step's history. */
const SNIPPET_BYTES = 1024;
const MAX_CUSTOM_HEADERS = 20;
const MAX_HEADER_VALUE_CHARS = 4096;
const MAX_IDEMPOTENCY_KEY_CHARS = 255;

type WebhookResolver = (hostname: string) => Promise<LookupAddress[]>;

export interface WebhookRequest {
  /** http or https, without credentials. */
  url: string;
  /** The automation's signing secret. */
  secret: string;
  /** Serialized with JSON.stringify; the caller builds the documented payload. */
  payload: unknown;
  /** Custom headers of the step (see webhookHeaderProblems for what is refused). */
  headers?: Record<string, string>;
  /** Bound on the whole call: DNS, connecting, sending and the answer. Default 10 s. */
  timeoutMs?: number;
  /** WEBHOOK_ALLOW_PRIVATE_NETWORKS: lets a self-hosted deployment call its own network (and tests a loopback receiver). */
  allowPrivateNetworks?: boolean;
  /** WEBHOOK_ALLOWED_NETWORKS: CIDR ranges called even though they are not public (e.g. one internal service's subnet). */
  allowedNetworks?: readonly string[];
  /** The same for every attempt of one step execution, so receivers can drop duplicates. */
  idempotencyKey: string;
  /** Clock (ms since the epoch) for the signature's timestamp. */
  now?: () => number;
  /** Tests only: answers DNS instead of the system resolver (dns.lookup, as any other connection of the process). */
  resolve?: WebhookResolver;
  /**
   * Another signature scheme: the headers that sign `body` at `timestampSec`, sent instead of the `Mailwright-*` ones
   * (webhooks out sign per Standard Webhooks; `secret` and `idempotencyKey` are then the caller's business).
   */
  signatureHeaders?: (body: string, timestampSec: number) => Record<string, string>;
  /**
   * Keeps the connection open for the next call to the same origin that DNS sends to the same checked addresses
   * (`keptAgent`): webhooks out, which call one receiver many times a second.
   */
  keepAlive?: boolean;
}

export interface WebhookResult {
  status: number;
  /** From the start of the call (DNS included) to the end of the response, monotonic clock. */
  durationMs: number;
  /** The first SNIPPET_BYTES of the response body (UTF-8, a character cut in half is left out). */
  responseSnippet: string;
}

/**
 * - INVALID_REQUEST: the step's URL, headers or payload are unusable (fix the automation);
 * - ADDRESS_REFUSED: the host is, or resolves to, a non-public address;
 * - TIMEOUT, NETWORK: no answer in time, or no connection (DNS failure, refused, reset, TLS);
 * - HTTP_STATUS: the receiver answered something other than 2xx (`status`).
 */
export type WebhookErrorCode = 'INVALID_REQUEST' | 'ADDRESS_REFUSED' | 'TIMEOUT' | 'NETWORK' | 'HTTP_STATUS';

export class WebhookError extends Error {
  override readonly name = 'WebhookError';
  readonly status?: number;
  readonly responseSnippet?: string;
  /** The receiver's Retry-After on a retryable status (429, 503...), at most 1 h: for the activity to honour. */
  readonly retryAfterMs?: number;

  constructor(
    message: string,
    readonly code: WebhookErrorCode,
    readonly retryable: boolean,
    extra: { status?: number; responseSnippet?: string; retryAfterMs?: number; cause?: unknown } = {},
  ) {
    super(message, extra.cause === undefined ? undefined : { cause: extra.cause });
    this.status = extra.status;
    this.responseSnippet = extra.responseSnippet;
    this.retryAfterMs = extra.retryAfterMs;
  }
}

const invalid = (message: string) => new WebhookError(message, 'INVALID_REQUEST', false);

// ---- Signature ----------------------------------------------------------------------------------------------------

function hmacHex(secret: string, timestampSec: number, rawBody: string | Buffer): string {
  return createHmac('sha256', secret).update(`${timestampSec}.`).update(rawBody).digest('hex');
}

/** The `Mailwright-Signature` value: `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">`. */
export function signWebhook(secret: string, rawBody: string | Buffer, timestampSec: number): string {
  return `t=${timestampSec},v1=${hmacHex(secret, timestampSec, rawBody)}`;
}

/**
 * For receivers (and tests): true when `header` signs exactly `rawBody` (the bytes received, before any JSON
 * parsing) with `secret`, and its timestamp is within `toleranceSec` of now, which bounds replays. Several `v1`
 * entries are accepted, any one matching (room for signing with two secrets during a rotation); unknown keys are
 * ignored so a later scheme can be added alongside.
 */
export function verifyWebhookSignature(secret: string, header: string | undefined, rawBody: string | Buffer, toleranceSec = 300, nowMs = Date.now()): boolean {
  if (!header) return false;
  let timestamp: number | undefined;
  const signatures: Buffer[] = [];
  for (const part of header.split(',')) {
    const eq = part.indexOf('=');
    if (eq < 0) continue;
    const key = part.slice(0, eq).trim();
    const value = part.slice(eq + 1).trim();
    if (key === 't') {
      if (timestamp !== undefined || !/^\d{1,12}$/.test(value)) return false;
      timestamp = Number(value);
    } else if (key === 'v1' && /^[0-9a-f]{64}$/i.test(value)) {
      signatures.push(Buffer.from(value, 'hex'));
    }
  }
  if (timestamp === undefined || signatures.length === 0) return false;
  if (Math.abs(nowMs / 1000 - timestamp) > toleranceSec) return false;
  const expected = Buffer.from(hmacHex(secret, timestamp, rawBody), 'hex');
  return signatures.some((s) => timingSafeEqual(s, expected));
}

// ---- Custom headers -----------------------------------------------------------------------------------------------

/** RFC 9110 § 5.6.2 token. */
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}$/;
/** Visible ASCII, space and tab: no CR/LF (header injection), and nothing Node would refuse at send time. */
const HEADER_VALUE = /^[\t\x20-\x7e]*$/;
/**
 * Headers the step may not set: hop-by-hop ones (RFC 9110 § 7.6.1) and Host, which belong to the connection; the
 * ones describing the body we send and sign; Expect, which would change how it is sent. `Mailwright-*` is ours
 * (the signature headers, and any later one) and checked separately.
 */
const RESERVED_HEADERS = new Set([
  'connection', 'keep-alive', 'proxy-connection', 'proxy-authenticate', 'proxy-authorization', 'te', 'trailer', 'transfer-encoding', 'upgrade',
  'host', 'content-length', 'content-type', 'content-encoding', 'expect', 'user-agent',
]);

/**
 * The custom header names a step may set, as one portable pattern for the OpenAPI document: a token, none of the
 * reserved names and no `Mailwright-*` (case-insensitive, spelled without flags).
 */
export const WEBHOOK_HEADER_NAME_PATTERN =
  `^(?!(?:${[...RESERVED_HEADERS].map(caseInsensitive).join('|')})$|${caseInsensitive('mailwright-')})[!#$%&'*+.^_\`|~0-9A-Za-z-]{1,100}$`;
/** Custom header values, as a pattern for the document. */
export const WEBHOOK_HEADER_VALUE_PATTERN = '^[\\t\\x20-\\x7e]*$';
export { MAX_CUSTOM_HEADERS, MAX_HEADER_VALUE_CHARS };

export interface HeaderProblem {
  header: string;
  message: string;
}

/** What is wrong with a step's custom headers (empty when nothing is): for the API's validation and callWebhook's. */
export function webhookHeaderProblems(headers: Record<string, string>): HeaderProblem[] {
  const problems: HeaderProblem[] = [];
  const names = Object.keys(headers);
  if (names.length > MAX_CUSTOM_HEADERS) problems.push({ header: '', message: `at most ${MAX_CUSTOM_HEADERS} custom headers` });
  const seen = new Set<string>();
  for (const name of names) {
    const lower = name.toLowerCase();
    const value: unknown = headers[name];
    if (!HEADER_NAME.test(name)) problems.push({ header: name, message: 'not a valid header name' });
    else if (RESERVED_HEADERS.has(lower) || lower.startsWith('mailwright-')) problems.push({ header: name, message: 'set by Mailwright, it cannot be overridden' });
    else if (seen.has(lower)) problems.push({ header: name, message: 'given twice (header names are case-insensitive)' });
    if (typeof value !== 'string' || !HEADER_VALUE.test(value)) problems.push({ header: name, message: 'the value must be printable ASCII, without line breaks' });
    else if (value.length > MAX_HEADER_VALUE_CHARS) problems.push({ header: name, message: `the value is longer than ${MAX_HEADER_VALUE_CHARS} characters` });
    seen.add(lower);
  }
  return problems;
}

// ---- Addresses ----------------------------------------------------------------------------------------------------

/** NAT64's well-known prefix (RFC 6052): an IPv6-only host reaches IPv4 through it, so the embedded IPv4 decides. */
const NAT64_PREFIX: [ipaddr.IPv6, number] = [ipaddr.IPv6.parse('64:ff9b::'), 96];
/** Deprecated IPv4-compatible addresses (RFC 4291 § 2.5.5.1), which ipaddr.js counts as unicast. */
const IPV4_COMPATIBLE: [ipaddr.IPv6, number] = [ipaddr.IPv6.parse('::'), 96];

/**
 * Why `address` may not be called, or null for a public unicast address. Allowed is what ipaddr.js calls `unicast`:
 * everything outside its special ranges (loopback, RFC 1918, unique-local fc00::/7, link-local, carrier-grade NAT,
 * unspecified, multicast, broadcast, documentation, benchmarking, reserved, 6to4/Teredo tunnels...). IPv4-mapped
 * IPv6 (::ffff:a.b.c.d) is judged as the IPv4 address it is.
 */
export function refusedAddressReason(address: string): string | null {
  let ip: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    ip = ipaddr.process(address);
  } catch {
    return 'not an IP address';
  }
  if (ip instanceof ipaddr.IPv6 && ip.match(NAT64_PREFIX)) {
    const [hi, lo] = [ip.parts[6]!, ip.parts[7]!];
    const embedded = `${hi >> 8}.${hi & 0xff}.${lo >> 8}.${lo & 0xff}`;
    const reason = refusedAddressReason(embedded);
    return reason && `NAT64 of ${embedded}, ${reason}`;
  }
  const range = ip.range();
  if (range !== 'unicast') return `${RANGE_WORDS[range] ?? `a ${range.replace(/[A-Z]/g, (c) => ` ${c.toLowerCase()}`)}`} address`;
  // After the range: :: and ::1 are in ::/96 too, and are better named unspecified and loopback.
  if (ip instanceof ipaddr.IPv6 && ip.match(IPV4_COMPATIBLE)) return 'an IPv4-compatible IPv6 address';
  return null;
}

/** ipaddr.js's range names in words (the rest are spelled out from camelCase). */
const RANGE_WORDS: Record<string, string> = {
  linkLocal: 'a link-local',
  uniqueLocal: 'a unique-local',
  carrierGradeNat: 'a carrier-grade NAT',
  ipv4Mapped: 'an IPv4-mapped',
  rfc6145: 'an RFC 6145',
  rfc6052: 'an RFC 6052',
  '6to4': 'a 6to4',
  teredo: 'a Teredo',
  unspecified: 'an unspecified',
  amt: 'an AMT',
  as112: 'an AS112',
  as112v6: 'an AS112',
  orchid2: 'an ORCHIDv2',
};

/** `localhost` and RFC 6761's `*.localhost`: loopback by definition, whatever DNS might say. */
function isLocalhostName(host: string): boolean {
  const name = host.toLowerCase().replace(/\.$/, '');
  return name === 'localhost' || name.endsWith('.localhost');
}

const systemResolver: WebhookResolver = (hostname) => dns.lookup(hostname, { all: true });

/** WEBHOOK_ALLOWED_NETWORKS parsed once per list (the worker's is one list, checked at every call). */
const parsedLists = new WeakMap<readonly string[], [ipaddr.IPv4 | ipaddr.IPv6, number][]>();
function parsedNetworks(cidrs: readonly string[]): [ipaddr.IPv4 | ipaddr.IPv6, number][] {
  let parsed = parsedLists.get(cidrs);
  if (!parsed) parsedLists.set(cidrs, (parsed = cidrs.map((cidr) => ipaddr.parseCIDR(cidr))));
  return parsed;
}

/** The addresses to connect to: an IP literal itself, else every DNS answer, each one checked. */
async function resolveTarget(host: string, req: WebhookRequest, signal: AbortSignal): Promise<LookupAddress[]> {
  const guard = !req.allowPrivateNetworks;
  const allowed = parsedNetworks(req.allowedNetworks ?? []);
  // Why the address is refused, unless it lies in an allowed network.
  const refusal = (address: string): string | null => {
    const reason = refusedAddressReason(address);
    if (!reason || allowed.length === 0) return reason;
    const ip = ipaddr.process(address);
    return allowed.some(([range, bits]) => range.kind() === ip.kind() && ip.match(range, bits)) ? null : reason;
  };
  const literal = isIP(host);
  if (literal) {
    const reason = guard && refusal(host);
    if (reason) throw new WebhookError(`Webhook address ${host} is refused: ${reason}`, 'ADDRESS_REFUSED', false);
    return [{ address: host, family: literal }];
  }
  if (guard && isLocalhostName(host)) throw new WebhookError(`Webhook host ${host} is refused: a loopback name`, 'ADDRESS_REFUSED', false);

  let addresses: LookupAddress[];
  try {
    addresses = await untilAborted((req.resolve ?? systemResolver)(host), signal);
  } catch (err) {
    if (err instanceof WebhookError) throw err;
    const code = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
    throw new WebhookError(`DNS lookup of ${host} failed (${code})`, 'NETWORK', true, { cause: err });
  }
  if (addresses.length === 0) throw new WebhookError(`DNS lookup of ${host} found no address`, 'NETWORK', true);
  if (guard) {
    // All of them, not only the first: the socket may try any (happy eyeballs), and a mixed answer is suspicious.
    for (const { address } of addresses) {
      const reason = refusal(address);
      if (reason) throw new WebhookError(`Webhook host ${host} resolves to ${address}, which is refused: ${reason}`, 'ADDRESS_REFUSED', false);
    }
  }
  return addresses;
}

/** A `lookup` for the socket that answers with the checked addresses only, instead of asking DNS again. */
function pinnedLookup(addresses: LookupAddress[]): LookupFunction {
  return (_hostname, options, callback) => {
    const family = options.family === 4 || options.family === 'IPv4' ? 4 : options.family === 6 || options.family === 'IPv6' ? 6 : 0;
    const usable = family ? addresses.filter((a) => a.family === family) : addresses;
    process.nextTick(() => {
      if (usable.length === 0) {
        callback(Object.assign(new Error(`no IPv${family} address`), { code: 'ENOTFOUND' }), '', undefined);
      } else if (options.all) {
        callback(null, usable);
      } else {
        callback(null, usable[0]!.address, usable[0]!.family);
      }
    });
  };
}

function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    if (signal.aborted) return onAbort();
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (err: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(err);
      },
    );
  });
}

// ---- The call -----------------------------------------------------------------------------------------------------

interface Prepared {
  url: URL;
  /** url.hostname without the brackets of an IPv6 literal. */
  host: string;
  body: string;
  headers: Record<string, string>;
  timeoutMs: number;
}

/** Everything that can be refused without the network, so a broken step fails before any DNS or connection. */
function prepare(req: WebhookRequest): Prepared {
  let url: URL;
  try {
    url = new URL(req.url);
  } catch {
    throw invalid('The webhook URL is not a valid URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw invalid(`The webhook URL must be http or https, not ${url.protocol.slice(0, -1)}`);
  if (url.username || url.password) throw invalid('The webhook URL must not contain credentials: send them in a custom header');
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  if (!host) throw invalid('The webhook URL has no host');

  const timeoutMs = req.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  if (!Number.isInteger(timeoutMs) || timeoutMs <= 0 || timeoutMs > 2 ** 31 - 1) throw invalid('timeoutMs must be a positive number of milliseconds');
  if (!req.secret && !req.signatureHeaders) throw invalid('The webhook signing secret is empty');
  if (!req.idempotencyKey || req.idempotencyKey.length > MAX_IDEMPOTENCY_KEY_CHARS || !/^[\x21-\x7e]+$/.test(req.idempotencyKey)) {
    throw invalid(`The idempotency key must be 1 to ${MAX_IDEMPOTENCY_KEY_CHARS} visible ASCII characters`);
  }
  const custom = req.headers ?? {};
  const problems = webhookHeaderProblems(custom);
  if (problems.length) throw invalid(`Invalid custom headers: ${problems.map((p) => (p.header ? `${p.header}: ${p.message}` : p.message)).join('; ')}`);

  let body: string | undefined;
  try {
    body = JSON.stringify(req.payload);
  } catch (err) {
    throw invalid(`The payload is not JSON-serialisable: ${(err as Error).message}`);
  }
  if (body === undefined) throw invalid('The payload is not JSON-serialisable');
  const size = Buffer.byteLength(body);
  if (size > MAX_WEBHOOK_BODY_BYTES) throw invalid(`The payload is ${size} bytes serialized, over the ${MAX_WEBHOOK_BODY_BYTES} byte limit`);

  const timestamp = Math.floor((req.now ?? Date.now)() / 1000);
  const headers = {
    ...custom,
    'Content-Type': 'application/json',
    'Content-Length': String(size),
    'User-Agent': USER_AGENT,
    ...(req.signatureHeaders
      ? req.signatureHeaders(body, timestamp)
      : {
          [WEBHOOK_ID_HEADER]: req.idempotencyKey,
          [WEBHOOK_TIMESTAMP_HEADER]: String(timestamp),
          [WEBHOOK_SIGNATURE_HEADER]: signWebhook(req.secret, body, timestamp),
        }),
  };
  return { url, host, body, headers, timeoutMs };
}

/** Agents of the calls that keep their connections (`keepAlive`), most recently used last; at most MAX_KEPT_AGENTS. */
const keptAgents = new Map<string, http.Agent>();
const MAX_KEPT_AGENTS = 256;
/** An idle kept connection is closed after this: below the 5 s that Node servers (and many others) keep one open. */
const KEPT_IDLE_MS = 4_000;

/**
 * The agent of an origin and the addresses checked for it this time: a kept socket was connected to one of the same
 * checked addresses, so reusing it skips no check (an answer of DNS that differs gets an agent of its own).
 */
function keptAgent(p: Prepared, addresses: LookupAddress[]): http.Agent {
  const key = `${p.url.protocol}//${p.host}:${p.url.port}|${addresses.map((a) => a.address).sort().join(',')}`;
  let agent = keptAgents.get(key);
  if (agent) keptAgents.delete(key);
  else agent = new (p.url.protocol === 'https:' ? https.Agent : http.Agent)({ keepAlive: true, maxSockets: 32, maxFreeSockets: 32, timeout: KEPT_IDLE_MS });
  keptAgents.set(key, agent);
  for (const [oldest, old] of keptAgents) {
    if (keptAgents.size <= MAX_KEPT_AGENTS) break;
    keptAgents.delete(oldest);
    old.destroy();
  }
  return agent;
}

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  snippet: string;
}

/**
 * One POST to the checked addresses. Node's http never follows redirects. Once the status line is in, the answer is
 * decided: the body is only read for the snippet, so its end, its error, the 64 KB cut-off or the deadline all just
 * stop the reading (a receiver that said 200 and then stalled did take the webhook; retrying would deliver it twice).
 */
function post(p: Prepared, addresses: LookupAddress[], signal: AbortSignal, keep = false): Promise<Answer> {
  return new Promise<Answer>((resolve, reject) => {
    let settled = false;
    const onAbort = () => request.destroy(signal.reason as Error);
    const settle = (fn: () => void) => {
      if (settled) return;
      settled = true;
      signal.removeEventListener('abort', onAbort);
      fn();
    };

    const request = (p.url.protocol === 'https:' ? https : http).request({
      method: 'POST',
      protocol: p.url.protocol,
      hostname: p.host,
      port: p.url.port || undefined,
      path: `${p.url.pathname}${p.url.search}`,
      headers: p.headers,
      // A connection of its own unless the caller keeps them: a socket of a shared pool may have been connected (and
      // checked) for another call; a kept one only ever for the same checked addresses.
      agent: keep ? keptAgent(p, addresses) : false,
      lookup: pinnedLookup(addresses),
    });

    request.on('response', (res) => {
      // From here the deadline only ends the reading of the body (done), it no longer fails the call.
      signal.removeEventListener('abort', onAbort);
      const kept: Buffer[] = [];
      let received = 0;
      const done = () =>
        settle(() => {
          // stream: true leaves out a trailing, incomplete UTF-8 sequence instead of writing U+FFFD for it.
          const snippet = new TextDecoder().decode(Buffer.concat(kept), { stream: true });
          resolve({ status: res.statusCode ?? 0, headers: res.headers, snippet });
          if (!res.complete) request.destroy();
        });
      res.on('data', (chunk: Buffer) => {
        if (received < SNIPPET_BYTES) kept.push(chunk.subarray(0, SNIPPET_BYTES - received));
        received += chunk.length;
        if (received > MAX_RESPONSE_BYTES) done();
      });
      res.on('end', done);
      res.on('error', done);
      res.on('close', done);
      signal.addEventListener('abort', done, { once: true });
    });
    request.on('error', (err) => settle(() => reject(err)));

    if (signal.aborted) return onAbort();
    signal.addEventListener('abort', onAbort, { once: true });
    request.end(p.body);
  });
}

/** Retry-After is the receiver's word, so it is capped: a year-long one must not park the step that long. */
const MAX_RETRY_AFTER_MS = 3_600_000;

/** Retry-After (RFC 9110 § 10.2.3): seconds or an HTTP date. */
function retryAfterMs(value: string | undefined, nowMs: number): number | undefined {
  if (!value) return undefined;
  const ms = /^\d+$/.test(value.trim()) ? Number(value.trim()) * 1000 : Date.parse(value) - nowMs;
  return Number.isNaN(ms) ? undefined : Math.min(MAX_RETRY_AFTER_MS, Math.max(0, ms));
}

/** 408 and 425 ask to repeat the request, 429 to slow down, 5xx is the receiver's own trouble: all worth a retry. */
const isRetryableStatus = (status: number) => status === 408 || status === 425 || status === 429 || (status >= 500 && status <= 599);

/**
 * POSTs the signed payload. Resolves on a 2xx answer; throws a WebhookError otherwise, `retryable` telling the
 * activity whether another attempt can succeed.
 */
export async function callWebhook(req: WebhookRequest): Promise<WebhookResult> {
  const started = performance.now();
  const p = prepare(req);
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(new WebhookError(`The receiver did not answer within ${p.timeoutMs} ms`, 'TIMEOUT', true)), p.timeoutMs);
  let answer: Answer;
  try {
    const addresses = await resolveTarget(p.host, req, controller.signal);
    answer = await post(p, addresses, controller.signal, req.keepAlive);
  } catch (err) {
    if (err instanceof WebhookError) throw err;
    const e = err as NodeJS.ErrnoException;
    throw new WebhookError(`Could not reach the receiver: ${e.code ? `${e.code} ` : ''}${e.message}`, 'NETWORK', true, { cause: err });
  } finally {
    clearTimeout(timer);
  }

  const { status, snippet } = answer;
  const durationMs = Math.round(performance.now() - started);
  if (status >= 200 && status <= 299) return { status, durationMs, responseSnippet: snippet };
  if (status >= 300 && status <= 399) {
    const location = answer.headers.location ? ` to ${answer.headers.location.slice(0, 200)}` : '';
    throw new WebhookError(`The receiver answered ${status} (a redirect${location}); redirects are not followed: use the final URL`, 'HTTP_STATUS', false, {
      status,
      responseSnippet: snippet,
    });
  }
  const retryable = isRetryableStatus(status);
  throw new WebhookError(`The receiver answered ${status}`, 'HTTP_STATUS', retryable, {
    status,
    responseSnippet: snippet,
    retryAfterMs: retryable ? retryAfterMs(answer.headers['retry-after'], (req.now ?? Date.now)()) : undefined,
  });
}
