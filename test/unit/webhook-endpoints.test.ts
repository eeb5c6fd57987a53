import { createHmac } from 'node:crypto';
import { buildRoutes } from '../../api/app';
import type { ApiDeps } from '../../api/context';
import { openApiDocument } from '../../api/system/routes';
import { loadConfig } from '../../domain/config';
import { endpointUrlProblem } from '../../domain/webhook-endpoints/webhook-endpoint.service';
import { WEBHOOK_RETRY, webhookBackoffMs, webhookRetryDelayMs } from '../../temporal/webhook-retry';
import { firstPass } from '../../domain/webhook-endpoints/webhook-attempt';
import { eventPayload, newEndpointSecret, standardWebhookHeaders, webhookTypeOf } from '../../domain/webhook-endpoints/standard-webhooks';

describe('Standard Webhooks signatures', () => {
  test("sign the specification's example exactly (whsec_ secret bytes, `<id>.<timestamp>.<body>`, v1,<base64>)", () => {
    // The example of the Standard Webhooks specification (standardwebhooks.com, "Verifying webhooks").
    const h = standardWebhookHeaders(['whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'], 'msg_p5jXN8AQM9LWM0D4loKWxJek', 1614265330, '{"test": 2432232314}');
    expect(h).toEqual({
      'webhook-id': 'msg_p5jXN8AQM9LWM0D4loKWxJek',
      'webhook-timestamp': '1614265330',
      'webhook-signature': 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=',
    });
  });

  test('two secrets (a rotation) give two space-separated entries, each verifiable with its own secret', () => {
    const [a, b] = [newEndpointSecret(), newEndpointSecret()];
    const sig = standardWebhookHeaders([a, b], 'msg_1', 1700000000, '{}')['webhook-signature'].split(' ');
    expect(sig).toHaveLength(2);
    const expected = (s: string) => `v1,${createHmac('sha256', Buffer.from(s.slice(6), 'base64')).update('msg_1.1700000000.{}').digest('base64')}`;
    expect(sig).toEqual([expected(a), expected(b)]);
  });

  test('secrets are whsec_ and 32 random bytes', () => {
    const s = newEndpointSecret();
    expect(s).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);
    expect(Buffer.from(s.slice(6), 'base64')).toHaveLength(32);
    expect(newEndpointSecret()).not.toBe(s);
  });
});

describe('payloads', () => {
  test('open and click events are named in the past tense like the other email events; others as recorded', () => {
    expect(['email.open', 'email.click', 'email.sent', 'segment.vip.entry', 'signed_up'].map(webhookTypeOf)).toEqual([
      'email.opened',
      'email.clicked',
      'email.sent',
      'segment.vip.entry',
      'signed_up',
    ]);
  });

  test('the body is { type, timestamp, data: { eventId, contact, emailId, properties } }', () => {
    const createdAt = new Date('2026-11-27T10:00:00.000Z');
    expect(eventPayload({ id: 'e1', name: 'email.click', contactId: 'c1', contactEmail: 'a@example.com', emailId: 'm1', data: { url: 'https://x.test' }, createdAt })).toEqual({
      type: 'email.clicked',
      timestamp: '2026-11-27T10:00:00.000Z',
      data: { eventId: 'e1', contact: { id: 'c1', email: 'a@example.com' }, emailId: 'm1', properties: { url: 'https://x.test' } },
    });
  });
});

describe('endpoint URLs (the SSRF guard of WEBHOOK steps)', () => {
  const closed = { allowPrivateNetworks: false, allowedNetworks: [] };
  const loopbackAllowed = { allowPrivateNetworks: false, allowedNetworks: ['127.0.0.0/8'] };
  test.each([
    ['https://hooks.example.com/in', closed, null],
    ['http://hooks.example.com/in', closed, /must be https/],
    ['https://169.254.169.254/latest', closed, /refused: a link-local/],
    ['https://10.0.0.1/', closed, /refused: a private/],
    ['http://127.0.0.1:8080/', closed, /must be https/],
    ['http://127.0.0.1:8080/', loopbackAllowed, null],
    ['http://10.0.0.1/', loopbackAllowed, /must be https/],
    ['http://10.0.0.1/', { allowPrivateNetworks: true, allowedNetworks: [] }, null],
    ['https://user:pw@hooks.example.com/', closed, /credentials/],
    ['ftp://hooks.example.com/', closed, /must be https/],
    ['not a url', closed, /not a valid URL/],
  ])('%s', (url, policy, expected) => {
    const problem = endpointUrlProblem(url, policy);
    if (expected === null) expect(problem).toBeNull();
    else expect(problem).toMatch(expected);
  });
});

describe('the OpenAPI document', () => {
  test('lists a `webhooks` payload for every event type an endpoint can receive, and webhook.test', () => {
    const deps = { config: loadConfig({ DATABASE_URL: 'postgres://unused/webhooks', NODE_ENV: 'test' }) } as ApiDeps;
    const doc = openApiDocument(buildRoutes(deps), deps) as { webhooks?: Record<string, { post: { requestBody: { content: Record<string, { schema: { $ref: string } }> } } }>; components: { schemas: Record<string, any> } };
    const types = ['email.sent', 'email.delivered', 'email.opened', 'email.clicked', 'email.bounced', 'email.complained', 'email.replied', 'email.auto_replied', 'contact.subscribed', 'contact.unsubscribed', 'segment.{slug}.entry', 'segment.{slug}.exit', '{tracked event name}', 'webhook.test'];
    expect(Object.keys(doc.webhooks ?? {})).toEqual(expect.arrayContaining(types));
    const ref = doc.webhooks!['email.sent']!.post.requestBody.content['application/json']!.schema.$ref;
    const schema = doc.components.schemas[ref.split('/').pop()!];
    expect(schema.required).toEqual(['type', 'timestamp', 'data']);
    expect(schema.properties.type).toMatchObject({ enum: ['email.sent'] });
    expect(schema.properties.data.properties.properties.required).toEqual(['messageId', 'response']);
  });
});

describe('Retry-After and the backoff of webhook deliveries', () => {
  test.each([
    // attempt, Retry-After (ms), next wait
    [1, undefined, undefined],
    [1, 9_000, 9_000],
    [1, 1_000, 5_000],
    [3, 1_000, 20_000],
    [3, 60_000, 60_000],
    [2, 0, 10_000],
    [1, 7_200_000, 3_600_000],
    [20, 5_000, 3_600_000],
  ])('after attempt %p, Retry-After %p ms waits %p ms (at least it and the backoff, at most an hour)', (attempt, retryAfter, expected) => {
    expect(webhookRetryDelayMs(attempt, retryAfter)).toBe(expected);
  });

  test('the backoff is 5 s doubling to an hour, as Temporal computes it from the policy', () => {
    expect([1, 2, 3, 4, 10, 11, 12, 40].map(webhookBackoffMs)).toEqual([5_000, 10_000, 20_000, 40_000, 2_560_000, 3_600_000, 3_600_000, 3_600_000]);
    expect(WEBHOOK_RETRY.forMs).toBe(3 * 24 * 3_600_000);
  });
});

describe('the first pass of a batch (firstPass)', () => {
  type Outcome = Awaited<ReturnType<Parameters<typeof firstPass>[0]>>;
  const done: Outcome = { outcome: 'done', status: 200 };
  const waitOf = (o: Outcome | null) => (o?.outcome === 'held' ? 5_000 : 7_000);

  test("a delivery held behind another batch's first attempt is looked at again within the pass, the lane doing other chains meanwhile", async () => {
    const releasedAt = Date.now() + 250;
    const calls: string[] = [];
    const attempt = async (id: string): Promise<Outcome> => {
      calls.push(id);
      if (id === 'h1' && Date.now() < releasedAt) return { outcome: 'held', behind: 'elsewhere', retrying: false };
      return done;
    };
    const pass = await firstPass(attempt, [['h1', 'h2'], ['o1']], { concurrency: 1, deadlineMs: Date.now() + 10_000, waitOf, holdForMs: 5_000 });
    expect(pass.settled.map((s) => s.deliveryId).sort()).toEqual(['h1', 'h2', 'o1']);
    expect(pass.waits).toEqual({});
    // One lane: o1 went while h1 waited, and h1 was looked at more than once.
    expect(calls.indexOf('o1')).toBeLessThan(calls.lastIndexOf('h1'));
    expect(calls.filter((c) => c === 'h1').length).toBeGreaterThan(1);
    expect(calls.indexOf('h2')).toBeGreaterThan(calls.lastIndexOf('h1'));
  });

  test('behind a delivery being retried, or held past holdForMs, a chain stops with the held wait; a failure to retry with its own', async () => {
    const attempt = async (id: string): Promise<Outcome> => {
      if (id === 'r1') return { outcome: 'held', behind: 'failing', retrying: true };
      if (id === 'l1') return { outcome: 'held', behind: 'slow', retrying: false };
      if (id === 'f1') return { outcome: 'retry', error: 'The receiver answered 500', status: 500 };
      return done;
    };
    const pass = await firstPass(attempt, [['r1', 'r2'], ['l1', 'l2'], ['f1', 'f2'], ['o1']], { concurrency: 2, deadlineMs: Date.now() + 10_000, waitOf, holdForMs: 300 });
    expect(pass.settled.map((s) => s.deliveryId)).toEqual(['o1']);
    expect(pass.waits).toEqual({ r1: 5_000, l1: 5_000, f1: 7_000 });
  });
});
