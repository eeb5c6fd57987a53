import { randomUUID } from 'node:crypto';
import { api } from '../helpers/api';
import { closeDb, db } from '../helpers/db';
import { createTestProject, type TestProject } from '../helpers/fixtures';

let project: TestProject;
const email = (tag = 't') => `${tag}-${randomUUID().slice(0, 8)}@example.com`;

beforeAll(async () => {
  project = await createTestProject();
});
afterAll(closeDb);

const track = (body: unknown, key = project.publicKey) => api('POST', '/v1/track', { key, body });
const contact = async (e: string) => (await db().query('select * from contacts where project_id = $1 and email = $2', [project.projectId, e])).rows[0];
const eventsOf = async (contactId: string) =>
  (await db().query('select name, data, source from events where contact_id = $1 order by id', [contactId])).rows;

describe('POST /v1/track', () => {
  test('creates the contact (subscribed by default), records the event and answers SPEC.md shape', async () => {
    const e = email();
    const res = await track({ email: e, event: 'signed_up' });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ success: true, data: { contact: expect.any(String), event: expect.any(String), timestamp: expect.any(String) } });
    const c = await contact(e);
    expect(c.id).toBe(res.body.data.contact);
    expect(c.subscribed).toBe(true);
    const events = await eventsOf(c.id);
    expect(events).toEqual([{ name: 'signed_up', data: {}, source: 'TRACKED' }]);
  });

  test('the secret key may track too', async () => {
    expect((await track({ email: email(), event: 'x' }, project.secretKey)).status).toBe(200);
  });

  test('tracking the same event again records a new event (no idempotency)', async () => {
    const e = email();
    const a = await track({ email: e, event: 'page_view' });
    const b = await track({ email: e, event: 'page_view' });
    expect(a.body.data.event).not.toBe(b.body.data.event);
    expect(a.body.data.contact).toBe(b.body.data.contact);
    expect(await eventsOf(a.body.data.contact)).toHaveLength(2);
  });

  test('emails are normalized: case and surrounding spaces map to one contact', async () => {
    const e = email();
    const a = await track({ email: e.toUpperCase(), event: 'a' });
    const b = await track({ email: e, event: 'b' });
    expect(a.body.data.contact).toBe(b.body.data.contact);
    expect((await contact(e)).email).toBe(e);
  });

  test.each([
    'email.sent',
    'email.opened',
    'EMAIL.clicked',
    'contact.subscribed',
    'contact.unsubscribed',
    'segment.vip-users.entry',
    'segment.vip.exit',
  ])('the reserved name %s -> 422 VALIDATION_ERROR with field code reserved_event', async (name) => {
    const res = await track({ email: email(), event: name });
    expect(res.status).toBe(422);
    expect(res.body.error.code).toBe('VALIDATION_ERROR');
    expect(res.body.error.errors).toEqual([expect.objectContaining({ field: 'event', code: 'reserved_event' })]);
  });

  test.each(['emails.sent', 'contact.updated', 'segment.vip', 'my.email.sent'])('the similar but free name %s is accepted', async (name) => {
    expect((await track({ email: email(), event: name })).status).toBe(200);
  });

  test.each([
    [{ email: 'nope', event: 'a' }, 'email', 'invalid_string'],
    [{ email: 'a@b.co' }, 'event', 'invalid_type'],
    [{ email: 'a@b.co', event: '' }, 'event', 'too_small'],
    [{ email: 'a@b.co', event: 'x'.repeat(201) }, 'event', 'too_big'],
    [{ email: 'a@b.co', event: 'bad\nname' }, 'event', 'invalid_format'],
    [{ email: 'a@b.co', event: 'a', data: 'string' }, 'data', 'invalid_type'],
    [{ email: 'a@b.co', event: 'a', data: [1, 2] }, 'data', 'invalid_type'],
    [{ email: 'a@b.co', event: 'a', subscribed: 'yes' }, 'subscribed', 'invalid_type'],
  ])('bad input %j -> 422 on %s', async (body, field, code) => {
    const res = await track(body);
    expect(res.status).toBe(422);
    const err = res.body.error.errors.find((e: { field: string }) => e.field === field);
    expect(err).toBeDefined();
    expect(err.code).toBe(code === 'invalid_format' ? 'invalid_string' : code);
  });

  test('a 10 MB data object -> 413 in the envelope, nothing stored', async () => {
    const e = email();
    const res = await track({ email: e, event: 'big', data: { blob: 'x'.repeat(10 * 1024 * 1024) } });
    expect(res.status).toBe(413);
    expect(res.body.error.code).toBe('PAYLOAD_TOO_LARGE');
    expect(await contact(e)).toBeUndefined();
  });
});

describe('contact data rules through /v1/track', () => {
  test('values are stored; null deletes; "" is ignored; non-persistent values reach the event only; reserved keys are dropped', async () => {
    const e = email();
    await track({ email: e, event: 'a', data: { plan: 'free', city: 'Oslo', age: 30, prefs: { theme: 'dark' }, tags: ['a'] } });
    const res = await track({
      email: e,
      event: 'upgraded',
      data: { plan: 'pro', city: null, age: '', otp: { value: '1234', persistent: false }, email: 'x@evil.com', id: 'x', mailwright_email: 'x', unsubscribeUrl: 'http://x' },
    });
    const c = await contact(e);
    expect(c.data).toEqual({ plan: 'pro', age: 30, prefs: { theme: 'dark' }, tags: ['a'] });
    const upgraded = (await eventsOf(c.id)).find((ev) => ev.name === 'upgraded');
    expect(upgraded.data).toEqual({ plan: 'pro', otp: '1234' });
    expect(res.status).toBe(200);
  });
});

describe('subscription transitions through /v1/track', () => {
  test('a new contact with subscribed:false is created unsubscribed, and no subscription event is emitted', async () => {
    const e = email();
    await track({ email: e, event: 'a', subscribed: false });
    const c = await contact(e);
    expect(c.subscribed).toBe(false);
    expect((await eventsOf(c.id)).map((ev) => ev.name)).toEqual(['a']);
  });

  test('without `subscribed` an existing contact keeps its state (an unsubscribed one is not resubscribed)', async () => {
    const e = email();
    await track({ email: e, event: 'a', subscribed: false });
    await track({ email: e, event: 'b' });
    expect((await contact(e)).subscribed).toBe(false);
  });

  test('an explicit change emits contact.subscribed / contact.unsubscribed before the tracked event; no change emits nothing', async () => {
    const e = email();
    await track({ email: e, event: 'first' });
    await track({ email: e, event: 'second', subscribed: true }); // already subscribed: no event
    await track({ email: e, event: 'third', subscribed: false });
    await track({ email: e, event: 'fourth', subscribed: true });
    const c = await contact(e);
    const names = (await eventsOf(c.id)).map((ev) => ev.name);
    expect(names).toEqual(['first', 'second', 'contact.unsubscribed', 'third', 'contact.subscribed', 'fourth']);
    const sys = (await eventsOf(c.id)).filter((ev) => ev.source === 'SYSTEM');
    expect(sys[0].data).toEqual({ via: 'track', event: 'third' });
  });
});

describe('concurrent tracking (calls arriving together are written in batches)', () => {
  test('200 concurrent calls over 50 emails: every call gets its own event on the right contact, one contact per email', async () => {
    const own = await createTestProject('Burst');
    const emails = Array.from({ length: 50 }, (_, i) => `burst${i}-${randomUUID().slice(0, 6)}@example.com`);
    const calls = Array.from({ length: 200 }, (_, i) => ({ email: emails[i % 50]!, event: `step_${Math.floor(i / 50)}`, data: { [`k${Math.floor(i / 50)}`]: i } }));
    const results = await Promise.all(calls.map((body) => api('POST', '/v1/track', { key: own.publicKey, body })));
    expect(results.every((r) => r.status === 200)).toBe(true);
    const { rows: contacts } = await db().query('select id, email, data from contacts where project_id = $1', [own.projectId]);
    expect(contacts).toHaveLength(50);
    const idByEmail = new Map(contacts.map((c) => [c.email, c.id]));
    results.forEach((r, i) => expect(r.body.data.contact).toBe(idByEmail.get(calls[i]!.email)));
    const eventIds = results.map((r) => r.body.data.event);
    expect(new Set(eventIds).size).toBe(200);
    const { rows: events } = await db().query('select e.id, e.name, c.email from events e join contacts c on c.id = e.contact_id where e.id = any($1)', [eventIds]);
    expect(events).toHaveLength(200);
    const byId = new Map(events.map((e) => [e.id, e]));
    results.forEach((r, i) => expect(byId.get(r.body.data.event)).toMatchObject({ name: calls[i]!.event, email: calls[i]!.email }));
    // each contact got every key once: data from all four calls was merged, none lost
    for (const c of contacts) expect(Object.keys(c.data).sort()).toEqual(['k0', 'k1', 'k2', 'k3']);
  });

  test('30 concurrent calls for one new email create exactly one contact and 30 events', async () => {
    const own = await createTestProject('Race');
    const e = email('race');
    const results = await Promise.all(Array.from({ length: 30 }, (_, i) => api('POST', '/v1/track', { key: own.publicKey, body: { email: e, event: 'hit', data: { n: i } } })));
    expect(results.every((r) => r.status === 200)).toBe(true);
    expect(new Set(results.map((r) => r.body.data.contact)).size).toBe(1);
    const { rows } = await db().query('select count(*)::int as n from events where contact_id = $1', [results[0]!.body.data.contact]);
    expect(rows[0].n).toBe(30);
  });

  test('a call does not wait on a transaction that only refers to its contact (as the analytics consumer does)', async () => {
    // The analytics consumer inserts contact_last_event rows, whose foreign key locks the contact FOR KEY SHARE until its
    // batch commits. The upsert locked contacts FOR UPDATE once, which waits on that lock (and deadlocked under load).
    const e = email('ref');
    const first = await track({ email: e, event: 'one' });
    expect(first.status).toBe(200);
    const client = await db().connect();
    try {
      const pid = (await client.query('select pg_backend_pid() as pid')).rows[0].pid as number;
      await client.query('begin');
      // The lock a foreign key check takes on the referenced row (RI_FKey_check: SELECT ... FOR KEY SHARE).
      await client.query('select 1 from contacts where id = $1 for key share', [first.body.data.contact]);
      let answered: Awaited<ReturnType<typeof track>> | undefined;
      const call = track({ email: e, event: 'two', data: { plan: 'pro' } }).then((r) => (answered = r));
      // Until the call answers: is any backend waiting on a lock this open transaction holds? (The outbox dispatcher's
      // connections are left out: the worker handles the first call's event meanwhile, and none of that is the call.)
      let blocked = false;
      while (!answered && !blocked) {
        const { rows } = await db().query(
          `select count(*)::int as n from pg_stat_activity where $1 = any(pg_blocking_pids(pid)) and application_name <> 'mailwright-outbox'`,
          [pid],
        );
        blocked = rows[0].n > 0;
        if (!blocked) await new Promise((r) => setTimeout(r, 20));
      }
      expect(blocked).toBe(false);
      await call;
      expect(answered!.status).toBe(200);
      expect((await contact(e)).data).toEqual({ plan: 'pro' });
    } finally {
      await client.query('rollback');
      client.release();
    }
  });

  test('concurrent subscription flips on one contact record one event per real change', async () => {
    const own = await createTestProject('Flips');
    const e = email('flip');
    await api('POST', '/v1/track', { key: own.publicKey, body: { email: e, event: 'start' } });
    const flips = await Promise.all(Array.from({ length: 20 }, (_, i) => api('POST', '/v1/track', { key: own.publicKey, body: { email: e, event: 'flip', subscribed: i % 2 === 0 } })));
    expect(flips.every((r) => r.status === 200)).toBe(true);
    const { rows } = await db().query(`select e.name from events e join contacts c on c.id = e.contact_id where c.email = $1 and c.project_id = $2 `, [e, own.projectId]);
    // Real changes alternate (unsubscribed, subscribed, ...) from the initial subscribed state, so the counts must
    // agree with the final state: one more unsubscription than subscriptions exactly when it ended unsubscribed.
    const subs = rows.filter((r) => r.name === 'contact.subscribed').length;
    const unsubs = rows.filter((r) => r.name === 'contact.unsubscribed').length;
    const { rows: c } = await db().query('select subscribed from contacts where email = $1 and project_id = $2', [e, own.projectId]);
    expect(unsubs - subs).toBe(c[0].subscribed ? 0 : 1);
    expect(rows.filter((r) => r.name === 'flip')).toHaveLength(20);
  });
});
