import { randomUUID } from 'node:crypto';
import { api } from '../helpers/api';
import { closeDb, db } from '../helpers/db';
import { addVerifiedDomain, createTestProject, uniqueDomain, type TestProject } from '../helpers/fixtures';

let project: TestProject;
let other: TestProject;
let domain: string;
const tag = () => randomUUID().slice(0, 8);
const call = (method: string, path: string, body?: unknown, p = project) => api(method, path, { key: p.secretKey, body });

const valid = (over: Record<string, unknown> = {}) => ({
  name: `Welcome ${tag()}`,
  subject: 'Hello {{ first_name | default: "there" }}',
  body: '<p>Hi {{ email }}</p>{% if plan == "pro" %}<p>Thanks for going pro</p>{% endif %}',
  type: 'TRANSACTIONAL',
  ...over,
});

async function create(over: Record<string, unknown> = {}, p = project) {
  const res = await call('POST', '/templates', valid(over), p);
  if (res.status !== 201) throw new Error(`template creation failed: ${res.status} ${res.text}`);
  return res.body;
}

async function storedCount(projectId: string): Promise<number> {
  const { rows } = await db().query<{ n: number }>('select count(*)::int as n from templates where project_id = $1', [projectId]);
  return rows[0]!.n;
}

beforeAll(async () => {
  project = await createTestProject('templates');
  other = await createTestProject('templates-other');
  domain = uniqueDomain();
  await addVerifiedDomain(project.projectId, domain);
});
afterAll(closeDb);

describe('POST /templates', () => {
  test('creates a template (201) with its sender settings; GET answers the same resource', async () => {
    const input = valid({ from: `hello@${domain}`, fromName: 'Acme Team', replyTo: 'support@elsewhere.example' });
    const res = await call('POST', '/templates', input);
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      id: expect.stringMatching(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/),
      name: input.name,
      subject: input.subject,
      body: input.body,
      type: 'TRANSACTIONAL',
      from: `hello@${domain}`,
      fromName: 'Acme Team',
      replyTo: 'support@elsewhere.example',
      createdAt: expect.any(String),
      updatedAt: expect.any(String),
    });
    expect(Date.now() - Date.parse(res.body.createdAt)).toBeLessThan(60_000);
    const got = await call('GET', `/templates/${res.body.id}`);
    expect(got.status).toBe(200);
    expect(got.body).toEqual(res.body);
  });

  test('sender settings are optional and default to null; MARKETING is a type', async () => {
    const res = await call('POST', '/templates', valid({ type: 'MARKETING' }));
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ type: 'MARKETING', from: null, fromName: null, replyTo: null });
  });

  test('missing required fields -> 422 VALIDATION_ERROR naming each field; nothing is stored', async () => {
    const p = await createTestProject(`tpl-${tag()}`);
    const res = await call('POST', '/templates', {}, p);
    expect(res.status).toBe(422);
    expect(res.body.success).toBe(false);
    expect(res.body.error.code).toBe('VALIDATION_ERROR');
    const fields = res.body.error.errors.map((e: { field: string }) => e.field).sort();
    expect(fields).toEqual(['body', 'name', 'subject', 'type']);
    expect(res.body.error.errors.find((e: { field: string }) => e.field === 'name').message).toBe('name is required');
    const blank = await call('POST', '/templates', valid({ name: '   ', subject: '', body: '' }), p);
    expect(blank.status).toBe(422);
    expect(blank.body.error.errors.map((e: { field: string }) => e.field).sort()).toEqual(['body', 'name', 'subject']);
    expect(await storedCount(p.projectId)).toBe(0);
  });

  test('a type other than TRANSACTIONAL or MARKETING -> 422 on type', async () => {
    const res = await call('POST', '/templates', valid({ type: 'NEWSLETTER' }));
    expect(res.status).toBe(422);
    expect(res.body.error.errors).toEqual([expect.objectContaining({ field: 'type', message: 'type is TRANSACTIONAL or MARKETING' })]);
  });

  test('a subject with a newline (header injection) or above 998 characters -> 422', async () => {
    for (const subject of ['Hello\r\nBcc: victim@example.com', 'Hello\nthere']) {
      const res = await call('POST', '/templates', valid({ subject }));
      expect(res.status).toBe(422);
      expect(res.body.error.errors).toEqual([expect.objectContaining({ field: 'subject', code: 'invalid_subject' })]);
    }
    const long = await call('POST', '/templates', valid({ subject: 'x'.repeat(999) }));
    expect(long.status).toBe(422);
    expect(long.body.error.errors).toEqual([expect.objectContaining({ field: 'subject', code: 'too_big' })]);
    expect((await call('POST', '/templates', valid({ subject: 'x'.repeat(998) }))).status).toBe(201);
  });

  test('a name above 200 characters, bad sender emails, a fromName with CR/LF and unknown keys -> 422', async () => {
    const res = await call('POST', '/templates', valid({ name: 'n'.repeat(201), from: 'not-an-email', replyTo: 'also bad', fromName: 'Acme\r\nBcc: x@y.z', colour: 'red' }));
    expect(res.status).toBe(422);
    const byField = Object.fromEntries(res.body.error.errors.map((e: { field: string; code: string }) => [e.field, e.code]));
    expect(byField).toEqual({ name: 'too_big', from: 'invalid_string', replyTo: 'invalid_string', fromName: 'header_injection', '(body)': 'unrecognized_keys' });
  });

  test('a from address on a domain the project has not added, or has not verified -> 403 DOMAIN_NOT_VERIFIED on from', async () => {
    const p = await createTestProject(`tpl-${tag()}`);
    const missing = uniqueDomain();
    const res = await call('POST', '/templates', valid({ from: `hi@${missing}` }), p);
    expect(res.status).toBe(403);
    expect(res.body.error).toMatchObject({ code: 'DOMAIN_NOT_VERIFIED', errors: [{ field: 'from', code: 'unverified_domain' }] });
    expect(res.body.error.message).toContain(missing);
    expect(res.body.error.suggestion).toContain('POST /domains');

    const pending = uniqueDomain();
    await db().query(`insert into domains (id, project_id, name, status) values ($1, $2, $3, 'PENDING')`, [randomUUID(), p.projectId, pending]);
    const notYet = await call('POST', '/templates', valid({ from: `hi@${pending}` }), p);
    expect(notYet.status).toBe(403);
    expect(notYet.body.error.message).toContain('not verified yet');

    // A domain VERIFIED by another project does not count.
    const res2 = await call('POST', '/templates', valid({ from: `hi@${domain}` }), p);
    expect(res2.status).toBe(403);
    expect(await storedCount(p.projectId)).toBe(0);
  });

  test('Liquid syntax errors in subject or body -> 422 invalid_template on each field', async () => {
    const res = await call('POST', '/templates', valid({ subject: 'Hi {{ name', body: '<p>{% if x %}unclosed</p>' }));
    expect(res.status).toBe(422);
    expect(res.body.error.code).toBe('VALIDATION_ERROR');
    expect(res.body.error.errors).toEqual([
      expect.objectContaining({ field: 'subject', code: 'invalid_template', message: expect.stringContaining('Invalid Liquid syntax') }),
      expect.objectContaining({ field: 'body', code: 'invalid_template' }),
    ]);
    const unknownFilter = await call('POST', '/templates', valid({ body: '{{ email | no_such_filter }}' }));
    expect(unknownFilter.status).toBe(422);
    expect(unknownFilter.body.error.errors).toEqual([expect.objectContaining({ field: 'body', code: 'invalid_template' })]);
  });

  test('an MJML body is compiled on save: broken MJML -> 422 invalid_mjml, valid MJML is stored as written', async () => {
    const broken = await call('POST', '/templates', valid({ body: '<mjml><mj-body><mj-section><mj-column><mj-bogus>Hi</mj-bogus></mj-column></mj-section></mj-body></mjml>' }));
    expect(broken.status).toBe(422);
    expect(broken.body.error.errors).toEqual([expect.objectContaining({ field: 'body', code: 'invalid_mjml' })]);
    const mjml = '<mjml><mj-body><mj-section><mj-column><mj-text>Hi {{ first }}</mj-text></mj-column></mj-section></mj-body></mjml>';
    const ok = await call('POST', '/templates', valid({ body: mjml }));
    expect(ok.status).toBe(201);
    expect(ok.body.body).toBe(mjml);
  });

  test('the body is capped at 512 KB: above -> 422 too_big, far above the request limit -> 413', async () => {
    const atCap = '<p>' + 'a'.repeat(512 * 1024 - 7) + '</p>';
    expect(Buffer.byteLength(atCap)).toBe(512 * 1024);
    expect((await call('POST', '/templates', valid({ body: atCap }))).status).toBe(201);
    const over = await call('POST', '/templates', valid({ body: atCap + 'x' }));
    expect(over.status).toBe(422);
    expect(over.body.error.errors).toEqual([expect.objectContaining({ field: 'body', code: 'too_big', message: expect.stringContaining('512 KB') })]);
    // Multi-byte text counts in UTF-8 bytes: 200k characters of "é" are 400 KB, 300k are 600 KB.
    expect((await call('POST', '/templates', valid({ body: 'é'.repeat(200_000) }))).status).toBe(201);
    expect((await call('POST', '/templates', valid({ body: 'é'.repeat(300_000) }))).status).toBe(422);
    const huge = await call('POST', '/templates', valid({ body: 'x'.repeat(3 * 1024 * 1024) }));
    expect(huge.status).toBe(413);
    expect(huge.body.error.code).toBe('PAYLOAD_TOO_LARGE');
  });
});

describe('GET /templates', () => {
  test('newest first, paged by cursor; total on the first page only; every template once', async () => {
    const p = await createTestProject(`tpl-${tag()}`);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await create({ name: `T${i}` }, p)).id);
    const seen: string[] = [];
    let cursor: string | undefined;
    const totals: number[] = [];
    for (let page = 0; page < 10; page++) {
      const res = await call('GET', `/templates?limit=2${cursor ? `&cursor=${cursor}` : ''}`, undefined, p);
      expect(res.status).toBe(200);
      expect(res.body.data.length).toBeLessThanOrEqual(2);
      seen.push(...res.body.data.map((t: { id: string }) => t.id));
      totals.push(res.body.total);
      if (!res.body.hasMore) {
        expect(res.body.cursor).toBeNull();
        break;
      }
      cursor = res.body.cursor;
    }
    expect(seen).toEqual([...ids].reverse());
    expect(totals).toEqual([5, 0, 0]);
    const first = await call('GET', '/templates', undefined, p);
    expect(first.body).toMatchObject({ hasMore: false, cursor: null, total: 5 });
    expect(first.body.data[0]).toEqual((await call('GET', `/templates/${ids[4]}`, undefined, p)).body);
  });

  test('type filters, search matches a case-insensitive substring of name or subject, wildcards literal', async () => {
    const p = await createTestProject(`tpl-${tag()}`);
    const receipt = await create({ name: 'Order Receipt', subject: 'Your order', type: 'TRANSACTIONAL' }, p);
    const promo = await create({ name: 'Spring promo', subject: 'SALE: 50% off everything', type: 'MARKETING' }, p);
    const news = await create({ name: 'Newsletter', subject: 'News of the month', type: 'MARKETING' }, p);
    const idsOf = (res: { body: { data: { id: string }[] } }) => res.body.data.map((t) => t.id);

    const marketing = await call('GET', '/templates?type=MARKETING', undefined, p);
    expect(idsOf(marketing)).toEqual([news.id, promo.id]);
    expect(marketing.body.total).toBe(2);
    expect(idsOf(await call('GET', '/templates?type=TRANSACTIONAL', undefined, p))).toEqual([receipt.id]);
    expect((await call('GET', '/templates?type=OTHER', undefined, p)).status).toBe(422);

    expect(idsOf(await call('GET', '/templates?search=RECEIPT', undefined, p))).toEqual([receipt.id]); // name
    expect(idsOf(await call('GET', '/templates?search=sale', undefined, p))).toEqual([promo.id]); // subject
    const order = await call('GET', '/templates?search=order', undefined, p);
    expect(idsOf(order)).toEqual([receipt.id]);
    expect(order.body.total).toBe(1);
    expect(idsOf(await call('GET', `/templates?search=${encodeURIComponent('50%')}`, undefined, p))).toEqual([promo.id]);
    expect(idsOf(await call('GET', `/templates?search=${encodeURIComponent('%')}`, undefined, p))).toEqual([promo.id]);
    expect(idsOf(await call('GET', '/templates?search=n_ws', undefined, p))).toEqual([]);
    expect(idsOf(await call('GET', '/templates?search=news&type=TRANSACTIONAL', undefined, p))).toEqual([]);
    const paged = await call('GET', '/templates?type=MARKETING&limit=1', undefined, p);
    expect(paged.body).toMatchObject({ hasMore: true, total: 2 });
    const next = await call('GET', `/templates?type=MARKETING&limit=1&cursor=${paged.body.cursor}`, undefined, p);
    expect(idsOf(next)).toEqual([promo.id]);
    expect(next.body).toMatchObject({ hasMore: false, total: 0 });
  });

  test('limit outside 1-100 and a forged cursor -> 422', async () => {
    expect((await call('GET', '/templates?limit=0')).status).toBe(422);
    expect((await call('GET', '/templates?limit=101')).status).toBe(422);
    const forged = await call('GET', '/templates?cursor=not-a-cursor');
    expect(forged.status).toBe(422);
    expect(forged.body.error.errors[0].code).toBe('invalid_cursor');
  });
});

describe('PATCH /templates/:id', () => {
  test('updates any subset; the rest stays; updatedAt moves', async () => {
    const t = await create({ from: `news@${domain}`, fromName: 'News', replyTo: 'r@example.com' });
    await new Promise((r) => setTimeout(r, 5));
    const res = await call('PATCH', `/templates/${t.id}`, { name: 'Renamed', type: 'MARKETING' });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ ...t, name: 'Renamed', type: 'MARKETING', updatedAt: expect.any(String) });
    expect(Date.parse(res.body.updatedAt)).toBeGreaterThan(Date.parse(t.updatedAt));
    const body = await call('PATCH', `/templates/${t.id}`, { subject: 'New {{ subject_line }}', body: '<h1>New</h1>' });
    expect(body.body).toMatchObject({ name: 'Renamed', subject: 'New {{ subject_line }}', body: '<h1>New</h1>', from: `news@${domain}` });
    expect((await call('GET', `/templates/${t.id}`)).body).toEqual(body.body);
  });

  test('null clears sender settings; a new from must be on a verified domain (403, nothing changes)', async () => {
    const t = await create({ from: `a@${domain}`, fromName: 'A', replyTo: 'r@example.com' });
    const refused = await call('PATCH', `/templates/${t.id}`, { from: `a@${uniqueDomain()}`, name: 'Should not stick' });
    expect(refused.status).toBe(403);
    expect(refused.body.error).toMatchObject({ code: 'DOMAIN_NOT_VERIFIED', errors: [{ field: 'from', code: 'unverified_domain' }] });
    expect((await call('GET', `/templates/${t.id}`)).body).toEqual(t);
    const moved = await call('PATCH', `/templates/${t.id}`, { from: `b@${domain}` });
    expect(moved.body.from).toBe(`b@${domain}`);
    const cleared = await call('PATCH', `/templates/${t.id}`, { from: null, fromName: null, replyTo: null });
    expect(cleared.status).toBe(200);
    expect(cleared.body).toMatchObject({ from: null, fromName: null, replyTo: null, name: t.name });
    const { rows } = await db().query('select from_email, from_name, reply_to from templates where id = $1', [t.id]);
    expect(rows[0]).toEqual({ from_email: null, from_name: null, reply_to: null });
  });

  test('an unchanged from is not checked again: a template whose domain was removed can still be edited', async () => {
    const p = await createTestProject(`tpl-${tag()}`);
    const d = uniqueDomain();
    await addVerifiedDomain(p.projectId, d);
    const t = await create({ from: `hi@${d}` }, p);
    await db().query('delete from domains where project_id = $1 and name = $2', [p.projectId, d]);
    const res = await call('PATCH', `/templates/${t.id}`, { name: 'Still editable', from: `hi@${d}` }, p);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ name: 'Still editable', from: `hi@${d}` });
    expect((await call('PATCH', `/templates/${t.id}`, { from: `other@${d}` }, p)).status).toBe(403);
  });

  test('the same rules as create: Liquid, subject newlines, nulls for required fields, unknown keys -> 422', async () => {
    const t = await create();
    const liquid = await call('PATCH', `/templates/${t.id}`, { body: '{% for x in y %}' });
    expect(liquid.status).toBe(422);
    expect(liquid.body.error.errors).toEqual([expect.objectContaining({ field: 'body', code: 'invalid_template' })]);
    expect((await call('PATCH', `/templates/${t.id}`, { subject: 'a\nb' })).body.error.errors[0].code).toBe('invalid_subject');
    const nulls = await call('PATCH', `/templates/${t.id}`, { name: null, type: null });
    expect(nulls.status).toBe(422);
    expect(nulls.body.error.errors.map((e: { field: string }) => e.field).sort()).toEqual(['name', 'type']);
    expect((await call('PATCH', `/templates/${t.id}`, { html: '<p>' })).status).toBe(422);
    expect((await call('GET', `/templates/${t.id}`)).body).toEqual(t);
  });
});

describe('POST /templates/:id/duplicate', () => {
  test('201 { id } of a copy named "<name> (copy)" with the same content and settings', async () => {
    const t = await create({ name: 'Launch', from: `hi@${domain}`, fromName: 'Launch team', replyTo: 'r@example.com', type: 'MARKETING' });
    const res = await call('POST', `/templates/${t.id}/duplicate`);
    expect(res.status).toBe(201);
    expect(res.body).toEqual({ id: expect.any(String) });
    expect(res.body.id).not.toBe(t.id);
    const copy = (await call('GET', `/templates/${res.body.id}`)).body;
    expect(copy).toEqual({ ...t, id: res.body.id, name: 'Launch (copy)', createdAt: expect.any(String), updatedAt: expect.any(String) });
    expect((await call('GET', `/templates/${t.id}`)).body).toEqual(t);
    const again = await call('POST', `/templates/${res.body.id}/duplicate`);
    expect((await call('GET', `/templates/${again.body.id}`)).body.name).toBe('Launch (copy) (copy)');
  });

  test('a 200-character name is shortened so the copy stays within 200', async () => {
    const t = await create({ name: 'x'.repeat(200) });
    const res = await call('POST', `/templates/${t.id}/duplicate`);
    expect(res.status).toBe(201);
    const copy = (await call('GET', `/templates/${res.body.id}`)).body;
    expect(copy.name).toBe(`${'x'.repeat(193)} (copy)`);
    expect(copy.name).toHaveLength(200);
  });
});

describe('GET /templates/:id/usage and DELETE', () => {
  test('usage lists campaigns and workflow steps (none exist yet)', async () => {
    const t = await create();
    const res = await call('GET', `/templates/${t.id}/usage`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ campaigns: [], workflows: [] });
    expect((await call('GET', `/templates/${randomUUID()}/usage`)).status).toBe(404);
  });

  test('DELETE -> 204, then GET and DELETE -> 404', async () => {
    const t = await create();
    const del = await call('DELETE', `/templates/${t.id}`);
    expect(del.status).toBe(204);
    expect(del.text).toBe('');
    const gone = await call('GET', `/templates/${t.id}`);
    expect(gone.status).toBe(404);
    expect(gone.body.error).toMatchObject({ code: 'NOT_FOUND', statusCode: 404 });
    expect((await call('DELETE', `/templates/${t.id}`)).status).toBe(404);
    const { rows } = await db().query('select 1 from templates where id = $1', [t.id]);
    expect(rows).toHaveLength(0);
  });

  test('deleting the project deletes its templates', async () => {
    const p = await createTestProject(`tpl-${tag()}`);
    await create({}, p);
    await db().query('delete from projects where id = $1', [p.projectId]);
    expect(await storedCount(p.projectId)).toBe(0);
  });
});

describe('isolation and keys', () => {
  test("another project's key gets 404 on every template route and does not see it listed", async () => {
    const t = await create({ name: `Private ${tag()}` });
    for (const [method, path, body] of [
      ['GET', `/templates/${t.id}`],
      ['PATCH', `/templates/${t.id}`, { name: 'stolen' }],
      ['DELETE', `/templates/${t.id}`],
      ['POST', `/templates/${t.id}/duplicate`],
      ['GET', `/templates/${t.id}/usage`],
    ] as const) {
      const res = await call(method, path, body, other);
      expect([method, path, res.status]).toEqual([method, path, 404]);
      expect(res.body.error.code).toBe('NOT_FOUND');
    }
    const list = await call('GET', `/templates?search=${encodeURIComponent(t.name)}`, undefined, other);
    expect(list.body).toMatchObject({ data: [], total: 0 });
    expect((await call('GET', '/templates?limit=100', undefined, other)).body.data.map((x: { id: string }) => x.id)).not.toContain(t.id);
    expect((await call('GET', `/templates/${t.id}`)).body).toEqual(t);
    expect(await storedCount(other.projectId)).toBe(0);
  });

  test('a malformed id -> 422 (as for segments); an unknown one -> 404', async () => {
    const bad = await call('GET', '/templates/not-a-uuid');
    expect(bad.status).toBe(422);
    expect(bad.body.error.errors[0]).toMatchObject({ field: 'params.id' });
    expect((await call('DELETE', '/templates/123')).status).toBe(422);
    expect((await call('GET', `/templates/${randomUUID()}`)).status).toBe(404);
  });

  test('a pk_ key -> 401 INVALID_API_KEY; no key -> 401 UNAUTHORIZED', async () => {
    const t = await create();
    for (const [method, path] of [['GET', '/templates'], ['POST', '/templates'], ['GET', `/templates/${t.id}`], ['DELETE', `/templates/${t.id}`]] as const) {
      const res = await api(method, path, { key: project.publicKey, body: method === 'POST' ? valid() : undefined });
      expect(res.status).toBe(401);
      expect(res.body.error.code).toBe('INVALID_API_KEY');
    }
    const none = await api('GET', '/templates');
    expect(none.status).toBe(401);
    expect(none.body.error.code).toBe('UNAUTHORIZED');
    expect((await call('GET', `/templates/${t.id}`)).status).toBe(200);
  });
});

describe('contact field usage lists templates', () => {
  test('/contacts/fields/:field/usage names the templates whose subject or body read the field', async () => {
    const p = await createTestProject(`tpl-${tag()}`);
    const a = await create({ name: 'Uses plan', subject: 'Your {{ plan | upcase }} plan', body: '<p>{% if plan == "pro" %}pro{% endif %}</p>' }, p);
    const b = await create({ name: 'Uses city', subject: 'Hello', body: '<p>{{ address.city }}</p>' }, p);
    await create({ name: 'Only mentions it', subject: 'plan your trip', body: '{% assign plan = "x" %}{{ plan }} {{ planet }}' }, p);
    const plan = await call('GET', '/contacts/fields/plan/usage', undefined, p);
    expect(plan.status).toBe(200);
    expect(plan.body.templates).toEqual([{ id: a.id, name: 'Uses plan', where: 'subject, body' }]);
    expect((await call('GET', '/contacts/fields/data.address/usage', undefined, p)).body.templates).toEqual([{ id: b.id, name: 'Uses city', where: 'body' }]);
    expect((await call('GET', '/contacts/fields/address.city/usage', undefined, p)).body.templates).toEqual([{ id: b.id, name: 'Uses city', where: 'body' }]);
    expect((await call('GET', '/contacts/fields/pla/usage', undefined, p)).body.templates).toEqual([]);
    expect((await call('GET', '/contacts/fields/plan/usage', undefined, other)).body.templates).toEqual([]);
  });
});

describe('OpenAPI', () => {
  test('the template routes and the Template schema are in the document', async () => {
    const doc = await api('GET', '/openapi.json');
    expect(doc.status).toBe(200);
    expect(Object.keys(doc.body.paths)).toEqual(expect.arrayContaining(['/templates', '/templates/{id}', '/templates/{id}/duplicate', '/templates/{id}/usage']));
    expect(Object.keys(doc.body.paths['/templates/{id}']).sort()).toEqual(['delete', 'get', 'patch']);
    expect(Object.keys(doc.body.components.schemas.Template.properties).sort()).toEqual(
      ['body', 'createdAt', 'from', 'fromName', 'id', 'name', 'replyTo', 'subject', 'type', 'updatedAt'],
    );
  });
});
