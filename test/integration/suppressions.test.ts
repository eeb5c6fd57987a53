import { randomUUID } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import { api } from '../helpers/api';
import { expectStatus, projectWithDomain } from '../helpers/automations';
import { closeDb, db, waitForEmailStatus } from '../helpers/db';
import { createTestProject, type TestProject } from '../helpers/fixtures';
import { messagesTo, refusals, waitForMail } from '../helpers/mailbox';
import { seedContacts } from '../helpers/seed';
import { startFakeSns } from '../helpers/sns';
import { waitFor } from '../helpers/wait';
import { stackEnv } from '../stack-env';
import { uuidv7 } from '../../domain/ids';

/**
 * The per-project suppression list on the real stack: its API, every send path skipping a suppressed address before
 * SMTP (nothing reaches the capture server for it, and its email says SUPPRESSED with the reason), and the bounce and
 * complaint sources that fill it (a relay's 5xx while sending, SES reports through the SNS webhook, soft bounces up
 * to SUPPRESS_SOFT_BOUNCES, 3 in the test stack as by default).
 */

let project: TestProject;
let domain: string;
let other: TestProject;
let sns: Awaited<ReturnType<typeof startFakeSns>>;
const tag = () => randomUUID().slice(0, 8);
const call = (method: string, path: string, body?: unknown, p = project) => api(method, path, { key: p.secretKey, body });
const ok = expectStatus;

beforeAll(async () => {
  ({ project, domain } = await projectWithDomain('suppressions'));
  other = await createTestProject('suppressions-other');
  sns = await startFakeSns({ apiUrl: stackEnv().apiUrl });
});
afterAll(async () => {
  await sns.stop();
  await closeDb();
});

const suppressHand = async (...emails: string[]) => (await ok(await call('POST', '/suppressions', { emails }), 200)).data;
const entryOf = async (email: string, p = project) => (await ok(await call('GET', `/suppressions?email=${encodeURIComponent(email)}`, undefined, p), 200)).data[0];
const send = async (to: string | string[], extra: Record<string, unknown> = {}) =>
  ok(await call('POST', '/v1/send', { to, from: `hi@${domain}`, subject: 'Suppression', body: '<p>s</p>', ...extra }), 200).data.emails;

/** Waits until an email has left QUEUED/SENDING; returns its row. */
async function waitForFinal(emailId: string): Promise<Record<string, any>> {
  return waitFor(`email ${emailId} final`, async () => {
    const { rows } = await db().query('select * from emails where id = $1', [emailId]);
    return rows[0] && !['QUEUED', 'SENDING'].includes(rows[0].status) ? rows[0] : undefined;
  });
}

/** A marker mail sent after `to`'s: once it has arrived, anything sent to `to` before it would have arrived too. */
async function fence(): Promise<void> {
  const marker = `fence-${tag()}@example.com`;
  await send(marker);
  await waitForMail(marker);
}

describe('the API', () => {
  test('POST adds addresses (normalized, each once, in the order given) and is idempotent; an entry keeps its first reason', async () => {
    const a = `Hand-${tag()}@Example.com`;
    const b = `hand-${tag()}@example.com`;
    const first = await ok(await call('POST', '/suppressions', { emails: [` ${a} `, b, a.toLowerCase()], detail: 'asked by phone' }), 200);
    expect(first.data).toEqual([
      expect.objectContaining({ email: a.toLowerCase(), reason: 'manual', source: 'api', detail: 'asked by phone', emailId: null, _meta: { isNew: true } }),
      expect.objectContaining({ email: b, reason: 'manual', _meta: { isNew: true } }),
    ]);
    expect(first.data[0].createdAt).toMatch(/Z$/);
    const again = await ok(await call('POST', '/suppressions', { emails: [b, a] }), 200);
    expect(again.data.map((s: any) => [s.email, s._meta.isNew, s.id])).toEqual([
      [b, false, first.data[1].id],
      [a.toLowerCase(), false, first.data[0].id],
    ]);
    // Another project's list is its own.
    expect((await ok(await call('GET', `/suppressions?email=${encodeURIComponent(b)}`, undefined, other), 200)).data).toEqual([]);
  });

  test('GET lists newest first with a cursor (total on the first page only) and filters by reason, address and substring', async () => {
    const p = (await projectWithDomain('suppressions-list')).project;
    const t = tag();
    const emails = Array.from({ length: 5 }, (_, i) => `list-${i}-${t}@example.com`);
    for (const e of emails) await ok(await call('POST', '/suppressions', { emails: [e] }, p), 200);
    // A hard bounce among them, as bounce processing records it.
    await db().query(`update suppressions set reason = 'hard_bounce', source = 'smtp' where project_id = $1 and email = $2`, [p.projectId, emails[1]]);
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const page: any = await ok(await call('GET', `/suppressions?limit=2${cursor ? `&cursor=${cursor}` : ''}`, undefined, p), 200);
      expect(page.total).toBe(pages === 0 ? 5 : 0);
      seen.push(...page.data.map((s: any) => s.email));
      cursor = page.hasMore ? page.cursor : null;
      pages++;
    } while (cursor);
    expect(pages).toBe(3);
    expect(seen).toEqual([...emails].reverse());
    const hard = await ok(await call('GET', '/suppressions?reason=hard_bounce', undefined, p), 200);
    expect(hard).toMatchObject({ data: [{ email: emails[1], reason: 'hard_bounce', source: 'smtp' }], hasMore: false, total: 1 });
    expect((await ok(await call('GET', '/suppressions?reason=manual', undefined, p), 200)).total).toBe(4);
    expect((await ok(await call('GET', `/suppressions?email=${encodeURIComponent(emails[3]!.toUpperCase())}`, undefined, p), 200)).data.map((s: any) => s.email)).toEqual([
      emails[3],
    ]);
    expect((await ok(await call('GET', `/suppressions?search=${encodeURIComponent(`-2-${t}`)}`, undefined, p), 200)).data.map((s: any) => s.email)).toEqual([emails[2]]);
    expect((await ok(await call('GET', '/suppressions?search=%25', undefined, p), 200)).data).toEqual([]); // wildcards are literal
  });

  test('DELETE reactivates an address (204), then 404; validation errors come in the envelope', async () => {
    const e = `gone-${tag()}@example.com`;
    await suppressHand(e);
    const del = await call('DELETE', `/suppressions/${encodeURIComponent(e.toUpperCase())}`);
    expect(del.status).toBe(204);
    expect(await entryOf(e)).toBeUndefined();
    const again = await call('DELETE', `/suppressions/${encodeURIComponent(e)}`);
    expect(again.status).toBe(404);
    expect(again.body).toMatchObject({ success: false, error: { code: 'NOT_FOUND', statusCode: 404 } });

    const problems: [unknown, string, string][] = [
      [{ emails: [] }, 'emails', 'too_small'],
      [{ emails: ['not-an-address'] }, 'emails.0', 'invalid_string'],
      [{ emails: Array.from({ length: 1001 }, (_, i) => `x${i}@example.com`) }, 'emails', 'too_big'],
      [{ emails: ['a@example.com'], detail: 'two\nlines' }, 'detail', 'invalid_string'],
      [{}, 'emails', 'invalid_type'],
    ];
    for (const [body, field, code] of problems) {
      const res = await call('POST', '/suppressions', body);
      expect({ status: res.status, code: res.body.error.code }).toEqual({ status: 422, code: 'VALIDATION_ERROR' });
      expect(res.body.error.errors).toEqual(expect.arrayContaining([expect.objectContaining({ field, code })]));
    }
    const badQuery = await call('GET', '/suppressions?reason=unsubscribed');
    expect(badQuery.status).toBe(422);
    expect(badQuery.body.error.errors[0].field).toBe('query.reason');
    expect((await call('DELETE', '/suppressions/not-an-address')).status).toBe(422);
    expect((await api('GET', '/suppressions', { key: project.publicKey })).body.error.code).toBe('INVALID_API_KEY');
  });

  test('the routes are in /openapi.json', async () => {
    const doc = (await api('GET', '/openapi.json')).body;
    expect(Object.keys(doc.paths['/suppressions'])).toEqual(expect.arrayContaining(['get', 'post']));
    expect(Object.keys(doc.paths['/suppressions/{email}'])).toEqual(['delete']);
    expect(doc.components.schemas.SuppressionReason.enum).toEqual(['hard_bounce', 'complaint', 'soft_bounce_limit', 'manual']);
  });
});

describe('every send path skips a suppressed address before SMTP and says so', () => {
  test('/v1/send: the suppressed recipient is answered SUPPRESSED with its reason and never sent; the others go out', async () => {
    const blocked = `blocked-${tag()}@example.com`;
    const fine = `fine-${tag()}@example.com`;
    await suppressHand(blocked);
    const emails = await send([fine, blocked.toUpperCase()]);
    expect(emails).toEqual([
      { contact: { id: expect.any(String), email: fine }, email: expect.any(String), status: 'QUEUED' },
      { contact: { id: expect.any(String), email: blocked }, email: expect.any(String), status: 'SUPPRESSED', suppression: { reason: 'manual' } },
    ]);
    await waitForMail(fine);
    const row = (await db().query('select status, error, workflow_id, attempts, queued_at from emails where id = $1', [emails[1].email])).rows[0];
    expect(row).toEqual({ status: 'SUPPRESSED', error: "Not sent: the address is on the project's suppression list (manual)", workflow_id: null, attempts: 0, queued_at: null });
    expect((await ok(await call('GET', `/emails/${emails[1].email}`), 200)).status).toBe('SUPPRESSED');
    // Only the deliverable email was handed to a delivery workflow.
    const fineRow = (await db().query('select workflow_id, queued_at from emails where id = $1', [emails[0].email])).rows[0];
    expect(fineRow).toEqual({ workflow_id: `email-delivery/${emails[0].email}`, queued_at: null }); // claimed by its delivery
    await fence();
    expect(await messagesTo(blocked)).toHaveLength(0);
  });

  test('/v1/send: a call whose first recipient is suppressed delivers the rest under the workflow id of its first queued email', async () => {
    const blocked = `first-${tag()}@example.com`;
    const fine = `second-${tag()}@example.com`;
    await suppressHand(blocked);
    const emails = await send([blocked, fine]);
    expect(emails.map((e: any) => e.status)).toEqual(['SUPPRESSED', 'QUEUED']);
    const row = await waitForEmailStatus(emails[1].email, 'SENT');
    expect(row.workflow_id).toBe(`email-delivery/${emails[1].email}`);
    await waitForMail(fine);
  });

  test('/v1/send with an Idempotency-Key: the replay answers the same statuses', async () => {
    const blocked = `idem-${tag()}@example.com`;
    await suppressHand(blocked);
    const key = `k-${tag()}`;
    const body = { to: blocked, from: `hi@${domain}`, subject: 'Once', body: '<p>o</p>' };
    const first = await api('POST', '/v1/send', { key: project.secretKey, body, headers: { 'Idempotency-Key': key } });
    const again = await api('POST', '/v1/send', { key: project.secretKey, body, headers: { 'Idempotency-Key': key } });
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.body.data.emails).toEqual(first.body.data.emails);
    expect(first.body.data.emails[0]).toMatchObject({ status: 'SUPPRESSED', suppression: { reason: 'manual' } });
  });

  test('reactivated, the address is mailed again', async () => {
    const back = `back-${tag()}@example.com`;
    await suppressHand(back);
    expect((await send(back))[0].status).toBe('SUPPRESSED');
    expect((await call('DELETE', `/suppressions/${encodeURIComponent(back)}`)).status).toBe(204);
    const [again] = await send(back);
    expect(again.status).toBe('QUEUED');
    await waitForMail(back);
  });

  test('campaigns: suppressed recipients of the snapshot end SUPPRESSED, are counted in the stats and get nothing', async () => {
    const t = `camp${tag()}`;
    const emails = Array.from({ length: 4 }, (_, i) => `${t}-${i}@example.com`);
    await seedContacts(project.projectId, 4, (i) => ({ email: emails[i]!, data: { tag: t } }));
    await suppressHand(emails[1]!, emails[3]!);
    const campaign = await ok(
      await call('POST', '/campaigns', {
        name: `C ${t}`,
        subject: 'News',
        body: '<p>News</p>',
        from: `news@${domain}`,
        audienceType: 'FILTERED',
        audienceFilter: { operator: 'AND', conditions: [{ field: 'data.tag', operator: 'equals', value: t }] },
      }),
      201,
    );
    ok(await call('POST', `/campaigns/${campaign.id}/send`), 200);
    await waitFor('the campaign sent', async () => ((await call('GET', `/campaigns/${campaign.id}`)).body.status === 'SENT' ? true : undefined));
    const { rows } = await db().query<{ to_email: string; status: string; error: string | null }>(
      'select to_email, status, error from emails where campaign_id = $1 order by to_email',
      [campaign.id],
    );
    expect(rows.map((r) => [r.to_email, r.status])).toEqual([
      [emails[0], 'SENT'],
      [emails[1], 'SUPPRESSED'],
      [emails[2], 'SENT'],
      [emails[3], 'SUPPRESSED'],
    ]);
    expect(rows[1]!.error).toBe("Not sent: the address is on the project's suppression list (manual)");
    const stats = await ok(await call('GET', `/campaigns/${campaign.id}/stats`), 200);
    expect(stats).toMatchObject({ audience: 4, sent: 2, suppressed: 2, skipped: 0, failed: 0 });
    await waitForMail(emails[0]!);
    await waitForMail(emails[2]!);
    await fence();
    expect(await messagesTo(emails[1]!)).toHaveLength(0);
    expect(await messagesTo(emails[3]!)).toHaveLength(0);
  });

  test('campaigns: an address suppressed while the campaign is sending is not mailed by it (SUPPRESSED, counted)', async () => {
    // A project of its own: the campaign is throttled to one message a second, so it is still sending when the
    // addresses are suppressed (each share then reads one recipient per round trip, one ahead of the one it sends).
    const own = await projectWithDomain('suppressions-mid-send');
    expectStatus(await api('PATCH', `/users/@me/projects/${own.project.projectId}`, { cookie: own.project.cookie, body: { settings: { campaignSendRate: 1 } } }), 200);
    const t = `mid${tag()}`;
    const emails = Array.from({ length: 8 }, (_, i) => `${t}-${i}@example.com`);
    await seedContacts(own.project.projectId, 8, (i) => ({ email: emails[i]!, data: { tag: t } }));
    const ownCall = (method: string, path: string, body?: unknown) => call(method, path, body, own.project);
    const campaign = await ok(
      await ownCall('POST', '/campaigns', {
        name: `C ${t}`,
        subject: 'Slow news',
        body: '<p>News</p>',
        from: `news@${own.domain}`,
        audienceType: 'FILTERED',
        audienceFilter: { operator: 'AND', conditions: [{ field: 'data.tag', operator: 'equals', value: t }] },
      }),
      201,
    );
    ok(await ownCall('POST', `/campaigns/${campaign.id}/send`), 200);
    await waitFor('a first message', async () => ((await Promise.all(emails.map(messagesTo))).some((m) => m.length > 0) ? true : undefined));
    ok(await ownCall('POST', '/suppressions', { emails }), 200);
    await waitFor('the campaign sent', async () => ((await ownCall('GET', `/campaigns/${campaign.id}`)).body.status === 'SENT' ? true : undefined), 30_000);
    const { rows } = await db().query<{ to_email: string; status: string; error: string | null }>('select to_email, status, error from emails where campaign_id = $1', [campaign.id]);
    const suppressed = rows.filter((r) => r.status === 'SUPPRESSED');
    expect(suppressed.length).toBeGreaterThan(0);
    expect(rows.filter((r) => r.status === 'SENT').length + suppressed.length).toBe(8);
    expect(suppressed[0]!.error).toBe("Not sent: the address is on the project's suppression list (manual)");
    expect(await ok(await ownCall('GET', `/campaigns/${campaign.id}/stats`), 200)).toMatchObject({ audience: 8, suppressed: suppressed.length, sent: 8 - suppressed.length });
    for (const r of suppressed) expect(await messagesTo(r.to_email)).toHaveLength(0);
  });

  test('campaign test sends: a suppressed address gets no test message, and the answer says so', async () => {
    const campaign = await ok(await call('POST', '/campaigns', { name: `T ${tag()}`, subject: 'Test me', body: '<p>t</p>', from: `news@${domain}`, audienceType: 'ALL' }), 201);
    const blocked = `tester-${tag()}@example.com`;
    await suppressHand(blocked);
    const res = await ok(await call('POST', `/campaigns/${campaign.id}/test`, { email: blocked }), 200);
    expect(res).toEqual({ emailId: expect.any(String), to: blocked, status: 'SUPPRESSED', suppression: { reason: 'manual' } });
    expect((await db().query('select status from emails where id = $1', [res.emailId])).rows[0].status).toBe('SUPPRESSED');
    const fine = `tester-ok-${tag()}@example.com`;
    expect(await ok(await call('POST', `/campaigns/${campaign.id}/test`, { email: fine }), 200)).toMatchObject({ to: fine, status: 'QUEUED' });
    await waitForMail(fine);
    await fence();
    expect(await messagesTo(blocked)).toHaveLength(0);
  });

  test('automation SEND_EMAIL: the step ends SUPPRESSED with the reason, the run goes on, nothing is sent', async () => {
    const template = (await ok(await call('POST', '/templates', { name: `T ${tag()}`, subject: 'Welcome', body: '<p>w</p>', type: 'TRANSACTIONAL', from: `auto@${domain}` }), 201)).id;
    const wf = await ok(await call('POST', '/workflows', { name: `W ${tag()}`, triggerEvent: `e-${tag()}` }), 201);
    const step = (await ok(await call('POST', `/workflows/${wf.id}/steps`, { type: 'SEND_EMAIL', config: { templateId: template } }), 201)).id;
    ok(await call('PATCH', `/workflows/${wf.id}`, { enabled: true }), 200);
    const blocked = `auto-${tag()}@example.com`;
    const contact = (await ok(await call('POST', '/contacts', { email: blocked }), 201)).id;
    await suppressHand(blocked);
    const run = await ok(await call('POST', `/workflows/${wf.id}/executions`, { contactId: contact }), 201);
    await waitFor('the run completed', async () => ((await call('GET', `/workflows/${wf.id}/executions/${run.id}`)).body.status === 'COMPLETED' ? true : undefined));
    const { rows } = await db().query('select id, status, error from emails where contact_id = $1', [contact]);
    expect(rows).toEqual([{ id: expect.any(String), status: 'SUPPRESSED', error: "Not sent: the address is on the project's suppression list (manual)" }]);
    const steps = await db().query(`select outcome from automation_execution_steps where execution_id = $1 and step_id = $2`, [run.id, step]);
    expect(steps.rows[0].outcome).toMatchObject({ emailId: rows[0].id, status: 'SUPPRESSED' });
    await fence();
    expect(await messagesTo(blocked)).toHaveLength(0);
  });

  test('delivery: an address suppressed after its email was accepted is not mailed (the claim reads the list)', async () => {
    const late = `late-${tag()}@example.com`;
    const emailId = uuidv7();
    await db().query(
      `insert into emails (id, project_id, kind, to_email, from_email, subject, html, status) values ($1, $2, 'TRANSACTIONAL', $3, $4, 'Late', '<p>l</p>', 'QUEUED')`,
      [emailId, project.projectId, late, `hi@${domain}`],
    );
    await suppressHand(late);
    const connection = await Connection.connect({ address: stackEnv().temporalAddress });
    try {
      const result = await new Client({ connection }).workflow.execute('emailDelivery', {
        taskQueue: 'mailwright',
        workflowId: `suppressed-delivery-${tag()}`,
        args: [{ projectId: project.projectId, emailIds: [emailId] }],
      });
      expect(result).toEqual({ sent: 0, rejected: 0, failed: 0, skipped: 1 });
    } finally {
      await connection.close();
    }
    const row = (await db().query('select status, error from emails where id = $1', [emailId])).rows[0];
    expect(row).toEqual({ status: 'SUPPRESSED', error: "Not sent: the address is on the project's suppression list (manual)" });
    expect(await messagesTo(late)).toHaveLength(0);
  });
});

describe('bounces and complaints fill the list', () => {
  test("a relay's 5xx about the recipient while sending: BOUNCED and suppressed (hard_bounce, smtp); the next send never reaches the relay", async () => {
    const to = `bounce-${tag()}@example.com`;
    const [first] = await send(to);
    expect((await waitForFinal(first.email)).status).toBe('BOUNCED');
    expect(await entryOf(to)).toMatchObject({ reason: 'hard_bounce', source: 'smtp', emailId: first.email, detail: expect.stringMatching(/^550 5\.1\.1/) });
    const [second] = await send(to);
    expect(second).toMatchObject({ status: 'SUPPRESSED', suppression: { reason: 'hard_bounce' } });
    await fence();
    expect((await refusals())[to]).toBe(1); // one RCPT TO, the first send's
  });

  test("a campaign's 5xx about a recipient suppresses it too (hard_bounce, smtp, the campaign's email)", async () => {
    const t = `cb${tag()}`;
    const bounced = `bounce-${t}@example.com`;
    await seedContacts(project.projectId, 2, (i) => ({ email: i === 0 ? bounced : `${t}-ok@example.com`, data: { tag: t } }));
    const campaign = await ok(
      await call('POST', '/campaigns', {
        name: `C ${t}`,
        subject: 'News',
        body: '<p>News</p>',
        from: `news@${domain}`,
        audienceType: 'FILTERED',
        audienceFilter: { operator: 'AND', conditions: [{ field: 'data.tag', operator: 'equals', value: t }] },
      }),
      201,
    );
    ok(await call('POST', `/campaigns/${campaign.id}/send`), 200);
    await waitFor('the campaign sent', async () => ((await call('GET', `/campaigns/${campaign.id}`)).body.status === 'SENT' ? true : undefined));
    const row = (await db().query(`select id, status from emails where campaign_id = $1 and to_email = $2`, [campaign.id, bounced])).rows[0];
    expect(row.status).toBe('BOUNCED');
    expect(await entryOf(bounced)).toMatchObject({ reason: 'hard_bounce', source: 'smtp', emailId: row.id, detail: expect.stringMatching(/^550 5\.1\.1/) });
  });

  test('a 5xx refusing the message after DATA (5.7.1, content) bounces the email but leaves the address alone', async () => {
    const to = `bouncedata-${tag()}@example.com`;
    const [sent] = await send(to);
    expect((await waitForFinal(sent.email)).status).toBe('BOUNCED');
    expect(await entryOf(to)).toBeUndefined();
  });

  /** An email sent and recorded SENT, whose SES reports the tests then post. */
  async function sentEmail(to: string): Promise<{ emailId: string; messageId: string }> {
    const [e] = await send(to);
    const row = await waitForEmailStatus(e.email, 'SENT');
    return { emailId: e.email, messageId: row.message_id };
  }
  const report = (kind: 'Bounce' | 'Complaint', e: { messageId: string }, to: string, part: Record<string, unknown>) =>
    sns.post(sns.notification(sns.sesReport(kind, e.messageId, to, part, `hi@${domain}`)));

  test('SES: a permanent bounce suppresses the address (hard_bounce, ses, the diagnostic code)', async () => {
    const to = `ses-hard-${tag()}@example.com`;
    const e = await sentEmail(to);
    const res = await report('Bounce', e, to, { bounceType: 'Permanent', bounceSubType: 'General', bouncedRecipients: [{ emailAddress: to, diagnosticCode: 'smtp; 550 5.1.1 user unknown' }] });
    expect(res.status).toBe(200);
    expect(await entryOf(to)).toMatchObject({ reason: 'hard_bounce', source: 'ses', emailId: e.emailId, detail: 'smtp; 550 5.1.1 user unknown' });
    expect((await send(to))[0].status).toBe('SUPPRESSED');
  });

  test('SES: a complaint suppresses the address (complaint), for transactional mail too', async () => {
    const to = `ses-complaint-${tag()}@example.com`;
    const e = await sentEmail(to);
    expect((await report('Complaint', e, to, { complainedRecipients: [{ emailAddress: to }], complaintFeedbackType: 'abuse' })).status).toBe(200);
    expect(await entryOf(to)).toMatchObject({ reason: 'complaint', source: 'ses', emailId: e.emailId, detail: 'abuse' });
    expect((await send(to))[0]).toMatchObject({ status: 'SUPPRESSED', suppression: { reason: 'complaint' } });
  });

  test('soft bounces: the third transient bounce of different emails suppresses (soft_bounce_limit); a repeated report and a content bounce count nothing; a hard bounce then replaces the reason', async () => {
    const to = `ses-soft-${tag()}@example.com`;
    const transient = (subType: string) => ({ bounceType: 'Transient', bounceSubType: subType, bouncedRecipients: [{ emailAddress: to, diagnosticCode: 'smtp; 452 4.2.2 mailbox full' }] });
    const first = await sentEmail(to);
    expect((await report('Bounce', first, to, transient('MailboxFull'))).status).toBe(200);
    expect((await report('Bounce', first, to, transient('MailboxFull'))).status).toBe(200); // the same email again
    const second = await sentEmail(to);
    expect((await report('Bounce', second, to, transient('ContentRejected'))).status).toBe(200); // about the message
    expect(await entryOf(to)).toBeUndefined();
    expect((await report('Bounce', second, to, transient('General'))).status).toBe(200);
    expect(await entryOf(to)).toBeUndefined();
    const third = await sentEmail(to);
    expect((await report('Bounce', third, to, transient('MailboxFull'))).status).toBe(200);
    const soft = await entryOf(to);
    expect(soft).toMatchObject({ reason: 'soft_bounce_limit', source: 'ses', emailId: third.emailId, detail: expect.stringMatching(/^3 soft bounces within 7 days; the last: smtp; 452/) });
    const { rows } = await db().query<{ n: number }>(`select count(*)::int as n from suppression_soft_bounces where project_id = $1 and email = $2`, [project.projectId, to]);
    expect(rows[0]!.n).toBe(3);
    // A permanent bounce of an email sent before the limit was reached makes the entry a hard bounce.
    expect((await report('Bounce', first, to, { bounceType: 'Permanent', bounceSubType: 'General', bouncedRecipients: [{ emailAddress: to }] })).status).toBe(200);
    const hard = await entryOf(to);
    expect(hard).toMatchObject({ id: soft.id, reason: 'hard_bounce', emailId: first.emailId, createdAt: soft.createdAt });
    expect(Date.parse(hard.updatedAt)).toBeGreaterThan(Date.parse(soft.updatedAt));
    // Reactivated, the address starts counting afresh.
    expect((await call('DELETE', `/suppressions/${encodeURIComponent(to)}`)).status).toBe(204);
    const { rows: after } = await db().query<{ n: number }>(`select count(*)::int as n from suppression_soft_bounces where project_id = $1 and email = $2`, [project.projectId, to]);
    expect(after[0]!.n).toBe(0);
  });
});
