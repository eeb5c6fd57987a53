import { randomUUID } from 'node:crypto';
import { api } from '../helpers/api';
import { closeDb, db } from '../helpers/db';
import { createTestProject, type TestProject } from '../helpers/fixtures';

let p: TestProject;
const email = () => `ev-${randomUUID().slice(0, 8)}@example.com`;
const track = (e: string, event: string, data?: Record<string, unknown>) => api('POST', '/v1/track', { key: p.publicKey, body: { email: e, event, data } });
const get = (path: string) => api('GET', path, { key: p.secretKey });

let alice: string;
let aliceId: string;
beforeAll(async () => {
  p = await createTestProject('Events');
  alice = email();
  const first = await track(alice, 'signed_up', { source: 'ads' });
  aliceId = first.body.data.contact;
  await track(alice, 'viewed_pricing');
  await track(alice, 'viewed_pricing');
  await track(email(), 'viewed_pricing');
  await track(email(), 'signed_up');
});
afterAll(closeDb);

describe('events', () => {
  test('GET /events lists recent events newest first with the contact, paginated', async () => {
    const page1 = await get('/events?limit=3');
    expect(page1.status).toBe(200);
    expect(page1.body.total).toBe(5);
    expect(page1.body.data).toHaveLength(3);
    expect(page1.body.data[0]).toMatchObject({ name: 'signed_up', source: 'TRACKED', emailId: null });
    const page2 = await get(`/events?limit=3&cursor=${page1.body.cursor}`);
    expect(page2.body.data).toHaveLength(2);
    expect(page2.body.hasMore).toBe(false);
    expect(page2.body.data[1]).toMatchObject({ name: 'signed_up', contactEmail: alice, data: { source: 'ads' } });
    expect((await get('/events?name=viewed_pricing')).body.total).toBe(3);
  });

  test("GET /events/contact/:contactId lists one contact's events; unknown contact -> 404", async () => {
    const res = await get(`/events/contact/${aliceId}`);
    expect(res.body.data.map((e: { name: string }) => e.name)).toEqual(['viewed_pricing', 'viewed_pricing', 'signed_up']);
    expect((await get(`/events/contact/${randomUUID()}`)).status).toBe(404);
  });

  test('GET /events/names lists distinct names with counts', async () => {
    const res = await get('/events/names');
    expect(res.body.data).toEqual([
      { name: 'signed_up', count: 2, lastSeenAt: expect.any(String), source: 'TRACKED' },
      { name: 'viewed_pricing', count: 3, lastSeenAt: expect.any(String), source: 'TRACKED' },
    ]);
  });

  test('GET /events/stats aggregates totals, names and days (from the rollups the analytics consumer keeps)', async () => {
    const deadline = Date.now() + 20_000;
    let res = await get('/events/stats?days=7');
    while (res.body.total !== 5 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 200));
      res = await get('/events/stats?days=7');
    }
    expect(res.body).toMatchObject({ windowDays: 7, total: 5, inWindow: 5, last24h: 5, uniqueContacts: 3 });
    expect(res.body.byName).toEqual([{ name: 'viewed_pricing', count: 3 }, { name: 'signed_up', count: 2 }]);
    expect(res.body.daily).toHaveLength(7);
    expect(res.body.daily[6]).toEqual({ date: new Date().toISOString().slice(0, 10), count: 5 });
    expect((await get('/events/stats?days=0')).status).toBe(422);
  });

  test('GET /events/stats: a new contact counts as active once; a deleted one no longer does (its events stay counted)', async () => {
    const stats = async (want: (b: any) => boolean) => {
      const deadline = Date.now() + 20_000;
      for (;;) {
        const res = await get('/events/stats?days=7');
        if (want(res.body) || Date.now() > deadline) return res.body;
        await new Promise((r) => setTimeout(r, 200));
      }
    };
    const before = await stats(() => true);
    const bob = email();
    const tracked = await track(bob, 'signed_up');
    await track(bob, 'viewed_pricing');
    const withBob = await stats((b) => b.total === before.total + 2);
    expect(withBob).toMatchObject({ total: before.total + 2, uniqueContacts: before.uniqueContacts + 1 });
    expect((await api('DELETE', `/contacts/${tracked.body.data.contact}`, { key: p.secretKey })).status).toBe(204);
    const after = await stats((b) => b.uniqueContacts === before.uniqueContacts);
    expect(after).toMatchObject({ total: before.total + 2, uniqueContacts: before.uniqueContacts });
  });

  test('GET /events/:eventName/usage answers with empty reference lists', async () => {
    const res = await get('/events/signed_up/usage');
    expect(res.body).toEqual({ event: 'signed_up', segments: [], campaigns: [], workflows: [], templates: [] });
  });

  test('DELETE /events/:eventName deletes that name only; service names are refused', async () => {
    const other = await createTestProject();
    await api('POST', '/v1/track', { key: other.publicKey, body: { email: email(), event: 'viewed_pricing' } });
    // The rollup per name counts them (the analytics consumer), and takes them back after the delete (a negative
    // tally through the outbox, the rollup's one writer).
    const counted = async (projectId: string) =>
      (await db().query(`select coalesce(sum(count), 0)::int as n from event_name_hourly where project_id = $1 and name = 'viewed_pricing'`, [projectId])).rows[0].n;
    const settle = async (projectId: string, n: number) => {
      for (const until = Date.now() + 15_000; (await counted(projectId)) !== n && Date.now() < until; ) await new Promise((r) => setTimeout(r, 100));
      expect(await counted(projectId)).toBe(n);
    };
    const pending = async () =>
      (await db().query(`select count(*)::int as n from event_outbox o join events e on e.id = o.event_id where o.consumer = 'analytics' and e.project_id = $1`, [p.projectId])).rows[0].n;
    for (const until = Date.now() + 15_000; (await pending()) > 0 && Date.now() < until; ) await new Promise((r) => setTimeout(r, 100));
    expect(await pending()).toBe(0);
    // The rollup is history (an event deleted with its contact stays counted): what it holds now loses these 3.
    const before = await counted(p.projectId);
    expect(before).toBeGreaterThanOrEqual(3);
    const res = await api('DELETE', '/events/viewed_pricing', { key: p.secretKey });
    expect(res.body).toEqual({ event: 'viewed_pricing', deleted: 3 });
    await settle(p.projectId, before - 3);
    await settle(other.projectId, 1);
    expect((await get('/events')).body.total).toBe(2);
    expect((await db().query(`select count(*)::int as n from events where project_id = $1`, [other.projectId])).rows[0].n).toBe(1);
    const reserved = await api('DELETE', '/events/email.sent', { key: p.secretKey });
    expect(reserved.status).toBe(422);
    expect(reserved.body.error.errors[0].code).toBe('reserved_event');
  });
});

describe('POST /events/track (dashboard alias)', () => {
  test('a member tracks into the named project with the session cookie', async () => {
    const e = email();
    const res = await api('POST', '/events/track', { cookie: p.cookie, body: { projectId: p.projectId, email: e, event: 'from_dashboard' } });
    expect(res.status).toBe(200);
    expect(res.body.success).toBe(true);
    const { rows } = await db().query('select c.project_id from events e join contacts c on c.id = e.contact_id where e.id = $1', [res.body.data.event]);
    expect(rows[0].project_id).toBe(p.projectId);
  });

  test("another user's project -> 404; no cookie -> 401; an API key is not a session", async () => {
    const stranger = await createTestProject();
    const body = { projectId: p.projectId, email: email(), event: 'x' };
    expect((await api('POST', '/events/track', { cookie: stranger.cookie, body })).status).toBe(404);
    expect((await api('POST', '/events/track', { body })).status).toBe(401);
    expect((await api('POST', '/events/track', { key: p.secretKey, body })).status).toBe(401);
  });
});
