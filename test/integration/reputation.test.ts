import { randomUUID } from 'node:crypto';
import { api } from '../helpers/api';
import { connectGateway, expectStatus, projectWithDomain } from '../helpers/automations';
import { closeDb, db } from '../helpers/db';
import { createTestProject, type TestProject } from '../helpers/fixtures';
import { messagesTo, waitForMail } from '../helpers/mailbox';
import { seedContacts } from '../helpers/seed';
import { startFakeSns } from '../helpers/sns';
import { stackEnv } from '../stack-env';
import { waitFor } from '../helpers/wait';

/**
 * Sending reputation on the real stack: 100 transactional emails sent through the relay, then SES bounce reports
 * through the SNS webhook for 15 of them (past the 10 % suspend threshold). The reputation check (triggered
 * here; its schedule is far off in the test stack) suspends the project: the campaign that was SENDING is PAUSED,
 * campaign sends and resumes are 403 PROJECT_SUSPENDED, transactional sends go on, the owner gets an email. The owner
 * lifts it: the rates count afresh, the campaign resumes and finishes. Another project is untouched.
 */

let project: TestProject;
let domain: string;
let other: TestProject;
const tag = randomUUID().slice(0, 8);
const call = (method: string, path: string, body?: unknown, p = project) => api(method, path, { key: p.secretKey, body });
const dashboard = (method: string, path: string, body?: unknown, p = project) => api(method, path, { cookie: p.cookie, body });
let sns: Awaited<ReturnType<typeof startFakeSns>>;

async function triggerCheck(): Promise<void> {
  const gateway = await connectGateway();
  try {
    await gateway.triggerReputationCheck();
  } finally {
    await gateway.close();
  }
}

beforeAll(async () => {
  ({ project, domain } = await projectWithDomain('reputation'));
  other = await createTestProject('reputation-other');
  sns = await startFakeSns({ apiUrl: stackEnv().apiUrl });
});

afterAll(async () => {
  await sns.stop();
  await closeDb();
});

test('bounce reports past the threshold suspend the marketing sends; the owner is told and lifts the suspension', async () => {
  const from = `news@${domain}`;
  // 100 transactional emails, accepted by the relay.
  const ids: string[] = [];
  for (let batch = 0; batch < 2; batch++) {
    const to = Array.from({ length: 50 }, (_, i) => `rep-${batch * 50 + i}-${tag}@example.com`);
    const res = expectStatus(await call('POST', '/v1/send', { to, from, subject: 'Hello', body: '<p>Hi</p>' }), 200);
    ids.push(...res.data.emails.map((e: { email: string }) => e.email));
  }
  await waitFor('100 emails sent', async () => {
    const { rows } = await db().query<{ n: number }>(`select count(*)::int as n from emails where id = any($1::uuid[]) and status = 'SENT'`, [ids]);
    return rows[0]!.n === 100 ? true : undefined;
  });
  // A campaign sending slowly (1 per second) to 30 contacts: SENDING when the check comes.
  await seedContacts(project.projectId, 30, (i) => ({ email: `camp-${i}-${tag}@example.com` }));
  expectStatus(await dashboard('PATCH', `/users/@me/projects/${project.projectId}`, { settings: { campaignSendRate: 1 } }), 200);
  const campaign = expectStatus(await call('POST', '/campaigns', { name: `C ${tag}`, subject: 'News', body: '<p>News</p>', from, audienceType: 'ALL' }), 201);
  expectStatus(await call('POST', `/campaigns/${campaign.id}/send`), 200);

  // Below the threshold so far: OK, rates over the 100 (and the campaign's first messages).
  const before = expectStatus(await dashboard('GET', `/users/@me/projects/${project.projectId}/security`), 200);
  expect(before).toMatchObject({ status: 'OK', bounced: 0, suspension: null, thresholds: { bounce: { warn: 0.05, suspend: 0.1 }, complaint: { warn: 0.001, suspend: 0.005 }, minSent: 100 } });
  expect(before.sent).toBeGreaterThanOrEqual(100);

  // SES reports 15 permanent bounces (over 10 % of what was sent, the campaign included).
  const { rows: sent } = await db().query<{ message_id: string; to_email: string }>(`select message_id, to_email from emails where id = any($1::uuid[]) order by id limit 15`, [ids]);
  for (const e of sent) {
    const res = await sns.post(sns.notification(sns.sesReport('Bounce', e.message_id, e.to_email, { bounceType: 'Permanent', bounceSubType: 'General', bouncedRecipients: [{ emailAddress: e.to_email }] }, from)));
    expect(res.status).toBe(200);
  }
  const warned = await waitFor('the bounces counted', async () => {
    const r = expectStatus(await dashboard('GET', `/projects/${project.projectId}/security`), 200);
    return r.bounced === 15 ? r : undefined;
  });
  expect(warned.status).toBe('WARNING'); // past 5 %, judged only by the check for a suspension
  expect(warned.bounceRate).toBeGreaterThanOrEqual(0.1);

  await triggerCheck();
  const suspended = await waitFor('the suspension', async () => {
    const r = expectStatus(await dashboard('GET', `/users/@me/projects/${project.projectId}/security`), 200);
    return r.status === 'SUSPENDED' ? r : undefined;
  });
  expect(suspended.suspension).toMatchObject({ reason: 'BOUNCE_RATE', bounced: 15, liftedAt: null });
  expect(suspended.recentSuspensions).toHaveLength(1);

  // The campaign that was sending is paused; campaign sends and resumes are refused; transactional sends go on.
  await waitFor('the campaign paused', async () => ((await call('GET', `/campaigns/${campaign.id}`)).body.status === 'PAUSED' ? true : undefined));
  const resume = await call('POST', `/campaigns/${campaign.id}/resume`);
  expect(resume.status).toBe(403);
  expect(resume.body.error.code).toBe('PROJECT_SUSPENDED');
  const second = expectStatus(await call('POST', '/campaigns', { name: `C2 ${tag}`, subject: 'More', body: '<p>More</p>', from, audienceType: 'ALL' }), 201);
  expect((await call('POST', `/campaigns/${second.id}/send`)).body.error.code).toBe('PROJECT_SUSPENDED');
  expectStatus(await call('POST', '/v1/send', { to: `after-${tag}@example.com`, from, subject: 'Receipt', body: '<p>Thanks</p>' }), 200);

  // The owner was told, once.
  // (The owner's first message is the verification email of the signup.)
  const mail = (await waitForMail(project.userEmail, { count: 2 })).find((m) => m.subject?.includes('Marketing sends suspended'));
  expect(mail).toBeDefined();
  expect(mail!.text).toContain('bounce rate reached');
  await triggerCheck();
  await new Promise((r) => setTimeout(r, 2_000));
  const { rows: notified } = await db().query<{ n: number }>(`select count(*)::int as n from project_suspensions where project_id = $1`, [project.projectId]);
  expect(notified[0]!.n).toBe(1);
  expect(await messagesTo(project.userEmail)).toHaveLength(2);

  // Only an owner lifts it (another user: 404); then the rates count afresh and the campaign may resume.
  expect((await dashboard('POST', `/users/@me/projects/${project.projectId}/security/lift`, undefined, other)).status).toBe(404);
  const lifted = expectStatus(await dashboard('POST', `/users/@me/projects/${project.projectId}/security/lift`), 200);
  expect(lifted.liftedAt).not.toBeNull();
  expect((await dashboard('POST', `/users/@me/projects/${project.projectId}/security/lift`)).body.error.code).toBe('NOT_SUSPENDED');
  const after = expectStatus(await dashboard('GET', `/users/@me/projects/${project.projectId}/security`), 200);
  expect(after).toMatchObject({ status: 'OK', sent: 0, bounceRate: null, suspension: null });
  expectStatus(await dashboard('PATCH', `/users/@me/projects/${project.projectId}`, { settings: { campaignSendRate: null } }), 200);
  expectStatus(await call('POST', `/campaigns/${campaign.id}/resume`), 200);
  await waitFor('the campaign sent', async () => ((await call('GET', `/campaigns/${campaign.id}`)).body.status === 'SENT' ? true : undefined));
  // A check now finds nothing to suspend (the window starts after the lift).
  await triggerCheck();
  await new Promise((r) => setTimeout(r, 2_000));
  expect(expectStatus(await dashboard('GET', `/users/@me/projects/${project.projectId}/security`), 200).status).toBe('OK');

  // Another project is untouched.
  expect(expectStatus(await dashboard('GET', `/users/@me/projects/${other.projectId}/security`, undefined, other), 200)).toMatchObject({ status: 'OK', suspension: null, recentSuspensions: [] });
});
