import { randomUUID } from 'node:crypto';
import { api } from '../helpers/api';
import { expectStatus, projectWithDomain } from '../helpers/automations';
import { closeDb, db, waitForEmailStatus } from '../helpers/db';
import { createTestProject, type TestProject } from '../helpers/fixtures';
import { ACTIVITY_TYPE_NAMES } from '../../domain/activity/activity-types';
import { waitFor } from '../helpers/wait';

/**
 * The activity feed and its counts, after a mixed load through the real API and worker: transactional sends (one
 * bounced by the relay), tracked events, a campaign, an automation run that finishes steps and one that waits in a
 * long DELAY. The feed walked page by page equals a scan of the sources; filters narrow it; the stats and the recent
 * count equal scans; upcoming lists the scheduled campaign and the waiting run; another project sees none of it.
 */

let project: TestProject;
let other: TestProject;
let domain: string;
const tag = randomUUID().slice(0, 8);
const call = (method: string, path: string, body?: unknown, p = project) => api(method, path, { key: p.secretKey, body });
const get = async (path: string, p = project) => expectStatus(await call('GET', path, undefined, p), 200);
const started = new Date(Date.now() - 1000);

const sentIds: string[] = [];
let campaignId = '';
let scheduledId = '';
let automationId = '';
let waitingAutomationId = '';
let contactA = '';

/** Every outbox row of the project's events consumed by the analytics consumer (the rollups are complete). */
async function rollupsCaughtUp(): Promise<void> {
  await waitFor('the analytics consumer', async () => {
    const { rows } = await db().query<{ n: number }>(
      `select count(*)::int as n from event_outbox o join events e on e.id = o.event_id where o.consumer = 'analytics' and e.project_id = $1`,
      [project.projectId],
    );
    return rows[0]!.n === 0 ? true : undefined;
  });
}

beforeAll(async () => {
  ({ project, domain } = await projectWithDomain('activity'));
  other = await createTestProject('activity-other');
  const from = `hi@${domain}`;
  // Transactional sends: one delivered to the capture server, one refused by it (bounce-*).
  for (const to of [`a-${tag}@example.com`, `bounce-${tag}@example.com`]) {
    sentIds.push(expectStatus(await call('POST', '/v1/send', { to, from, subject: 'Hi', body: '<p>x</p>' }), 200).data.emails[0].email);
  }
  await waitForEmailStatus(sentIds[0]!, 'SENT');
  await waitForEmailStatus(sentIds[1]!, 'BOUNCED');
  contactA = (await db().query<{ id: string }>('select id from contacts where project_id = $1 and email = $2', [project.projectId, `a-${tag}@example.com`])).rows[0]!.id;
  // Tracked events.
  for (let i = 0; i < 4; i++) expectStatus(await api('POST', '/v1/track', { key: project.publicKey, body: { email: `a-${tag}@example.com`, event: i % 2 ? 'viewed' : 'signed_up' } }), 200);
  // A campaign to everyone (the two contacts above, subscribed), sent to the end.
  const campaign = expectStatus(await call('POST', '/campaigns', { name: `C ${tag}`, subject: 'News', body: '<p>News</p>', from, audienceType: 'ALL' }), 201);
  campaignId = campaign.id;
  expectStatus(await call('POST', `/campaigns/${campaignId}/send`), 200);
  await waitFor('the campaign to finish', async () => ((await get(`/campaigns/${campaignId}`)).status === 'SENT' ? true : undefined));
  // A scheduled campaign (upcoming).
  const later = expectStatus(await call('POST', '/campaigns', { name: `Later ${tag}`, subject: 'Later', body: '<p>Later</p>', from, audienceType: 'ALL' }), 201);
  scheduledId = later.id;
  expectStatus(await call('POST', `/campaigns/${scheduledId}/send`, { scheduledFor: new Date(Date.now() + 3 * 86_400_000).toISOString() }), 200);
  // An automation that sends and ends, and one that waits in a long delay.
  const template = expectStatus(await call('POST', '/templates', { name: `T ${tag}`, subject: 'Welcome', body: '<p>Welcome</p>', type: 'TRANSACTIONAL', from }), 201).id;
  const build = async (event: string, steps: { type: string; config: Record<string, unknown> }[]) => {
    const wf = expectStatus(await call('POST', '/workflows', { name: `W ${event}`, triggerEvent: event }), 201);
    const ids: string[] = [];
    for (const s of steps) ids.push(expectStatus(await call('POST', `/workflows/${wf.id}/steps`, s), 201).id);
    for (let i = 0; i + 1 < ids.length; i++) expectStatus(await call('POST', `/workflows/${wf.id}/transitions`, { fromStepId: ids[i], toStepId: ids[i + 1] }), 201);
    expectStatus(await call('PATCH', `/workflows/${wf.id}`, { enabled: true }), 200);
    return wf.id as string;
  };
  automationId = await build(`go_${tag}`, [{ type: 'SEND_EMAIL', config: { templateId: template } }, { type: 'EXIT', config: {} }]);
  waitingAutomationId = await build(`wait_${tag}`, [{ type: 'DELAY', config: { duration: { amount: 2, unit: 'days' } } }, { type: 'SEND_EMAIL', config: { templateId: template } }]);
  expectStatus(await api('POST', '/v1/track', { key: project.publicKey, body: { email: `a-${tag}@example.com`, event: `go_${tag}` } }), 200);
  expectStatus(await api('POST', '/v1/track', { key: project.publicKey, body: { email: `a-${tag}@example.com`, event: `wait_${tag}` } }), 200);
  await waitFor('the automation run to complete', async () => {
    const { rows } = await db().query<{ status: string }>('select status from automation_executions where automation_id = $1', [automationId]);
    return rows[0]?.status === 'COMPLETED' ? true : undefined;
  });
  await waitFor('the delayed run to wait', async () => {
    const { rows } = await db().query<{ next_wake_at: Date | null }>('select next_wake_at from automation_executions where automation_id = $1', [waitingAutomationId]);
    return rows[0]?.next_wake_at ? true : undefined;
  });
  await rollupsCaughtUp();
}, 180_000);

afterAll(closeDb);

/** The feed's items computed from the stored rows: what the endpoint must list, newest first. */
async function scanFeed(): Promise<{ key: string; type: string }[]> {
  const { rows } = await db().query<{ key: string; type: string; at: string }>(
    `select key, type, at from (
       select e.id::text as key, case when e.source = 'TRACKED' then 'event.tracked' when e.name = 'email.open' then 'email.opened'
              when e.name = 'email.click' then 'email.clicked' when e.name ~ '^segment\\.[^.]+\\.entry$' then 'segment.entered'
              when e.name ~ '^segment\\.[^.]+\\.exit$' then 'segment.exited' else e.name end as type, e.created_at as at
       from events e where e.project_id = $1
       union all select 'c:' || id || ':1', 'campaign.started', started_at from campaigns where project_id = $1 and started_at is not null
       union all select 'c:' || id || ':2', 'campaign.' || lower(status), finished_at from campaigns where project_id = $1 and finished_at is not null
       union all select 's:' || execution_id || ':' || lpad(seq::text, 10, '0'), 'automation.step', finished_at from automation_execution_steps where project_id = $1
     ) x order by at desc, key collate "C" desc`,
    [project.projectId],
  );
  return rows.map((r) => ({ key: r.key, type: r.type }));
}

/** Walks the feed to its end; the first page's `total` must be the number of items the walk found. */
async function walk(query: string, limit: number, p = project): Promise<any[]> {
  const items: any[] = [];
  let cursor: string | null = null;
  let total = -1;
  for (let page = 0; page < 100; page++) {
    const res: any = await get(`/activity?limit=${limit}${query}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`, p);
    if (page === 0) total = res.total;
    items.push(...res.data);
    expect(res.hasMore).toBe(res.cursor !== null);
    if (!res.hasMore) {
      expect({ query, total }).toEqual({ query, total: items.length });
      return items;
    }
    cursor = res.cursor;
  }
  throw new Error('too many pages');
}

test('the feed walked page by page equals a scan of events, campaigns and automation steps, newest first', async () => {
  const expected = await scanFeed();
  const types = new Set(expected.map((e) => e.type));
  for (const t of ['email.sent', 'email.bounced', 'event.tracked', 'campaign.started', 'campaign.sent', 'automation.step']) expect(types).toContain(t);
  const items = await walk('', 3);
  expect(items.map((i) => ({ key: i.id, type: i.type }))).toEqual(expected);
  for (let i = 1; i < items.length; i++) expect(items[i - 1].occurredAt >= items[i].occurredAt).toBe(true);
  const campaignEnd = items.find((i) => i.type === 'campaign.sent');
  expect(campaignEnd).toMatchObject({ campaignId, name: `C ${tag}`, data: { status: 'SENT', audienceSize: expect.any(Number) } });
  const step = items.find((i) => i.type === 'automation.step' && i.automationId === automationId && i.name === 'SEND_EMAIL');
  expect(step).toMatchObject({ contactId: contactA, executionId: expect.any(String), data: { emailId: expect.any(String) } });
  const tracked = items.find((i) => i.type === 'event.tracked' && i.name === 'signed_up');
  expect(tracked).toMatchObject({ contactId: contactA, emailId: null });
  // Another project sees none of it.
  expect((await get('/activity', other)).data).toEqual([]);
});

test('filters: types, contact, campaign, automation and time range narrow the feed', async () => {
  const all = await scanFeed();
  const byType = await walk('&types=event.tracked,automation.step', 100);
  expect(byType.map((i) => i.id)).toEqual(all.filter((e) => e.type === 'event.tracked' || e.type === 'automation.step').map((e) => e.key));

  const campaign = await walk(`&campaignId=${campaignId}`, 100);
  expect(campaign.map((i) => i.type).sort()).toEqual(['campaign.sent', 'campaign.started']);
  // The campaign's messages went out: their service events carry the campaign (the trigger fills events.campaign_id).
  const { rows: campaignEvents } = await db().query<{ n: number }>('select count(*)::int as n from events where campaign_id = $1', [campaignId]);
  expect(campaign.length).toBe(2 + campaignEvents[0]!.n);

  const automation = await walk(`&automationId=${automationId}`, 100);
  expect(automation.map((i) => i.name)).toEqual(['EXIT', 'SEND_EMAIL']);
  expect(automation.every((i) => i.type === 'automation.step' && i.automationId === automationId)).toBe(true);

  const contact = await walk(`&contactId=${contactA}`, 100);
  expect(contact.length).toBeGreaterThan(0);
  expect(contact.every((i) => i.contactId === contactA)).toBe(true);
  expect(contact.some((i) => i.type === 'automation.step')).toBe(true);
  expect(contact.some((i) => i.type === 'campaign.started')).toBe(false);

  // A time range: only what happened in it (from the middle of the feed).
  const items = await walk('', 100);
  const mid = items[Math.floor(items.length / 2)];
  const before = await walk(`&to=${encodeURIComponent(mid.occurredAt)}`, 100);
  expect(before.length).toBeGreaterThan(0);
  expect(before.every((i) => i.occurredAt < mid.occurredAt)).toBe(true);
  const future = await walk(`&from=${encodeURIComponent(new Date(Date.now() + 3_600_000).toISOString())}`, 100);
  expect(future).toEqual([]);
});

test('stats count each type over the window as a scan does; recent-count counts what happened since a time', async () => {
  const expected = await scanFeed();
  const counts = Object.fromEntries(ACTIVITY_TYPE_NAMES.map((t) => [t, 0]));
  for (const e of expected) counts[e.type]! += 1;
  const from = new Date(started.getTime() - 3_600_000).toISOString();
  const stats = await get(`/activity/stats?from=${encodeURIComponent(from)}`);
  expect(stats.counts).toEqual(counts);
  expect(stats.total).toBe(expected.length);
  const empty = await get(`/activity/stats?from=2001-01-01T00:00:00Z&to=2001-01-02T00:00:00Z`);
  expect(empty.total).toBe(0);
  expect((await get(`/activity/stats?from=${encodeURIComponent(from)}`, other)).total).toBe(0);

  expect((await get(`/activity/recent-count?since=${encodeURIComponent(started.toISOString())}`)).count).toBe(expected.length);
  // Since the middle of the feed: the items at or after it.
  const items = await walk('', 100);
  const mid = items[Math.floor(items.length / 2)];
  const since = new Date(mid.occurredAt);
  const after = items.filter((i) => new Date(i.occurredAt).getTime() >= since.getTime()).length;
  expect((await get(`/activity/recent-count?since=${encodeURIComponent(since.toISOString())}`)).count).toBe(after);
  expect((await get(`/activity/recent-count?since=${encodeURIComponent(new Date(Date.now() + 60_000).toISOString())}`)).count).toBe(0);
});

test('upcoming lists the scheduled campaign and the waiting run, soonest first; types lists the catalogue', async () => {
  const upcoming = (await get('/activity/upcoming')).data;
  expect(upcoming.map((u: any) => u.type)).toEqual(['automation.wake', 'campaign.scheduled']);
  expect(upcoming[0]).toMatchObject({ automationId: waitingAutomationId, contactId: contactA, name: 'DELAY', data: { stepType: 'DELAY', status: expect.any(String) } });
  expect(upcoming[1]).toMatchObject({ campaignId: scheduledId, name: `Later ${tag}` });
  expect(new Date(upcoming[0].at).getTime()).toBeGreaterThan(Date.now() + 86_400_000);
  expect((await get('/activity/upcoming?limit=1')).data).toHaveLength(1);
  expect((await get('/activity/upcoming', other)).data).toEqual([]);

  const types = (await get('/activity/types')).data;
  expect(types.map((t: any) => t.type)).toEqual(ACTIVITY_TYPE_NAMES);
});

test('422 for an unknown type, a bad cursor, a bad id and a reversed range; 401 without the secret key', async () => {
  const bad = async (path: string, code: string) => {
    const res = await call('GET', path);
    expect(res.status).toBe(422);
    expect(JSON.stringify(res.body)).toContain(code);
  };
  await bad('/activity?types=email.sent,nope', 'invalid_type');
  await bad('/activity?cursor=bm9wZQ', 'invalid_cursor');
  await bad('/activity?contactId=123', 'contactId');
  await bad('/activity?from=2030-01-02T00:00:00Z&to=2030-01-01T00:00:00Z', 'invalid_range');
  await bad('/activity/stats?from=2030-01-02T00:00:00Z&to=2030-01-01T00:00:00Z', 'invalid_range');
  await bad('/activity/recent-count', 'since');
  expect((await api('GET', '/activity', { key: project.publicKey })).status).toBe(401);
});
