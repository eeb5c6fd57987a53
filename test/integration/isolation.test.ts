import { randomUUID } from 'node:crypto';
import { api } from '../helpers/api';
import { closeDb, db } from '../helpers/db';
import { createTestProject, type TestProject } from '../helpers/fixtures';

/** Project A's keys never read or change project B's contacts or events; pk_ keys work on /v1/track only. */
let a: TestProject;
let b: TestProject;
let bContact: { id: string; email: string };

beforeAll(async () => {
  a = await createTestProject('A');
  b = await createTestProject('B');
  const tracked = await api('POST', '/v1/track', { key: b.publicKey, body: { email: 'shared@example.com', event: 'b_only', data: { secret: 'b' } } });
  bContact = { id: tracked.body.data.contact, email: 'shared@example.com' };
});
afterAll(closeDb);

describe('project isolation', () => {
  test("A cannot read, change or delete B's contact by id (404, and B's row is untouched)", async () => {
    for (const [method, body] of [['GET', undefined], ['PATCH', { data: { secret: 'a' } }], ['DELETE', undefined]] as const) {
      const res = await api(method, `/contacts/${bContact.id}`, { key: a.secretKey, body });
      expect(res.status).toBe(404);
    }
    expect((await api('GET', `/events/contact/${bContact.id}`, { key: a.secretKey })).status).toBe(404);
    const { rows } = await db().query('select data from contacts where id = $1', [bContact.id]);
    expect(rows[0].data).toEqual({ secret: 'b' });
  });

  test("the same email in A is A's own contact; lists, lookup, fields and events show only A's data", async () => {
    const mine = await api('POST', '/contacts', { key: a.secretKey, body: { email: bContact.email } });
    expect(mine.status).toBe(201);
    expect(mine.body.id).not.toBe(bContact.id);
    expect(mine.body.data).toEqual({});
    const list = await api('GET', '/contacts', { key: a.secretKey });
    expect(list.body.data.map((c: { id: string }) => c.id)).toEqual([mine.body.id]);
    const lookup = await api('POST', '/contacts/lookup', { key: a.secretKey, body: { emails: [bContact.email] } });
    expect(lookup.body.results[0].id).toBe(mine.body.id);
    const fields = await api('GET', '/contacts/fields', { key: a.secretKey });
    expect(fields.body.data.map((f: { name: string }) => f.name)).not.toContain('secret');
    expect((await api('GET', '/events', { key: a.secretKey })).body.total).toBe(0);
    expect((await api('GET', '/events/names', { key: a.secretKey })).body.data).toEqual([]);
    expect((await api('GET', '/contacts/fields/secret/values', { key: a.secretKey })).body.total).toBe(0);
  });

  test("deleting a field or an event name in A leaves B's data alone", async () => {
    await api('DELETE', '/contacts/fields/secret', { key: a.secretKey });
    await api('DELETE', '/events/b_only', { key: a.secretKey });
    expect((await db().query('select data from contacts where id = $1', [bContact.id])).rows[0].data).toEqual({ secret: 'b' });
    expect((await db().query(`select count(*)::int as n from events where contact_id = $1`, [bContact.id])).rows[0].n).toBe(1);
  });
});

describe('the public key is refused everywhere but POST /v1/track', () => {
  const id = randomUUID();
  test.each([
    ['GET', '/contacts'],
    ['POST', '/contacts'],
    ['GET', `/contacts/${id}`],
    ['PATCH', `/contacts/${id}`],
    ['DELETE', `/contacts/${id}`],
    ['POST', '/contacts/lookup'],
    ['GET', '/contacts/fields'],
    ['GET', '/contacts/fields/plan/values'],
    ['GET', '/contacts/fields/plan/usage'],
    ['DELETE', '/contacts/fields/plan'],
    ['GET', '/events'],
    ['GET', '/events/stats'],
    ['GET', '/events/names'],
    ['GET', `/events/contact/${id}`],
    ['GET', '/events/x/usage'],
    ['DELETE', '/events/x'],
    ['POST', '/v1/send'],
  ])('%s %s -> 401 INVALID_API_KEY', async (method, path) => {
    const res = await api(method, path, { key: a.publicKey, body: method === 'GET' || method === 'DELETE' ? undefined : {} });
    expect(res.status).toBe(401);
    expect(res.body.error.code).toBe('INVALID_API_KEY');
  });

  test('POST /v1/track accepts it', async () => {
    expect((await api('POST', '/v1/track', { key: a.publicKey, body: { email: 'pk@example.com', event: 'ok' } })).status).toBe(200);
  });
});
