import { randomUUID } from 'node:crypto';
import { api } from '../helpers/api';
import { closeDb, db } from '../helpers/db';
import { createTestProject, type TestProject } from '../helpers/fixtures';
import { seedContacts } from '../helpers/seed';

let project: TestProject;
let other: TestProject;
const tag = () => randomUUID().slice(0, 8);
const call = (method: string, path: string, body?: unknown, p = project) => api(method, path, { key: p.secretKey, body });
const plan = (value: unknown, op = 'equals') => ({ operator: 'AND', conditions: [{ field: 'data.plan', operator: op, value }] });

beforeAll(async () => {
  project = await createTestProject('segments');
  other = await createTestProject('segments-other');
});
afterAll(closeDb);

/** A fresh project per scenario, so counts are exact. */
async function freshProject(): Promise<TestProject> {
  return createTestProject(`seg-${tag()}`);
}

async function membershipRows(segmentId: string): Promise<string[]> {
  const { rows } = await db().query<{ email: string }>(
    'select c.email from segment_memberships m join contacts c on c.id = m.contact_id where m.segment_id = $1 order by c.email',
    [segmentId],
  );
  return rows.map((r) => r.email);
}

async function segmentEvents(projectId: string, slug: string): Promise<{ name: string; email: string }[]> {
  const { rows } = await db().query<{ name: string; email: string }>(
    `select e.name, c.email from events e join contacts c on c.id = e.contact_id where e.project_id = $1 and e.name like $2 order by e.name, c.email`,
    [projectId, `segment.${slug}.%`],
  );
  return rows;
}

interface Compute {
  id: string;
  segmentId: string;
  workflowId: string;
  status: 'RUNNING' | 'COMPLETED' | 'FAILED';
  result: { entered: number; exited: number; memberCount: number } | null;
  error: string | null;
  startedAt: string;
  finishedAt: string | null;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls GET /segments/:id/compute until the compute (`id`, or whichever is last) is no longer RUNNING. */
async function computeDone(segmentId: string, p: TestProject, id?: string, timeoutMs = 30_000): Promise<Compute> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const res = await call('GET', `/segments/${segmentId}/compute`, undefined, p);
    if (res.status === 200 && res.body.status !== 'RUNNING' && (id === undefined || res.body.id === id)) return res.body as Compute;
    if (Date.now() > deadline) throw new Error(`the compute of ${segmentId} did not finish: ${res.status} ${res.text}`);
    await sleep(100);
  }
}

/** POST /segments/:id/compute (202), then the result of that compute once COMPLETED. */
async function compute(segmentId: string, p = project): Promise<Compute['result']> {
  const started = await call('POST', `/segments/${segmentId}/compute`, undefined, p);
  expect(started.status).toBe(202);
  const done = await computeDone(segmentId, p, started.body.id);
  expect(done).toMatchObject({ status: 'COMPLETED', error: null });
  return done.result;
}

describe('POST /segments', () => {
  test('a dynamic segment is created with a slug, its condition and a counted memberCount', async () => {
    const p = await freshProject();
    await seedContacts(p.projectId, 6, (i) => ({ email: `c${i}-${tag()}@example.com`, data: { plan: i < 4 ? 'pro' : 'free' } }));
    const res = await call('POST', '/segments', { name: 'Pro users!', type: 'DYNAMIC', condition: plan('pro'), description: 'paying' }, p);
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ name: 'Pro users!', slug: 'pro-users', type: 'DYNAMIC', description: 'paying', condition: plan('pro'), trackMembership: false, memberCount: 4 });
    expect(res.body.filters).toBeUndefined();
    const again = await call('POST', '/segments', { name: 'Pro users', type: 'DYNAMIC', condition: plan('pro') }, p);
    expect(again.body.slug).toBe('pro-users-2');
  });

  test('the variant body { name, filters } makes a dynamic segment and echoes filters', async () => {
    const res = await call('POST', '/segments', { name: `Variant ${tag()}`, filters: plan('team'), trackMembership: true });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ type: 'DYNAMIC', condition: plan('team'), filters: plan('team'), trackMembership: true });
  });

  test('DYNAMIC requires condition, STATIC rejects it, type is required without filters', async () => {
    const dyn = await call('POST', '/segments', { name: 'x', type: 'DYNAMIC' });
    expect(dyn.status).toBe(422);
    expect(dyn.body.error).toMatchObject({ code: 'VALIDATION_ERROR', errors: [{ field: 'condition', code: 'required' }] });
    const stat = await call('POST', '/segments', { name: 'x', type: 'STATIC', condition: plan('pro') });
    expect(stat.status).toBe(422);
    expect(stat.body.error.errors).toEqual([expect.objectContaining({ field: 'condition', code: 'static_segment' })]);
    const none = await call('POST', '/segments', { name: 'x' });
    expect(none.body.error.errors).toEqual([expect.objectContaining({ field: 'type' })]);
    const both = await call('POST', '/segments', { name: 'x', filters: plan('a'), condition: plan('a') });
    expect(both.status).toBe(422);
  });

  test('an invalid filter -> 422 with precise paths (unknown operator, wrong value type, too deep)', async () => {
    const res = await call('POST', '/segments', {
      name: 'bad',
      type: 'DYNAMIC',
      condition: { operator: 'AND', conditions: [{ field: 'data.a', operator: 'equals', value: 1 }, { field: 'subscribed', operator: 'equals', value: 'yes' }, { field: 'data.b', operator: 'like', value: 'x' }] },
    });
    expect(res.status).toBe(422);
    expect(res.body.success).toBe(false);
    expect(res.body.error.errors).toEqual([
      expect.objectContaining({ field: 'condition.conditions.1.value', code: 'invalid_value' }),
      expect.objectContaining({ field: 'condition.conditions.2.operator', code: 'unknown_operator' }),
    ]);
    const deep = (n: number): unknown => (n === 0 ? { field: 'email', operator: 'equals', value: 'a@b.c' } : { operator: 'OR', conditions: [deep(n - 1)] });
    const tooDeep = await call('POST', '/segments', { name: 'deep', type: 'DYNAMIC', condition: deep(6) });
    expect(tooDeep.status).toBe(422);
    expect(tooDeep.body.error.errors[0].code).toBe('too_deep');
    const notObject = await call('POST', '/segments', { name: 'x', type: 'DYNAMIC', condition: 'plan = pro' });
    expect(notObject.status).toBe(422);
    expect(notObject.body.error.errors[0].field).toBe('condition');
  });

  test('SQL in a field name or value is data: the segment matches nothing and contacts survive', async () => {
    const p = await freshProject();
    await seedContacts(p.projectId, 3, (i) => ({ email: `i${i}-${tag()}@example.com`, data: { plan: 'pro' } }));
    const evil = { operator: 'OR', conditions: [
      { field: "data.plan'); drop table contacts; --", operator: 'exists' },
      { field: 'data.plan', operator: 'equals', value: "pro' or '1'='1" },
      { field: 'email', operator: 'contains', value: "'; delete from contacts; --" },
    ] };
    const res = await call('POST', '/segments', { name: 'evil', type: 'DYNAMIC', condition: evil }, p);
    expect(res.status).toBe(201);
    expect(res.body.memberCount).toBe(0);
    expect((await call('GET', `/segments/${res.body.id}/contacts`, undefined, p)).body.total).toBe(0);
    const { rows } = await db().query('select count(*)::int as n from contacts where project_id = $1', [p.projectId]);
    expect(rows[0].n).toBe(3);
  });
});

describe('GET, PATCH, DELETE /segments/:id', () => {
  test('list and get; another project cannot see it (404); a malformed id -> 422', async () => {
    const created = (await call('POST', '/segments', { name: `Listed ${tag()}`, type: 'STATIC' })).body;
    const list = await call('GET', '/segments');
    expect(list.status).toBe(200);
    expect(list.body.data.map((s: { id: string }) => s.id)).toContain(created.id);
    expect((await call('GET', `/segments/${created.id}`)).body).toEqual(created);
    expect((await call('GET', `/segments/${created.id}`, undefined, other)).status).toBe(404);
    expect((await call('PATCH', `/segments/${created.id}`, { name: 'x' }, other)).status).toBe(404);
    expect((await call('DELETE', `/segments/${created.id}`, undefined, other)).status).toBe(404);
    expect((await call('POST', `/segments/${created.id}/compute`, undefined, other)).status).toBe(404);
    expect((await call('GET', '/segments/nope')).status).toBe(422);
    expect((await call('GET', `/segments/${randomUUID()}`)).status).toBe(404);
  });

  test('PATCH: condition recounts a dynamic segment, is refused on a static one; the slug stays', async () => {
    const p = await freshProject();
    await seedContacts(p.projectId, 5, (i) => ({ email: `p${i}-${tag()}@example.com`, data: { plan: i < 2 ? 'pro' : 'team' } }));
    const seg = (await call('POST', '/segments', { name: 'Patchable', type: 'DYNAMIC', condition: plan('pro') }, p)).body;
    expect(seg.memberCount).toBe(2);
    const patched = await call('PATCH', `/segments/${seg.id}`, { name: 'Renamed', condition: plan('team'), description: 'd' }, p);
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({ name: 'Renamed', slug: 'patchable', description: 'd', condition: plan('team'), memberCount: 3 });
    const stat = (await call('POST', '/segments', { name: 'Static', type: 'STATIC' }, p)).body;
    const refused = await call('PATCH', `/segments/${stat.id}`, { condition: plan('pro') }, p);
    expect(refused.status).toBe(422);
    expect(refused.body.error.errors[0]).toMatchObject({ field: 'condition', code: 'static_segment' });
    expect((await call('PATCH', `/segments/${seg.id}`, { type: 'STATIC' }, p)).status).toBe(422);
  });

  test('DELETE -> 204, then 404', async () => {
    const seg = (await call('POST', '/segments', { name: `Gone ${tag()}`, type: 'STATIC' })).body;
    expect((await call('DELETE', `/segments/${seg.id}`)).status).toBe(204);
    expect((await call('GET', `/segments/${seg.id}`)).status).toBe(404);
    expect((await call('DELETE', `/segments/${seg.id}`)).status).toBe(404);
  });
});

describe('GET /segments/:id/contacts', () => {
  test('live for dynamic segments, paged with total/page/pageSize; pageSize above 100 -> 422', async () => {
    const p = await freshProject();
    await seedContacts(p.projectId, 7, (i) => ({ email: `l${i}-${tag()}@example.com`, data: { n: i } }));
    const seg = (await call('POST', '/segments', { name: 'Big n', type: 'DYNAMIC', condition: { operator: 'AND', conditions: [{ field: 'data.n', operator: 'gte', value: 2 }] } }, p)).body;
    const page1 = await call('GET', `/segments/${seg.id}/contacts?pageSize=3`, undefined, p);
    expect(page1.status).toBe(200);
    expect(page1.body).toMatchObject({ total: 5, page: 1, pageSize: 3 });
    expect(page1.body.data.map((c: { data: { n: number } }) => c.data.n)).toEqual([6, 5, 4]);
    const page2 = await call('GET', `/segments/${seg.id}/contacts?pageSize=3&page=2`, undefined, p);
    expect(page2.body.data.map((c: { data: { n: number } }) => c.data.n)).toEqual([3, 2]);
    // Live: a new matching contact shows up without a refresh, while the cached count stays.
    await call('POST', '/contacts', { email: `late-${tag()}@example.com`, data: { n: 10 } }, p);
    expect((await call('GET', `/segments/${seg.id}/contacts`, undefined, p)).body.total).toBe(6);
    expect((await call('GET', `/segments/${seg.id}`, undefined, p)).body.memberCount).toBe(5);
    const tooBig = await call('GET', `/segments/${seg.id}/contacts?pageSize=101`, undefined, p);
    expect(tooBig.status).toBe(422);
    expect(tooBig.body.error.errors[0].field).toBe('query.pageSize');
    expect((await call('GET', `/segments/${seg.id}/contacts?page=0`, undefined, p)).status).toBe(422);
  });
});

describe('static members', () => {
  test('add by email (unknown ones reported or created), list, remove; dynamic segments refuse', async () => {
    const p = await freshProject();
    const t = tag();
    const known = [`k1-${t}@example.com`, `k2-${t}@example.com`];
    await seedContacts(p.projectId, 2, (i) => ({ email: known[i]! }));
    const seg = (await call('POST', '/segments', { name: 'VIP', type: 'STATIC' }, p)).body;
    const add = await call('POST', `/segments/${seg.id}/members`, { emails: [known[0]!.toUpperCase(), `missing-${t}@example.com`] }, p);
    expect(add.status).toBe(200);
    expect(add.body).toEqual({ added: 1, alreadyMembers: 0, created: 0, notFound: [`missing-${t}@example.com`], memberCount: 1 });
    const again = await call('POST', `/segments/${seg.id}/members`, { emails: [known[0], known[1], `new-${t}@example.com`], createMissing: true, subscribed: false }, p);
    expect(again.body).toEqual({ added: 2, alreadyMembers: 1, created: 1, notFound: [], memberCount: 3 });
    const created = await db().query('select subscribed from contacts where project_id = $1 and email = $2', [p.projectId, `new-${t}@example.com`]);
    expect(created.rows).toEqual([{ subscribed: false }]);
    const list = await call('GET', `/segments/${seg.id}/contacts`, undefined, p);
    expect(list.body.total).toBe(3);
    expect(list.body.data.map((c: { email: string }) => c.email).sort()).toEqual([known[0], known[1], `new-${t}@example.com`].sort());
    const removed = await call('DELETE', `/segments/${seg.id}/members`, { emails: [known[1], `nobody-${t}@example.com`] }, p);
    expect(removed.body).toEqual({ removed: 1, memberCount: 2 });
    expect((await call('GET', `/segments/${seg.id}`, undefined, p)).body.memberCount).toBe(2);
    expect((await call('POST', `/segments/${seg.id}/members`, { emails: ['not-an-email'] }, p)).body.error.errors[0].field).toBe('emails.0');

    const dyn = (await call('POST', '/segments', { name: 'Dyn', type: 'DYNAMIC', condition: plan('pro') }, p)).body;
    const refused = await call('POST', `/segments/${dyn.id}/members`, { emails: [known[0]] }, p);
    expect(refused.status).toBe(422);
    expect(refused.body.error.errors[0].code).toBe('dynamic_segment');
    expect((await call('DELETE', `/segments/${dyn.id}/members`, { emails: [known[0]] }, p)).status).toBe(422);
  });

  test("another project's contacts are never added", async () => {
    const p = await freshProject();
    const e = `foreign-${tag()}@example.com`;
    await seedContacts(other.projectId, 1, () => ({ email: e }));
    const seg = (await call('POST', '/segments', { name: 'S', type: 'STATIC' }, p)).body;
    const add = await call('POST', `/segments/${seg.id}/members`, { emails: [e] }, p);
    expect(add.body).toMatchObject({ added: 0, notFound: [e] });
  });
});

describe('compute and refresh', () => {
  test('compute of a tracked segment fires entry/exit events after data changes and /v1/track events', async () => {
    const p = await freshProject();
    const t = tag();
    const emails = [0, 1, 2, 3].map((i) => `m${i}-${t}@example.com`);
    const ids = await seedContacts(p.projectId, 4, (i) => ({ email: emails[i]!, data: { plan: i < 2 ? 'pro' : 'free' } }));
    const condition = { operator: 'OR', conditions: [{ field: 'data.plan', operator: 'equals', value: 'pro' }, { event: 'upgrade', operator: 'hasDone', withinDays: 7 }] };
    const seg = (await call('POST', '/segments', { name: 'Engaged pro', type: 'DYNAMIC', condition, trackMembership: true }, p)).body;
    expect(seg.slug).toBe('engaged-pro');

    expect(await compute(seg.id, p)).toEqual({ entered: 2, exited: 0, memberCount: 2 });
    expect(await membershipRows(seg.id)).toEqual([emails[0], emails[1]]);
    expect(await segmentEvents(p.projectId, 'engaged-pro')).toEqual([
      { name: 'segment.engaged-pro.entry', email: emails[0] },
      { name: 'segment.engaged-pro.entry', email: emails[1] },
    ]);

    // Nothing changed: nothing fires.
    expect(await compute(seg.id, p)).toEqual({ entered: 0, exited: 0, memberCount: 2 });

    // m0 downgrades (exit); m2 tracks `upgrade` (entry).
    expect((await call('PATCH', `/contacts/${ids[0]}`, { data: { plan: 'free' } }, p)).status).toBe(200);
    expect((await api('POST', '/v1/track', { key: p.publicKey, body: { email: emails[2], event: 'upgrade' } })).status).toBe(200);
    expect(await compute(seg.id, p)).toEqual({ entered: 1, exited: 1, memberCount: 2 });
    expect(await membershipRows(seg.id)).toEqual([emails[1], emails[2]]);
    const events = await segmentEvents(p.projectId, 'engaged-pro');
    expect(events).toEqual([
      { name: 'segment.engaged-pro.entry', email: emails[0] },
      { name: 'segment.engaged-pro.entry', email: emails[1] },
      { name: 'segment.engaged-pro.entry', email: emails[2] },
      { name: 'segment.engaged-pro.exit', email: emails[0] },
    ]);
    // The events are in the contact's stream, as SYSTEM events naming the segment.
    const stream = await call('GET', `/events/contact/${ids[0]}`, undefined, p);
    expect(stream.body.data.map((e: { name: string }) => e.name)).toEqual(['segment.engaged-pro.exit', 'segment.engaged-pro.entry']);
    expect(stream.body.data[0]).toMatchObject({ source: 'SYSTEM', data: { segmentId: seg.id } });
    expect((await call('GET', `/segments/${seg.id}`, undefined, p)).body.memberCount).toBe(2);

    // Deleting a member contact drops its membership; the next compute has no exit to fire for it.
    await call('DELETE', `/contacts/${ids[1]}`, undefined, p);
    expect(await compute(seg.id, p)).toEqual({ entered: 0, exited: 0, memberCount: 1 });
  });

  test('refresh writes nothing but the count (no events, no membership writes)', async () => {
    const p = await freshProject();
    const t = tag();
    await seedContacts(p.projectId, 3, (i) => ({ email: `r${i}-${t}@example.com`, data: { plan: 'pro' } }));
    const seg = (await call('POST', '/segments', { name: 'Refreshable', type: 'DYNAMIC', condition: plan('pro'), trackMembership: true }, p)).body;
    await compute(seg.id, p);
    const before = await membershipRows(seg.id);
    const eventsBefore = await segmentEvents(p.projectId, 'refreshable');
    await seedContacts(p.projectId, 2, (i) => ({ email: `r-new${i}-${t}@example.com`, data: { plan: 'pro' } }));
    const refreshed = await call('POST', `/segments/${seg.id}/refresh`, undefined, p);
    expect(refreshed.status).toBe(200);
    expect(refreshed.body.memberCount).toBe(5);
    expect(await membershipRows(seg.id)).toEqual(before);
    expect(await segmentEvents(p.projectId, 'refreshable')).toEqual(eventsBefore);
    expect(await compute(seg.id, p)).toEqual({ entered: 2, exited: 0, memberCount: 5 });
  });

  test('compute of an untracked or static segment only refreshes the count (through the same workflow)', async () => {
    const p = await freshProject();
    const emails = [0, 1].map((i) => `u${i}-${tag()}@example.com`);
    await seedContacts(p.projectId, 2, (i) => ({ email: emails[i]!, data: { plan: 'pro' } }));
    const seg = (await call('POST', '/segments', { name: 'Untracked', type: 'DYNAMIC', condition: plan('pro') }, p)).body;
    await seedContacts(p.projectId, 1, () => ({ email: `u-late-${tag()}@example.com`, data: { plan: 'pro' } }));
    expect(await compute(seg.id, p)).toEqual({ entered: 0, exited: 0, memberCount: 3 });
    expect(await membershipRows(seg.id)).toEqual([]);
    expect(await segmentEvents(p.projectId, 'untracked')).toEqual([]);
    expect((await call('GET', `/segments/${seg.id}`, undefined, p)).body).toMatchObject({ memberCount: 3, computedAt: null });

    const stat = (await call('POST', '/segments', { name: 'Static', type: 'STATIC' }, p)).body;
    await call('POST', `/segments/${stat.id}/members`, { emails }, p);
    expect(await compute(stat.id, p)).toEqual({ entered: 0, exited: 0, memberCount: 2 });
    expect(await segmentEvents(p.projectId, 'static')).toEqual([]);
  });

  test('turning tracking off forgets the membership', async () => {
    const p = await freshProject();
    await seedContacts(p.projectId, 2, (i) => ({ email: `o${i}-${tag()}@example.com`, data: { plan: 'pro' } }));
    const seg = (await call('POST', '/segments', { name: 'Toggle', type: 'DYNAMIC', condition: plan('pro'), trackMembership: true }, p)).body;
    await compute(seg.id, p);
    expect(await membershipRows(seg.id)).toHaveLength(2);
    await call('PATCH', `/segments/${seg.id}`, { trackMembership: false }, p);
    expect(await membershipRows(seg.id)).toEqual([]);
  });
});

describe('compute runs as a workflow', () => {
  test('POST answers 202 with the compute to poll (Location); GET shows it until COMPLETED; 404 before the first', async () => {
    const p = await freshProject();
    await seedContacts(p.projectId, 2, (i) => ({ email: `w${i}-${tag()}@example.com`, data: { plan: 'pro' } }));
    const seg = (await call('POST', '/segments', { name: 'Polled', type: 'DYNAMIC', condition: plan('pro'), trackMembership: true }, p)).body;
    const never = await call('GET', `/segments/${seg.id}/compute`, undefined, p);
    expect({ status: never.status, code: never.body.error?.code }).toEqual({ status: 404, code: 'NOT_FOUND' });

    const started = await call('POST', `/segments/${seg.id}/compute`, undefined, p);
    expect(started.status).toBe(202);
    expect(started.headers.get('location')).toBe(`/segments/${seg.id}/compute`);
    expect(started.body).toMatchObject({ id: expect.any(String), segmentId: seg.id, workflowId: `segment-compute/${seg.id}`, startedAt: expect.any(String) });
    expect(['RUNNING', 'COMPLETED']).toContain(started.body.status);

    const done = await computeDone(seg.id, p, started.body.id);
    expect(done).toEqual({
      id: started.body.id,
      segmentId: seg.id,
      workflowId: `segment-compute/${seg.id}`,
      status: 'COMPLETED',
      result: { entered: 2, exited: 0, memberCount: 2 },
      error: null,
      startedAt: expect.any(String),
      finishedAt: expect.any(String),
    });
    expect(Date.parse(done.finishedAt!)).toBeGreaterThanOrEqual(Date.parse(done.startedAt));
    expect((await call('GET', `/segments/${seg.id}`, undefined, p)).body).toMatchObject({ memberCount: 2, computedAt: expect.any(String) });
    expect((await call('GET', `/segments/${seg.id}/compute`, undefined, other)).status).toBe(404);
    expect((await call('GET', `/segments/${randomUUID()}/compute`, undefined, p)).status).toBe(404);
  });

  test('one compute per segment: concurrent POSTs and a POST while it runs join one run, which fires each event once; after it ended a POST starts a new run', async () => {
    const p = await freshProject();
    const t = tag();
    const ids = await seedContacts(p.projectId, 2, (i) => ({ email: `once${i}-${t}@example.com`, data: { plan: 'pro' } }));
    const seg = (await call('POST', '/segments', { name: 'Once', type: 'DYNAMIC', condition: plan('pro'), trackMembership: true }, p)).body;
    // Holds the compute: an uncommitted membership of the segment keys the segment's row, so the compute's row lock
    // waits for this transaction.
    const hold = await db().connect();
    let first: Compute;
    try {
      await hold.query('begin');
      await hold.query('insert into segment_memberships (segment_id, contact_id) values ($1, $2)', [seg.id, ids[0]]);
      const [a, b] = await Promise.all([0, 1].map(() => call('POST', `/segments/${seg.id}/compute`, undefined, p)));
      expect([a!.status, b!.status]).toEqual([202, 202]);
      expect(b!.body.id).toBe(a!.body.id);
      first = a!.body;
      const again = await call('POST', `/segments/${seg.id}/compute`, undefined, p);
      expect(again.body).toMatchObject({ id: first.id, status: 'RUNNING' });
      expect((await call('GET', `/segments/${seg.id}/compute`, undefined, p)).body).toMatchObject({ id: first.id, status: 'RUNNING', result: null, finishedAt: null });
    } finally {
      await hold.query('rollback');
      hold.release();
    }
    expect((await computeDone(seg.id, p, first.id)).result).toEqual({ entered: 2, exited: 0, memberCount: 2 });
    expect(await segmentEvents(p.projectId, 'once')).toHaveLength(2);

    const next = await call('POST', `/segments/${seg.id}/compute`, undefined, p);
    expect(next.status).toBe(202);
    expect(next.body.id).not.toBe(first.id);
    expect(next.body.workflowId).toBe(first.workflowId);
    expect((await computeDone(seg.id, p, next.body.id)).result).toEqual({ entered: 0, exited: 0, memberCount: 2 });
  });

  test('a POST right after a compute finished starts a new run: a run that recorded its end is never joined', async () => {
    const p = await freshProject();
    await seedContacts(p.projectId, 1, () => ({ email: `again-${tag()}@example.com`, data: { plan: 'pro' } }));
    const seg = (await call('POST', '/segments', { name: 'Again', type: 'DYNAMIC', condition: plan('pro'), trackMembership: true }, p)).body;
    let current: string = (await call('POST', `/segments/${seg.id}/compute`, undefined, p)).body.id;
    for (let i = 0; i < 5; i++) {
      const done = await computeDone(seg.id, p, current);
      // At once: the finished run's workflow may still be completing, and a start would join it.
      const next = await call('POST', `/segments/${seg.id}/compute`, undefined, p);
      expect(next.status).toBe(202);
      expect(next.body.id).not.toBe(done.id);
      current = next.body.id;
    }
    expect((await computeDone(seg.id, p, current)).result).toEqual({ entered: 0, exited: 0, memberCount: 1 });
  });

  test("the schedule recomputes a tracked segment once its project's segmentRecomputeMinutes have passed, and not before", async () => {
    const p = await freshProject();
    const set = await api('PATCH', `/users/@me/projects/${p.projectId}`, { cookie: p.cookie, body: { settings: { segmentRecomputeMinutes: 5 } } });
    expect(set.status).toBe(200);
    expect(set.body.settings.segmentRecomputeMinutes).toBe(5);
    const hourly = await freshProject();
    const t = tag();
    await seedContacts(p.projectId, 2, (i) => ({ email: `sched${i}-${t}@example.com`, data: { plan: 'pro' } }));
    await seedContacts(hourly.projectId, 1, () => ({ email: `sched-h-${t}@example.com`, data: { plan: 'pro' } }));
    const tracked = { type: 'DYNAMIC', condition: plan('pro'), trackMembership: true };
    const due = (await call('POST', '/segments', { name: 'Scheduled', ...tracked }, p)).body;
    const recent = (await call('POST', '/segments', { name: 'Recent', ...tracked }, p)).body;
    const notYet = (await call('POST', '/segments', { name: 'Hourly', ...tracked }, hourly)).body;
    // Due: created 6 minutes ago in the 5-minute project. Not due: created just now, or 30 minutes ago in an hourly project.
    await db().query(`update segments set created_at = now() - interval '6 minutes' where id = $1`, [due.id]);
    await db().query(`update segments set created_at = now() - interval '30 minutes' where id = $1`, [notYet.id]);

    const done = await computeDone(due.id, p, undefined, 30_000); // the sweep runs every 3 s in the test stack
    expect(done).toMatchObject({ workflowId: `segment-compute/${due.id}`, status: 'COMPLETED', result: { entered: 2, exited: 0, memberCount: 2 } });
    expect(await segmentEvents(p.projectId, 'scheduled')).toHaveLength(2);
    // Two sweeps later: the computed segment is not due again for 5 minutes, the others are not due at all.
    await sleep(7_000);
    expect((await call('GET', `/segments/${due.id}/compute`, undefined, p)).body.id).toBe(done.id);
    expect((await call('GET', `/segments/${recent.id}/compute`, undefined, p)).status).toBe(404);
    expect((await call('GET', `/segments/${notYet.id}/compute`, undefined, hourly)).status).toBe(404);
  });

  test('settings.segmentRecomputeMinutes takes a whole number from 5 to 10080, or null (hourly)', async () => {
    const p = await freshProject();
    const path = `/users/@me/projects/${p.projectId}`;
    expect((await api('GET', '/users/@me/projects', { cookie: p.cookie })).body[0].settings).toMatchObject({ segmentRecomputeMinutes: null });
    const set = await api('PATCH', path, { cookie: p.cookie, body: { settings: { segmentRecomputeMinutes: 10_080 } } });
    expect(set.body.settings).toMatchObject({ segmentRecomputeMinutes: 10_080, trackOpens: true });
    for (const bad of [4, 10_081, 7.5, '60']) {
      const res = await api('PATCH', path, { cookie: p.cookie, body: { settings: { segmentRecomputeMinutes: bad } } });
      expect({ bad, status: res.status, field: res.body.error?.errors?.[0]?.field }).toEqual({ bad, status: 422, field: 'settings.segmentRecomputeMinutes' });
    }
    const reset = await api('PATCH', path, { cookie: p.cookie, body: { settings: { segmentRecomputeMinutes: null } } });
    expect(reset.body.settings.segmentRecomputeMinutes).toBeNull();
  });
});

describe('usage endpoints report segments', () => {
  test('/contacts/fields/:field/usage and /events/:eventName/usage list the segments that reference them', async () => {
    const p = await freshProject();
    const a = (await call('POST', '/segments', {
      name: 'Uses plan',
      type: 'DYNAMIC',
      condition: { operator: 'AND', conditions: [{ field: 'data.plan', operator: 'exists' }, { operator: 'OR', conditions: [{ event: 'purchase', operator: 'hasDone' }] }] },
    }, p)).body;
    const b = (await call('POST', '/segments', { name: 'Uses city', type: 'DYNAMIC', condition: { operator: 'AND', conditions: [{ field: 'data.address.city', operator: 'equals', value: 'Oslo' }] } }, p)).body;
    const field = await call('GET', '/contacts/fields/plan/usage', undefined, p);
    expect(field.status).toBe(200);
    expect(field.body.segments).toEqual([{ id: a.id, name: 'Uses plan', where: 'condition' }]);
    expect((await call('GET', '/contacts/fields/data.address/usage', undefined, p)).body.segments).toEqual([{ id: b.id, name: 'Uses city', where: 'condition' }]);
    expect((await call('GET', '/contacts/fields/pla/usage', undefined, p)).body.segments).toEqual([]);
    const event = await call('GET', '/events/purchase/usage', undefined, p);
    expect(event.body.segments).toEqual([{ id: a.id, name: 'Uses plan', where: 'condition' }]);
    expect((await call('GET', '/contacts/fields/plan/usage', undefined, other)).body.segments).toEqual([]);
  });
});

describe('OpenAPI', () => {
  test('the segment routes and the Filter schema are in the document', async () => {
    const doc = await api('GET', '/openapi.json');
    expect(doc.status).toBe(200);
    expect(Object.keys(doc.body.paths)).toEqual(expect.arrayContaining(['/segments', '/segments/{id}', '/segments/{id}/contacts', '/segments/{id}/members', '/segments/{id}/compute', '/segments/{id}/refresh']));
    expect(doc.body.components.schemas.Filter).toBeDefined();
  });
});
