import { randomUUID } from 'node:crypto';
import { closeDb, db } from '../helpers/db';
import { addVerifiedDomain, createTestProject, uniqueDomain, type TestProject } from '../helpers/fixtures';
import { messagesTo, waitForMail } from '../helpers/mailbox';
import { seedContacts } from '../helpers/seed';
import { maybeRecordHistory } from '../helpers/histories';
import { stackEnv } from '../stack-env';
import { initOrm, type MikroORM } from '../../domain/orm';
import { TemporalGateway } from '../../temporal/client';
import { workflowIds } from '../../temporal/definitions';
import { cancelCampaign, campaignRow, pauseCampaign, rescheduleCampaign, resumeCampaign, sendCampaign } from '../../domain/campaigns/campaign-steering';
import type { CampaignRow } from '../../domain/campaigns/campaign.entity';
import { findStrandedEmails } from '../../domain/emails/delivery';
import { mirrorClosedRuns } from '../../domain/temporal-mirror';
import { api } from '../helpers/api';

/**
 * The send engine end to end: the steering functions the API calls (with the real Temporal gateway), the
 * `campaign-send` workflow on the real worker, the SMTP capture server. Campaign rows are written with SQL here; the
 * HTTP routes have their own tests (campaigns.test.ts).
 */

let orm: MikroORM;
let gateway: TemporalGateway;
let project: TestProject;
let domain: string;

beforeAll(async () => {
  orm = await initOrm(stackEnv().databaseUrl, 4);
  gateway = await TemporalGateway.connect({ address: stackEnv().temporalAddress, namespace: 'default', taskQueue: 'mailwright' });
  project = await createTestProject();
  domain = uniqueDomain();
  await addVerifiedDomain(project.projectId, domain);
});
afterAll(async () => {
  await gateway.close();
  await orm.close();
  await closeDb();
});

const em = () => orm.em.fork();

/** A fresh tag so each test's recipients are its own. */
const tagged = () => `c${randomUUID().slice(0, 8)}`;

async function createCampaign(fields: Partial<Record<'audience_type' | 'segment_id' | 'audience_filter' | 'subject' | 'body' | 'name', unknown>> = {}): Promise<string> {
  const id = randomUUID();
  await db().query(
    `insert into campaigns (id, project_id, name, subject, body, from_email, from_name, audience_type, segment_id, audience_filter)
     values ($1, $2, $3, $4, $5, $6, 'Acme News', $7, $8, $9)`,
    [
      id,
      project.projectId,
      fields.name ?? 'Spring news',
      fields.subject ?? 'Hello {{ first | default: "friend" }}',
      fields.body ?? '<p>Hi {{ first | default: "friend" }}, <a href="https://example.com/sale">see the sale</a>.</p>',
      `news@${domain}`,
      fields.audience_type ?? 'FILTERED',
      fields.segment_id ?? null,
      fields.audience_filter === undefined ? null : JSON.stringify(fields.audience_filter),
    ],
  );
  return id;
}

/** Contacts whose data carries the test's tag, and a filter that selects exactly them. */
async function audience(tag: string, n: number, make: (i: number) => { subscribed?: boolean; data?: Record<string, unknown> } = () => ({})) {
  const emails = Array.from({ length: n }, (_, i) => `${tag}-${i}@example.com`);
  await seedContacts(project.projectId, n, (i) => ({ email: emails[i]!, ...make(i), data: { tag, first: `F${i}`, ...make(i).data } }));
  return { emails, filter: { operator: 'AND', conditions: [{ field: 'data.tag', operator: 'equals', value: tag }] } };
}

/** Waits for the row's status; `mirror`: runs the email sweeper's mirror of runs closed in Temporal at each look. */
async function waitForStatus(id: string, status: string, timeoutMs = 60_000, mirror = false): Promise<CampaignRow> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (mirror) await mirrorClosedRuns(em(), await gateway.runsClosedOutside({ since: new Date(Date.now() - 10 * 60_000) }));
    const row = await campaignRow(em(), project.projectId, id);
    if (row!.status === status) return row!;
    if (Date.now() > deadline) throw new Error(`campaign ${id} is ${row!.status}, expected ${status}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

async function stats(id: string) {
  const { rows } = await db().query('select audience, sent, skipped, failed from campaign_stats where campaign_id = $1', [id]);
  return rows[0] as { audience: number; sent: number; skipped: number; failed: number };
}

/** How many messages each address received. */
async function receivedCounts(emails: string[]): Promise<number[]> {
  return Promise.all(emails.map(async (e) => (await messagesTo(e)).length));
}

async function setRate(perSecond: number | null) {
  await db().query(`update projects set settings = settings || jsonb_build_object('campaignSendRate', $2::int) where id = $1`, [project.projectId, perSecond]);
}

describe('campaign send', () => {
  afterEach(() => setRate(null));

  test('every subscribed member of the audience gets exactly one message with the marketing headers; unsubscribed contacts none', async () => {
    const tag = tagged();
    const { emails, filter } = await audience(tag, 30, (i) => ({ subscribed: i % 10 !== 9 }));
    const id = await createCampaign({ audience_filter: filter });
    await sendCampaign(em(), gateway, project.projectId, id);
    const done = await waitForStatus(id, 'SENT');
    expect(done.audienceSize).toBe(27);
    const subscribed = emails.filter((_, i) => i % 10 !== 9);
    const unsubscribed = emails.filter((_, i) => i % 10 === 9);
    expect(await receivedCounts(subscribed)).toEqual(subscribed.map(() => 1));
    expect(await receivedCounts(unsubscribed)).toEqual(unsubscribed.map(() => 0));
    expect(await stats(id)).toEqual({ audience: 27, sent: 27, skipped: 0, failed: 0 });

    const [mail] = await waitForMail(emails[0]!);
    expect(mail!.subject).toBe('Hello F0');
    expect(mail!.from!.value).toEqual([{ name: 'Acme News', address: `news@${domain}` }]);
    expect(mail!.headers.get('precedence')).toBe('bulk');
    const header = (name: string) => (mail!.headerLines.find((h) => h.key === name)?.line ?? '').replace(/\r?\n[ \t]+/g, ' ');
    expect(header('list-id')).toBe(`List-Id: "Spring news" <${project.projectId}.campaigns.${domain}>`);
    expect(header('list-unsubscribe-post')).toBe('List-Unsubscribe-Post: List-Unsubscribe=One-Click');
    expect(header('list-unsubscribe')).toContain('/unsubscribe/');
    const { rows } = await db().query(`select id, status, subject, html, smtp_response, provider_message_id from emails where campaign_id = $1 and to_email = $2`, [id, emails[0]]);
    // The relay's id of the message, from its reply (`250 Ok: queued as <id>`), for provider reports that name only it.
    const queued = /queued as (\S+)$/.exec(rows[0].smtp_response)?.[1];
    expect(queued).toBeDefined();
    expect(rows).toEqual([{ id: expect.any(String), status: 'SENT', subject: 'Hello F0', html: '', smtp_response: expect.any(String), provider_message_id: queued }]);
    expect(mail!.messageId).toBe(`<${rows[0].id}@${domain}>`);
    await maybeRecordHistory(workflowIds.campaignSend(id), 'campaign-send-completed');
  });

  test('an MJML campaign (compiled once in the MJML thread of the worker, rendered in the render threads) reaches each recipient as its own HTML and text', async () => {
    const tag = tagged();
    const { emails, filter } = await audience(tag, 6);
    const body = `<mjml><mj-body><mj-section><mj-column>
<mj-text>Hi {{ first }}, your {{ tag }} picks</mj-text>
<mj-button href="https://example.com/shop?who={{ first }}">Open the shop</mj-button>
</mj-column></mj-section></mj-body></mjml>`;
    const id = await createCampaign({ audience_filter: filter, body });
    await sendCampaign(em(), gateway, project.projectId, id);
    await waitForStatus(id, 'SENT');
    expect(await receivedCounts(emails)).toEqual(emails.map(() => 1));
    for (const i of [0, 5]) {
      const [mail] = await waitForMail(emails[i]!);
      const html = String(mail!.html);
      // MJML's output (its table layout and the button's cell), personalised per recipient.
      expect(html).toMatch(/<table[^>]*role="presentation"/);
      expect(html).toContain(`Hi F${i}, your ${tag} picks`);
      expect(html).not.toContain('<mj-');
      // The button's link is tracked: a click link of ours, not the target.
      expect(html).not.toContain('https://example.com/shop');
      expect(html).toMatch(/href="[^"]*\/t\/c\/[A-Za-z0-9_-]+"/);
      expect(mail!.text).toContain(`Hi F${i}, your ${tag} picks`);
      // The text part names the link's own target (it is not tracked there).
      expect(mail!.text).toContain(`[https://example.com/shop?who=F${i}]`);
    }
  });

  test('a contact who unsubscribes after the snapshot is skipped and counted', async () => {
    await setRate(10);
    const tag = tagged();
    // 40 contacts at 5 per second per share: the last three (in contact order) are far from the first chunk of theirs.
    const { emails, filter } = await audience(tag, 40);
    const id = await createCampaign({ audience_filter: filter });
    await sendCampaign(em(), gateway, project.projectId, id);
    for (;;) {
      const { rows } = await db().query('select count(*)::int as n from emails where campaign_id = $1', [id]);
      if (rows[0].n === 40) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    const late = emails.slice(37);
    await db().query(`update contacts set subscribed = false where project_id = $1 and email = any($2)`, [project.projectId, late]);
    await waitForStatus(id, 'SENT');
    expect(await receivedCounts(late)).toEqual([0, 0, 0]);
    expect(await stats(id)).toEqual({ audience: 40, sent: 37, skipped: 3, failed: 0 });
    const { rows } = await db().query(`select status, error from emails where campaign_id = $1 and to_email = $2`, [id, late[0]]);
    expect(rows).toEqual([{ status: 'CANCELLED', error: 'Unsubscribed after the audience snapshot' }]);
  });

  test('pause stops the send; resume sends the rest, each recipient exactly once', async () => {
    await setRate(20);
    const tag = tagged();
    const { emails, filter } = await audience(tag, 60);
    const id = await createCampaign({ audience_filter: filter });
    await sendCampaign(em(), gateway, project.projectId, id);
    await new Promise((r) => setTimeout(r, 1200));
    await pauseCampaign(em(), gateway, project.projectId, id);
    await new Promise((r) => setTimeout(r, 2500)); // the chunk in progress finishes; nothing after it
    const atPause = (await receivedCounts(emails)).reduce((a, b) => a + b, 0);
    await new Promise((r) => setTimeout(r, 1500));
    const stillPaused = (await receivedCounts(emails)).reduce((a, b) => a + b, 0);
    expect(stillPaused).toBe(atPause);
    expect(atPause).toBeGreaterThan(0);
    expect(atPause).toBeLessThan(60);
    expect((await campaignRow(em(), project.projectId, id)).status).toBe('PAUSED');
    await resumeCampaign(em(), gateway, project.projectId, id);
    await waitForStatus(id, 'SENT');
    expect(await receivedCounts(emails)).toEqual(emails.map(() => 1));
    expect((await stats(id)).sent).toBe(60);
    await maybeRecordHistory(workflowIds.campaignSend(id), 'campaign-send-paused-resumed');
  });

  test("a paused campaign's QUEUED rows are never taken for stranded transactional mail (the sweeper leaves them)", async () => {
    await setRate(5);
    const a = await audience(tagged(), 30);
    const id = await createCampaign({ audience_filter: a.filter });
    await sendCampaign(em(), gateway, project.projectId, id);
    while ((await db().query('select count(*)::int as n from emails where campaign_id = $1', [id])).rows[0].n < 30) await new Promise((r) => setTimeout(r, 50));
    await pauseCampaign(em(), gateway, project.projectId, id);
    await db().query(`update emails set created_at = now() - interval '1 day' where campaign_id = $1`, [id]);
    const stranded = (await findStrandedEmails(em(), { olderThanMs: 0, limit: 100_000 })).flatMap((g) => g.emailIds);
    const { rows } = await db().query(`select id from emails where campaign_id = $1 and status = 'QUEUED'`, [id]);
    expect(rows.length).toBeGreaterThan(0);
    expect(stranded.filter((e) => rows.some((r) => r.id === e))).toEqual([]);
    await cancelCampaign(em(), gateway, project.projectId, id);
  });

  test('cancel while sending: what was sent stays sent, the rest is CANCELLED and never sent', async () => {
    await setRate(20);
    const tag = tagged();
    const { emails, filter } = await audience(tag, 60);
    const id = await createCampaign({ audience_filter: filter });
    await sendCampaign(em(), gateway, project.projectId, id);
    await new Promise((r) => setTimeout(r, 1200));
    await cancelCampaign(em(), gateway, project.projectId, id);
    await waitForStatus(id, 'CANCELLED');
    // The run settles the rest once its activities stopped.
    const deadline = Date.now() + 30_000;
    let counts: Record<string, number>;
    for (;;) {
      const { rows } = await db().query(`select status, count(*)::int as n from emails where campaign_id = $1 group by status`, [id]);
      counts = Object.fromEntries(rows.map((r) => [r.status, r.n]));
      if (!counts.QUEUED || Date.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(counts.QUEUED).toBeUndefined();
    expect(counts.SENT! + counts.CANCELLED!).toBe(60);
    expect(counts.CANCELLED).toBeGreaterThan(0);
    const received = await receivedCounts(emails);
    expect(received.reduce((a, b) => a + b, 0)).toBe(counts.SENT);
    expect(Math.max(...received)).toBe(1);
    const { rows: wf } = await db().query('select status_reason as "statusReason" from campaigns where id = $1', [id]);
    expect(wf[0].statusReason).toBe('Cancelled through the API');
    await maybeRecordHistory(workflowIds.campaignSend(id), 'campaign-send-cancelled');
  });

  test('a scheduled campaign waits for its time; a moved time is honoured; cancel while scheduled sends nothing', async () => {
    const tag = tagged();
    const { emails, filter } = await audience(tag, 3);
    const id = await createCampaign({ audience_filter: filter });
    const first = new Date(Date.now() + 60_000);
    const scheduled = await sendCampaign(em(), gateway, project.projectId, id, { scheduledFor: first });
    expect(scheduled.status).toBe('SCHEDULED');
    await new Promise((r) => setTimeout(r, 1000));
    expect(await receivedCounts(emails)).toEqual([0, 0, 0]);
    const moved = new Date(Date.now() + 2_000);
    await rescheduleCampaign(em(), gateway, project.projectId, id, moved);
    const sent = await waitForStatus(id, 'SENT', 30_000);
    const startedAt = new Date(sent.startedAt!).getTime();
    expect(startedAt).toBeGreaterThanOrEqual(moved.getTime() - 50);
    expect(startedAt).toBeLessThan(first.getTime());
    expect(await receivedCounts(emails)).toEqual([1, 1, 1]);
    await maybeRecordHistory(workflowIds.campaignSend(id), 'campaign-send-rescheduled');

    const other = tagged();
    const b = await audience(other, 2);
    const id2 = await createCampaign({ audience_filter: b.filter });
    await sendCampaign(em(), gateway, project.projectId, id2, { scheduledFor: new Date(Date.now() + 3_000) });
    await cancelCampaign(em(), gateway, project.projectId, id2);
    await new Promise((r) => setTimeout(r, 5_000));
    expect((await campaignRow(em(), project.projectId, id2)).status).toBe('CANCELLED');
    expect(await receivedCounts(b.emails)).toEqual([0, 0]);
  });

  test('a segment edited mid-send does not change the snapshot or stall the campaign', async () => {
    await setRate(20);
    const tag = tagged();
    const { emails } = await audience(tag, 30, (i) => ({ data: { group: i < 20 ? 'a' : 'b' } }));
    const segmentId = randomUUID();
    await db().query(
      `insert into segments (id, project_id, name, slug, type, condition) values ($1, $2, 'Group A', $3, 'DYNAMIC', $4)`,
      [segmentId, project.projectId, `group-a-${tag}`, JSON.stringify({ operator: 'AND', conditions: [{ field: 'data.group', operator: 'equals', value: 'a' }, { field: 'data.tag', operator: 'equals', value: tag }] })],
    );
    const id = await createCampaign({ audience_type: 'SEGMENT', segment_id: segmentId });
    await sendCampaign(em(), gateway, project.projectId, id);
    await waitForStatus(id, 'SENDING');
    await new Promise((r) => setTimeout(r, 500));
    await db().query(`update segments set condition = $2 where id = $1`, [segmentId, JSON.stringify({ operator: 'AND', conditions: [{ field: 'data.tag', operator: 'equals', value: tag }] })]);
    await waitForStatus(id, 'SENT');
    expect(await receivedCounts(emails)).toEqual(emails.map((_, i) => (i < 20 ? 1 : 0)));
  });

  test('cancelling the run in Temporal shows as CANCELLED (the run records it), terminating it as FAILED (the sweeper mirrors it)', async () => {
    await setRate(5);
    const a = await audience(tagged(), 40);
    const id = await createCampaign({ audience_filter: a.filter });
    await sendCampaign(em(), gateway, project.projectId, id);
    await waitForStatus(id, 'SENDING');
    await gateway.client.workflow.getHandle(workflowIds.campaignSend(id)).cancel();
    const cancelled = await waitForStatus(id, 'CANCELLED', 30_000);
    expect(cancelled.statusReason).toBe('Cancelled in Temporal');

    const b = await audience(tagged(), 40);
    const id2 = await createCampaign({ audience_filter: b.filter });
    await sendCampaign(em(), gateway, project.projectId, id2);
    await waitForStatus(id2, 'SENDING');
    await gateway.client.workflow.getHandle(workflowIds.campaignSend(id2)).terminate('operator test');
    const failed = await waitForStatus(id2, 'FAILED', 10_000, true);
    expect(failed.statusReason).toBe('The campaign-send workflow was terminated in Temporal');
  });

  test('a 5xx is BOUNCED once with its event; a 4xx is retried in a later pass and sent; one that never succeeds ends FAILED', async () => {
    const tag = tagged();
    const emails = [`bounce-${tag}@example.com`, `tempfail-1-${tag}@example.com`, `tempfail-9-${tag}@example.com`, `ok-${tag}@example.com`];
    await seedContacts(project.projectId, emails.length, (i) => ({ email: emails[i]!, data: { tag } }));
    const id = await createCampaign({ audience_filter: { operator: 'AND', conditions: [{ field: 'data.tag', operator: 'equals', value: tag }] } });
    await sendCampaign(em(), gateway, project.projectId, id);
    await waitForStatus(id, 'SENT', 60_000);
    const { rows } = await db().query(`select to_email as "to", status from emails where campaign_id = $1 order by to_email`, [id]);
    expect(Object.fromEntries(rows.map((r) => [r.to, r.status]))).toEqual({
      [emails[0]!]: 'BOUNCED',
      [emails[1]!]: 'SENT',
      [emails[2]!]: 'FAILED',
      [emails[3]!]: 'SENT',
    });
    expect(await receivedCounts(emails)).toEqual([0, 1, 0, 1]);
    // Handed to the relay: the two accepted and the one rejected; the one that kept failing transiently is failed.
    expect(await stats(id)).toEqual({ audience: 4, sent: 3, skipped: 0, failed: 1 });
    const { rows: events } = await db().query(
      `select ev.name from events ev join emails e on e.id = ev.email_id where e.campaign_id = $1 order by ev.name`,
      [id],
    );
    expect(events.map((e) => e.name)).toEqual(['email.bounced']);
    await maybeRecordHistory(workflowIds.campaignSend(id), 'campaign-send-retry-passes');
  });

  test('through the HTTP API: an ALL campaign reaches every subscribed contact of its project once, and its stats say so', async () => {
    const own = await createTestProject('All audience');
    const ownDomain = uniqueDomain();
    await addVerifiedDomain(own.projectId, ownDomain);
    const tag = tagged();
    const emails = Array.from({ length: 12 }, (_, i) => `${tag}-all-${i}@example.com`);
    await seedContacts(own.projectId, emails.length, (i) => ({ email: emails[i]!, subscribed: i !== 11, data: { first: `A${i}` } }));
    const call = (method: string, path: string, body?: unknown) => api(method, path, { key: own.secretKey, body });
    const created = await call('POST', '/campaigns', { name: 'Everyone', subject: 'Hi {{ first }}', body: '<p>Hello {{ first }}</p>', from: `news@${ownDomain}`, audienceType: 'ALL' });
    expect(created.status).toBe(201);
    expect((await call('GET', `/campaigns/${created.body.id}`)).body.audienceSize).toBe(11);
    const sent = await call('POST', `/campaigns/${created.body.id}/send`);
    expect(sent.status).toBe(200);
    expect(sent.body.status).toBe('SENDING');
    const deadline = Date.now() + 60_000;
    let status = '';
    while (status !== 'SENT' && Date.now() < deadline) {
      status = (await call('GET', `/campaigns/${created.body.id}`)).body.status;
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(status).toBe('SENT');
    expect(await receivedCounts(emails)).toEqual(emails.map((_, i) => (i === 11 ? 0 : 1)));
    const stats = await call('GET', `/campaigns/${created.body.id}/stats`);
    expect(stats.body).toMatchObject({ audience: 11, sent: 11, failed: 0, skipped: 0 });
    // The sends reach the analytics rollup as tallies through the outbox (no email.sent event per message): counted
    // once, and no tally left behind.
    const rollup = async () =>
      (await db().query<{ sent: number; left: number }>(
        `select (select coalesce(sum(count), 0)::int from analytics_hourly where project_id = $1 and metric = 'sent') as sent,
                (select count(*)::int from event_tallies where project_id = $1) as left`,
        [own.projectId],
      )).rows[0]!;
    const until = Date.now() + 15_000;
    while (JSON.stringify(await rollup()) !== JSON.stringify({ sent: 11, left: 0 }) && Date.now() < until) await new Promise((r) => setTimeout(r, 100));
    expect(await rollup()).toEqual({ sent: 11, left: 0 });
    expect((await db().query(`select count(*)::int as n from events where project_id = $1 and name = 'email.sent'`, [own.projectId])).rows[0].n).toBe(0);
    expect((await call('POST', `/campaigns/${created.body.id}/pause`)).body.error.code).toBe('CAMPAIGN_STATE');
    expect((await call('DELETE', `/campaigns/${created.body.id}`)).status).toBe(204);
  });

  test('cancel while paused: nothing more is sent, the rest is CANCELLED', async () => {
    await setRate(10);
    const a = await audience(tagged(), 40);
    const id = await createCampaign({ audience_filter: a.filter });
    await sendCampaign(em(), gateway, project.projectId, id);
    await new Promise((r) => setTimeout(r, 800));
    await pauseCampaign(em(), gateway, project.projectId, id);
    await new Promise((r) => setTimeout(r, 1500));
    const atPause = (await receivedCounts(a.emails)).reduce((x, y) => x + y, 0);
    await cancelCampaign(em(), gateway, project.projectId, id);
    const deadline = Date.now() + 30_000;
    while ((await db().query(`select count(*)::int as n from emails where campaign_id = $1 and status = 'QUEUED'`, [id])).rows[0].n > 0) {
      if (Date.now() > deadline) throw new Error('rows still QUEUED 30 s after the cancel');
      await new Promise((r) => setTimeout(r, 200));
    }
    await new Promise((r) => setTimeout(r, 1000));
    expect((await receivedCounts(a.emails)).reduce((x, y) => x + y, 0)).toBe(atPause);
    const { rows } = await db().query(`select status, count(*)::int as n from emails where campaign_id = $1 group by status order by status`, [id]);
    expect(rows).toEqual([
      { status: 'CANCELLED', n: 40 - atPause },
      { status: 'SENT', n: atPause },
    ]);
    expect((await campaignRow(em(), project.projectId, id)).status).toBe('CANCELLED');
  });

  test('send refuses a non-DRAFT campaign and a past scheduledFor; two concurrent sends start one run', async () => {
    const a = await audience(tagged(), 2);
    const id = await createCampaign({ audience_filter: a.filter });
    await expect(sendCampaign(em(), gateway, project.projectId, id, { scheduledFor: new Date(Date.now() - 1000) })).rejects.toMatchObject({ statusCode: 422 });
    const results = await Promise.allSettled([sendCampaign(em(), gateway, project.projectId, id), sendCampaign(em(), gateway, project.projectId, id)]);
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    expect(results.find((r) => r.status === 'rejected')).toMatchObject({ reason: { statusCode: 409, code: 'CAMPAIGN_STATE' } });
    await waitForStatus(id, 'SENT');
    expect(await receivedCounts(a.emails)).toEqual([1, 1]);
    await expect(sendCampaign(em(), gateway, project.projectId, id)).rejects.toMatchObject({ statusCode: 409 });
  });
});
