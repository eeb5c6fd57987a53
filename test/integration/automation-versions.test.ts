import { randomUUID } from 'node:crypto';
import { api } from '../helpers/api';
import { connectGateway, expectStatus, projectWithDomain } from '../helpers/automations';
import { closeDb, db } from '../helpers/db';
import { type TestProject } from '../helpers/fixtures';
import { messagesTo, waitForMail } from '../helpers/mailbox';
import { maybeRecordHistory } from '../helpers/histories';
import type { TemporalGateway } from '../../temporal/client';

/**
 * A run carries the graph version it started on: edits of the workflow while it waits (a step's config changed, a
 * step added, the step it waits in deleted with splice) and disabling the workflow do not change its steps; the
 * next run starts on the edited graph.
 */

let project: TestProject;
let domain: string;
let gateway: TemporalGateway;
const call = (method: string, path: string, body?: unknown) => api(method, path, { key: project.secretKey, body });
const tag = () => randomUUID().slice(0, 8);

beforeAll(async () => {
  ({ project, domain } = await projectWithDomain('automation versions'));
  gateway = await connectGateway();
});
afterAll(async () => {
  await gateway.close();
  await closeDb();
});

const ok = expectStatus;

const track = async (email: string, event: string) => ok(await api('POST', '/v1/track', { key: project.publicKey, body: { email, event } }), 200);

/** Waits until the workflow has an execution for the contact in one of `statuses`; returns it in full. */
async function waitForExecution(workflowId: string, email: string, statuses: string[], timeoutMs = 30_000): Promise<any> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { rows } = await db().query<{ id: string }>('select id from contacts where project_id = $1 and email = $2', [project.projectId, email]);
    if (rows[0]) {
      const list = (await ok(await call('GET', `/workflows/${workflowId}/executions?limit=100&contactId=${rows[0].id}`), 200)).data as any[];
      const hit = list.find((x) => statuses.includes(x.status));
      if (hit) return ok(await call('GET', `/workflows/${workflowId}/executions/${hit.id}`), 200);
    }
    if (Date.now() > deadline) throw new Error(`no execution of ${workflowId} for ${email} in ${statuses.join('/')}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const subjectsTo = async (email: string, count: number) => (await waitForMail(email, { count })).map((m) => m.subject).sort();

test('a run started on an older graph version finishes on its own steps, whatever the edits and the disabling', async () => {
  const event = `versioned-${tag()}`;
  const tpl = (await ok(await call('POST', '/templates', { name: `T ${tag()}`, subject: 'Template subject', body: '<p>x</p>', type: 'TRANSACTIONAL', from: `auto@${domain}` }), 201)).id;
  const wf = await ok(await call('POST', '/workflows', { name: `W ${tag()}`, triggerEvent: event }), 201);
  const step = async (type: string, config: Record<string, unknown>) => (await ok(await call('POST', `/workflows/${wf.id}/steps`, { type, config }), 201)).id as string;
  const connect = async (from: string, to: string) => ok(await call('POST', `/workflows/${wf.id}/transitions`, { fromStepId: from, toStepId: to }), 201);

  // Version 1: A (subject "v1 first") -> DELAY 3 s -> B (subject "v1 last").
  const a = await step('SEND_EMAIL', { templateId: tpl, subject: 'v1 first' });
  const d = await step('DELAY', { duration: { amount: 3, unit: 'seconds' } });
  const b = await step('SEND_EMAIL', { templateId: tpl, subject: 'v1 last' });
  await connect(a, d);
  await connect(d, b);
  const enabled = await ok(await call('PATCH', `/workflows/${wf.id}`, { enabled: true }), 200);
  expect(enabled.problems).toEqual([]);

  const oldEmail = `old-${tag()}@example.com`;
  await track(oldEmail, event);
  const waiting = await waitForExecution(wf.id, oldEmail, ['WAITING']);
  expect(waiting).toMatchObject({ currentStepId: d, version: enabled.publishedVersion });

  // While the run waits in the DELAY: B's config changed, a step C added after B, the DELAY itself deleted with
  // splice (A now leads to B), then the workflow disabled.
  await ok(await call('PATCH', `/workflows/${wf.id}/steps/${b}`, { config: { templateId: tpl, subject: 'v2 last' } }), 200);
  const c = await step('SEND_EMAIL', { templateId: tpl, subject: 'v2 inserted' });
  await connect(b, c);
  await ok(await call('DELETE', `/workflows/${wf.id}/steps/${d}?splice=true`), 204);
  const edited = await ok(await call('GET', `/workflows/${wf.id}`), 200);
  expect(edited.problems).toEqual([]);
  expect(edited.publishedVersion).toBeGreaterThan(waiting.version);
  expect(edited.transitions.map((t: any) => [t.fromStepId, t.toStepId]).sort()).toEqual([[a, b], [b, c]].sort());
  await ok(await call('PATCH', `/workflows/${wf.id}`, { enabled: false }), 200);
  expect((await ok(await call('GET', `/workflows/${wf.id}/executions/${waiting.id}`), 200)).status).toBe('WAITING');

  // The run goes on with version 1: the DELAY that no longer exists, then B as it was; never C.
  await gateway.client.workflow.getHandle(waiting.temporalWorkflowId).result();
  const done = await waitForExecution(wf.id, oldEmail, ['COMPLETED']);
  expect(done.version).toBe(waiting.version);
  expect(done.steps.map((s: any) => [s.stepId, s.type])).toEqual([
    [a, 'SEND_EMAIL'],
    [d, 'DELAY'],
    [b, 'SEND_EMAIL'],
  ]);
  expect(done.steps.every((s: any) => s.outcome.status === undefined || s.outcome.status === 'SENT')).toBe(true);
  expect(await subjectsTo(oldEmail, 2)).toEqual(['v1 first', 'v1 last']);
  await maybeRecordHistory(done.temporalWorkflowId, 'automation-run-older-version');

  // Enabled again, a new run takes the edited graph: A, B as edited, C; no DELAY.
  await ok(await call('PATCH', `/workflows/${wf.id}`, { enabled: true }), 200);
  const newEmail = `new-${tag()}@example.com`;
  await track(newEmail, event);
  const next = await waitForExecution(wf.id, newEmail, ['COMPLETED']);
  expect(next.version).toBeGreaterThan(done.version);
  expect(next.steps.map((s: any) => s.stepId)).toEqual([a, b, c]);
  expect(await subjectsTo(newEmail, 3)).toEqual(['v1 first', 'v2 inserted', 'v2 last']);
  // Nothing more reached the first contact.
  expect(await messagesTo(oldEmail)).toHaveLength(2);
});
