import { randomUUID } from 'node:crypto';
import type { ManagedProcess } from '../../scripts/services/process';
import { PgRateLimitStore } from '../../domain/rate-limit/rate-limit.store';
import { RATE_LIMIT_SYNC_INTERVAL_MS } from '../../domain/rate-limit/rate-limiter';
import { localAllowance, windowIndex } from '../../domain/rate-limit/window';
import { stackEnv } from '../stack-env';
import { startExtraApi } from '../helpers/extra-api';
import { api, type ApiResponse } from '../helpers/api';
import { closeDb, db } from '../helpers/db';
import { createTestProject, type TestProject } from '../helpers/fixtures';

// Two extra API processes with a small budget and a short window, sharing the stack's database like a production
// deployment shares its Postgres; the stack's own API keeps the default limit, so other tests are not affected.
const LIMIT = 20;
const WINDOW_MS = 5_000;
const PROCESSES = 2;
const ALLOWANCE = localAllowance({ limit: LIMIT, windowMs: WINDOW_MS }, RATE_LIMIT_SYNC_INTERVAL_MS);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const children: ManagedProcess[] = [];
let urlA: string;
let urlB: string;

async function startLimitedApi(name: string): Promise<string> {
  const api = await startExtraApi(name, { RATE_LIMIT_PER_MINUTE: String(LIMIT), RATE_LIMIT_WINDOW: `${WINDOW_MS / 1000}s` });
  children.push(api.process);
  return api.url;
}

/** Waits for the next window when fewer than `ms` are left of the current one, so a sequence stays in one window. */
async function windowHeadroom(ms: number): Promise<void> {
  const left = WINDOW_MS - (Date.now() % WINDOW_MS);
  if (left < ms) await sleep(left + 30);
}

const header = (res: ApiResponse, name: string) => res.headers.get(name);
const contacts = (baseUrl: string, p: TestProject) => api('GET', '/contacts?limit=1', { baseUrl, key: p.secretKey });
const track = (baseUrl: string, p: TestProject) =>
  api('POST', '/v1/track', { baseUrl, key: p.publicKey, body: { email: `rl-${randomUUID().slice(0, 8)}@example.com`, event: 'rate_limited' } });

/** Sends sequential requests until one is refused (at most `max`); returns the answers. */
async function exhaust(send: () => Promise<ApiResponse>, max = LIMIT * 2): Promise<ApiResponse[]> {
  const out: ApiResponse[] = [];
  for (let i = 0; i < max; i++) {
    const res = await send();
    out.push(res);
    if (res.status === 429) break;
  }
  return out;
}

beforeAll(async () => {
  [urlA, urlB] = await Promise.all([startLimitedApi('api-rate-limit-a'), startLimitedApi('api-rate-limit-b')]);
}, 120_000);

afterAll(async () => {
  await Promise.all(children.map((c) => c.stop()));
  await closeDb();
});

describe('API rate limit (two API processes, 20 requests per 5 s window)', () => {
  test(`a concurrent burst through two processes admits the budget and at most processes x allowance (${PROCESSES} x ${ALLOWANCE}) more`, async () => {
    const project = await createTestProject('Rate limit burst');
    await windowHeadroom(3_500);
    const started = Date.now();
    // pk_ keys on /v1/track and sk_ keys elsewhere draw on the same budget.
    const burst = await Promise.all(
      Array.from({ length: 60 }, (_, i) => {
        const baseUrl = i % 2 === 0 ? urlA : urlB;
        return i % 4 < 2 ? track(baseUrl, project) : contacts(baseUrl, project);
      }),
    );
    const ended = Date.now();
    expect(burst.filter((r) => r.status !== 200 && r.status !== 429)).toEqual([]);
    const admitted = burst.filter((r) => r.status === 200).length;
    // Had the burst run into the next window, the sliding window would rightly have freed that share of the budget.
    const boundary = (windowIndex(started, WINDOW_MS) + 1) * WINDOW_MS;
    const freed = ended > boundary ? Math.ceil((LIMIT * (ended - boundary)) / WINDOW_MS) : 0;
    expect(admitted).toBeGreaterThanOrEqual(LIMIT);
    expect(admitted).toBeLessThanOrEqual(LIMIT + PROCESSES * ALLOWANCE + freed);
    for (const r of burst.filter((x) => x.status === 429)) expect(r.body.error.code).toBe('RATE_LIMIT_EXCEEDED');
    // Both processes took part, and what they admitted is what Postgres counted.
    expect(burst.filter((r, i) => i % 2 === 0 && r.status === 200).length).toBeGreaterThan(0);
    expect(burst.filter((r, i) => i % 2 === 1 && r.status === 200).length).toBeGreaterThan(0);
    await sleep(RATE_LIMIT_SYNC_INTERVAL_MS * 3);
    const { rows } = await db().query('select coalesce(sum(count), 0)::int as n from rate_limit_windows where project_id = $1', [project.projectId]);
    expect(rows[0].n).toBe(admitted);
  });

  test('over the budget: 429 in the error envelope with Retry-After; RateLimit headers count down on every answer; another project is unaffected', async () => {
    const [project, other] = await Promise.all([createTestProject('Rate limit A'), createTestProject('Rate limit B')]);
    await windowHeadroom(3_000);
    const answers = await exhaust(() => contacts(urlA, project));
    expect(answers.map((r) => r.status)).toEqual([...Array(LIMIT).fill(200), 429]);
    expect(answers.slice(0, LIMIT).map((r) => Number(header(r, 'ratelimit-remaining')))).toEqual(Array.from({ length: LIMIT }, (_, i) => LIMIT - 1 - i));
    for (const r of answers) {
      expect(header(r, 'ratelimit-limit')).toBe(String(LIMIT));
      expect(header(r, 'ratelimit-policy')).toBe(`${LIMIT};w=${WINDOW_MS / 1000}`);
      const reset = Number(header(r, 'ratelimit-reset'));
      expect(Number.isInteger(reset) && reset >= 1 && reset <= (2 * WINDOW_MS) / 1000).toBe(true);
    }
    const refused = answers.at(-1)!;
    expect(refused.body).toEqual({
      success: false,
      error: { code: 'RATE_LIMIT_EXCEEDED', message: expect.stringContaining(`${LIMIT} API requests`), statusCode: 429, requestId: header(refused, 'x-request-id'), suggestion: expect.stringContaining('Retry-After') },
      timestamp: expect.any(String),
    });
    const retryAfter = Number(header(refused, 'retry-after'));
    expect(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= (2 * WINDOW_MS) / 1000).toBe(true);
    expect(header(refused, 'ratelimit-remaining')).toBe('0');
    expect(header(refused, 'ratelimit-reset')).toBe(String(retryAfter));

    // Another project on the same process has its whole budget, and error answers carry the headers too.
    const fresh = await contacts(urlA, other);
    expect(fresh.status).toBe(200);
    expect(header(fresh, 'ratelimit-remaining')).toBe(String(LIMIT - 1));
    const invalid = await api('POST', '/v1/track', { baseUrl: urlA, key: other.publicKey, body: { event: 'no email' } });
    expect(invalid.status).toBe(422);
    expect(header(invalid, 'ratelimit-remaining')).toBe(String(LIMIT - 2));

    // The other process shares the spent budget: it admits at most its allowance before its first sync.
    const onB = await exhaust(() => contacts(urlB, project), ALLOWANCE + 1);
    expect(onB.at(-1)!.status).toBe(429);
    expect(onB.filter((r) => r.status === 200).length).toBeLessThanOrEqual(ALLOWANCE);
  });

  test('pk_ keys on /v1/track count against the same budget as the secret key', async () => {
    const project = await createTestProject('Rate limit track');
    await windowHeadroom(3_000);
    const first = await track(urlA, project);
    expect(first.status).toBe(200);
    expect(header(first, 'ratelimit-remaining')).toBe(String(LIMIT - 1));
    const secret = await contacts(urlA, project);
    expect(header(secret, 'ratelimit-remaining')).toBe(String(LIMIT - 2));
    const rest = await exhaust(() => track(urlA, project));
    expect(rest.map((r) => r.status)).toEqual([...Array(LIMIT - 2).fill(200), 429]);
    expect(rest.at(-1)!.body.error.code).toBe('RATE_LIMIT_EXCEEDED');
  });

  test('dashboard routes, /health, /config, docs and public pages are neither limited nor counted', async () => {
    const project = await createTestProject('Rate limit dashboard');
    await windowHeadroom(4_000);
    const spent = await exhaust(() => contacts(urlA, project));
    expect(spent.at(-1)!.status).toBe(429);
    // With the budget spent, the dashboard keeps working for the same project, well past the limit.
    for (let i = 0; i < LIMIT + 5; i++) {
      const res = await api('GET', '/users/@me/projects', { baseUrl: urlA, cookie: project.cookie });
      expect(res.status).toBe(200);
      expect(res.body.map((p: { id: string }) => p.id)).toContain(project.projectId);
      expect(header(res, 'ratelimit-limit')).toBeNull();
    }
    for (const p of ['/health', '/config', '/openapi.json', '/t/o/not-a-token']) {
      const res = await api('GET', p, { baseUrl: urlA });
      expect([p, res.status === 429]).toEqual([p, false]);
      expect([p, header(res, 'ratelimit-limit')]).toEqual([p, null]);
    }
    // Nothing of that was counted: a fresh project's first API call still sees its whole budget.
    const other = await createTestProject('Rate limit dashboard 2');
    for (let i = 0; i < LIMIT + 5; i++) await api('GET', '/users/@me/projects', { baseUrl: urlA, cookie: other.cookie });
    expect(header(await contacts(urlA, other), 'ratelimit-remaining')).toBe(String(LIMIT - 1));
  });

  test('the budget comes back: a request after Retry-After is admitted, and two windows later the spent requests no longer count', async () => {
    const project = await createTestProject('Rate limit reset');
    await windowHeadroom(4_000);
    const spent = await exhaust(() => contacts(urlA, project));
    expect(spent.at(-1)!.status).toBe(429);
    const retryAfter = Number(header(spent.at(-1)!, 'retry-after'));
    expect((await contacts(urlA, project)).status).toBe(429);
    await sleep(retryAfter * 1000);
    const again = await contacts(urlA, project);
    expect(again.status).toBe(200);
    // That one request is all that counts once the window of the spent ones has passed: 20 - 1 - this one.
    const twoLater = (windowIndex(Date.now(), WINDOW_MS) + 1) * WINDOW_MS;
    await sleep(twoLater - Date.now() + 50);
    const later = await contacts(urlA, project);
    expect(later.status).toBe(200);
    expect(header(later, 'ratelimit-remaining')).toBe(String(LIMIT - 2));
  });

  test('the store adds up counts of several callers in Postgres and deletes old windows', async () => {
    const store = new PgRateLimitStore(stackEnv().databaseUrl, { timeoutMs: 10_000 });
    try {
      const [p, q] = [randomUUID(), randomUUID()];
      const w = 60_000;
      const now = Math.floor(Date.now() / w) * w;
      expect(await store.sync([{ projectId: p, windowStartMs: now - w, delta: 5 }], w)).toEqual([{ count: 5, previous: 0 }]);
      expect(await store.sync([{ projectId: p, windowStartMs: now, delta: 3 }, { projectId: q, windowStartMs: now, delta: 0 }], w)).toEqual([
        { count: 3, previous: 5 },
        { count: 0, previous: 0 },
      ]);
      // A second process adding to both windows in one statement.
      const both = await store.sync([{ projectId: p, windowStartMs: now, delta: 4 }, { projectId: p, windowStartMs: now - w, delta: 2 }], w);
      expect(both[0]!.count).toBe(7);
      expect(both[1]!.count).toBe(7);
      expect(await store.sync([{ projectId: p, windowStartMs: now, delta: 0 }], w)).toEqual([{ count: 7, previous: 7 }]);
      await db().query(`insert into rate_limit_windows (project_id, window_start, count) values ($1, now() - interval '1 hour', 9)`, [q]);
      await store.deleteBefore(Date.now() - 5 * 60_000);
      const { rows } = await db().query('select project_id, count from rate_limit_windows where project_id = any($1::uuid[]) order by window_start', [[p, q]]);
      expect(rows).toEqual([
        { project_id: p, count: 7 },
        { project_id: p, count: 7 },
      ]);
    } finally {
      await store.close();
    }
  });
});
