import http from 'node:http';
import { isIP } from 'node:net';
import dns2 from 'dns2';
import { freePort } from '../../scripts/services/process';

const { Packet } = dns2;
/** RFC 1035 § 4.1.1 response codes (dns2 has them at run time, its typings do not). */
const RCODE = { FORMERR: 1, SERVFAIL: 2, NXDOMAIN: 3 } as const;

/** An MX record as published: `exchange` "." (or "") with priority 0 is a null MX (RFC 7505). */
interface MxRecord {
  exchange: string;
  priority: number;
}

/** The records of one name, per type; a type with no records answers NODATA. */
export interface ZoneRecords {
  txt?: string[];
  mx?: MxRecord[];
  a?: string[];
  aaaa?: string[];
  ns?: string[];
}

/** What the server does for one name: answer with its records (NODATA for a type it has none of), fail, or never answer. */
type ZoneEntry = ZoneRecords | { mode: 'servfail' | 'drop' };

/** TXT character-strings are at most 255 bytes: longer values (DKIM keys) are split, as a DNS host would. */
function chunks(value: string): string[] {
  const out: string[] = [];
  for (let i = 0; i < value.length; i += 255) out.push(value.slice(i, i + 255));
  return out.length ? out : [''];
}

const normalize = (name: string) => name.toLowerCase().replace(/\.$/, '');

const isHostName = (v: unknown): v is string => typeof v === 'string' && /^(?:\.|[A-Za-z0-9_-]{1,63}(?:\.[A-Za-z0-9_-]{1,63})*\.?)$/.test(v);
const isStringList = (v: unknown, ok: (s: string) => boolean): v is string[] => Array.isArray(v) && v.every((s) => typeof s === 'string' && ok(s));

/** Validates a PUT body; undefined when it is neither a record set nor a failure mode. */
function parseEntry(body: Record<string, unknown>): ZoneEntry | undefined {
  if (body.mode === 'servfail' || body.mode === 'drop') return { mode: body.mode };
  const types = ['txt', 'mx', 'a', 'aaaa', 'ns'] as const;
  if (!types.some((t) => t in body) || Object.keys(body).some((k) => !(types as readonly string[]).includes(k))) return undefined;
  const entry: ZoneRecords = {};
  if (body.txt !== undefined) {
    if (!isStringList(body.txt, () => true)) return undefined;
    entry.txt = body.txt;
  }
  if (body.a !== undefined) {
    if (!isStringList(body.a, (v) => isIP(v) === 4)) return undefined;
    entry.a = body.a;
  }
  if (body.aaaa !== undefined) {
    if (!isStringList(body.aaaa, (v) => isIP(v) === 6)) return undefined;
    entry.aaaa = body.aaaa;
  }
  if (body.ns !== undefined) {
    if (!isStringList(body.ns, isHostName)) return undefined;
    entry.ns = body.ns;
  }
  if (body.mx !== undefined) {
    if (!Array.isArray(body.mx)) return undefined;
    const mx: MxRecord[] = [];
    for (const r of body.mx as { exchange?: unknown; priority?: unknown }[]) {
      const { exchange, priority } = r ?? {};
      if (!(isHostName(exchange) || exchange === '') || !Number.isInteger(priority) || (priority as number) < 0 || (priority as number) > 65535) return undefined;
      mx.push({ exchange: exchange as string, priority: priority as number });
    }
    entry.mx = mx;
  }
  return entry;
}

/** The records of `entry` that answer `question` (every type for ANY); none means NODATA. */
function answers(question: dns2.Packet.Question, entry: ZoneRecords): dns2.Packet.Resource[] {
  const { TYPE, CLASS } = Packet;
  const base = { name: question.name, class: CLASS.IN, ttl: 0 };
  const wants = (type: number) => question.type === type || question.type === TYPE.ANY;
  const out: Partial<dns2.Packet.Resource>[] = [];
  if (wants(TYPE.TXT)) for (const value of entry.txt ?? []) out.push({ ...base, type: TYPE.TXT, data: chunks(value) });
  if (wants(TYPE.MX)) for (const r of entry.mx ?? []) out.push({ ...base, type: TYPE.MX, exchange: r.exchange === '.' ? '' : r.exchange, priority: r.priority });
  if (wants(TYPE.A)) for (const address of entry.a ?? []) out.push({ ...base, type: TYPE.A, address });
  if (wants(TYPE.AAAA)) for (const address of entry.aaaa ?? []) out.push({ ...base, type: TYPE.AAAA, address });
  if (wants(TYPE.NS)) for (const ns of entry.ns ?? []) out.push({ ...base, type: TYPE.NS, ns });
  return out as dns2.Packet.Resource[];
}

/**
 * The authoritative DNS server of the test stack, on loopback (UDP and TCP on one port, so truncated answers can be
 * retried over TCP). It serves an in-memory zone that the test process changes over HTTP (the test files run in other
 * module registries than the global setup, so they cannot share memory with it):
 *   PUT    /zone/<name>  { "txt"?: [...], "mx"?: [{ "exchange", "priority" }], "a"?: [...], "aaaa"?: [...], "ns"?: [...] }
 *                        (at least one type; replaces the name's records) | { "mode": "servfail" | "drop" }
 *   DELETE /zone/<name>  the name no longer exists (NXDOMAIN)
 *   GET    /zone         the whole zone
 * A name in the zone answers its records of the asked type, or NODATA when it has none of that type. A name that is
 * not in the zone but has names under it (an empty non-terminal, e.g. `example.test` when only `_dmarc.example.test`
 * is published) answers NODATA too, as real servers do (RFC 8020). Other names answer NXDOMAIN.
 */
export async function startDnsServer(): Promise<{ server: string; controlUrl: string; stop(): Promise<void> }> {
  const zone = new Map<string, ZoneEntry>();

  const existsBelow = (name: string) => {
    for (const key of zone.keys()) if (key.endsWith(`.${name}`)) return true;
    return false;
  };

  const handle: dns2.DnsHandler = (request, send) => {
    const response = Packet.createResponseFromRequest(request);
    response.header.aa = 1;
    const question = request.questions[0];
    const name = question ? normalize(question.name) : '';
    const entry = question ? zone.get(name) : undefined;
    if (entry && 'mode' in entry && entry.mode === 'drop') return;
    if (!question) response.header.rcode = RCODE.FORMERR;
    else if (!entry) {
      if (!existsBelow(name)) response.header.rcode = RCODE.NXDOMAIN;
    } else if ('mode' in entry) response.header.rcode = RCODE.SERVFAIL;
    else response.answers.push(...answers(question, entry));
    send(response).catch(() => undefined);
  };

  // UDP and TCP on the same port: take a free TCP port, and try again with another if its UDP twin is taken.
  const listen = async (port: number): Promise<dns2.DnsServer> => {
    const server = dns2.createServer({ udp: true, tcp: true, handle });
    server.on('requestError', () => undefined);
    const failed = new Promise<Error>((resolve) => server.once('error', (err: Error) => resolve(err)));
    const result = await Promise.race([server.listen({ udp: { port, address: '127.0.0.1' }, tcp: { port, address: '127.0.0.1' } }), failed]);
    if (!(result instanceof Error)) return server;
    for (const s of Object.values((server as unknown as { servers: Record<string, { close(): void }> }).servers)) {
      try {
        s.close();
      } catch {
        // that one was not listening
      }
    }
    throw result;
  };
  let port = 0;
  let dns: dns2.DnsServer | undefined;
  for (let attempt = 1; !dns; attempt++) {
    port = await freePort();
    try {
      dns = await listen(port);
    } catch (err) {
      if (attempt >= 10) throw err;
    }
  }
  const dnsServer = dns;

  const web = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const name = url.pathname.startsWith('/zone/') ? normalize(decodeURIComponent(url.pathname.slice('/zone/'.length))) : undefined;
    const reply = (status: number, body?: unknown) => {
      res.statusCode = status;
      if (body !== undefined) res.setHeader('content-type', 'application/json');
      res.end(body === undefined ? undefined : JSON.stringify(body));
    };
    if (req.method === 'GET' && url.pathname === '/zone') return reply(200, Object.fromEntries(zone));
    if (!name) return reply(404);
    if (req.method === 'DELETE') {
      zone.delete(name);
      return reply(204);
    }
    if (req.method !== 'PUT') return reply(405);
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => {
      try {
        const body: unknown = JSON.parse(Buffer.concat(parts).toString('utf8'));
        const entry = body && typeof body === 'object' && !Array.isArray(body) ? parseEntry(body as Record<string, unknown>) : undefined;
        if (!entry) {
          return reply(400, {
            error: 'expected { txt?, mx?: [{ exchange, priority }], a?, aaaa?, ns? } (at least one) or { mode: "servfail" | "drop" }',
          });
        }
        zone.set(name, entry);
        reply(204);
      } catch {
        reply(400, { error: 'invalid JSON' });
      }
    });
  });
  await new Promise<void>((resolve) => web.listen(0, '127.0.0.1', resolve));
  const webPort = (web.address() as { port: number }).port;

  return {
    server: `127.0.0.1:${port}`,
    controlUrl: `http://127.0.0.1:${webPort}`,
    stop: async () => {
      web.closeAllConnections();
      await new Promise<void>((r) => web.close(() => r()));
      await dnsServer.close();
    },
  };
}
