import { randomUUID } from 'node:crypto';
import type { ParsedMail } from 'mailparser';
import { closeDb, db } from '../helpers/db';
import { addVerifiedDomain, projectWithVerifiedDomain, uniqueDomain, type TestProject } from '../helpers/fixtures';
import { messagesTo, waitForMail } from '../helpers/mailbox';
import { seedContacts } from '../helpers/seed';
import { api } from '../helpers/api';
import { stackEnv } from '../stack-env';
import { initOrm } from '../../domain/orm';
import { beginCampaignSend } from '../../domain/campaigns/campaign-send';

/**
 * A/B-tested campaigns end to end, through the HTTP API, the real worker and the SMTP capture server: the split, the
 * test shares, opens and clicks through the real tracking endpoints, the decision (automatic or a person's pick), and
 * the winner sent to exactly the contacts outside the test shares.
 */

let project: TestProject;
let domain: string;

beforeAll(async () => {
  ({ project, domain } = await projectWithVerifiedDomain());
});
afterAll(async () => {
  await closeDb();
});

const call = (method: string, path: string, body?: unknown) => api(method, path, { key: project.secretKey, ...(body === undefined ? {} : { body }) });
const get = (path: string) => fetch(`${stackEnv().apiUrl}${path}`, { redirect: 'manual' });

async function audience(n: number) {
  const tag = `ab${randomUUID().slice(0, 8)}`;
  const emails = Array.from({ length: n }, (_, i) => `${tag}-${i}@example.com`);
  await seedContacts(project.projectId, n, (i) => ({ email: emails[i]!, data: { tag, first: `F${i}` } }));
  return { emails, filter: { operator: 'AND', conditions: [{ field: 'data.tag', operator: 'equals', value: tag }] } };
}

const BODY = '<p>Hi {{ first }}, <a href="https://example.com/sale">see the sale</a>.</p>';

async function createAb(filter: unknown, abTest: Record<string, unknown>): Promise<string> {
  const res = await call('POST', '/campaigns', {
    name: 'A/B news',
    subject: 'Subject A {{ first }}',
    body: BODY,
    from: `news@${domain}`,
    audienceType: 'FILTERED',
    audienceFilter: filter,
    trackOpens: true,
    trackClicks: true,
    abTest,
  });
  expect(res.status).toBe(201);
  return res.body.id as string;
}

/** Waits until `count` of `emails` have a message each, and returns each address's messages parsed (one each). */
async function waitForRecipients(emails: string[], count: number, timeoutMs = 60_000): Promise<Map<string, ParsedMail>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const got = (await Promise.all(emails.map(async (e) => ((await messagesTo(e)).length > 0 ? e : null)))).filter((e): e is string => e !== null);
    if (got.length >= count) {
      const parsed = await Promise.all(got.map(async (e) => [e, (await waitForMail(e))[0]!] as const));
      return new Map(parsed);
    }
    if (Date.now() > deadline) throw new Error(`expected ${count} recipients with mail, found ${got.length}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

async function waitForStatus(id: string, status: string, timeoutMs = 90_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const res = await call('GET', `/campaigns/${id}`);
    if (res.body.status === status) return res.body;
    if (Date.now() > deadline) throw new Error(`campaign ${id} is ${res.body.status} (${res.body.statusReason}), expected ${status}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

const trackingPath = (mail: ParsedMail, kind: 'o' | 'c') => new URL(new RegExp(`(?:src|href)="([^"]+/t/${kind}/[\\w-]+)"`).exec(mail.html as string)![1]!).pathname;

async function counts(emails: string[]): Promise<number[]> {
  return Promise.all(emails.map(async (e) => (await messagesTo(e)).length));
}

describe('A/B-tested campaign', () => {
  test('automatic: each variant goes to its test share, clicks through the tracking endpoint decide, the winner goes to exactly the rest', async () => {
    const { emails, filter } = await audience(20);
    const id = await createAb(filter, {
      variants: [{}, { subject: 'Subject B {{ first }}', preheader: 'A peek at B' }],
      testShare: { count: 3 },
      metric: 'unique_clicks',
      testDurationSeconds: 15,
      afterTest: 'auto',
    });
    expect((await call('POST', `/campaigns/${id}/send`)).status).toBe(200);

    // The test shares: 3 recipients each, and nothing more while the test runs.
    const test = await waitForRecipients(emails, 6);
    await new Promise((r) => setTimeout(r, 1_000));
    expect((await counts(emails)).reduce((a, b) => a + b, 0)).toBe(6);
    const bySubject = (prefix: string) => [...test].filter(([, m]) => m.subject!.startsWith(prefix)).map(([e, m]) => ({ email: e, mail: m }));
    const a = bySubject('Subject A');
    const b = bySubject('Subject B');
    expect([a.length, b.length]).toEqual([3, 3]);
    expect(b[0]!.mail.html).toContain('A peek at B');
    // The split is stored per recipient row, as the mail went.
    const { rows } = await db().query<{ to_email: string; variant: number | null }>('select to_email, variant from emails where campaign_id = $1', [id]);
    const variantOf = new Map(rows.map((r) => [r.to_email, r.variant]));
    expect(a.map((x) => variantOf.get(x.email))).toEqual([0, 0, 0]);
    expect(b.map((x) => variantOf.get(x.email))).toEqual([1, 1, 1]);
    expect(rows.filter((r) => r.variant === null)).toHaveLength(14);

    // Everyone in the test opens; two readers of B click.
    for (const { mail } of [...a, ...b]) expect((await get(trackingPath(mail, 'o'))).status).toBe(200);
    for (const { mail } of b.slice(0, 2)) expect((await get(trackingPath(mail, 'c'))).status).toBe(302);

    const done = await waitForStatus(id, 'SENT');
    expect(done.abDecision).toMatchObject({
      winner: 1,
      winnerLabel: 'B',
      decidedBy: 'auto',
      metric: 'unique_clicks',
      test: expect.stringContaining('two-proportion z-test'),
      variants: [
        { variant: 0, sent: 3, opens: 3, clicks: 0, successes: 0, trials: 3 },
        { variant: 1, sent: 3, opens: 3, clicks: 2, successes: 2, trials: 3 },
      ],
    });
    // 2 of 3 against 0 of 3: p is about 0.05, reported as within noise.
    expect(done.abDecision.withinNoise).toBe(done.abDecision.pValue >= 0.05);

    // The winner went to exactly the 14 contacts outside the test shares, once each; the test recipients got nothing more.
    const rest = emails.filter((e) => !test.has(e));
    expect(rest).toHaveLength(14);
    expect(await counts(emails)).toEqual(emails.map(() => 1));
    for (const e of rest) {
      const [mail] = await waitForMail(e);
      expect(mail!.subject).toMatch(/^Subject B F\d+$/);
      expect(mail!.html).toContain('A peek at B');
    }

    const stats = await call('GET', `/campaigns/${id}/stats`);
    expect(stats.status).toBe(200);
    expect(stats.body).toMatchObject({ audience: 20, sent: 20 });
    expect(stats.body.abTest).toMatchObject({
      metric: 'unique_clicks',
      variants: [
        { variant: 0, label: 'A', recipients: 3, sent: 3, opens: 3, clicks: 0 },
        { variant: 1, label: 'B', recipients: 3, sent: 3, opens: 3, clicks: 2 },
      ],
      finalSend: { winner: 1, recipients: 14, sent: 14, opens: 0, clicks: 0 },
      decision: { winner: 1 },
    });
    // Analytics: the per-campaign breakdown and the ranking carry the same groups for an A/B campaign.
    for (const path of ['/analytics/campaign-stats?limit=100', '/analytics/top-campaigns?by=sent&limit=100']) {
      const listed = await call('GET', path);
      expect(listed.status).toBe(200);
      const row = listed.body.data.find((c: { campaignId: string }) => c.campaignId === id);
      expect(row).toMatchObject({ sent: 20, abTest: { variants: stats.body.abTest.variants, finalSend: stats.body.abTest.finalSend, decision: { winner: 1 } } });
    }
  }, 150_000);

  test("manual: the remainder waits for a person's pick; a contact who unsubscribed during the wait gets nothing", async () => {
    const { emails, filter } = await audience(10);
    const id = await createAb(filter, {
      variants: [{ subject: 'Manual A' }, { subject: 'Manual B' }, { subject: 'Manual C', fromName: 'Team C' }],
      testShare: { percent: 20 },
      metric: 'unique_opens',
      testDurationSeconds: 1,
      afterTest: 'manual',
    });
    expect((await call('POST', `/campaigns/${id}/send`)).status).toBe(200);
    const test = await waitForRecipients(emails, 6);
    const rest = emails.filter((e) => !test.has(e));
    // Past the test's end, nothing more goes out until someone picks.
    await new Promise((r) => setTimeout(r, 3_000));
    expect((await counts(emails)).reduce((x, y) => x + y, 0)).toBe(6);
    expect((await call('GET', `/campaigns/${id}`)).body).toMatchObject({ status: 'SENDING', abDecision: null });
    const picked = [...test.values()].find((m) => m.subject === 'Manual C')!;
    expect(picked.from!.value[0]!.name).toBe('Team C');

    await db().query('update contacts set subscribed = false where project_id = $1 and email = $2', [project.projectId, rest[0]]);
    expect((await call('POST', `/campaigns/${id}/winner`, { variant: 5 })).status).toBe(422);
    const pick = await call('POST', `/campaigns/${id}/winner`, { variant: 2 });
    expect(pick.status).toBe(200);
    expect(pick.body.abPick).toBe(2);
    const done = await waitForStatus(id, 'SENT');
    expect(done.abDecision).toMatchObject({ winner: 2, winnerLabel: 'C', decidedBy: 'manual' });
    expect(await counts(rest)).toEqual([0, 1, 1, 1]);
    for (const e of rest.slice(1)) expect((await waitForMail(e))[0]!.subject).toBe('Manual C');
    const again = await call('POST', `/campaigns/${id}/winner`, { variant: 0 });
    expect(again.status).toBe(409);
    expect((await call('GET', `/campaigns/${id}/stats`)).body.abTest.finalSend).toMatchObject({ winner: 2, recipients: 4, sent: 3 });
  }, 120_000);

  test('a sender domain that lost its verification during the wait: no remainder is sent, the campaign ends FAILED with the reason', async () => {
    const { emails, filter } = await audience(6);
    const own = uniqueDomain();
    await addVerifiedDomain(project.projectId, own);
    const res = await call('POST', '/campaigns', {
      name: 'A/B lost domain',
      subject: 'Lost A',
      body: BODY,
      from: `news@${own}`,
      audienceType: 'FILTERED',
      audienceFilter: filter,
      abTest: { variants: [{}, { subject: 'Lost B' }], testShare: { count: 1 }, metric: 'unique_opens', testDurationSeconds: 60, afterTest: 'manual' },
    });
    expect((await call('POST', `/campaigns/${res.body.id}/send`)).status).toBe(200);
    await waitForRecipients(emails, 2);
    await db().query(`update domains set status = 'PENDING' where project_id = $1 and name = $2`, [project.projectId, own]);
    expect((await call('POST', `/campaigns/${res.body.id}/winner`, { variant: 1 })).status).toBe(200);
    const failed = await waitForStatus(res.body.id, 'FAILED');
    expect(failed.statusReason).toMatch(/^The winner was not sent: /);
    expect(failed.abDecision).toBeNull();
    await new Promise((r) => setTimeout(r, 500));
    expect((await counts(emails)).reduce((a, b) => a + b, 0)).toBe(2);
    const { rows } = await db().query<{ status: string; n: number }>(
      'select status, count(*)::int as n from emails where campaign_id = $1 and variant is null group by status',
      [res.body.id],
    );
    expect(rows).toEqual([{ status: 'CANCELLED', n: 4 }]);
  });

  test('an audience too small for the shares is refused at send time (422, the campaign stays a DRAFT); a campaign without variants has no winner to pick', async () => {
    const { filter } = await audience(5);
    const id = await createAb(filter, { variants: [{}, { subject: 'B' }], testShare: { count: 3 }, metric: 'unique_opens', testDurationSeconds: 60, afterTest: 'auto' });
    const res = await call('POST', `/campaigns/${id}/send`);
    expect(res.status).toBe(422);
    expect(res.body.error.code).toBe('VALIDATION_ERROR');
    expect(res.body.error.errors).toEqual([expect.objectContaining({ field: 'abTest.testShare', code: 'audience_too_small' })]);
    expect((await call('GET', `/campaigns/${id}`)).body.status).toBe('DRAFT');

    // The same check when the send starts (a scheduled campaign whose audience shrank): FAILED with the reason, and
    // the snapshot rolled back with it (no recipient rows).
    await db().query(`update campaigns set status = 'SENDING' where id = $1`, [id]);
    const orm = await initOrm(stackEnv().databaseUrl, 4);
    try {
      expect(await beginCampaignSend(orm.em.fork(), id)).toEqual({ state: 'ended', status: 'FAILED' });
    } finally {
      await orm.close();
    }
    const failed = (await call('GET', `/campaigns/${id}`)).body;
    expect(failed.status).toBe('FAILED');
    expect(failed.statusReason).toMatch(/too small for 2 test shares of 3 recipients/);
    expect((await db().query('select 1 from emails where campaign_id = $1', [id])).rowCount).toBe(0);

    // Counted as the split counts: 7 contacts are enough for two shares of 3 and a remainder, but not once one of
    // them is suppressed (the snapshot leaves suppressed addresses out).
    const seven = await audience(7);
    const tight = await createAb(seven.filter, { variants: [{}, { subject: 'B' }], testShare: { count: 3 }, metric: 'unique_opens', testDurationSeconds: 60, afterTest: 'auto' });
    expect((await call('POST', '/suppressions', { emails: [seven.emails[0]] })).status).toBe(200);
    const refused = await call('POST', `/campaigns/${tight}/send`);
    expect(refused.status).toBe(422);
    expect(refused.body.error.errors).toEqual([expect.objectContaining({ field: 'abTest.testShare', code: 'audience_too_small' })]);
    expect((await call('DELETE', `/suppressions/${encodeURIComponent(seven.emails[0]!)}`)).status).toBeLessThan(300);
    expect((await call('POST', `/campaigns/${tight}/send`)).status).toBe(200);
    await call('POST', `/campaigns/${tight}/cancel`);

    const plain = await call('POST', '/campaigns', { name: 'Plain', subject: 'S', body: BODY, from: `news@${domain}`, audienceType: 'ALL' });
    expect(plain.body.abTest).toBeNull();
    const pick = await call('POST', `/campaigns/${plain.body.id}/winner`, { variant: 0 });
    expect(pick.status).toBe(422);
    // One variant is not a test.
    const one = await call('POST', '/campaigns', { name: 'One', subject: 'S', body: BODY, from: `news@${domain}`, audienceType: 'ALL', abTest: { variants: [{}], testShare: { count: 1 }, metric: 'unique_opens', testDurationSeconds: 60, afterTest: 'auto' } });
    expect(one.status).toBe(422);
  });
});
