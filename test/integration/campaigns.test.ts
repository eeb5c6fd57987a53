import { randomUUID } from 'node:crypto';
import { api } from '../helpers/api';
import { closeDb, db, waitForEmailStatus } from '../helpers/db';
import { addVerifiedDomain, createTestProject, uniqueDomain, type TestProject } from '../helpers/fixtures';
import { waitForMail } from '../helpers/mailbox';
import { seedContacts } from '../helpers/seed';

/**
 * The campaign CRUD API over HTTP against the real stack. SCHEDULED campaigns are real (a send scheduled a year
 * ahead, so its workflow only waits); SENDING, PAUSED, SENT and CANCELLED states that need a running send are written
 * into the database directly where noted, so these tests do not depend on the send engine finishing.
 */

let project: TestProject;
let other: TestProject;
let domain: string;
const tag = () => randomUUID().slice(0, 8);
const call = (method: string, path: string, body?: unknown, p = project) => api(method, path, { key: p.secretKey, body });
const UUIDV7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const inAYear = () => new Date(Date.now() + 300 * 24 * 3600 * 1000).toISOString();
const plan = (value: string) => ({ operator: 'AND', conditions: [{ field: 'data.plan', operator: 'equals', value }] });

const valid = (over: Record<string, unknown> = {}, senderDomain = domain) => ({
  name: `Spring sale ${tag()}`,
  subject: 'Hello {{ first | default: "there" }}',
  body: '<p>Hi {{ first | default: "there" }}, our sale starts today.</p>',
  from: `news@${senderDomain}`,
  audienceType: 'ALL',
  ...over,
});

async function create(over: Record<string, unknown> = {}, p = project): Promise<Record<string, any>> {
  const res = await call('POST', '/campaigns', valid(over), p);
  if (res.status !== 201) throw new Error(`campaign creation failed: ${res.status} ${res.text}`);
  return res.body;
}

/** A SCHEDULED campaign: a real send a year ahead (its workflow waits on a timer). */
async function scheduled(over: Record<string, unknown> = {}, p = project): Promise<Record<string, any>> {
  const c = await create(over, p);
  const res = await call('POST', `/campaigns/${c.id}/send`, { scheduledFor: inAYear() }, p);
  if (res.status !== 200) throw new Error(`scheduling failed: ${res.status} ${res.text}`);
  return res.body;
}

/** Puts a campaign in a state only a running send reaches (the engine is tested in campaign-send.test.ts). */
async function forceStatus(id: string, status: string): Promise<void> {
  await db().query('update campaigns set status = $2 where id = $1', [id, status]);
}

async function storedCount(projectId: string): Promise<number> {
  const { rows } = await db().query<{ n: number }>('select count(*)::int as n from campaigns where project_id = $1', [projectId]);
  return rows[0]!.n;
}

const fieldCodes = (res: { body: any }) => Object.fromEntries(res.body.error.errors.map((e: { field: string; code: string }) => [e.field, e.code]));

beforeAll(async () => {
  project = await createTestProject('campaigns');
  other = await createTestProject('campaigns-other');
  domain = uniqueDomain();
  await addVerifiedDomain(project.projectId, domain);
});
afterAll(async () => {
  // Scheduled runs of this file would otherwise wait a year in the shared Temporal server.
  const { rows } = await db().query<{ id: string; project_id: string }>(
    `select id, project_id from campaigns where project_id = any($1::uuid[]) and status in ('SCHEDULED', 'SENDING', 'PAUSED')`,
    [[project.projectId, other.projectId]],
  );
  const keys = new Map([project, other].map((p) => [p.projectId, p]));
  await Promise.all(rows.map((r) => call('POST', `/campaigns/${r.id}/cancel`, undefined, keys.get(r.project_id))));
  await closeDb();
});

describe('POST /campaigns', () => {
  test('creates a DRAFT (201) with every field; GET answers the same campaign, `type` equal to the audience type', async () => {
    const input = valid({
      description: 'Spring promotion',
      fromName: 'Acme News',
      replyTo: 'support@elsewhere.example',
      trackOpens: false,
      trackClicks: true,
    });
    const res = await call('POST', '/campaigns', input);
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      id: expect.stringMatching(UUIDV7),
      name: input.name,
      description: 'Spring promotion',
      subject: input.subject,
      body: input.body,
      templateId: null,
      from: `news@${domain}`,
      fromName: 'Acme News',
      replyTo: 'support@elsewhere.example',
      audienceType: 'ALL',
      type: 'ALL',
      segmentId: null,
      audienceFilter: null,
      status: 'DRAFT',
      scheduledAt: null,
      trackOpens: false,
      trackClicks: true,
      audienceSize: null,
      startedAt: null,
      finishedAt: null,
      statusReason: null,
      abTest: null,
      abPick: null,
      abDecision: null,
      createdAt: expect.any(String),
      updatedAt: expect.any(String),
    });
    expect(Date.now() - Date.parse(res.body.createdAt)).toBeLessThan(60_000);
    const got = await call('GET', `/campaigns/${res.body.id}`);
    expect(got.status).toBe(200);
    expect(got.body).toEqual({ ...res.body, audienceSize: expect.any(Number) });
  });

  test('a stored template can supply the content; explicit subject and body are kept beside it as overrides', async () => {
    const template = await call('POST', '/templates', { name: `T ${tag()}`, subject: 'From the template', body: '<p>Template body</p>', type: 'MARKETING' });
    expect(template.status).toBe(201);
    const only = await call('POST', '/campaigns', valid({ subject: undefined, body: undefined, templateId: template.body.id }));
    expect(only.status).toBe(201);
    expect(only.body).toMatchObject({ templateId: template.body.id, subject: null, body: null });
    const overriding = await call('POST', '/campaigns', valid({ templateId: template.body.id, subject: 'Own subject' , body: undefined }));
    expect(overriding.status).toBe(201);
    expect(overriding.body).toMatchObject({ templateId: template.body.id, subject: 'Own subject', body: null });
  });

  test('missing required fields -> 422 naming each; without a template subject and body are required; nothing is stored', async () => {
    const p = await createTestProject(`cmp-${tag()}`);
    const empty = await call('POST', '/campaigns', {}, p);
    expect(empty.status).toBe(422);
    expect(empty.body.error.code).toBe('VALIDATION_ERROR');
    expect(Object.keys(fieldCodes(empty)).sort()).toEqual(['audienceType', 'from', 'name']);
    const noContent = await call('POST', '/campaigns', valid({ subject: undefined, body: null }), p);
    expect(noContent.status).toBe(422);
    expect(fieldCodes(noContent)).toEqual({ subject: 'required', body: 'required' });
    expect(await storedCount(p.projectId)).toBe(0);
  });

  test('audience rules: SEGMENT needs segmentId, FILTERED needs audienceFilter, and each is refused for another type (422)', async () => {
    const segment = await call('POST', '/segments', { name: `S ${tag()}`, type: 'STATIC' });
    const cases: [Record<string, unknown>, Record<string, string>][] = [
      [{ audienceType: 'SEGMENT' }, { segmentId: 'required' }],
      [{ audienceType: 'FILTERED' }, { audienceFilter: 'required' }],
      [{ audienceType: 'ALL', audienceFilter: plan('pro') }, { audienceFilter: 'invalid_combination' }],
      [{ audienceType: 'ALL', segmentId: segment.body.id }, { segmentId: 'invalid_combination' }],
      [{ audienceType: 'SEGMENT', segmentId: segment.body.id, audienceFilter: plan('pro') }, { audienceFilter: 'invalid_combination' }],
      [{ audienceType: 'FILTERED', audienceFilter: plan('pro'), segmentId: segment.body.id }, { segmentId: 'invalid_combination' }],
      [{ audienceType: 'EVERYONE' }, { audienceType: 'invalid_value' }],
    ];
    for (const [over, expected] of cases) {
      const res = await call('POST', '/campaigns', valid(over));
      expect({ over, status: res.status, codes: fieldCodes(res) }).toEqual({ over, status: 422, codes: expected });
    }
  });

  test('an audience filter is checked like a segment condition (422 with the path inside audienceFilter)', async () => {
    const res = await call('POST', '/campaigns', valid({ audienceType: 'FILTERED', audienceFilter: { operator: 'AND', conditions: [{ field: 'data.plan', operator: 'sounds_like', value: 'x' }] } }));
    expect(res.status).toBe(422);
    expect(res.body.error.errors).toEqual([expect.objectContaining({ field: 'audienceFilter.conditions.0.operator', code: 'unknown_operator' })]);
  });

  test('a template or segment that is not the project\'s -> 422 not_found on the field', async () => {
    const theirs = await call('POST', '/templates', { name: 'Theirs', subject: 'S', body: '<p>b</p>', type: 'MARKETING' }, other);
    const unknownTemplate = await call('POST', '/campaigns', valid({ templateId: randomUUID() }));
    expect(unknownTemplate.status).toBe(422);
    expect(fieldCodes(unknownTemplate)).toEqual({ templateId: 'not_found' });
    const foreignTemplate = await call('POST', '/campaigns', valid({ templateId: theirs.body.id, subject: undefined, body: undefined }));
    expect(fieldCodes(foreignTemplate)).toEqual({ templateId: 'not_found' });
    const unknownSegment = await call('POST', '/campaigns', valid({ audienceType: 'SEGMENT', segmentId: randomUUID() }));
    expect(unknownSegment.status).toBe(422);
    expect(fieldCodes(unknownSegment)).toEqual({ segmentId: 'not_found' });
  });

  test('a from address on a domain the project has not added or not verified -> 403 DOMAIN_NOT_VERIFIED on from', async () => {
    const missing = uniqueDomain();
    const res = await call('POST', '/campaigns', valid({ from: `news@${missing}` }));
    expect(res.status).toBe(403);
    expect(res.body.error).toMatchObject({ code: 'DOMAIN_NOT_VERIFIED', errors: [{ field: 'from', code: 'unverified_domain' }] });
    expect(res.body.error.message).toContain(missing);
    // Another project's verified domain is not this project's.
    expect((await call('POST', '/campaigns', valid({}, domain), other)).status).toBe(403);
  });

  test('Liquid syntax errors -> 422 invalid_template; a subject with a line break -> 422 invalid_subject', async () => {
    const liquid = await call('POST', '/campaigns', valid({ subject: 'Hi {{ first', body: '<p>{% if x %}</p>' }));
    expect(liquid.status).toBe(422);
    expect(fieldCodes(liquid)).toEqual({ subject: 'invalid_template', body: 'invalid_template' });
    const newline = await call('POST', '/campaigns', valid({ subject: 'Hi\r\nBcc: victim@example.com' }));
    expect(fieldCodes(newline)).toEqual({ subject: 'invalid_subject' });
    const unknownKey = await call('POST', '/campaigns', valid({ colour: 'red' }));
    expect(fieldCodes(unknownKey)).toEqual({ '(body)': 'unrecognized_keys' });
  });
});

describe('GET /campaigns', () => {
  test('newest first with cursor pagination; total on the first page only; status and search filter; another project sees none', async () => {
    const p = await createTestProject(`cmp-list-${tag()}`);
    const d = uniqueDomain();
    await addVerifiedDomain(p.projectId, d);
    const ids: string[] = [];
    for (const name of ['Alpha news', 'Beta 100% off', 'Gamma news', 'Delta NEWS', 'Epsilon']) ids.push((await call('POST', '/campaigns', valid({ name }, d), p)).body.id);
    await forceStatus(ids[1]!, 'SENT');

    const first = await call('GET', '/campaigns?limit=2', undefined, p);
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ hasMore: true, total: 5 });
    expect(first.body.data.map((c: { id: string }) => c.id)).toEqual([ids[4], ids[3]]);
    const walked = [...first.body.data];
    let cursor = first.body.cursor;
    while (cursor) {
      const page = await call('GET', `/campaigns?limit=2&cursor=${encodeURIComponent(cursor)}`, undefined, p);
      expect(page.body.total).toBe(0);
      walked.push(...page.body.data);
      cursor = page.body.hasMore ? page.body.cursor : null;
    }
    expect(walked.map((c) => c.id)).toEqual([...ids].reverse());
    expect(walked.every((c) => c.audienceSize === null)).toBe(true);

    const sent = await call('GET', '/campaigns?status=SENT', undefined, p);
    expect(sent.body).toMatchObject({ total: 1, hasMore: false, data: [{ id: ids[1], status: 'SENT' }] });
    const drafts = await call('GET', '/campaigns?status=DRAFT', undefined, p);
    expect(drafts.body.total).toBe(4);
    const news = await call('GET', '/campaigns?search=news', undefined, p);
    expect(news.body.data.map((c: { id: string }) => c.id)).toEqual([ids[3], ids[2], ids[0]]);
    expect(news.body.total).toBe(3);
    const literal = await call('GET', `/campaigns?search=${encodeURIComponent('0%')}`, undefined, p);
    expect(literal.body.data.map((c: { id: string }) => c.id)).toEqual([ids[1]]);
    expect((await call('GET', `/campaigns?search=news&status=DRAFT&limit=1`, undefined, p)).body).toMatchObject({ total: 3, hasMore: true });

    const theirs = await call('GET', '/campaigns', undefined, other);
    expect(theirs.body.data.some((c: { id: string }) => ids.includes(c.id))).toBe(false);
  });

  test('a bad status, limit or cursor -> 422', async () => {
    expect(fieldCodes(await call('GET', '/campaigns?status=ARCHIVED'))).toEqual({ 'query.status': 'invalid_value' });
    expect((await call('GET', '/campaigns?limit=101')).status).toBe(422);
    expect(fieldCodes(await call('GET', '/campaigns?cursor=nope'))).toEqual({ 'query.cursor': 'invalid_cursor' });
  });

  test('the earlier response variant wraps the list as { items, nextCursor }', async () => {
    await create();
    const res = await api('GET', '/campaigns?limit=1', { key: project.secretKey, headers: { 'mailwright-response-variant': 'earlier' } });
    expect(res.status).toBe(200);
    expect(res.body.success).toBe(true);
    expect(Object.keys(res.body.data).sort()).toEqual(['hasMore', 'items', 'nextCursor', 'total']);
  });
});

describe('GET /campaigns/:id audience size of a draft', () => {
  test('counts the subscribed contacts of ALL, a static segment, a dynamic segment and a filter, now', async () => {
    const p = await createTestProject(`cmp-aud-${tag()}`);
    const d = uniqueDomain();
    await addVerifiedDomain(p.projectId, d);
    // 0 pro, 1 pro unsubscribed, 2 pro, 3 pro, 4 free, 5 free unsubscribed
    const emails = Array.from({ length: 6 }, (_, i) => `a${i}-${tag()}@example.com`);
    await seedContacts(p.projectId, 6, (i) => ({ email: emails[i]!, subscribed: i !== 1 && i !== 5, data: { plan: i < 4 ? 'pro' : 'free' } }));
    const dynamic = await call('POST', '/segments', { name: 'Pro', type: 'DYNAMIC', condition: plan('pro') }, p);
    const fixed = await call('POST', '/segments', { name: 'Picked', type: 'STATIC' }, p);
    expect((await call('POST', `/segments/${fixed.body.id}/members`, { emails: [emails[0], emails[1], emails[4]] }, p)).status).toBe(200);

    const size = async (over: Record<string, unknown>) => {
      const c = await call('POST', '/campaigns', valid(over, d), p);
      expect(c.status).toBe(201);
      const got = await call('GET', `/campaigns/${c.body.id}`, undefined, p);
      return got.body.audienceSize;
    };
    expect(await size({ audienceType: 'ALL' })).toBe(4);
    expect(await size({ audienceType: 'SEGMENT', segmentId: dynamic.body.id })).toBe(3);
    expect(await size({ audienceType: 'SEGMENT', segmentId: fixed.body.id })).toBe(2);
    expect(await size({ audienceType: 'FILTERED', audienceFilter: plan('free') })).toBe(1);

    // Live: a contact subscribing changes the count at once.
    await db().query('update contacts set subscribed = true where email = $1', [emails[5]]);
    expect(await size({ audienceType: 'FILTERED', audienceFilter: plan('free') })).toBe(2);
  });

  test('a draft whose segment was deleted has no audience to count: null', async () => {
    const segment = await call('POST', '/segments', { name: `Gone ${tag()}`, type: 'STATIC' });
    const c = await create({ audienceType: 'SEGMENT', segmentId: segment.body.id });
    expect((await call('DELETE', `/segments/${segment.body.id}`)).status).toBe(204);
    const got = await call('GET', `/campaigns/${c.id}`);
    expect(got.status).toBe(200);
    expect(got.body).toMatchObject({ segmentId: segment.body.id, audienceSize: null });
  });

  test('an unknown id, another project\'s campaign, or a non-UUID -> 404 / 404 / 422', async () => {
    const c = await create();
    expect((await call('GET', `/campaigns/${randomUUID()}`)).status).toBe(404);
    const foreign = await call('GET', `/campaigns/${c.id}`, undefined, other);
    expect(foreign.status).toBe(404);
    expect(foreign.body.error.code).toBe('NOT_FOUND');
    expect((await call('GET', '/campaigns/not-a-uuid')).status).toBe(422);
  });
});

describe('PUT /campaigns/:id', () => {
  test('replaces the whole campaign: optional fields left out become null', async () => {
    const c = await create({ description: 'old', fromName: 'Old name', replyTo: 'old@elsewhere.example', trackOpens: true });
    const replacement = valid({ name: 'Replaced', audienceType: 'FILTERED', audienceFilter: plan('pro') });
    const res = await call('PUT', `/campaigns/${c.id}`, replacement);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      id: c.id,
      name: 'Replaced',
      description: null,
      fromName: null,
      replyTo: null,
      trackOpens: null,
      audienceType: 'FILTERED',
      type: 'FILTERED',
      audienceFilter: plan('pro'),
      status: 'DRAFT',
      createdAt: c.createdAt,
    });
    expect(Date.parse(res.body.updatedAt)).toBeGreaterThanOrEqual(Date.parse(c.updatedAt));
    expect((await call('GET', `/campaigns/${c.id}`)).body).toMatchObject({ name: 'Replaced', audienceFilter: plan('pro') });
  });

  test('every required field is required; the same rules as POST apply', async () => {
    const c = await create();
    const partial = await call('PUT', `/campaigns/${c.id}`, { name: 'Only a name' });
    expect(partial.status).toBe(422);
    expect(Object.keys(fieldCodes(partial)).sort()).toEqual(['audienceType', 'from']);
    const noSegment = await call('PUT', `/campaigns/${c.id}`, valid({ audienceType: 'SEGMENT' }));
    expect(fieldCodes(noSegment)).toEqual({ segmentId: 'required' });
    const unverified = await call('PUT', `/campaigns/${c.id}`, valid({ from: `news@${uniqueDomain()}` }));
    expect(unverified.status).toBe(403);
    expect((await call('GET', `/campaigns/${c.id}`)).body.name).toBe(c.name);
  });
});

describe('PATCH /campaigns/:id', () => {
  test('changes the given fields only; null clears an optional one', async () => {
    const c = await create({ description: 'keep me', fromName: 'Acme' });
    const res = await call('PATCH', `/campaigns/${c.id}`, { name: 'Renamed', fromName: null });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ name: 'Renamed', fromName: null, description: 'keep me', subject: c.subject, body: c.body, from: c.from });
    expect((await call('PATCH', `/campaigns/${c.id}`, {})).body).toMatchObject({ name: 'Renamed' });
  });

  test('changing audienceType drops the stored reference of the old type; a reference the new type does not take is refused', async () => {
    const segment = await call('POST', '/segments', { name: `S ${tag()}`, type: 'STATIC' });
    const c = await create({ audienceType: 'SEGMENT', segmentId: segment.body.id });
    const toFilter = await call('PATCH', `/campaigns/${c.id}`, { audienceType: 'FILTERED', audienceFilter: plan('pro') });
    expect(toFilter.status).toBe(200);
    expect(toFilter.body).toMatchObject({ audienceType: 'FILTERED', segmentId: null, audienceFilter: plan('pro') });
    expect(fieldCodes(await call('PATCH', `/campaigns/${c.id}`, { segmentId: segment.body.id }))).toEqual({ segmentId: 'invalid_combination' });
    expect(fieldCodes(await call('PATCH', `/campaigns/${c.id}`, { audienceType: 'SEGMENT' }))).toEqual({ segmentId: 'required' });
    const toAll = await call('PATCH', `/campaigns/${c.id}`, { audienceType: 'ALL' });
    expect(toAll.body).toMatchObject({ audienceType: 'ALL', segmentId: null, audienceFilter: null });
  });

  test('content stays complete: clearing subject without a template is refused, with a template it is allowed', async () => {
    const template = await call('POST', '/templates', { name: `T ${tag()}`, subject: 'From the template', body: '<p>Template body</p>', type: 'MARKETING' });
    const c = await create();
    expect(fieldCodes(await call('PATCH', `/campaigns/${c.id}`, { subject: null }))).toEqual({ subject: 'required' });
    const withTemplate = await call('PATCH', `/campaigns/${c.id}`, { templateId: template.body.id, subject: null, body: null });
    expect(withTemplate.status).toBe(200);
    expect(withTemplate.body).toMatchObject({ templateId: template.body.id, subject: null, body: null });
    expect(fieldCodes(await call('PATCH', `/campaigns/${c.id}`, { templateId: null }))).toEqual({ subject: 'required', body: 'required' });
    expect(fieldCodes(await call('PATCH', `/campaigns/${c.id}`, { templateId: randomUUID() }))).toEqual({ templateId: 'not_found' });
  });

  test('an unknown campaign or another project\'s -> 404', async () => {
    const c = await create();
    expect((await call('PATCH', `/campaigns/${randomUUID()}`, { name: 'x' })).status).toBe(404);
    expect((await call('PATCH', `/campaigns/${c.id}`, { name: 'x' }, other)).status).toBe(404);
    expect((await call('GET', `/campaigns/${c.id}`)).body.name).toBe(c.name);
  });
});

describe('editing by status', () => {
  test.each(['SENDING', 'PAUSED', 'SENT', 'CANCELLED', 'FAILED'])('a %s campaign cannot be changed: 409 CAMPAIGN_NOT_EDITABLE for PUT and PATCH', async (status) => {
    const c = await create();
    // Set directly: reaching this state needs a running send (see the file comment).
    await forceStatus(c.id, status);
    const patch = await call('PATCH', `/campaigns/${c.id}`, { name: 'Too late' });
    expect(patch.status).toBe(409);
    expect(patch.body.error.code).toBe('CAMPAIGN_NOT_EDITABLE');
    const put = await call('PUT', `/campaigns/${c.id}`, valid({ name: 'Too late' }));
    expect(put.status).toBe(409);
    expect(put.body.error.code).toBe('CAMPAIGN_NOT_EDITABLE');
    const { rows } = await db().query('select name from campaigns where id = $1', [c.id]);
    expect(rows[0].name).toBe(c.name);
  });

  test('a SCHEDULED campaign can be edited, and PATCH/PUT scheduledAt moves its time', async () => {
    const c = await scheduled();
    expect(c.status).toBe('SCHEDULED');
    const edited = await call('PATCH', `/campaigns/${c.id}`, { subject: 'New subject' });
    expect(edited.status).toBe(200);
    expect(edited.body).toMatchObject({ status: 'SCHEDULED', subject: 'New subject', scheduledAt: c.scheduledAt });
    const tooFar = await call('PATCH', `/campaigns/${c.id}`, { scheduledAt: new Date(Date.now() + 400 * 24 * 3600 * 1000).toISOString() });
    expect(tooFar.status).toBe(422);
    expect(tooFar.body.error.errors).toEqual([expect.objectContaining({ field: 'scheduledAt', code: 'too_far' })]);
    const later = new Date(Date.now() + 320 * 24 * 3600 * 1000).toISOString();
    const moved = await call('PATCH', `/campaigns/${c.id}`, { scheduledAt: later });
    expect(moved.status).toBe(200);
    expect(moved.body).toMatchObject({ status: 'SCHEDULED', scheduledAt: later });
    const evenLater = new Date(Date.now() + 340 * 24 * 3600 * 1000).toISOString();
    const put = await call('PUT', `/campaigns/${c.id}`, valid({ name: 'Put while scheduled', scheduledAt: evenLater }));
    expect(put.status).toBe(200);
    expect(put.body).toMatchObject({ name: 'Put while scheduled', scheduledAt: evenLater, status: 'SCHEDULED' });
    const past = await call('PATCH', `/campaigns/${c.id}`, { scheduledAt: '2020-01-01T00:00:00Z' });
    expect(fieldCodes(past)).toEqual({ scheduledAt: 'in_past' });
  });

  test('scheduledAt on a DRAFT -> 422 not_scheduled (a draft is scheduled through /send); a date the calendar lacks -> 422', async () => {
    const c = await create();
    expect(fieldCodes(await call('PATCH', `/campaigns/${c.id}`, { scheduledAt: inAYear() }))).toEqual({ scheduledAt: 'not_scheduled' });
    expect(fieldCodes(await call('PATCH', `/campaigns/${c.id}`, { scheduledAt: '2031-02-30T09:00:00Z' }))).toEqual({ scheduledAt: 'invalid_date' });
    expect(fieldCodes(await call('PATCH', `/campaigns/${c.id}`, { scheduledAt: 'tomorrow' }))).toEqual({ scheduledAt: 'invalid_string' });
    expect((await call('GET', `/campaigns/${c.id}`)).body.status).toBe('DRAFT');
  });
});

describe('DELETE /campaigns/:id', () => {
  test('a DRAFT is deleted (204); the emails it sent stay', async () => {
    const c = await create();
    // An email of this campaign as the send records it (emails.campaign_id has no foreign key).
    const emailId = randomUUID();
    await db().query(
      `insert into emails (id, project_id, kind, to_email, from_email, subject, html, status, campaign_id) values ($1, $2, 'MARKETING', 'x@example.com', $3, 'S', '', 'SENT', $4)`,
      [emailId, project.projectId, c.from, c.id],
    );
    const res = await call('DELETE', `/campaigns/${c.id}`);
    expect(res.status).toBe(204);
    expect((await call('GET', `/campaigns/${c.id}`)).status).toBe(404);
    expect((await call('DELETE', `/campaigns/${c.id}`)).status).toBe(404);
    const { rows } = await db().query('select campaign_id from emails where id = $1', [emailId]);
    expect(rows).toEqual([{ campaign_id: c.id }]);
  });

  test('SCHEDULED, SENDING and PAUSED campaigns -> 409 CAMPAIGN_ACTIVE; once cancelled the campaign can be deleted', async () => {
    const c = await scheduled();
    const refused = await call('DELETE', `/campaigns/${c.id}`);
    expect(refused.status).toBe(409);
    expect(refused.body.error).toMatchObject({ code: 'CAMPAIGN_ACTIVE' });
    expect(refused.body.error.suggestion).toContain('cancel');
    for (const status of ['SENDING', 'PAUSED']) {
      const d = await create();
      // Set directly: reaching this state needs a running send (see the file comment).
      await forceStatus(d.id, status);
      const res = await call('DELETE', `/campaigns/${d.id}`);
      expect({ status, code: res.body.error.code }).toEqual({ status, code: 'CAMPAIGN_ACTIVE' });
      await forceStatus(d.id, 'CANCELLED');
      expect((await call('DELETE', `/campaigns/${d.id}`)).status).toBe(204);
    }
    const cancelled = await call('POST', `/campaigns/${c.id}/cancel`);
    expect(cancelled.body.status).toBe('CANCELLED');
    expect((await call('DELETE', `/campaigns/${c.id}`)).status).toBe(204);
  });

  test('another project\'s campaign -> 404 and it stays', async () => {
    const c = await create();
    expect((await call('DELETE', `/campaigns/${c.id}`, undefined, other)).status).toBe(404);
    expect((await call('GET', `/campaigns/${c.id}`)).status).toBe(200);
  });
});

describe('POST /campaigns/:id/duplicate', () => {
  test('a new DRAFT "<name> (copy)" with the same content, audience and settings, without schedule or send state', async () => {
    const template = await call('POST', '/templates', { name: `T ${tag()}`, subject: 'S', body: '<p>b</p>', type: 'MARKETING' });
    const c = await scheduled({
      description: 'd',
      templateId: template.body.id,
      fromName: 'Acme',
      replyTo: 'r@elsewhere.example',
      audienceType: 'FILTERED',
      audienceFilter: plan('pro'),
      trackOpens: false,
      trackClicks: false,
    });
    const res = await call('POST', `/campaigns/${c.id}/duplicate`);
    expect(res.status).toBe(201);
    const same = ['description', 'subject', 'body', 'templateId', 'from', 'fromName', 'replyTo', 'audienceType', 'type', 'segmentId', 'audienceFilter', 'trackOpens', 'trackClicks'];
    expect(Object.fromEntries(same.map((k) => [k, res.body[k]]))).toEqual(Object.fromEntries(same.map((k) => [k, c[k]])));
    expect(res.body).toMatchObject({ name: `${c.name} (copy)`, status: 'DRAFT', scheduledAt: null, audienceSize: null, startedAt: null, finishedAt: null, statusReason: null });
    expect(res.body.id).not.toBe(c.id);
    const { rows } = await db().query('select workflow_id, send_content from campaigns where id = $1', [res.body.id]);
    expect(rows[0]).toEqual({ workflow_id: null, send_content: null });
    const { rows: stats } = await db().query('select 1 from campaign_stats where campaign_id = $1', [res.body.id]);
    expect(stats).toEqual([]);
  });

  test('a finished campaign can be duplicated; a long name is shortened to stay within 200 characters', async () => {
    const c = await create({ name: 'n'.repeat(200) });
    await forceStatus(c.id, 'SENT');
    const res = await call('POST', `/campaigns/${c.id}/duplicate`);
    expect(res.status).toBe(201);
    expect(res.body.name).toBe(`${'n'.repeat(193)} (copy)`);
    expect(res.body.status).toBe('DRAFT');
    expect((await call('POST', `/campaigns/${c.id}/duplicate`, undefined, other)).status).toBe(404);
  });
});

describe('sending and steering', () => {
  test('send with scheduledFor -> SCHEDULED; sending it again, pausing or resuming it -> 409 CAMPAIGN_STATE; cancel -> CANCELLED, then 409', async () => {
    const c = await create();
    const at = inAYear();
    const res = await call('POST', `/campaigns/${c.id}/send`, { scheduledFor: at });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id: c.id, status: 'SCHEDULED', scheduledAt: at });
    for (const action of ['send', 'pause', 'resume']) {
      const again = await call('POST', `/campaigns/${c.id}/${action}`);
      expect({ action, status: again.status, code: again.body.error?.code }).toEqual({ action, status: 409, code: 'CAMPAIGN_STATE' });
    }
    const cancelled = await call('POST', `/campaigns/${c.id}/cancel`);
    expect(cancelled.status).toBe(200);
    expect(cancelled.body).toMatchObject({ status: 'CANCELLED', finishedAt: expect.any(String) });
    expect((await call('POST', `/campaigns/${c.id}/cancel`)).body.error.code).toBe('CAMPAIGN_STATE');
    expect((await call('GET', `/campaigns/${c.id}`)).body.status).toBe('CANCELLED');
  });

  test('sending a campaign that is not a DRAFT -> 409 CAMPAIGN_STATE', async () => {
    for (const status of ['SENDING', 'PAUSED', 'SENT', 'CANCELLED', 'FAILED']) {
      const c = await create();
      // Set directly: reaching this state needs a running send (see the file comment).
      await forceStatus(c.id, status);
      const res = await call('POST', `/campaigns/${c.id}/send`);
      expect({ status, code: res.status, error: res.body.error.code }).toEqual({ status, code: 409, error: 'CAMPAIGN_STATE' });
    }
  });

  test('two identical concurrent sends: exactly one 200 and one 409', async () => {
    const c = await create();
    const at = inAYear();
    const results = await Promise.all([0, 1].map(() => call('POST', `/campaigns/${c.id}/send`, { scheduledFor: at })));
    expect(results.map((r) => r.status).sort()).toEqual([200, 409]);
    expect(results.find((r) => r.status === 409)!.body.error.code).toBe('CAMPAIGN_STATE');
    expect((await call('GET', `/campaigns/${c.id}`)).body.status).toBe('SCHEDULED');
  });

  test('scheduledFor in the past -> 422 in_past; the campaign stays a DRAFT', async () => {
    const c = await create();
    const res = await call('POST', `/campaigns/${c.id}/send`, { scheduledFor: '2020-01-01T00:00:00Z' });
    expect(res.status).toBe(422);
    expect(fieldCodes(res)).toEqual({ scheduledFor: 'in_past' });
    expect((await call('GET', `/campaigns/${c.id}`)).body.status).toBe('DRAFT');
  });

  test('a sender domain that is no longer verified -> 403 on send; another project\'s campaign -> 404', async () => {
    const d = uniqueDomain();
    await addVerifiedDomain(project.projectId, d);
    const c = await create({}, project);
    const onD = await call('PATCH', `/campaigns/${c.id}`, { from: `news@${d}` });
    expect(onD.status).toBe(200);
    await db().query(`update domains set status = 'PENDING' where project_id = $1 and name = $2`, [project.projectId, d]);
    const res = await call('POST', `/campaigns/${c.id}/send`);
    expect(res.status).toBe(403);
    expect(res.body.error.code).toBe('DOMAIN_NOT_VERIFIED');
    expect((await call('POST', `/campaigns/${c.id}/send`, { scheduledFor: inAYear() }, other)).status).toBe(404);
    expect((await call('GET', `/campaigns/${c.id}`)).body.status).toBe('DRAFT');
  });
});

describe('what depends on a campaign', () => {
  test('template usage lists the campaign; DELETE /templates/:id -> 409 TEMPLATE_IN_USE while it is SCHEDULED, 204 once cancelled', async () => {
    const template = await call('POST', '/templates', { name: `T ${tag()}`, subject: 'S', body: '<p>b</p>', type: 'MARKETING' });
    const c = await create({ name: 'Uses the template', templateId: template.body.id, subject: undefined, body: undefined });
    const draftUsage = await call('GET', `/templates/${template.body.id}/usage`);
    expect(draftUsage.body).toEqual({ campaigns: [{ id: c.id, name: 'Uses the template', active: false }], workflows: [] });
    expect((await call('POST', `/campaigns/${c.id}/send`, { scheduledFor: inAYear() })).status).toBe(200);
    expect((await call('GET', `/templates/${template.body.id}/usage`)).body.campaigns).toEqual([{ id: c.id, name: 'Uses the template', active: true }]);
    const refused = await call('DELETE', `/templates/${template.body.id}`);
    expect(refused.status).toBe(409);
    expect(refused.body.error.code).toBe('TEMPLATE_IN_USE');
    expect(refused.body.error.message).toContain('Uses the template');
    await call('POST', `/campaigns/${c.id}/cancel`);
    expect((await call('DELETE', `/templates/${template.body.id}`)).status).toBe(204);
  });

  test('DELETE /segments/:id -> 409 SEGMENT_IN_USE while a SCHEDULED campaign sends to it; a draft does not block', async () => {
    const segment = await call('POST', '/segments', { name: `S ${tag()}`, type: 'DYNAMIC', condition: plan('pro') });
    const c = await scheduled({ name: 'Pro launch', audienceType: 'SEGMENT', segmentId: segment.body.id });
    const draft = await create({ audienceType: 'SEGMENT', segmentId: segment.body.id });
    const refused = await call('DELETE', `/segments/${segment.body.id}`);
    expect(refused.status).toBe(409);
    expect(refused.body.error.code).toBe('SEGMENT_IN_USE');
    expect(refused.body.error.message).toContain('Pro launch');
    await call('POST', `/campaigns/${c.id}/cancel`);
    expect((await call('DELETE', `/segments/${segment.body.id}`)).status).toBe(204);
    expect((await call('GET', `/campaigns/${draft.id}`)).status).toBe(200);
  });

  test('/contacts/fields/:field/usage and /events/:eventName/usage list the FILTERED campaigns that reference them', async () => {
    const p = await createTestProject(`cmp-usage-${tag()}`);
    const d = uniqueDomain();
    await addVerifiedDomain(p.projectId, d);
    const filter = {
      operator: 'AND',
      conditions: [{ field: 'data.plan', operator: 'exists' }, { operator: 'OR', conditions: [{ field: 'data.address.city', operator: 'equals', value: 'Oslo' }, { event: 'purchase', operator: 'hasDone' }] }],
    };
    const c = (await call('POST', '/campaigns', valid({ name: 'Filtered', audienceType: 'FILTERED', audienceFilter: filter }, d), p)).body;
    await call('POST', '/campaigns', valid({ name: 'Everyone' }, d), p);
    const ref = [{ id: c.id, name: 'Filtered', where: 'audienceFilter' }];
    const field = await call('GET', '/contacts/fields/plan/usage', undefined, p);
    expect(field.status).toBe(200);
    expect(field.body.campaigns).toEqual(ref);
    expect((await call('GET', '/contacts/fields/address/usage', undefined, p)).body.campaigns).toEqual(ref);
    expect((await call('GET', '/contacts/fields/data.address.city/usage', undefined, p)).body.campaigns).toEqual(ref);
    expect((await call('GET', '/contacts/fields/pla/usage', undefined, p)).body.campaigns).toEqual([]);
    expect((await call('GET', '/contacts/fields/address.street/usage', undefined, p)).body.campaigns).toEqual([]);
    expect((await call('GET', '/events/purchase/usage', undefined, p)).body.campaigns).toEqual(ref);
    expect((await call('GET', '/events/purchased/usage', undefined, p)).body.campaigns).toEqual([]);
    expect((await call('GET', '/contacts/fields/plan/usage', undefined, other)).body.campaigns).toEqual([]);
  });
});

describe('POST /campaigns/:id/test', () => {
  test("renders with the contact's data, prefixes the subject, marks the header; counts in no stats and changes no contact", async () => {
    const email = `tester-${tag()}@example.com`;
    // Unsubscribed: a test is transactional and still reaches it.
    await seedContacts(project.projectId, 1, () => ({ email, subscribed: false, data: { first: 'Ada' } }));
    const { rows: before } = await db().query('select to_jsonb(c) as row from contacts c where project_id = $1 and email = $2', [project.projectId, email]);
    const c = await create({ fromName: 'Acme News', body: '<p>Hi {{ first | default: "there" }}, <a href="https://example.com/sale">the sale</a></p>' });

    const res = await call('POST', `/campaigns/${c.id}/test`, { email: `  ${email.toUpperCase()} ` });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ emailId: expect.stringMatching(UUIDV7), to: email, status: 'QUEUED' });
    const [mail] = await waitForMail(email);
    expect(mail!.subject).toBe('[Test] Hello Ada');
    expect(mail!.headers.get('x-mailwright-test')).toBe('true');
    expect(mail!.headers.get('list-unsubscribe')).toBeUndefined();
    expect(mail!.html).toContain('Hi Ada');
    // No tracking: the link is the real one and there is no open pixel.
    expect(mail!.html).toContain('href="https://example.com/sale"');
    expect(mail!.html).not.toContain('/t/o/');
    expect(mail!.from?.value[0]).toMatchObject({ address: c.from, name: 'Acme News' });

    const row = await waitForEmailStatus(res.body.emailId, 'SENT');
    expect(row).toMatchObject({ campaign_id: null, kind: 'TRANSACTIONAL', to_email: email });
    expect(row.contact_id).toBe(before[0].row.id);
    const { rows: after } = await db().query('select to_jsonb(c) as row from contacts c where project_id = $1 and email = $2', [project.projectId, email]);
    expect(after).toEqual(before);
    const { rows: stats } = await db().query('select 1 from campaign_stats where campaign_id = $1', [c.id]);
    expect(stats).toEqual([]);
    expect((await call('GET', `/campaigns/${c.id}/stats`)).body).toMatchObject({ sent: 0, audience: 0, updatedAt: null });
    expect((await call('GET', `/campaigns/${c.id}`)).body.status).toBe('DRAFT');
  });

  test('an address with no contact: sent without data and without creating a contact; works in any status', async () => {
    const email = `nobody-${tag()}@example.com`;
    const c = await create();
    await forceStatus(c.id, 'SENT');
    const res = await call('POST', `/campaigns/${c.id}/test`, { email });
    expect(res.status).toBe(200);
    const [mail] = await waitForMail(email);
    expect(mail!.subject).toBe('[Test] Hello there');
    expect(mail!.headers.get('x-mailwright-test')).toBe('true');
    const row = await waitForEmailStatus(res.body.emailId, 'SENT');
    expect(row).toMatchObject({ contact_id: null, campaign_id: null });
    const { rows } = await db().query('select 1 from contacts where project_id = $1 and email = $2', [project.projectId, email]);
    expect(rows).toEqual([]);
  });

  test('a campaign on its template: the template supplies what the campaign does not override', async () => {
    const template = await call('POST', '/templates', { name: `T ${tag()}`, subject: 'Template subject', body: '<p>Template body</p>', type: 'MARKETING' });
    const c = await create({ templateId: template.body.id, subject: 'Own subject', body: undefined });
    const email = `tpl-${tag()}@example.com`;
    expect((await call('POST', `/campaigns/${c.id}/test`, { email })).status).toBe(200);
    const [mail] = await waitForMail(email);
    expect(mail!.subject).toBe('[Test] Own subject');
    expect(mail!.html).toContain('Template body');
  });

  test('an unverified sender domain -> 403; a deleted template -> 422; a bad address -> 422; another project -> 404', async () => {
    const d = uniqueDomain();
    await addVerifiedDomain(project.projectId, d);
    const c = await create({}, project);
    await call('PATCH', `/campaigns/${c.id}`, { from: `news@${d}` });
    await db().query(`update domains set status = 'PENDING' where project_id = $1 and name = $2`, [project.projectId, d]);
    expect((await call('POST', `/campaigns/${c.id}/test`, { email: `x-${tag()}@example.com` })).body.error.code).toBe('DOMAIN_NOT_VERIFIED');

    const template = await call('POST', '/templates', { name: `T ${tag()}`, subject: 'S', body: '<p>b</p>', type: 'MARKETING' });
    const t = await create({ templateId: template.body.id, subject: undefined, body: undefined });
    expect((await call('DELETE', `/templates/${template.body.id}`)).status).toBe(204);
    const gone = await call('POST', `/campaigns/${t.id}/test`, { email: `x-${tag()}@example.com` });
    expect(gone.status).toBe(422);
    expect(fieldCodes(gone)).toEqual({ templateId: 'not_found' });

    expect(fieldCodes(await call('POST', `/campaigns/${t.id}/test`, { email: 'not an address' }))).toEqual({ email: 'invalid_string' });
    expect((await call('POST', `/campaigns/${t.id}/test`, { email: `x-${tag()}@example.com` }, other)).status).toBe(404);
  });
});

describe('GET /campaigns/:id/stats', () => {
  test("a campaign that has not been sent has zero counts; another project's campaign -> 404", async () => {
    const c = await create();
    const res = await call('GET', `/campaigns/${c.id}/stats`);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ campaignId: c.id, audience: 0, sent: 0, openedUnique: 0, clickedUnique: 0, bounced: 0, openRate: 0, updatedAt: null });
    expect((await call('GET', `/campaigns/${c.id}/stats`, undefined, other)).status).toBe(404);
  });
});

describe('project setting campaignSendRate', () => {
  test('PATCH /users/@me/projects/:id takes a whole number from 1 to 1000000 or null, and the project shows it', async () => {
    const path = `/users/@me/projects/${project.projectId}`;
    const set = await api('PATCH', path, { cookie: project.cookie, body: { settings: { campaignSendRate: 50 } } });
    expect(set.status).toBe(200);
    expect(set.body.settings).toMatchObject({ campaignSendRate: 50, trackOpens: true });
    for (const bad of [0, 1.5, 1_000_001, '50']) {
      const res = await api('PATCH', path, { cookie: project.cookie, body: { settings: { campaignSendRate: bad } } });
      expect({ bad, status: res.status, field: res.body.error?.errors?.[0]?.field }).toEqual({ bad, status: 422, field: 'settings.campaignSendRate' });
    }
    const reset = await api('PATCH', path, { cookie: project.cookie, body: { settings: { campaignSendRate: null } } });
    expect(reset.body.settings.campaignSendRate).toBeNull();
  });
});
