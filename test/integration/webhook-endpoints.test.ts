import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createHmac, randomUUID, timingSafeEqual } from 'node:crypto';
import { api } from '../helpers/api';
import { expectStatus, projectWithDomain } from '../helpers/automations';
import { closeDb, db, waitForEmailStatus } from '../helpers/db';
import { deliver } from '../helpers/smtp-client';
import { schemaProblems } from '../helpers/openapi';
import { stackEnv } from '../stack-env';
import { loadConfig } from '../../domain/config';
import { returnPathAddress } from '../../domain/inbound/return-path';
import { createTestProject, type TestProject } from '../helpers/fixtures';
import { waitFor } from '../helpers/wait';
import { messagesTo, waitForMail } from '../helpers/mailbox';
import { startFakeSns } from '../helpers/sns';
import { Client, Connection } from '@temporalio/client';

/**
 * Webhooks out on the real stack (README › Webhooks out): endpoints of a project receive its events, signed per
 * Standard Webhooks and checked here by a verifier written from the specification; a failing receiver gets the same
 * `webhook-id` again; attempts are listed; disabled endpoints and other projects' endpoints get nothing; the secret is
 * shown once and a rotation signs with both secrets.
 */

interface Received {
  path: string;
  headers: http.IncomingHttpHeaders;
  body: string;
  /** When it arrived (ms). */
  atMs: number;
}

const received: Received[] = [];
/** Answers to give, per path, before the default 200 (e.g. [500] fails the first request). */
const script = new Map<string, number[]>();
/** Headers of the scripted (non-200) answers, per path (e.g. Retry-After). */
const scriptHeaders = new Map<string, () => Record<string, string>>();
let server: http.Server;
let base: string;
let project: TestProject;
let domain: string;
let other: TestProject;
const tag = () => randomUUID().slice(0, 8);
const call = (method: string, path: string, body?: unknown, p = project) => api(method, path, { key: p.secretKey, body });

/**
 * A Standard Webhooks verifier: the signed content is `<webhook-id>.<webhook-timestamp>.<raw body>`, the key the bytes
 * of the base64 after `whsec_`, and any space-separated `v1,<base64>` entry may match; the timestamp must be recent.
 */
function verify(secret: string, r: Received, toleranceSec = 300): boolean {
  const id = r.headers['webhook-id'] as string | undefined;
  const ts = r.headers['webhook-timestamp'] as string | undefined;
  const sig = r.headers['webhook-signature'] as string | undefined;
  if (!id || !ts || !sig || !/^\d+$/.test(ts) || Math.abs(Date.now() / 1000 - Number(ts)) > toleranceSec) return false;
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
  const expected = createHmac('sha256', key).update(`${id}.${ts}.${r.body}`).digest();
  return sig.split(' ').some((entry) => {
    const [version, value] = entry.split(',');
    const given = Buffer.from(value ?? '', 'base64');
    return version === 'v1' && given.length === expected.length && timingSafeEqual(given, expected);
  });
}

const at = (path: string) => received.filter((r) => r.path === path);
const bodies = (path: string) => at(path).map((r) => JSON.parse(r.body) as { type: string; timestamp: string; data: Record<string, any> });

/**
 * Each body conforms to what /openapi.json documents for its type (the webhook entries, OpenAPI 3.1): every required key
 * there, each of the documented type, no undocumented one. `entryOf` names the entry of types that are patterns.
 */
async function expectDocumented(got: { type: string }[], entryOf: Record<string, string> = {}): Promise<void> {
  const doc = (await api('GET', '/openapi.json')).body;
  for (const b of got) {
    const entry = doc.webhooks[entryOf[b.type] ?? b.type];
    expect({ type: b.type, documented: entry !== undefined }).toEqual({ type: b.type, documented: true });
    expect({ type: b.type, problems: schemaProblems(doc, entry.post.requestBody.content['application/json'].schema, b) }).toEqual({ type: b.type, problems: [] });
  }
}

async function endpoint(body: Record<string, unknown>, p = project): Promise<{ id: string; secret: string; path: string }> {
  const path = `/ep/${tag()}`;
  const created = expectStatus(await call('POST', '/webhook-endpoints', { url: `${base}${path}`, ...body }, p), 201);
  return { id: created.id, secret: created.secret, path };
}

beforeAll(async () => {
  server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      const path = req.url ?? '';
      received.push({ path, headers: req.headers, body, atMs: Date.now() });
      const status = script.get(path)?.shift() ?? 200;
      const extra = status === 200 ? {} : (scriptHeaders.get(path)?.() ?? {});
      res.writeHead(status, { 'content-type': 'text/plain', ...extra }).end(status === 200 ? 'thanks' : 'not now');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  ({ project, domain } = await projectWithDomain('webhooks-out'));
  other = await createTestProject('webhooks-out-other');
});
afterAll(async () => {
  server.close();
  await closeDb();
});

test('the secret is shown once (creation), never by GET or the list; a refused URL is a 422', async () => {
  const ep = await endpoint({ eventTypes: ['*'], description: 'shown once' });
  expect(ep.secret).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);
  expect(Buffer.from(ep.secret.slice(6), 'base64')).toHaveLength(32);
  const got = expectStatus(await call('GET', `/webhook-endpoints/${ep.id}`), 200);
  expect(got).toMatchObject({ id: ep.id, eventTypes: ['*'], enabled: true, description: 'shown once' });
  expect(JSON.stringify(got)).not.toContain(ep.secret.slice(6));
  expect(got).not.toHaveProperty('secret');
  const list = expectStatus(await call('GET', '/webhook-endpoints?limit=100'), 200);
  expect(list.data.map((e: { id: string }) => e.id)).toContain(ep.id);
  expect(JSON.stringify(list)).not.toContain(ep.secret.slice(6));
  // Another project cannot see or change it.
  expect((await call('GET', `/webhook-endpoints/${ep.id}`, undefined, other)).status).toBe(404);
  expect((await call('PATCH', `/webhook-endpoints/${ep.id}`, { enabled: false }, other)).status).toBe(404);
  // Only public https, or the loopback range this stack allows.
  for (const url of ['http://10.0.0.1/hook', 'https://169.254.169.254/latest', 'http://hooks.example.com/in']) {
    const res = await call('POST', '/webhook-endpoints', { url, eventTypes: ['*'] });
    expect({ url, status: res.status, code: res.body?.error?.code }).toEqual({ url, status: 422, code: 'VALIDATION_ERROR' });
  }
  expect((await call('DELETE', `/webhook-endpoints/${ep.id}`)).status).toBe(204);
  expect((await call('GET', `/webhook-endpoints/${ep.id}`)).status).toBe(404);
});

test('email.sent after /v1/send and a tracked event arrive signed (Standard Webhooks); disabled and other projects\' endpoints get nothing', async () => {
  const event = `signed_up_${tag()}`;
  const wanted = await endpoint({ eventTypes: ['email.sent', event] });
  const disabled = await endpoint({ eventTypes: ['*'], enabled: false });
  const foreign = await endpoint({ eventTypes: ['*'] }, other);
  const to = `hooked-${tag()}@example.com`;
  const sent = expectStatus(await call('POST', '/v1/send', { to, from: `hi@${domain}`, subject: 'Hooked', body: '<p>hi</p>' }), 200);
  const emailId: string = sent.data.emails[0].email;
  expectStatus(await call('POST', '/v1/track', { email: to, event, data: { plan: 'pro' } }), 200);

  await waitFor('both events at the endpoint', async () => (at(wanted.path).length >= 2 ? true : undefined), 30_000);
  const got = at(wanted.path);
  for (const r of got) {
    expect(verify(wanted.secret, r)).toBe(true);
    expect(verify(`whsec_${Buffer.alloc(32, 1).toString('base64')}`, r)).toBe(false);
    expect(verify(wanted.secret, { ...r, body: r.body.replace('Hooked', 'Hacked') + ' ' })).toBe(false);
    expect(r.headers['webhook-id']).toMatch(/^msg_[0-9a-f]{32}$/);
  }
  const payloads = bodies(wanted.path);
  expect(payloads.map((p) => p.type).sort()).toEqual(['email.sent', event].sort());
  const sentPayload = payloads.find((p) => p.type === 'email.sent')!;
  expect(sentPayload.data).toMatchObject({ emailId, contact: { email: to }, properties: { messageId: expect.any(String) } });
  expect(new Date(sentPayload.timestamp).toISOString()).toBe(sentPayload.timestamp);
  expect(payloads.find((p) => p.type === event)!.data).toMatchObject({ contact: { email: to }, emailId: null, properties: { plan: 'pro' } });

  // The fan-out of one event to all of a project's endpoints happens together: give stragglers a moment anyway.
  await new Promise((r) => setTimeout(r, 1_500));
  expect(at(disabled.path)).toEqual([]);
  expect(at(foreign.path)).toEqual([]);
  expect(expectStatus(await call('GET', `/webhook-endpoints/${disabled.id}/deliveries`), 200).data).toEqual([]);
  expect(expectStatus(await call('GET', `/webhook-endpoints/${foreign.id}/deliveries`, undefined, other), 200).data).toEqual([]);
  // Nor can this project read the other's deliveries.
  expect((await call('GET', `/webhook-endpoints/${foreign.id}/deliveries`)).status).toBe(404);
});

test('a receiver answering 500 gets the event again with the same webhook-id; both attempts are listed; retry resends it', async () => {
  const event = `retried_${tag()}`;
  const ep = await endpoint({ eventTypes: [event] });
  script.set(ep.path, [500]);
  expectStatus(await call('POST', '/v1/track', { email: `retry-${tag()}@example.com`, event }), 200);
  await waitFor('the second attempt', async () => (at(ep.path).length >= 2 ? true : undefined), 40_000);
  const [first, second] = at(ep.path);
  expect(second!.headers['webhook-id']).toBe(first!.headers['webhook-id']);
  expect(second!.body).toBe(first!.body);
  expect(verify(ep.secret, second!)).toBe(true);

  const delivery = await waitFor(
    'the delivery listed as succeeded',
    async () => {
      const d = expectStatus(await call('GET', `/webhook-endpoints/${ep.id}/deliveries`), 200).data[0];
      return d?.status === 'SUCCEEDED' ? d : undefined;
    },
    10_000,
  );
  expect(delivery).toMatchObject({ type: event, attempts: 2, lastResponseCode: 200, webhookId: first!.headers['webhook-id'] });
  expect(delivery.attemptList).toEqual([
    expect.objectContaining({ succeeded: false, responseCode: 500, responseBody: 'not now', durationMs: expect.any(Number) }),
    expect.objectContaining({ succeeded: true, responseCode: 200, responseBody: 'thanks', error: null }),
  ]);

  expectStatus(await call('POST', `/webhook-endpoints/${ep.id}/deliveries/${delivery.id}/retry`), 202);
  await waitFor('the resend', async () => (at(ep.path).length >= 3 ? true : undefined), 20_000);
  expect(at(ep.path)[2]!.headers['webhook-id']).toBe(first!.headers['webhook-id']);
  expect((await call('POST', `/webhook-endpoints/${ep.id}/deliveries/${delivery.id}/retry`, undefined, other)).status).toBe(404);
});

test('rotation: the new secret is shown once and, for the grace period, deliveries are signed with both secrets', async () => {
  const ep = await endpoint({ eventTypes: ['email.sent'] });
  const rotated = expectStatus(await call('POST', `/webhook-endpoints/${ep.id}/rotate-secret`), 200);
  expect(rotated.secret).toMatch(/^whsec_/);
  expect(rotated.secret).not.toBe(ep.secret);
  expect(Date.parse(rotated.previousSecretExpiresAt) - Date.now()).toBeGreaterThan(23 * 3_600_000);

  const test = expectStatus(await call('POST', `/webhook-endpoints/${ep.id}/test`), 202);
  expect(test).toMatchObject({ type: 'webhook.test', status: 'PENDING' });
  await waitFor('the test event', async () => (at(ep.path).length >= 1 ? true : undefined), 20_000);
  const r = at(ep.path)[0]!;
  expect(JSON.parse(r.body)).toMatchObject({ type: 'webhook.test', data: { endpointId: ep.id } });
  expect((r.headers['webhook-signature'] as string).split(' ')).toHaveLength(2);
  expect(verify(rotated.secret, r)).toBe(true);
  expect(verify(ep.secret, r)).toBe(true);
  expect(r.headers['webhook-id']).toBe(test.webhookId);
});

test('an endpoint whose every attempt fails for WEBHOOK_ENDPOINT_DISABLE_AFTER (3 s here) is disabled; its delivery ends CANCELLED; enabling clears it', async () => {
  const event = `doomed_${tag()}`;
  const ep = await endpoint({ eventTypes: [event] });
  script.set(ep.path, Array<number>(50).fill(503));
  expectStatus(await call('POST', '/v1/track', { email: `doomed-${tag()}@example.com`, event }), 200);
  const disabled = await waitFor(
    'the endpoint disabled',
    async () => {
      const e = expectStatus(await call('GET', `/webhook-endpoints/${ep.id}`), 200);
      return e.enabled ? undefined : e;
    },
    40_000,
  );
  expect(disabled.disabledReason).toMatch(/^Every attempt failed since \d{4}-\d\d-\d\dT/);
  expect(disabled.failingSince).not.toBeNull();
  expect(at(ep.path).length).toBeGreaterThanOrEqual(2);
  const delivery = await waitFor(
    'the delivery cancelled',
    async () => {
      const d = expectStatus(await call('GET', `/webhook-endpoints/${ep.id}/deliveries`), 200).data[0];
      return d?.status === 'CANCELLED' ? d : undefined;
    },
    40_000,
  );
  expect(delivery.attemptList.length).toBeGreaterThanOrEqual(2);
  expect(delivery.attemptList.every((a: { succeeded: boolean; responseCode: number }) => !a.succeeded && a.responseCode === 503)).toBe(true);
  const calls = at(ep.path).length;
  expect(calls).toBe(delivery.attemptList.length);

  // The owner is told, once (the first message of the owner is the signup's verification email), by the system sender.
  const notice = (await waitForMail(project.userEmail, { count: 2, timeoutMs: 20_000 })).find((m) => m.subject?.startsWith('Webhook endpoint disabled'));
  expect(notice).toBeDefined();
  expect(notice!.subject).toBe('Webhook endpoint disabled: webhooks-out');
  expect(notice!.from?.value[0]?.address).toBe('accounts@mailwright.test');
  expect(notice!.headers.get('auto-submitted')).toBe('auto-generated');
  expect(notice!.text).toContain(`${base}${ep.path}`);
  expect(notice!.text).toContain('Every attempt failed since');
  expect(notice!.text).toContain(`/webhook-endpoints/${ep.id}/replay`);
  // The cancelling attempt found the notice sent: no second one.
  expect(await messagesTo(project.userEmail)).toHaveLength(2);

  const enabled = expectStatus(await call('PATCH', `/webhook-endpoints/${ep.id}`, { enabled: true }), 200);
  expect(enabled).toMatchObject({ enabled: true, disabledReason: null, failingSince: null });
});

/**
 * The consumers the outbox trigger queues an event for, seen inside the recording transaction (rolled back, so the
 * dispatcher never sees it): the event is inserted as any writer inserts one.
 */
async function queuedFor(projectId: string, contactId: string): Promise<string[]> {
  const client = await db().connect();
  try {
    await client.query('begin');
    const { rows } = await client.query<{ id: string }>(
      `insert into events (id, project_id, contact_id, name, data, source) values (gen_random_uuid(), $1, $2, 'interest_probe', '{}', 'TRACKED') returning id`,
      [projectId, contactId],
    );
    const queued = await client.query<{ consumer: string }>('select consumer from event_outbox where event_id = $1 order by consumer', [rows[0]!.id]);
    return queued.rows.map((r) => r.consumer);
  } finally {
    await client.query('rollback');
    client.release();
  }
}

test('the outbox queues webhooks-out only for projects with an enabled endpoint (create, disable, enable, delete, two endpoints)', async () => {
  const p = await createTestProject('webhooks-out-interest');
  const contactId: string = expectStatus(await call('POST', '/v1/track', { email: `interest-${tag()}@example.com`, event: 'seen' }, p), 200).data.contact;
  const queued = () => queuedFor(p.projectId, contactId);
  // The other consumers get it (the trigger ran), webhooks-out does not: the project has no endpoint.
  expect(await queued()).toEqual(expect.arrayContaining(['analytics']));
  expect(await queued()).not.toContain('webhooks-out');
  const off = await endpoint({ eventTypes: ['*'], enabled: false }, p);
  expect(await queued()).not.toContain('webhooks-out');
  const on = await endpoint({ eventTypes: ['email.sent'] }, p);
  expect(await queued()).toContain('webhooks-out');
  expectStatus(await call('PATCH', `/webhook-endpoints/${on.id}`, { enabled: false }, p), 200);
  expect(await queued()).not.toContain('webhooks-out');
  expectStatus(await call('PATCH', `/webhook-endpoints/${off.id}`, { enabled: true }, p), 200);
  expectStatus(await call('PATCH', `/webhook-endpoints/${on.id}`, { enabled: true }, p), 200);
  expect(await queued()).toContain('webhooks-out');
  // One of two enabled endpoints goes: the project is still listed; the second goes: it is not.
  expect((await call('DELETE', `/webhook-endpoints/${off.id}`, undefined, p)).status).toBe(204);
  expect(await queued()).toContain('webhooks-out');
  expect((await call('DELETE', `/webhook-endpoints/${on.id}`, undefined, p)).status).toBe(204);
  expect(await queued()).not.toContain('webhooks-out');
});

test('Retry-After of a 429 (seconds) or a 503 (an HTTP date) delays the next attempt by at least that, beyond the 5 s backoff', async () => {
  const event = `throttled_${tag()}`;
  const seconds = await endpoint({ eventTypes: [event] });
  const date = await endpoint({ eventTypes: [event] });
  const plain = await endpoint({ eventTypes: [event] });
  script.set(seconds.path, [429]);
  scriptHeaders.set(seconds.path, () => ({ 'retry-after': '9' }));
  script.set(date.path, [503]);
  // HTTP dates have whole seconds: 10 s ahead is at least 9 s ahead.
  scriptHeaders.set(date.path, () => ({ 'retry-after': new Date(Date.now() + 10_000).toUTCString() }));
  script.set(plain.path, [503]);
  expectStatus(await call('POST', '/v1/track', { email: `throttled-${tag()}@example.com`, event }), 200);
  await waitFor('the second attempts', async () => ([seconds, date, plain].every((e) => at(e.path).length >= 2) ? true : undefined), 40_000);
  const gap = (e: { path: string }) => at(e.path)[1]!.atMs - at(e.path)[0]!.atMs;
  expect(gap(seconds)).toBeGreaterThanOrEqual(9_000);
  expect(gap(date)).toBeGreaterThanOrEqual(9_000);
  // Without Retry-After the policy's first wait (5 s) applies: the receivers above were not merely slow to be retried.
  expect(gap(plain)).toBeLessThan(9_000);
  expect(at(seconds.path)[1]!.headers['webhook-id']).toBe(at(seconds.path)[0]!.headers['webhook-id']);
}, 60_000);

test('replay: the events of [from, to) that the endpoint wants are sent in recorded order, once; its status counts them; a second replay sends nothing again; bad ranges are 422', async () => {
  const p = await createTestProject('webhooks-out-replay');
  const event = `replayed_${tag()}`;
  const pause = () => new Promise((r) => setTimeout(r, 30));
  const track = async (email: string, name: string, n: number) => expectStatus(await call('POST', '/v1/track', { email, event: name, data: { n } }, p), 200).data.event as string;
  const [ada, bob] = [`ada-${tag()}@example.com`, `bob-${tag()}@example.com`];
  await track(ada, event, 0);
  await pause();
  const from = new Date().toISOString();
  await pause();
  const inRange = [await track(ada, event, 1), await track(bob, event, 2), await track(ada, 'not_wanted', 3), await track(ada, event, 4)];
  await pause();
  const to = new Date().toISOString();
  await pause();
  await track(bob, event, 5);
  const ep = await endpoint({ eventTypes: [event] }, p);

  const replay = expectStatus(await call('POST', `/webhook-endpoints/${ep.id}/replay`, { from, to }, p), 202);
  expect(replay).toMatchObject({ endpointId: ep.id, from, to, workflowId: `webhook-replay/${ep.id}/${replay.replayId}` });
  await waitFor('the replayed events', async () => (at(ep.path).length >= 3 ? true : undefined), 30_000);
  await new Promise((r) => setTimeout(r, 1_500));
  const got = bodies(ep.path);
  expect(got.map((b) => b.data.eventId).sort()).toEqual([inRange[0], inRange[1], inRange[3]].sort());
  expect(at(ep.path).every((r) => verify(ep.secret, r))).toBe(true);
  // A contact's events arrive in recorded order.
  expect(got.filter((b) => b.data.contact.email === ada).map((b) => b.data.properties.n)).toEqual([1, 4]);
  const listed = expectStatus(await call('GET', `/webhook-endpoints/${ep.id}/deliveries`, undefined, p), 200);
  expect(listed.total).toBe(3);
  // Its status: the run's state, what it read and queued, and how those deliveries stand.
  const status = (r: { replayId: string }) => call('GET', `/webhook-endpoints/${ep.id}/replays/${r.replayId}`, undefined, p);
  const done = await waitFor('the replay settled', async () => {
    const s = expectStatus(await status(replay), 200);
    return s.state === 'COMPLETED' && s.deliveries.SUCCEEDED === 3 ? s : undefined;
  }, 20_000);
  expect(done).toMatchObject({ replayId: replay.replayId, endpointId: ep.id, from, to, workflowId: replay.workflowId, queued: 3, deliveries: { PENDING: 0, SUCCEEDED: 3, FAILED: 0, CANCELLED: 0 } });
  // Every event of the range was read (the four tracked ones, and whatever else the project recorded meanwhile).
  expect(done.events).toBeGreaterThanOrEqual(4);

  // Again: every delivery is SUCCEEDED, so nothing is sent twice.
  const again = expectStatus(await call('POST', `/webhook-endpoints/${ep.id}/replay`, { from, to }, p), 202);
  await new Promise((r) => setTimeout(r, 3_000));
  expect(at(ep.path)).toHaveLength(3);
  expect(expectStatus(await status(again), 200)).toMatchObject({ state: 'COMPLETED', events: done.events, queued: 0, deliveries: { PENDING: 0, SUCCEEDED: 0, FAILED: 0, CANCELLED: 0 } });
  // An unknown replay, and another project's key: 404.
  expect((await status({ replayId: randomUUID() })).status).toBe(404);
  expect((await call('GET', `/webhook-endpoints/${ep.id}/replays/${replay.replayId}`)).status).toBe(404);

  const refused = async (body: unknown) => {
    const res = await call('POST', `/webhook-endpoints/${ep.id}/replay`, body, p);
    return { status: res.status, codes: (res.body?.error?.errors ?? []).map((e: { code: string }) => e.code) };
  };
  expect(await refused({ from: to, to: from })).toEqual({ status: 422, codes: ['invalid_range'] });
  expect(await refused({ from: '2026-01-01T00:00:00Z', to: '2026-02-02T00:00:00Z' })).toEqual({ status: 422, codes: ['range_too_large'] });
  expect((await refused({ from: 'yesterday', to })).status).toBe(422);
  expect((await call('POST', `/webhook-endpoints/${ep.id}/replay`, { from, to })).status).toBe(404);
}, 60_000);

test("a contact's later events wait while its earlier one is retried (also from another batch); other contacts' do not", async () => {
  const event = `ordered_${tag()}`;
  const ep = await endpoint({ eventTypes: [event] });
  script.set(ep.path, [500]);
  const [ada, bob] = [`ordered-ada-${tag()}@example.com`, `ordered-bob-${tag()}@example.com`];
  const track = async (email: string, n: number) => expectStatus(await call('POST', '/v1/track', { email, event, data: { n } }), 200);
  await track(ada, 1);
  // The first attempt failed: what comes now is another batch, and must wait for the retry of n=1 (5 s later).
  await waitFor('the first attempt', async () => (at(ep.path).length >= 1 ? true : undefined), 20_000);
  await track(ada, 2);
  await track(ada, 3);
  await track(bob, 4);
  await waitFor('every event delivered', async () => (at(ep.path).length >= 5 ? true : undefined), 40_000);
  const arrivals = at(ep.path).map((r) => ({ n: (JSON.parse(r.body) as { data: { properties: { n: number } } }).data.properties.n, atMs: r.atMs }));
  const adaOrder = arrivals.filter((a) => a.n !== 4).map((a) => a.n);
  expect(adaOrder).toEqual([1, 1, 2, 3]);
  // Bob's event did not wait for Ada's retry.
  const retryAt = arrivals.filter((a) => a.n === 1)[1]!.atMs;
  expect(arrivals.find((a) => a.n === 4)!.atMs).toBeLessThan(retryAt);
  const delivered = expectStatus(await call('GET', `/webhook-endpoints/${ep.id}/deliveries`), 200).data;
  // Held looks are not attempts: n=2 and n=3 were called once each.
  expect(delivered.map((d: { attempts: number; payload: { data: { properties: { n: number } } } }) => [d.payload.data.properties.n, d.attempts]).sort()).toEqual([
    [1, 2],
    [2, 1],
    [3, 1],
    [4, 1],
  ]);
}, 60_000);

/** An ARF (RFC 5965) abuse report about `email`, as a feedback loop sends it to abuse@ the bounce host. */
function abuseReport(email: { id: string; to: string; messageId: string }, bounceHost: string): string {
  const secret = loadConfig({ ...process.env, DATABASE_URL: stackEnv().databaseUrl }).appSecret;
  const b = `arf-${tag()}`;
  const report = ['Feedback-Type: abuse', 'User-Agent: ISP-FBL/1.0', 'Version: 1', `Original-Mail-From: <${returnPathAddress(email.id, bounceHost, secret)}>`, `Original-Rcpt-To: <${email.to}>`];
  const returned = [`From: news@${domain}`, `To: ${email.to}`, 'Subject: Hooked', `Message-ID: ${email.messageId}`];
  const head = ['From: Feedback Loop <fbl@isp.test>', `To: abuse@${bounceHost}`, 'Subject: FW: Hooked', `Message-ID: <${tag()}@isp.test>`, 'MIME-Version: 1.0'];
  return [...head, `Content-Type: multipart/report; report-type=feedback-report; boundary="${b}"`, '', `--${b}`, 'Content-Type: text/plain', '', 'An abuse report.', '',
    `--${b}`, 'Content-Type: message/feedback-report', '', ...report, '', `--${b}`, 'Content-Type: text/rfc822-headers', '', ...returned, '', `--${b}--`, ''].join('\r\n');
}

test('email.bounced, email.complained, contact.unsubscribed, a tracked event and a segment entry arrive signed, each with its documented payload', async () => {
  const t = tag();
  const custom = `upgraded_${t}`;
  const types = ['email.bounced', 'email.complained', 'contact.unsubscribed', custom, `segment.vip-${t}.entry`];
  const ep = await endpoint({ eventTypes: types });
  const send = async (to: string) => expectStatus(await call('POST', '/v1/send', { to, from: `news@${domain}`, subject: 'Hooked', body: '<p>hi</p>' }), 200).data.emails[0].email as string;

  // A permanent bounce: the relay refuses the recipient (550 at RCPT TO).
  const bouncedId = await send(`bounce-${t}@example.com`);
  // A complaint through the feedback loop: email.complained, and the contact unsubscribed (via complaint).
  const complainer = `complainer-${t}@example.com`;
  expectStatus(await call('POST', '/contacts', { email: complainer, subscribed: true }), 201);
  const complainedId = await send(complainer);
  const row = await waitForEmailStatus(complainedId, 'SENT');
  const arf = await deliver(stackEnv().inboundSmtpPort, 'fbl@isp.test', [`abuse@bounces.${domain}`], abuseReport({ id: complainedId, to: complainer, messageId: row.message_id }, `bounces.${domain}`));
  expect(arf.data?.code).toBe(250);
  // A tracked event with its data.
  expectStatus(await call('POST', '/v1/track', { email: `tracked-${t}@example.com`, event: custom, data: { plan: 'pro', seats: 3 } }), 200);
  // A segment entry: a contact matches a tracked segment at its compute.
  expectStatus(await call('POST', '/contacts', { email: `vip-${t}@example.com`, data: { tier: `vip-${t}` } }), 201);
  const segment = expectStatus(await call('POST', '/segments', { name: `VIP ${t}`, type: 'DYNAMIC', trackMembership: true, condition: { operator: 'AND', conditions: [{ field: 'data.tier', operator: 'equals', value: `vip-${t}` }] } }), 201);
  expect(segment.slug).toBe(`vip-${t}`);
  expectStatus(await call('POST', `/segments/${segment.id}/compute`), 202);

  await waitFor('every type at the endpoint', async () => (types.every((type) => bodies(ep.path).some((b) => b.type === type)) ? true : undefined), 45_000).catch((err: Error) => {
    throw new Error(`${err.message}; received: ${bodies(ep.path).map((b) => b.type).join(', ')}`);
  });
  for (const r of at(ep.path)) expect(verify(ep.secret, r)).toBe(true);
  const of = (type: string) => bodies(ep.path).find((b) => b.type === type)!;
  expect(of('email.bounced').data).toMatchObject({ emailId: bouncedId, contact: { email: `bounce-${t}@example.com` }, properties: { source: 'smtp', bounceType: 'Permanent' } });
  expect(of('email.complained').data).toMatchObject({ emailId: complainedId, contact: { email: complainer }, properties: { source: 'arf', complaintFeedbackType: 'abuse' } });
  expect(of('contact.unsubscribed').data).toMatchObject({ contact: { email: complainer }, properties: { via: 'complaint' } });
  expect(of(custom).data).toMatchObject({ emailId: null, contact: { email: `tracked-${t}@example.com` }, properties: { plan: 'pro', seats: 3 } });
  expect(of(`segment.vip-${t}.entry`).data).toMatchObject({ contact: { email: `vip-${t}@example.com` }, properties: { segmentId: segment.id, segmentName: `VIP ${t}` } });

  await expectDocumented(bodies(ep.path), { [custom]: '{tracked event name}', [`segment.vip-${t}.entry`]: 'segment.{slug}.entry' });
}, 90_000);

test('email.delivered, email.opened, email.clicked, email.failed, email.replied, email.auto_replied, contact.subscribed and a segment exit arrive signed, each as documented', async () => {
  const t = tag();
  const types = ['email.delivered', 'email.opened', 'email.clicked', 'email.failed', 'email.replied', 'email.auto_replied', 'contact.subscribed', `segment.gold-${t}.exit`];
  const ep = await endpoint({ eventTypes: types });
  const secret = loadConfig({ ...process.env, DATABASE_URL: stackEnv().databaseUrl }).appSecret;
  const bounceHost = `bounces.${domain}`;
  const reader = `reader-${t}@example.com`;
  const link = `https://example.com/pricing-${t}`;
  const emailId: string = expectStatus(
    await call('POST', '/v1/send', { to: reader, from: `news@${domain}`, subject: 'Hooked', body: `<p>hi <a href="${link}">pricing</a></p>` }),
    200,
  ).data.emails[0].email;
  const row = await waitForEmailStatus(emailId, 'SENT');

  // email.delivered: SES reports the delivery through SNS (the test plays SNS, as webhooks-sns.test.ts does).
  const sns = await startFakeSns({ apiUrl: stackEnv().apiUrl });
  try {
    const report = sns.sesReport('Delivery', row.message_id, reader, { timestamp: new Date().toISOString(), smtpResponse: '250 2.0.0 OK', processingTimeMillis: 812 }, `news@${domain}`);
    expect((await sns.post(sns.notification(report))).body).toMatchObject({ outcome: 'applied', events: ['email.delivered'] });
  } finally {
    await sns.stop();
  }
  // email.opened and email.clicked: the pixel and the tracked link of the message as the relay received it.
  const html = String((await waitForMail(reader))[0]!.html);
  const tracked = (kind: 'o' | 'c') => html.match(new RegExp(`${stackEnv().apiUrl.replace(/[.:/]/g, '\\$&')}/t/${kind}/[A-Za-z0-9_-]+`))?.[0];
  expect({ pixel: tracked('o') !== undefined, link: tracked('c') !== undefined }).toEqual({ pixel: true, link: true });
  expect((await fetch(tracked('o')!)).status).toBe(200);
  expect((await fetch(tracked('c')!, { redirect: 'manual' })).headers.get('location')).toBe(link);
  // email.auto_replied (an out-of-office to the return path) and email.replied (an answer to the replies address), over SMTP.
  const rp = returnPathAddress(emailId, bounceHost, secret);
  const ooo = [`From: ${reader}`, `To: ${rp}`, 'Subject: Out of Office: Hooked', 'Auto-Submitted: auto-replied', `In-Reply-To: ${row.message_id}`, `Message-ID: <${tag()}@example.com>`, '', 'Away until Monday.', ''];
  expect((await deliver(stackEnv().inboundSmtpPort, '', [rp], ooo.join('\r\n'))).data?.code).toBe(250);
  const reply = [`From: Reader <${reader}>`, `To: replies@${bounceHost}`, 'Subject: Re: Hooked', `In-Reply-To: ${row.message_id}`, `References: ${row.message_id}`, `Message-ID: <${tag()}@example.com>`, '', 'Yes please, tell me more.', ''];
  expect((await deliver(stackEnv().inboundSmtpPort, reader, [`replies@${bounceHost}`], reply.join('\r\n'))).data?.code).toBe(250);
  // email.failed: the relay answers 451 every time and delivery gives up (a delivery run with a 1 ms retry window
  // instead of the day the API's run waits).
  const doomedId: string = expectStatus(await call('POST', '/v1/send', { to: `tempfail-999-${t}@example.com`, from: `news@${domain}`, subject: 'Doomed', body: '<p>x</p>' }), 200).data.emails[0].email;
  const connection = await Connection.connect({ address: stackEnv().temporalAddress });
  try {
    const gaveUp = await new Client({ connection }).workflow.execute('emailDelivery', {
      taskQueue: 'mailwright',
      workflowId: `email-delivery-give-up/${doomedId}`,
      args: [{ projectId: project.projectId, emailIds: [doomedId], retryWindowMs: 1 }],
    });
    expect(gaveUp).toMatchObject({ failed: 1 });
  } finally {
    await connection.close();
  }
  // contact.subscribed: an unsubscribed contact subscribes.
  const joiner = `joiner-${t}@example.com`;
  const joinerId: string = expectStatus(await call('POST', '/contacts', { email: joiner, subscribed: false }), 201).id;
  expectStatus(await call('PATCH', `/contacts/${joinerId}`, { subscribed: true }), 200);
  // A segment exit: a member's data changes and the next compute finds it no longer matches.
  const member = `gold-${t}@example.com`;
  const memberId: string = expectStatus(await call('POST', '/contacts', { email: member, data: { tier: `gold-${t}` } }), 201).id;
  const condition = { operator: 'AND', conditions: [{ field: 'data.tier', operator: 'equals', value: `gold-${t}` }] };
  const segment = expectStatus(await call('POST', '/segments', { name: `Gold ${t}`, type: 'DYNAMIC', trackMembership: true, condition }), 201);
  expectStatus(await call('POST', `/segments/${segment.id}/compute`), 202);
  await waitFor(
    'the member counted',
    async () => ((await db().query('select 1 from segment_memberships where segment_id = $1 and contact_id = $2', [segment.id, memberId])).rowCount ? true : undefined),
    30_000,
  );
  expectStatus(await call('PATCH', `/contacts/${memberId}`, { data: { tier: 'lapsed' } }), 200);
  await waitFor('the recompute accepted', async () => ((await call('POST', `/segments/${segment.id}/compute`)).status === 202 ? true : undefined), 20_000);

  await waitFor('every type at the endpoint', async () => (types.every((type) => bodies(ep.path).some((b) => b.type === type)) ? true : undefined), 60_000).catch((err: Error) => {
    throw new Error(`${err.message}; received: ${bodies(ep.path).map((b) => b.type).join(', ')}`);
  });
  for (const r of at(ep.path)) expect(verify(ep.secret, r)).toBe(true);
  const of = (type: string) => bodies(ep.path).find((b) => b.type === type)!;
  const contact = { email: reader };
  expect(of('email.delivered').data).toMatchObject({ emailId, contact, properties: { source: 'ses', smtpResponse: '250 2.0.0 OK', processingTimeMillis: 812 } });
  expect(of('email.opened').data).toMatchObject({ emailId, contact, properties: {} });
  expect(of('email.clicked').data).toMatchObject({ emailId, contact, properties: { url: link } });
  expect(of('email.auto_replied').data).toMatchObject({ emailId, contact, properties: { from: reader, subject: 'Out of Office: Hooked', inboundId: expect.any(String) } });
  expect(of('email.replied').data).toMatchObject({ emailId, contact, properties: { from: reader, subject: 'Re: Hooked', excerpt: 'Yes please, tell me more.' } });
  expect(of('email.failed').data).toMatchObject({ emailId: doomedId, contact: { email: `tempfail-999-${t}@example.com` }, properties: { reason: expect.stringMatching(/^Delivery gave up after 1 attempts: /) } });
  expect(of('contact.subscribed').data).toMatchObject({ contact: { id: joinerId, email: joiner }, emailId: null, properties: { via: expect.any(String) } });
  expect(of(`segment.gold-${t}.exit`).data).toMatchObject({ contact: { id: memberId, email: member }, properties: { segmentId: segment.id, segmentName: `Gold ${t}` } });
  await expectDocumented(bodies(ep.path), { [`segment.gold-${t}.exit`]: 'segment.{slug}.exit' });
}, 120_000);
