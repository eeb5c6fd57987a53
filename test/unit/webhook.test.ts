import { createHmac } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  callWebhook,
  MAX_WEBHOOK_BODY_BYTES,
  refusedAddressReason,
  signWebhook,
  verifyWebhookSignature,
  WebhookError,
  webhookHeaderProblems,
  type WebhookErrorCode,
  type WebhookRequest,
} from '../../domain/automations/webhook';

// A real receiver on 127.0.0.1 (no mock of http): each test sets what it answers and reads what it was sent. The
// signature is re-computed here from the documented scheme, independently of the code under test.

interface Received {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
  /** The client's address and port: one per connection. */
  remote: string;
}
type Handler = (req: http.IncomingMessage, res: http.ServerResponse, body: Buffer) => void;

const SECRET = 'whsec_unit-test-0123456789';
let received: Received[] = [];
let handler: Handler = (_req, res) => res.end('ok');
let server: http.Server;
let base: string;
let port: number;

beforeAll(async () => {
  server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      received.push({ method: req.method!, url: req.url!, headers: req.headers, body, remote: `${req.socket.remoteAddress}:${req.socket.remotePort}` });
      handler(req, res, body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
  base = `http://127.0.0.1:${port}`;
});
afterEach(() => {
  server.closeAllConnections(); // the receivers that never answer
  received = [];
  handler = (_req, res) => res.end('ok');
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

const request = (over: Partial<WebhookRequest> = {}): WebhookRequest => ({
  url: `${base}/hooks/mailwright?src=test`,
  secret: SECRET,
  payload: { type: 'automation.webhook', contact: { email: 'ada@example.com' }, n: 1 },
  idempotencyKey: 'wh_01J0000000000000000000000',
  allowPrivateNetworks: true,
  timeoutMs: 5_000,
  ...over,
});

async function failure(p: Promise<unknown>): Promise<WebhookError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(err instanceof WebhookError)) throw new Error(`expected a WebhookError, got ${String(err)}`);
  return err;
}
async function expectFailure(p: Promise<unknown>, code: WebhookErrorCode, retryable: boolean): Promise<WebhookError> {
  const err = await failure(p);
  expect([err.code, err.retryable]).toEqual([code, retryable]);
  return err;
}

describe('signature', () => {
  const body = '{"hello":"world"}';
  const t = 1_767_225_600; // 2026-01-01T00:00:00Z
  const at = t * 1000;

  test('is HMAC-SHA256 in hex over "<t>.<raw body>", written as t=<t>,v1=<hex>', () => {
    const hex = createHmac('sha256', SECRET).update(`${t}.${body}`).digest('hex');
    expect(signWebhook(SECRET, body, t)).toBe(`t=${t},v1=${hex}`);
    expect(signWebhook(SECRET, Buffer.from(body), t)).toBe(`t=${t},v1=${hex}`);
  });

  test('verifies with the secret, within the tolerance, and from a Buffer as received', () => {
    const header = signWebhook(SECRET, body, t);
    expect(verifyWebhookSignature(SECRET, header, body, 300, at)).toBe(true);
    expect(verifyWebhookSignature(SECRET, header, Buffer.from(body), 300, at + 299_000)).toBe(true);
    expect(verifyWebhookSignature(SECRET, header, body, 300, at - 299_000)).toBe(true);
  });

  test('fails for a tampered body, another secret, or a changed timestamp', () => {
    const header = signWebhook(SECRET, body, t);
    expect(verifyWebhookSignature(SECRET, header, '{"hello":"World"}', 300, at)).toBe(false);
    expect(verifyWebhookSignature(SECRET, header, `${body} `, 300, at)).toBe(false);
    expect(verifyWebhookSignature('another-secret', header, body, 300, at)).toBe(false);
    expect(verifyWebhookSignature(SECRET, header.replace(`t=${t}`, `t=${t + 1}`), body, 300, at)).toBe(false);
  });

  test('fails when stale or too far in the future (replays)', () => {
    const header = signWebhook(SECRET, body, t);
    expect(verifyWebhookSignature(SECRET, header, body, 300, at + 301_000)).toBe(false);
    expect(verifyWebhookSignature(SECRET, header, body, 300, at - 301_000)).toBe(false);
    expect(verifyWebhookSignature(SECRET, header, body, 3600, at + 3_000_000)).toBe(true);
  });

  test('fails for missing or malformed headers', () => {
    const hex = signWebhook(SECRET, body, t).split('v1=')[1]!;
    for (const header of [undefined, '', `v1=${hex}`, `t=${t}`, `t=abc,v1=${hex}`, `t=${t},t=${t},v1=${hex}`, `t=${t},v1=${hex.slice(2)}`, `t=${t},v0=${hex}`]) {
      expect(verifyWebhookSignature(SECRET, header, body, 300, at)).toBe(false);
    }
  });

  test('accepts any matching v1 among several (secret rotation) and ignores unknown keys', () => {
    const good = signWebhook(SECRET, body, t).split('v1=')[1]!;
    const old = signWebhook('old-secret', body, t).split('v1=')[1]!;
    expect(verifyWebhookSignature(SECRET, `t=${t},v1=${old},v1=${good},v2=whatever`, body, 300, at)).toBe(true);
    expect(verifyWebhookSignature(SECRET, ` t=${t} , v1=${good.toUpperCase()}`, body, 300, at)).toBe(true);
  });
});

describe('delivery', () => {
  test('POSTs the JSON payload with the documented headers, and the receiver verifies the signature', async () => {
    handler = (_req, res) => res.writeHead(202, { 'content-type': 'application/json' }).end('{"accepted":true}');
    const now = Date.now();
    const req = request({ headers: { Authorization: 'Bearer abc', 'X-Tenant': 'acme' }, now: () => now });
    const result = await callWebhook(req);

    expect(result.status).toBe(202);
    expect(result.responseSnippet).toBe('{"accepted":true}');
    expect(result.durationMs).toBeGreaterThanOrEqual(0);
    expect(received).toHaveLength(1);
    const [got] = received;
    expect(got!.method).toBe('POST');
    expect(got!.url).toBe('/hooks/mailwright?src=test');
    expect(JSON.parse(got!.body.toString())).toEqual(req.payload);
    const h = got!.headers;
    expect(h['content-type']).toBe('application/json');
    expect(h['content-length']).toBe(String(got!.body.length));
    expect(h['user-agent']).toBe('Mailwright-Webhooks/1');
    expect(h['mailwright-webhook-id']).toBe(req.idempotencyKey);
    expect(h['mailwright-timestamp']).toBe(String(Math.floor(now / 1000)));
    expect(h['authorization']).toBe('Bearer abc');
    expect(h['x-tenant']).toBe('acme');
    const signature = h['mailwright-signature'] as string;
    expect(signature).toMatch(new RegExp(`^t=${h['mailwright-timestamp']},v1=[0-9a-f]{64}$`));
    expect(verifyWebhookSignature(SECRET, signature, got!.body)).toBe(true);
    expect(verifyWebhookSignature('wrong', signature, got!.body)).toBe(false);
  });

  test('the idempotency key is the same on every attempt; the signature is made anew for each', async () => {
    await callWebhook(request({ now: () => 1_767_225_600_000 }));
    await callWebhook(request({ now: () => 1_767_225_660_000 }));
    const [a, b] = received.map((r) => r.headers);
    expect(a!['mailwright-webhook-id']).toBe(b!['mailwright-webhook-id']);
    expect(a!['mailwright-signature']).not.toBe(b!['mailwright-signature']);
  });

  test('the snippet is the first 1 KB of the body, without a character cut in half', async () => {
    handler = (_req, res) => res.end(`${'a'.repeat(1023)}é and more`);
    const { responseSnippet } = await callWebhook(request());
    expect(responseSnippet).toBe('a'.repeat(1023));
  });

  test('a receiver streaming a huge body is cut off after 64 KB, and the 2xx still counts', async () => {
    let written = 0;
    let closed = false;
    handler = (_req, res) => {
      res.writeHead(200);
      res.on('close', () => (closed = true));
      const chunk = Buffer.alloc(16 * 1024, 'x');
      const pump = () => {
        while (!closed && written < 50 * 1024 * 1024 && res.write(chunk)) written += chunk.length;
        if (!closed && written < 50 * 1024 * 1024) res.once('drain', pump);
      };
      pump();
    };
    const result = await callWebhook(request());
    expect(result.status).toBe(200);
    expect(result.responseSnippet).toBe('x'.repeat(1024));
    await new Promise((r) => setTimeout(r, 50));
    expect(closed).toBe(true);
    expect(written).toBeLessThan(50 * 1024 * 1024);
  });

  test('the host is connected to through the checked addresses, without a second DNS query', async () => {
    // .test never resolves in real DNS: reaching the receiver proves the socket used the resolver's answer.
    const resolve = jest.fn(async () => [{ address: '127.0.0.1', family: 4 }]);
    const result = await callWebhook(request({ url: `http://receiver.test:${port}/x`, resolve }));
    expect(result.status).toBe(200);
    expect(resolve).toHaveBeenCalledTimes(1);
    expect(resolve).toHaveBeenCalledWith('receiver.test');
    expect(received[0]!.headers.host).toBe(`receiver.test:${port}`);
  });
});

describe('kept connections (keepAlive: webhooks out)', () => {
  const sockets = () => new Set(received.map((r) => r.remote)).size;

  test('calls that keep their connection reuse one socket; calls that do not open one each', async () => {
    for (let i = 0; i < 3; i++) expect((await callWebhook(request({ keepAlive: true }))).status).toBe(200);
    expect(sockets()).toBe(1);
    received = [];
    for (let i = 0; i < 3; i++) expect((await callWebhook(request())).status).toBe(200);
    expect(sockets()).toBe(3);
  });

  test('a kept socket serves only the same checked addresses: a different DNS answer for the host gets a connection of its own', async () => {
    // The socket connects to the first address of the answer: the receiver's, in both answers.
    const via = (...addresses: string[]) => request({ url: `http://kept.test:${port}/x`, keepAlive: true, resolve: async () => addresses.map((address) => ({ address, family: 4 })) });
    await callWebhook(via('127.0.0.1'));
    await callWebhook(via('127.0.0.1'));
    await callWebhook(via('127.0.0.1', '127.0.0.3'));
    expect(received).toHaveLength(3);
    expect(sockets()).toBe(2);
  });
});

describe('failures and retryability', () => {
  test.each([
    [500, true],
    [502, true],
    [503, true],
    [408, true],
    [425, true],
    [429, true],
    [400, false],
    [401, false],
    [404, false],
    [410, false],
    [422, false],
  ])('%i: retryable %s, with the status and the snippet', async (status, retryable) => {
    handler = (_req, res) => res.writeHead(status).end(`answer ${status}`);
    const err = await expectFailure(callWebhook(request()), 'HTTP_STATUS', retryable);
    expect(err.status).toBe(status);
    expect(err.responseSnippet).toBe(`answer ${status}`);
    expect(err.message).toContain(String(status));
  });

  test('Retry-After of a 429 or 503 is passed on, in seconds or as a date', async () => {
    handler = (_req, res) => res.writeHead(429, { 'retry-after': '7' }).end();
    expect((await failure(callWebhook(request()))).retryAfterMs).toBe(7000);
    const now = Date.parse('2026-01-01T00:00:00Z');
    handler = (_req, res) => res.writeHead(503, { 'retry-after': 'Thu, 01 Jan 2026 00:00:30 GMT' }).end();
    expect((await failure(callWebhook(request({ now: () => now })))).retryAfterMs).toBe(30_000);
    handler = (_req, res) => res.writeHead(429, { 'retry-after': '999999999' }).end();
    expect((await failure(callWebhook(request()))).retryAfterMs).toBe(3_600_000);
    handler = (_req, res) => res.writeHead(404, { 'retry-after': '7' }).end();
    expect((await failure(callWebhook(request()))).retryAfterMs).toBeUndefined();
  });

  test('a redirect is not followed and fails for good', async () => {
    handler = (_req, res) => res.writeHead(302, { location: `${base}/elsewhere` }).end();
    const err = await expectFailure(callWebhook(request()), 'HTTP_STATUS', false);
    expect(err.status).toBe(302);
    expect(err.message).toContain('/elsewhere');
    expect(received.map((r) => r.url)).toEqual(['/hooks/mailwright?src=test']);
  });

  test('no answer within timeoutMs: retryable timeout', async () => {
    handler = () => undefined;
    const started = Date.now();
    const err = await expectFailure(callWebhook(request({ timeoutMs: 300 })), 'TIMEOUT', true);
    expect(err.message).toContain('300 ms');
    expect(Date.now() - started).toBeLessThan(3000);
  });

  test('the timeout covers DNS too', async () => {
    const resolve = () => new Promise<never>(() => undefined);
    await expectFailure(callWebhook(request({ url: 'http://slow-dns.test/', resolve, timeoutMs: 200 })), 'TIMEOUT', true);
  });

  test('a refused connection or a failed DNS lookup: retryable network error', async () => {
    const closed = http.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const closedPort = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const refused = await expectFailure(callWebhook(request({ url: `http://127.0.0.1:${closedPort}/` })), 'NETWORK', true);
    expect(refused.message).toContain('ECONNREFUSED');

    const nxdomain = () => Promise.reject(Object.assign(new Error('getaddrinfo ENOTFOUND nope.test'), { code: 'ENOTFOUND' }));
    const dns = await expectFailure(callWebhook(request({ url: 'http://nope.test/', resolve: nxdomain })), 'NETWORK', true);
    expect(dns.message).toContain('ENOTFOUND');
    await expectFailure(callWebhook(request({ url: 'http://empty.test/', resolve: async () => [] })), 'NETWORK', true);
  });
});

describe('SSRF guard', () => {
  const guarded = (url: string, over: Partial<WebhookRequest> = {}) => callWebhook(request({ url, allowPrivateNetworks: false, ...over }));

  test.each([
    ['127.0.0.1', () => `${base}/`],
    ['localhost', () => `http://localhost:${port}/`],
    ['LOCALHOST. (trailing dot)', () => `http://LOCALHOST.:${port}/`],
    ['*.localhost', () => `http://api.localhost:${port}/`],
    ['::1', () => `http://[::1]:${port}/`],
    ['IPv4-mapped ::ffff:127.0.0.1', () => `http://[::ffff:127.0.0.1]:${port}/`],
    ['IPv4-compatible ::127.0.0.1', () => `http://[::127.0.0.1]:${port}/`],
    ['127.0.0.1 written as 0x7f.1', () => `http://0x7f.1:${port}/`],
    ['cloud metadata 169.254.169.254', () => 'http://169.254.169.254/latest/meta-data/'],
    ['10.x', () => 'http://10.1.2.3/'],
    ['172.16/12', () => 'https://172.20.0.1/'],
    ['192.168/16', () => 'http://192.168.1.1/'],
    ['carrier-grade NAT', () => 'http://100.64.0.1/'],
    ['0.0.0.0', () => `http://0.0.0.0:${port}/`],
    ['unique-local fd00::/8', () => 'http://[fd12:3456::1]/'],
    ['link-local fe80::/10', () => 'http://[fe80::1]/'],
  ])('%s is refused for good, before any connection or DNS query', async (_name, url) => {
    const resolve = jest.fn(async () => [{ address: '93.184.215.14', family: 4 }]);
    const err = await expectFailure(guarded(url(), { resolve }), 'ADDRESS_REFUSED', false);
    expect(err.message).toMatch(/refused/);
    expect(resolve).not.toHaveBeenCalled();
    expect(received).toHaveLength(0);
  });

  test('a host name that resolves to loopback is refused (checked on the DNS answer, not the name)', async () => {
    const resolve = jest.fn(async () => [{ address: '127.0.0.1', family: 4 }]);
    const err = await expectFailure(guarded(`http://innocent.example:${port}/`, { resolve }), 'ADDRESS_REFUSED', false);
    expect(err.message).toContain('127.0.0.1');
    expect(received).toHaveLength(0);
  });

  test('every answer is checked: one private address among public ones is enough to refuse', async () => {
    const resolve = async () => [
      { address: '93.184.215.14', family: 4 },
      { address: '2606:2800:21f:cb07:6820:80da:af6b:8b2c', family: 6 },
      { address: '::ffff:169.254.169.254', family: 6 },
    ];
    const err = await expectFailure(guarded('https://mixed.example/', { resolve }), 'ADDRESS_REFUSED', false);
    expect(err.message).toContain('169.254.169.254');
  });

  test('allowPrivateNetworks lets loopback through (self-hosted receivers)', async () => {
    expect((await callWebhook(request({ url: `http://localhost:${port}/`, allowPrivateNetworks: true }))).status).toBe(200);
  });

  test('allowedNetworks lets those ranges through and keeps refusing the rest', async () => {
    expect((await guarded(`http://127.0.0.1:${port}/`, { allowedNetworks: ['127.0.0.0/8'] })).status).toBe(200);
    const resolve: WebhookRequest['resolve'] = async () => [{ address: '127.0.0.1', family: 4 }];
    expect((await guarded(`http://receiver.example:${port}/`, { allowedNetworks: ['127.0.0.0/8'], resolve })).status).toBe(200);
    await expectFailure(guarded('http://169.254.169.254/', { allowedNetworks: ['127.0.0.0/8'] }), 'ADDRESS_REFUSED', false);
    await expectFailure(guarded('http://10.1.2.3/', { allowedNetworks: ['10.9.0.0/16', 'fd00::/8'] }), 'ADDRESS_REFUSED', false);
    await expectFailure(guarded(`http://[::ffff:127.0.0.1]:${port}/`, { allowedNetworks: ['10.0.0.0/8'] }), 'ADDRESS_REFUSED', false);
  });

  test.each([
    ['127.0.0.1', 'loopback'],
    ['::1', 'loopback'],
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:10.0.0.1', 'private'],
    ['10.0.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['192.168.0.1', 'private'],
    ['169.254.169.254', 'link-local'],
    ['fe80::abcd', 'link-local'],
    ['100.64.0.1', 'carrier-grade NAT'],
    ['100.127.255.254', 'carrier-grade NAT'],
    ['fc00::1', 'unique-local'],
    ['fd00:ec2::254', 'unique-local'],
    ['0.0.0.0', 'unspecified'],
    ['::', 'unspecified'],
    ['224.0.0.1', 'multicast'],
    ['ff02::1', 'multicast'],
    ['255.255.255.255', 'broadcast'],
    ['192.0.2.1', 'reserved'],
    ['::7f00:1', 'IPv4-compatible'], // how the URL parser writes [::127.0.0.1]
    ['64:ff9b::7f00:1', 'NAT64 of 127.0.0.1'],
    ['64:ff9b:1::a00:1', 'RFC 6052'],
    ['2002:7f00:1::1', '6to4'],
    ['not-an-ip', 'not an IP address'],
  ])('refusedAddressReason(%s) names %s', (address, why) => {
    expect(refusedAddressReason(address)).toContain(why);
  });

  test.each(['93.184.215.14', '8.8.8.8', '100.63.255.255', '100.128.0.0', '172.32.0.1', '2606:4700:4700::1111', '::ffff:8.8.8.8', '64:ff9b::808:808'])(
    'refusedAddressReason(%s) is null: public unicast',
    (address) => expect(refusedAddressReason(address)).toBeNull(),
  );
});

describe('invalid requests fail for good, before any network', () => {
  test.each([
    ['not a URL', 'not a url'],
    ['ftp', 'ftp://example.com/hook'],
    ['file', 'file:///etc/passwd'],
    ['javascript', 'javascript:alert(1)'],
    ['credentials', 'https://user:pass@example.com/hook'],
    ['user only', 'https://user@example.com/hook'],
  ])('URL: %s', async (_name, url) => {
    const resolve = jest.fn(async () => [{ address: '93.184.215.14', family: 4 }]);
    await expectFailure(callWebhook(request({ url, allowPrivateNetworks: false, resolve })), 'INVALID_REQUEST', false);
    expect(resolve).not.toHaveBeenCalled();
  });

  test('a payload over 256 KB serialized is refused; one just under is sent', async () => {
    const overhead = JSON.stringify({ s: '' }).length;
    const err = await expectFailure(callWebhook(request({ payload: { s: 'x'.repeat(MAX_WEBHOOK_BODY_BYTES - overhead + 1) } })), 'INVALID_REQUEST', false);
    expect(err.message).toContain('limit');
    // Multi-byte characters count as bytes, not characters.
    await expectFailure(callWebhook(request({ payload: { s: 'é'.repeat(MAX_WEBHOOK_BODY_BYTES / 2) } })), 'INVALID_REQUEST', false);
    expect(received).toHaveLength(0);
    expect((await callWebhook(request({ payload: { s: 'x'.repeat(MAX_WEBHOOK_BODY_BYTES - overhead) } }))).status).toBe(200);
  });

  test('a payload that is not JSON is refused', async () => {
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    for (const payload of [undefined, 10n, cyclic, () => 1]) {
      await expectFailure(callWebhook(request({ payload })), 'INVALID_REQUEST', false);
    }
    expect(received).toHaveLength(0);
  });

  test('empty secret, bad idempotency key or timeout are refused', async () => {
    await expectFailure(callWebhook(request({ secret: '' })), 'INVALID_REQUEST', false);
    await expectFailure(callWebhook(request({ idempotencyKey: '' })), 'INVALID_REQUEST', false);
    await expectFailure(callWebhook(request({ idempotencyKey: 'a b' })), 'INVALID_REQUEST', false);
    await expectFailure(callWebhook(request({ idempotencyKey: 'k\r\nX-Evil: 1' })), 'INVALID_REQUEST', false);
    await expectFailure(callWebhook(request({ timeoutMs: 0 })), 'INVALID_REQUEST', false);
    await expectFailure(callWebhook(request({ timeoutMs: Number.NaN })), 'INVALID_REQUEST', false);
    expect(received).toHaveLength(0);
  });

  test.each([
    ['Host', 'evil.example'],
    ['host', 'evil.example'],
    ['Content-Length', '1'],
    ['Content-Type', 'text/plain'],
    ['Transfer-Encoding', 'chunked'],
    ['Connection', 'close'],
    ['Keep-Alive', 'timeout=5'],
    ['Upgrade', 'websocket'],
    ['TE', 'trailers'],
    ['Proxy-Authorization', 'Basic eA=='],
    ['Expect', '100-continue'],
    ['User-Agent', 'curl'],
    ['Mailwright-Signature', 't=1,v1=00'],
    ['mailwright-webhook-id', 'other'],
    ['Mailwright-Timestamp', '1'],
    ['Mailwright-Anything', 'x'],
    ['X Bad', 'space in the name'],
    ['X-Bad:', 'colon in the name'],
    ['', 'empty name'],
    ['X-Injected', 'a\r\nX-Evil: 1'],
    ['X-Newline', 'a\nb'],
    ['X-Nul', 'a\u0000b'],
    ['X-Unicode', 'café'],
    ['X-Long', 'x'.repeat(4097)],
  ])('custom header %j is refused (%#)', async (name, value) => {
    expect(webhookHeaderProblems({ [name]: value })).toHaveLength(1);
    const err = await expectFailure(callWebhook(request({ headers: { [name]: value } })), 'INVALID_REQUEST', false);
    expect(err.message).toContain('custom headers');
    expect(received).toHaveLength(0);
  });

  test('header rules: the same name twice, too many headers, and what is fine', () => {
    expect(webhookHeaderProblems({ 'X-A': '1', 'x-a': '2' })).toEqual([{ header: 'x-a', message: expect.stringContaining('twice') }]);
    const many = Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`X-H${i}`, 'v']));
    expect(webhookHeaderProblems(many)).toEqual([{ header: '', message: expect.stringContaining('20') }]);
    expect(webhookHeaderProblems({ Authorization: 'Bearer t0k3n', 'X-Api-Key': 'k', 'X-Empty': '', 'X-Tab': 'a\tb', Accept: '*/*' })).toEqual([]);
  });
});
