import { randomUUID } from 'node:crypto';
import { api } from '../helpers/api';
import { closeDb, waitForEmailStatus } from '../helpers/db';
import { addVerifiedDomain, createTestProject, uniqueDomain, type TestProject } from '../helpers/fixtures';
import { stackEnv } from '../stack-env';

let project: TestProject;
let domain: string;
const rcpt = (tag = 'metrics') => `${tag}-${randomUUID().slice(0, 8)}@example.com`;

beforeAll(async () => {
  project = await createTestProject('Metrics');
  domain = uniqueDomain();
  await addVerifiedDomain(project.projectId, domain);
});
afterAll(closeDb);

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** One scrape, parsed from the Prometheus text format. */
async function scrape(baseUrl: string): Promise<{ text: string; samples: Sample[] }> {
  const res = await fetch(`${baseUrl}/metrics`);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
  const text = await res.text();
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) continue;
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]!] = l[2]!;
    samples.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return { text, samples };
}

/** The sum of the samples of `name` whose labels include `labels`. */
function total(samples: Sample[], name: string, labels: Record<string, string> = {}): number {
  return samples
    .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    .reduce((sum, s) => sum + s.value, 0);
}

/** Scrapes until `ready` holds (counters move after the response: delivery and the outbox run in the background). */
async function scrapeUntil(baseUrl: string, ready: (samples: Sample[]) => boolean, timeoutMs = 30_000): Promise<Sample[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { samples } = await scrape(baseUrl);
    if (ready(samples) || Date.now() > deadline) return samples;
    await new Promise((r) => setTimeout(r, 200));
  }
}

describe('GET /metrics on the API', () => {
  test('counts /v1/send and /v1/track by route template and status, and the emailDelivery workflow starts; never the raw URL', async () => {
    const { apiUrl } = stackEnv();
    const before = (await scrape(apiUrl)).samples;
    const to = rcpt();
    const sent = await api('POST', '/v1/send', { key: project.secretKey, body: { to, from: `hi@${domain}`, subject: 'Metrics', body: '<p>m</p>' } });
    expect(sent.status).toBe(200);
    const tracked = await api('POST', '/v1/track', { key: project.publicKey, body: { email: rcpt('tracked'), event: 'metrics_seen' } });
    expect(tracked.status).toBe(200);
    const unknown = `/no-such-route-${randomUUID()}`;
    expect((await api('GET', unknown)).status).toBe(404);

    const send = { name: 'mailwright_http_requests_total', labels: { method: 'POST', route: '/v1/send', status: '200' } };
    const track = { name: 'mailwright_http_requests_total', labels: { method: 'POST', route: '/v1/track', status: '200' } };
    const starts = { name: 'mailwright_workflow_starts_total', labels: { workflow: 'emailDelivery', outcome: 'started' } };
    const after = await scrapeUntil(apiUrl, (s) => [send, track, starts].every((m) => total(s, m.name, m.labels) > total(before, m.name, m.labels)));
    for (const m of [send, track, starts]) expect({ ...m, grew: total(after, m.name, m.labels) > total(before, m.name, m.labels) }).toEqual({ ...m, grew: true });
    expect(total(after, 'mailwright_http_request_duration_seconds_count', send.labels)).toBeGreaterThan(total(before, 'mailwright_http_request_duration_seconds_count', send.labels));
    expect(total(after, 'mailwright_http_requests_total', { route: 'unmatched', status: '404' })).toBeGreaterThan(0);

    const { text } = await scrape(apiUrl);
    expect(text).not.toContain(unknown);
    expect(text).not.toContain(to);
    // Node's process metrics come along.
    expect(text).toContain('process_cpu_seconds_total');
  });
});

describe("GET /metrics on the worker's listener (WORKER_METRICS_PORT)", () => {
  test('a delivered email shows as an SMTP send and an email sent; a bounce as a 5xx error; events as outbox lag', async () => {
    const { workerMetricsUrl } = stackEnv();
    const before = (await scrape(workerMetricsUrl)).samples;
    const ok = await api('POST', '/v1/send', { key: project.secretKey, body: { to: rcpt(), from: `hi@${domain}`, subject: 'Metrics', body: '<p>m</p>' } });
    const bounce = await api('POST', '/v1/send', { key: project.secretKey, body: { to: rcpt('bounce'), from: `hi@${domain}`, subject: 'Metrics', body: '<p>m</p>' } });
    await waitForEmailStatus(ok.body.data.emails[0].email, 'SENT');
    await waitForEmailStatus(bounce.body.data.emails[0].email, 'BOUNCED');
    await api('POST', '/v1/track', { key: project.publicKey, body: { email: rcpt('tracked'), event: 'metrics_lag' } });

    const grew = (s: Sample[], name: string, labels: Record<string, string>) => total(s, name, labels) > total(before, name, labels);
    const expected: [string, Record<string, string>][] = [
      ['mailwright_smtp_send_duration_seconds_count', { outcome: 'sent' }],
      ['mailwright_smtp_send_duration_seconds_count', { outcome: 'rejected' }],
      ['mailwright_smtp_send_errors_total', { reason: '5xx' }],
      ['mailwright_emails_total', { source: 'transactional', status: 'sent' }],
      ['mailwright_emails_total', { source: 'transactional', status: 'bounced' }],
      // The probe consumer (EVENTS_PROBE in the test stack) receives every event.
      ['mailwright_outbox_lag_seconds_count', { consumer: 'probe' }],
    ];
    const after = await scrapeUntil(workerMetricsUrl, (s) => expected.every(([name, labels]) => grew(s, name, labels)));
    for (const [name, labels] of expected) expect({ name, labels, grew: grew(after, name, labels) }).toEqual({ name, labels, grew: true });
    // The outbox's rows, read at the scrape: a series per registered consumer and state.
    expect(after.some((s) => s.name === 'mailwright_outbox_rows' && s.labels.consumer === 'probe' && s.labels.state === 'pending')).toBe(true);
  });
});

describe('GET /health', () => {
  test('the API: 200 with the database and Temporal checks', async () => {
    const res = await api('GET', '/health');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      status: 'ok',
      checks: { database: { ok: true, latencyMs: expect.any(Number) }, temporal: { ok: true, latencyMs: expect.any(Number) } },
    });
  });

  test("the worker's listener: 200 with the database, Temporal and the worker's own state", async () => {
    const res = await fetch(`${stackEnv().workerMetricsUrl}/health`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({
      status: 'ok',
      checks: {
        database: { ok: true, latencyMs: expect.any(Number) },
        temporal: { ok: true, latencyMs: expect.any(Number) },
        worker: { ok: true, latencyMs: expect.any(Number) },
      },
    });
  });
});
