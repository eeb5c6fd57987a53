import { randomUUID } from 'node:crypto';
import { api } from '../helpers/api';
import { connectGateway, expectStatus, projectWithDomain } from '../helpers/automations';
import { closeDb, db } from '../helpers/db';
import { createTestProject, type TestProject } from '../helpers/fixtures';
import { makePng } from '../helpers/images';
import { seedContacts } from '../helpers/seed';
import { stackEnv } from '../stack-env';
import { waitFor } from '../helpers/wait';

/**
 * A project reset through the real API and worker: a project with 100,000 contacts, events, a scheduled campaign, an
 * automation run waiting in a long delay, a template, a segment and an upload loses all of it; its keys, members,
 * domain and settings stay; the campaign's and the run's workflows are cancelled in Temporal; another project is
 * untouched.
 */

const CONTACTS = 100_000;
let project: TestProject;
let domain: string;
let other: TestProject;
const tag = randomUUID().slice(0, 8);
const call = (method: string, path: string, body?: unknown, p = project) => api(method, path, { key: p.secretKey, body });
const dashboard = (method: string, path: string, body?: unknown, p = project) => api(method, path, { cookie: p.cookie, body });

async function counts(projectId: string): Promise<Record<string, number>> {
  const tables = ['contacts', 'events', 'emails', 'campaigns', 'automations', 'automation_executions', 'segments', 'templates', 'uploads', 'analytics_hourly', 'event_name_hourly', 'domains', 'memberships'];
  const out: Record<string, number> = {};
  for (const t of tables) out[t] = (await db().query<{ n: number }>(`select count(*)::int as n from ${t} where project_id = $1`, [projectId])).rows[0]!.n;
  return out;
}

let campaignId = '';
let runWorkflowId = '';

beforeAll(async () => {
  ({ project, domain } = await projectWithDomain('reset'));
  other = await createTestProject('reset-other');
  const from = `hi@${domain}`;
  await seedContacts(project.projectId, CONTACTS, (i) => ({ email: `r${i}-${tag}@example.com` }));
  for (let i = 0; i < 5; i++) expectStatus(await api('POST', '/v1/track', { key: project.publicKey, body: { email: `r${i}-${tag}@example.com`, event: 'visited' } }), 200);
  expectStatus(await api('POST', '/v1/track', { key: other.publicKey, body: { email: `keep-${tag}@example.com`, event: 'visited' } }), 200);
  const template = expectStatus(await call('POST', '/templates', { name: `T ${tag}`, subject: 'Hi', body: '<p>Hi</p>', type: 'TRANSACTIONAL', from }), 201).id;
  expectStatus(await call('POST', '/segments', { name: `S ${tag}`, type: 'STATIC' }), 201);
  const campaign = expectStatus(await call('POST', '/campaigns', { name: `C ${tag}`, subject: 'Later', body: '<p>Later</p>', from, audienceType: 'ALL' }), 201);
  campaignId = campaign.id;
  expectStatus(await call('POST', `/campaigns/${campaignId}/send`, { scheduledFor: new Date(Date.now() + 86_400_000).toISOString() }), 200);
  const wf = expectStatus(await call('POST', '/workflows', { name: `W ${tag}`, triggerEvent: `wait_${tag}` }), 201);
  const delay = expectStatus(await call('POST', `/workflows/${wf.id}/steps`, { type: 'DELAY', config: { duration: { amount: 3, unit: 'days' } } }), 201).id;
  const send = expectStatus(await call('POST', `/workflows/${wf.id}/steps`, { type: 'SEND_EMAIL', config: { templateId: template } }), 201).id;
  expectStatus(await call('POST', `/workflows/${wf.id}/transitions`, { fromStepId: delay, toStepId: send }), 201);
  expectStatus(await call('PATCH', `/workflows/${wf.id}`, { enabled: true }), 200);
  expectStatus(await api('POST', '/v1/track', { key: project.publicKey, body: { email: `r1-${tag}@example.com`, event: `wait_${tag}` } }), 200);
  runWorkflowId = await waitFor('the run to wait', async () => {
    const { rows } = await db().query<{ workflow_id: string }>(`select workflow_id from automation_executions where automation_id = $1 and next_wake_at is not null`, [wf.id]);
    return rows[0]?.workflow_id;
  });
  const form = new FormData();
  form.append('file', new Blob([makePng(4, 4, Date.now() % 1000)], { type: 'image/png' }), 'a.png');
  const up = await fetch(`${stackEnv().apiUrl}/uploads/image`, { method: 'POST', headers: { authorization: `Bearer ${project.secretKey}` }, body: form });
  expect(up.status).toBe(201);
}, 180_000);

afterAll(closeDb);

test("a reset deletes the project's data in a watched workflow, stops what runs, keeps keys, members, domains and settings, and leaves another project alone", async () => {
  const before = await counts(project.projectId);
  expect(before).toMatchObject({ contacts: CONTACTS, campaigns: 1, automations: 1, segments: 1, templates: 1, uploads: 1, domains: 1, memberships: 1 });
  expect(before.events).toBeGreaterThanOrEqual(6);
  const otherBefore = await counts(other.projectId);
  const name = (await dashboard('GET', '/users/@me/projects')).body.find((p: any) => p.id === project.projectId).name as string;

  // The confirmation must be the project's name; only a member (here: the owner) may ask.
  const wrong = await dashboard('POST', `/users/@me/projects/${project.projectId}/reset`, { confirm: `${name}x` });
  expect(wrong.status).toBe(422);
  expect(JSON.stringify(wrong.body)).toContain('confirmation_mismatch');
  expect((await dashboard('POST', `/users/@me/projects/${project.projectId}/reset`, { confirm: name }, other)).status).toBe(404);
  expect((await dashboard('GET', `/users/@me/projects/${project.projectId}/resets`)).body).toEqual({ data: [] });
  expect((await dashboard('GET', `/users/@me/projects/${project.projectId}/resets`, undefined, other)).status).toBe(404);

  const started = await dashboard('POST', `/users/@me/projects/${project.projectId}/reset`, { confirm: name });
  expect(started.status).toBe(202);
  expect(started.body).toMatchObject({ status: 'RUNNING', workflowId: `project-reset/${project.projectId}` });
  // One at a time.
  const again = await dashboard('POST', `/users/@me/projects/${project.projectId}/reset`, { confirm: name });
  expect(again.status).toBe(409);
  expect(again.body.error.code).toBe('RESET_RUNNING');

  const done = await waitFor('the reset to end', async () => {
    const r = (await dashboard('GET', `/users/@me/projects/${project.projectId}/resets`)).body.data[0];
    return r.status === 'RUNNING' ? undefined : r;
  });
  expect(done).toMatchObject({ status: 'COMPLETED', error: null, finishedAt: expect.any(String) });
  expect(done.deleted).toMatchObject({ contacts: CONTACTS, campaigns: 1, automations: 1, segments: 1, templates: 1, uploads: 1 });
  expect(done.deleted.events).toBe(before.events);

  const after = await counts(project.projectId);
  expect(after).toEqual({ ...Object.fromEntries(Object.keys(after).map((k) => [k, 0])), domains: 1, memberships: 1 });
  expect(await counts(other.projectId)).toEqual(otherBefore);

  // The keys still work, on an empty project (the domain and the membership stayed: counted above).
  const list = expectStatus(await call('GET', '/contacts'), 200);
  expect(list.total).toBe(0);
  expectStatus(await api('POST', '/v1/track', { key: project.publicKey, body: { email: `new-${tag}@example.com`, event: 'visited' } }), 200);

  // What ran was cancelled in Temporal.
  const gateway = await connectGateway();
  try {
    const run = await gateway.client.workflow.getHandle(runWorkflowId).describe();
    expect(run.status.name).toBe('CANCELLED');
    // The scheduled campaign's run was asked to cancel; it closes once it has recorded that (its rows are gone).
    const send = await waitFor('the campaign run to close', async () => {
      const d = await gateway.client.workflow.getHandle(`campaign-send/${campaignId}`).describe();
      return d.status.name === 'RUNNING' ? undefined : d.status.name;
    }, 30_000);
    expect(['CANCELLED', 'COMPLETED']).toContain(send);
    const reset = await gateway.client.workflow.getHandle(`project-reset/${project.projectId}`).describe();
    expect(reset.status.name).toBe('COMPLETED');
  } finally {
    await gateway.close();
  }

  // A second reset may start once the first ended.
  const second = await dashboard('POST', `/users/@me/projects/${project.projectId}/reset`, { confirm: name });
  expect(second.status).toBe(202);
  await waitFor('the second reset', async () => {
    const list = (await dashboard('GET', `/users/@me/projects/${project.projectId}/resets`)).body.data;
    return list.length === 2 && list[0].id === second.body.id && list[0].status === 'COMPLETED' ? true : undefined;
  });
});
