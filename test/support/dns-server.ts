import http from 'node:http';
import dns2 from 'dns2';
import { freePort } from '../../scripts/services/process';

const { Packet } = dns2;
/** RFC 1035 § 4.1.1 response codes (dns2 has them at run time, its typings do not). */
const RCODE = { FORMERR: 1, SERVFAIL: 2, NXDOMAIN: 3 } as const;

/** What the server does for one name: answer with these TXT records (none: NODATA), fail, or never answer. */
export type ZoneEntry = { txt: string[] } | { mode: 'servfail' | 'drop' };

/** TXT character-strings are at most 255 bytes: longer values (DKIM keys) are split, as a DNS host would. */
function chunks(value: string): string[] {
  const out: string[] = [];
  for (let i = 0; i < value.length; i += 255) out.push(value.slice(i, i + 255));
  return out.length ? out : [''];
}

const normalize = (name: string) => name.toLowerCase().replace(/\.$/, '');

/**
 * The authoritative DNS server of the test stack, on loopback (UDP and TCP on one port, so truncated answers can be
 * retried over TCP). It serves an in-memory zone that the test process changes over HTTP (the test files run in other
 * module registries than the global setup, so they cannot share memory with it):
 *   PUT    /zone/<name>  { "txt": [...] } | { "mode": "servfail" | "drop" }
 *   DELETE /zone/<name>  the name no longer exists (NXDOMAIN)
 *   GET    /zone         the whole zone
 * Unknown names answer NXDOMAIN.
 */
export async function startDnsServer(): Promise<{ server: string; controlUrl: string; stop(): Promise<void> }> {
  const zone = new Map<string, ZoneEntry>();

  const handle: dns2.DnsHandler = (request, send) => {
    const response = Packet.createResponseFromRequest(request);
    response.header.aa = 1;
    const question = request.questions[0];
    const entry = question ? zone.get(normalize(question.name)) : undefined;
    if (entry && 'mode' in entry && entry.mode === 'drop') return;
    if (!question) response.header.rcode = RCODE.FORMERR;
    else if (!entry) response.header.rcode = RCODE.NXDOMAIN;
    else if ('mode' in entry) response.header.rcode = RCODE.SERVFAIL;
    else if (question.type === Packet.TYPE.TXT || question.type === Packet.TYPE.ANY) {
      for (const value of entry.txt) {
        response.answers.push({ name: question.name, type: Packet.TYPE.TXT, class: Packet.CLASS.IN, ttl: 0, data: chunks(value) } as dns2.Packet.Resource);
      }
    }
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
        const body = JSON.parse(Buffer.concat(parts).toString('utf8')) as Partial<{ txt: unknown; mode: unknown }>;
        if (Array.isArray(body.txt) && body.txt.every((v) => typeof v === 'string')) zone.set(name, { txt: body.txt as string[] });
        else if (body.mode === 'servfail' || body.mode === 'drop') zone.set(name, { mode: body.mode });
        else return reply(400, { error: 'expected { txt: string[] } or { mode: "servfail" | "drop" }' });
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
