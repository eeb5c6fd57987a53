import { randomUUID } from 'node:crypto';
import { api } from '../helpers/api';
import { connectGateway, expectStatus, projectWithDomain } from '../helpers/automations';
import { closeDb } from '../helpers/db';
import { createTestProject, type TestProject } from '../helpers/fixtures';
import { messagesTo, waitForMail } from '../helpers/mailbox';
import type { TemporalGateway } from '../../temporal/client';
import { EMAIL_SWEEPER_SCHEDULE_ID } from '../../temporal/definitions';
import { ScheduleOverlapPolicy } from '@temporalio/client';

/**
 * The workflows API over HTTP against the real stack: the graph (steps, transitions, splice, versions), enabling and
 * its 422s, the 409s, manual starts with context, cancellation from the API and from Temporal, cancel-all.
 */

let project: TestProject;
let other: TestProject;
let domain: string;
let gateway: TemporalGateway;
const call = (method: string, path: string, body?: unknown, p = project) => api(method, path, { key: p.secretKey, body });
const tag = () => randomUUID().slice(0, 8);

beforeAll(async () => {
  ({ project, domain } = await projectWithDomain('automations'));
  other = await createTestProject('automations-other');
  gateway = await connectGateway();
});
afterAll(async () => {
  await gateway.close();
  await closeDb();
});

const ok = expectStatus;

async function template(subject = `S ${tag()}`, from: string | null = `auto@${domain}`): Promise<string> {
  return (await ok(await call('POST', '/templates', { name: `T ${tag()}`, subject, body: '<p>Hi {{ context.who | default: "you" }}</p>', type: 'TRANSACTIONAL', ...(from ? { from } : {}) }), 201)).id;
}

async function newWorkflow(over: Record<string, unknown> = {}) {
  return ok(await call('POST', '/workflows', { name: `W ${tag()}`, triggerEvent: `e-${tag()}`, ...over }), 201);
}
const addStep = async (id: string, step: Record<string, unknown>) => (await ok(await call('POST', `/workflows/${id}/steps`, step), 201)).id as string;
const connect = async (id: string, fromStepId: string, toStepId: string, branch?: string) =>
  (await ok(await call('POST', `/workflows/${id}/transitions`, { fromStepId, toStepId, ...(branch ? { branch } : {}) }), 201)).id as string;
const delay = (amount: number, unit = 'seconds') => ({ type: 'DELAY', config: { duration: { amount, unit } } });

async function contact(email = `c-${tag()}@example.com`): Promise<{ id: string; email: string }> {
  return { id: (await ok(await call('POST', '/contacts', { email }), 201)).id, email };
}

async function waitForStatus(workflowId: string, executionId: string, status: string, timeoutMs = 30_000): Promise<any> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const x = await ok(await call('GET', `/workflows/${workflowId}/executions/${executionId}`), 200);
    if (x.status === status) return x;
    if (Date.now() > deadline) throw new Error(`execution ${executionId} is ${x.status}, expected ${status}`);
    await new Promise((r) => setTimeout(r, 150));
  }
}

describe('workflow records', () => {
  test('create: triggerType EVENT, enabled false, whatever the body says; get, list, patch, delete', async () => {
    const res = await call('POST', '/workflows', { name: 'Onboarding', triggerEvent: 'signup', description: 'Welcome series' });
    const wf = await ok(res, 201);
    expect(wf).toMatchObject({ name: 'Onboarding', triggerType: 'EVENT', enabled: false, allowReentry: false, triggerEvent: 'signup', triggerConfig: { event: 'signup', filter: null }, steps: [], transitions: [], version: 1, publishedVersion: null });
    expect(wf.webhookSecret).toMatch(/^whsec_/);
    expect(wf.problems.map((p: any) => p.code)).toEqual(['no_steps']);
    expect((await call('POST', '/workflows', { name: 'x', enabled: true })).status).toBe(201);
    const listed = await ok(await call('GET', '/workflows?limit=100'), 200);
    expect(listed.data.map((w: any) => w.id)).toContain(wf.id);
    expect(listed.data.every((w: any) => w.enabled === false)).toBe(true);
    const patched = await ok(await call('PATCH', `/workflows/${wf.id}`, { name: 'Renamed', allowReentry: true, triggerEvent: 'contact.subscribed' }), 200);
    expect(patched).toMatchObject({ name: 'Renamed', allowReentry: true, triggerEvent: 'contact.subscribed' });
    expect((await call('GET', `/workflows/${wf.id}`, undefined, other)).status).toBe(404);
    expect((await call('PATCH', `/workflows/${wf.id}`, { name: 'theirs' }, other)).status).toBe(404);
    expect((await call('DELETE', `/workflows/${wf.id}`)).status).toBe(204);
    expect((await call('GET', `/workflows/${wf.id}`)).status).toBe(404);
  });

  test('validation: each step type checks its config; bad branches; unknown steps', async () => {
    const wf = await newWorkflow();
    const bad = [
      { type: 'DELAY', config: { duration: { amount: 0, unit: 'seconds' } } },
      { type: 'DELAY', config: { duration: { amount: 400, unit: 'days' } } },
      { type: 'SEND_EMAIL', config: {} },
      { type: 'WAIT_FOR_EVENT', config: { event: '', timeout: { amount: 1, unit: 'hours' } } },
      { type: 'CONDITION', config: { filter: { operator: 'XOR', conditions: [] } } },
      { type: 'WEBHOOK', config: { url: 'ftp://example.com/x' } },
      { type: 'WEBHOOK', config: { url: 'https://user:pw@example.com/x' } },
      { type: 'WEBHOOK', config: { url: 'https://example.com/x', headers: { Host: 'evil' } } },
      { type: 'UPDATE_CONTACT', config: { data: 'plan=pro' } },
      { type: 'DELAY', config: { duration: { amount: 53, unit: 'weeks' } } },
      { type: 'TELEPORT', config: {} },
    ];
    for (const body of bad) {
      const res = await call('POST', `/workflows/${wf.id}/steps`, body);
      expect({ body, status: res.status, code: res.body?.error?.code }).toEqual({ body, status: 422, code: 'VALIDATION_ERROR' });
    }
    const cond = await addStep(wf.id, { type: 'CONDITION', config: { filter: { operator: 'AND', conditions: [{ field: 'data.plan', operator: 'equals', value: 'pro' }] } } });
    const exit = await addStep(wf.id, { type: 'EXIT' });
    const wrong = await call('POST', `/workflows/${wf.id}/transitions`, { fromStepId: cond, toStepId: exit });
    expect(wrong.status).toBe(422);
    expect(wrong.body.error.errors[0]).toMatchObject({ field: 'branch', code: 'invalid_branch' });
    expect((await call('POST', `/workflows/${wf.id}/transitions`, { fromStepId: exit, toStepId: cond })).status).toBe(422);
    expect((await call('POST', `/workflows/${wf.id}/transitions`, { fromStepId: cond, toStepId: randomUUID(), branch: 'yes' })).status).toBe(422);
    await connect(wf.id, cond, exit, 'yes');
    const twice = await call('POST', `/workflows/${wf.id}/transitions`, { fromStepId: cond, toStepId: exit, branch: 'yes' });
    expect(twice.status).toBe(409);
    expect(twice.body.error.code).toBe('TRANSITION_EXISTS');
    // PATCH of a step validates the config as its type's.
    const badPatch = await call('PATCH', `/workflows/${wf.id}/steps/${cond}`, { config: { filter: 'nope' } });
    expect(badPatch.status).toBe(422);
    expect(badPatch.body.error.errors[0].field).toMatch(/^config/);
    expect((await call('PATCH', `/workflows/${wf.id}/steps/${randomUUID()}`, { name: 'x' })).status).toBe(404);
    expect((await call('DELETE', `/workflows/${wf.id}/transitions/${randomUUID()}`)).status).toBe(404);
  });

  test('enabling an invalid graph is a 422 naming each problem', async () => {
    const t = await template();
    const noSender = await template('no sender', null);
    const wf = await newWorkflow({ triggerEvent: null });
    const a = await addStep(wf.id, { type: 'CONDITION', config: { filter: { operator: 'AND', conditions: [] } } });
    const b = await addStep(wf.id, { type: 'SEND_EMAIL', config: { templateId: t } });
    const c = await addStep(wf.id, { type: 'UPDATE_CONTACT', config: { subscribed: true } });
    const orphan = await addStep(wf.id, { type: 'SEND_EMAIL', config: { templateId: randomUUID() } });
    const unverified = await addStep(wf.id, { type: 'SEND_EMAIL', config: { templateId: t, from: 'x@unverified.example' } });
    const senderless = await addStep(wf.id, { type: 'SEND_EMAIL', config: { templateId: noSender } });
    await connect(wf.id, a, b, 'yes');
    await connect(wf.id, b, c);
    await connect(wf.id, c, b); // a cycle with no pause
    const res = await call('PATCH', `/workflows/${wf.id}`, { enabled: true });
    expect(res.status).toBe(422);
    const problems = res.body.error.errors.map((e: any) => `${e.code}:${e.field}`);
    expect(problems).toEqual(
      expect.arrayContaining([
        'no_trigger:triggerEvent',
        `missing_branch:steps.${a}`,
        `unreachable:steps.${orphan}`,
        `unreachable:steps.${unverified}`,
        `unreachable:steps.${senderless}`,
        `not_found:steps.${orphan}.config.templateId`,
        `domain_not_verified:steps.${unverified}.config.from`,
        `required:steps.${senderless}.config.from`,
      ]),
    );
    expect(problems.some((p: string) => p.startsWith('cycle:'))).toBe(true);
    expect((await ok(await call('GET', `/workflows/${wf.id}`), 200)).enabled).toBe(false);
  });

  test('splice: deleting a middle step reconnects its neighbours; deleting the entry hands it on; a two-branch step cannot be spliced', async () => {
    const wf = await newWorkflow();
    const s1 = await addStep(wf.id, delay(1));
    const s2 = await addStep(wf.id, delay(2));
    const s3 = await addStep(wf.id, { type: 'EXIT' });
    await connect(wf.id, s1, s2);
    await connect(wf.id, s2, s3);
    expect((await call('DELETE', `/workflows/${wf.id}/steps/${s2}?splice=true`)).status).toBe(204);
    let got = await ok(await call('GET', `/workflows/${wf.id}`), 200);
    expect(got.transitions.map((t: any) => [t.fromStepId, t.toStepId])).toEqual([[s1, s3]]);
    expect((await call('DELETE', `/workflows/${wf.id}/steps/${s1}?splice=true`)).status).toBe(204);
    got = await ok(await call('GET', `/workflows/${wf.id}`), 200);
    expect(got.entryStepId).toBe(s3);
    const w = await addStep(wf.id, { type: 'WAIT_FOR_EVENT', config: { event: 'x', timeout: { amount: 1, unit: 'days' } } });
    await connect(wf.id, w, s3, 'event');
    const e2 = await addStep(wf.id, { type: 'EXIT' });
    await connect(wf.id, w, e2, 'timeout');
    const ambiguous = await call('DELETE', `/workflows/${wf.id}/steps/${w}?splice=true`);
    expect(ambiguous.status).toBe(422);
    expect((await call('DELETE', `/workflows/${wf.id}/steps/${w}`)).status).toBe(204);
    expect((await ok(await call('GET', `/workflows/${wf.id}`), 200)).transitions).toEqual([]);
  });

  test('GET /workflows/fields lists contact fields and event names; usage endpoints and the template guard see workflows', async () => {
    const event = `usage-${tag()}`;
    await ok(await api('POST', '/v1/track', { key: project.publicKey, body: { email: `u-${tag()}@example.com`, event, data: { plan: 'pro' } } }), 200);
    const fields = await ok(await call('GET', '/workflows/fields'), 200);
    expect(fields.contact.map((f: any) => f.path)).toEqual(expect.arrayContaining(['email', 'subscribed']));
    expect(fields.events.map((e: any) => e.name)).toContain(event);
    const t = await template();
    const wf = await newWorkflow({ triggerEvent: event });
    const send = await addStep(wf.id, { type: 'SEND_EMAIL', config: { templateId: t } });
    const cond = await addStep(wf.id, { type: 'CONDITION', config: { filter: { operator: 'AND', conditions: [{ field: 'data.tier', operator: 'exists' }] } } });
    await connect(wf.id, send, cond);
    const exitStep = await addStep(wf.id, { type: 'EXIT' });
    await connect(wf.id, cond, exitStep, 'yes');
    await connect(wf.id, cond, (await addStep(wf.id, { type: 'EXIT' })), 'no');
    await ok(await call('PATCH', `/workflows/${wf.id}`, { enabled: true }), 200);
    const usage = await ok(await call('GET', `/templates/${t}/usage`), 200);
    expect(usage.workflows).toEqual([expect.objectContaining({ id: wf.id, active: true })]);
    const del = await call('DELETE', `/templates/${t}`);
    expect(del.status).toBe(409);
    expect(del.body.error.code).toBe('TEMPLATE_IN_USE');
    expect((await ok(await call('GET', `/events/${event}/usage`), 200)).workflows).toEqual([expect.objectContaining({ id: wf.id, where: 'trigger' })]);
    expect((await ok(await call('GET', '/contacts/fields/tier/usage'), 200)).workflows).toEqual([expect.objectContaining({ id: wf.id, where: `step ${cond}` })]);
    await ok(await call('PATCH', `/workflows/${wf.id}`, { enabled: false }), 200);
    expect((await call('DELETE', `/templates/${t}`)).status).toBe(204);
  });
});

describe('executions', () => {
  /** An enabled workflow: SEND_EMAIL -> DELAY -> SEND_EMAIL (subjects `first`/`second`). */
  async function twoEmails(delaySeconds: number, first = `First ${tag()}`, second = `Second ${tag()}`) {
    const wf = await newWorkflow();
    const a = await addStep(wf.id, { type: 'SEND_EMAIL', config: { templateId: await template(first) } });
    const d = await addStep(wf.id, delay(delaySeconds));
    const b = await addStep(wf.id, { type: 'SEND_EMAIL', config: { templateId: await template(second) } });
    await connect(wf.id, a, d);
    await connect(wf.id, d, b);
    await ok(await call('PATCH', `/workflows/${wf.id}`, { enabled: true }), 200);
    return { id: wf.id as string, steps: { a, d, b }, first, second, trigger: wf.triggerEvent as string };
  }

  test('manual start with context (by id and by email); 409 while active; 422 for an unknown contact', async () => {
    const wf = await twoEmails(1);
    const c = await contact();
    const started = await ok(await call('POST', `/workflows/${wf.id}/executions`, { contactId: c.id, context: { who: 'Grace' } }), 201);
    expect(started).toMatchObject({ status: 'RUNNING', contactId: c.id, context: { who: 'Grace' }, run: 1, triggerEventId: null });
    const again = await call('POST', `/workflows/${wf.id}/executions`, { email: c.email });
    expect(again.status).toBe(409);
    expect(again.body.error.code).toBe('EXECUTION_ACTIVE');
    const mails = await waitForMail(c.email, { count: 2 });
    expect(mails.every((m) => (m.html || '').includes('Hi Grace'))).toBe(true);
    await waitForStatus(wf.id, started.id, 'COMPLETED');
    const second = await ok(await call('POST', `/workflows/${wf.id}/executions`, { email: c.email }), 201);
    expect(second.run).toBe(2);
    expect((await call('POST', `/workflows/${wf.id}/executions`, { contactId: randomUUID() })).status).toBe(422);
    expect((await call('POST', `/workflows/${wf.id}/executions`, {})).status).toBe(422);
    expect((await call('POST', `/workflows/${wf.id}/executions`, { email: c.email }, other)).status).toBe(404);
  });

  test('cancel from the API: a waiting run ends CANCELLED and sends nothing more; 409 once ended; delete refused while active', async () => {
    const wf = await twoEmails(3600);
    const c = await contact();
    const x = await ok(await call('POST', `/workflows/${wf.id}/executions`, { contactId: c.id }), 201);
    const waiting = await waitForStatus(wf.id, x.id, 'WAITING');
    expect(waiting.currentStepId).toBe(wf.steps.d);
    expect(Date.parse(waiting.nextWakeAt)).toBeGreaterThan(Date.now() + 3_000_000);
    const del = await call('DELETE', `/workflows/${wf.id}`);
    expect(del.status).toBe(409);
    expect(del.body.error.code).toBe('WORKFLOW_ACTIVE');
    expect((await call('DELETE', `/workflows/${wf.id}/executions/${x.id}`)).status).toBe(200);
    const cancelled = await waitForStatus(wf.id, x.id, 'CANCELLED');
    expect(cancelled.finishedAt).toEqual(expect.any(String));
    expect(cancelled.steps.map((s: any) => s.type)).toEqual(['SEND_EMAIL']);
    const ended = await call('DELETE', `/workflows/${wf.id}/executions/${x.id}`);
    expect(ended.status).toBe(409);
    expect(ended.body.error.code).toBe('EXECUTION_ENDED');
    expect(await messagesTo(c.email)).toHaveLength(1);
    expect((await ok(await call('GET', `/workflows/${wf.id}/executions?status=CANCELLED`), 200)).data.map((e: any) => e.id)).toEqual([x.id]);
    expect((await call('DELETE', `/workflows/${wf.id}`)).status).toBe(204);
  });

  test('cancelled in Temporal: the run records CANCELLED; terminated there: the email sweeper mirrors it as FAILED', async () => {
    const wf = await twoEmails(3600);
    const [c1, c2] = [await contact(), await contact()];
    const x1 = await ok(await call('POST', `/workflows/${wf.id}/executions`, { contactId: c1.id }), 201);
    const x2 = await ok(await call('POST', `/workflows/${wf.id}/executions`, { contactId: c2.id }), 201);
    await waitForStatus(wf.id, x1.id, 'WAITING');
    await waitForStatus(wf.id, x2.id, 'WAITING');
    await gateway.client.workflow.getHandle(x1.temporalWorkflowId).cancel();
    await gateway.client.workflow.getHandle(x2.temporalWorkflowId).terminate('operator');
    expect((await waitForStatus(wf.id, x1.id, 'CANCELLED')).statusReason).toMatch(/Cancel/);
    expect((await ok(await call('GET', `/workflows/${wf.id}/executions/${x2.id}`), 200)).status).toBe('WAITING'); // a read asks nobody
    // The sweeper's schedule, run now (as every 5 minutes); Temporal's list of closed runs may lag a moment, so again until seen.
    const sweeps = setInterval(() => void gateway.client.schedule.getHandle(EMAIL_SWEEPER_SCHEDULE_ID).trigger(ScheduleOverlapPolicy.ALLOW_ALL).catch(() => undefined), 2_000);
    try {
      await gateway.client.schedule.getHandle(EMAIL_SWEEPER_SCHEDULE_ID).trigger(ScheduleOverlapPolicy.ALLOW_ALL);
      expect((await waitForStatus(wf.id, x2.id, 'FAILED')).statusReason).toBe('The run was terminated in Temporal');
    } finally {
      clearInterval(sweeps);
    }
  });

  test('cancel-all cancels every active run; each records CANCELLED', async () => {
    const wf = await twoEmails(3600);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await ok(await call('POST', `/workflows/${wf.id}/executions`, { contactId: (await contact()).id }), 201)).id);
    for (const id of ids) await waitForStatus(wf.id, id, 'WAITING');
    const res = await ok(await call('POST', `/workflows/${wf.id}/executions/cancel-all`), 202);
    expect(res).toMatchObject({ active: 5, temporalWorkflowId: expect.stringMatching(/^automation-cancel-all\//) });
    for (const id of ids) await waitForStatus(wf.id, id, 'CANCELLED');
    expect((await ok(await call('GET', `/workflows/${wf.id}/executions?status=WAITING`), 200)).total).toBe(0);
  });

  test('a graph edited, disabled and step-deleted while runs wait: they finish on their own version; new runs take the new one', async () => {
    const wf = await twoEmails(3);
    const c = await contact();
    const old = await ok(await call('POST', `/workflows/${wf.id}/executions`, { contactId: c.id }), 201);
    await waitForStatus(wf.id, old.id, 'WAITING');
    const before = (await ok(await call('GET', `/workflows/${wf.id}`), 200)).publishedVersion;
    // Edit the second email's template, splice the delay out, then disable.
    const newSubject = `Edited ${tag()}`;
    await ok(await call('PATCH', `/workflows/${wf.id}/steps/${wf.steps.b}`, { config: { templateId: await template(newSubject) } }), 200);
    expect((await call('DELETE', `/workflows/${wf.id}/steps/${wf.steps.d}?splice=true`)).status).toBe(204);
    const edited = await ok(await call('GET', `/workflows/${wf.id}`), 200);
    expect(edited.publishedVersion).toBeGreaterThan(before);
    expect(edited.problems).toEqual([]);
    await ok(await call('PATCH', `/workflows/${wf.id}`, { enabled: false }), 200);
    const done = await waitForStatus(wf.id, old.id, 'COMPLETED', 20_000);
    expect(done.version).toBe(before);
    expect(done.steps.map((s: any) => s.type)).toEqual(['SEND_EMAIL', 'DELAY', 'SEND_EMAIL']);
    const subjects = (await waitForMail(c.email, { count: 2 })).map((m) => m.subject).sort();
    expect(subjects).toEqual([wf.first, wf.second].sort());
    // A new (manual) run takes the edited graph: no delay, the new template.
    const c2 = await contact();
    const fresh = await ok(await call('POST', `/workflows/${wf.id}/executions`, { contactId: c2.id }), 201);
    expect(fresh.version).toBe(edited.publishedVersion);
    const fin = await waitForStatus(wf.id, fresh.id, 'COMPLETED');
    expect(fin.steps.map((s: any) => s.type)).toEqual(['SEND_EMAIL', 'SEND_EMAIL']);
    expect((await waitForMail(c2.email, { count: 2 })).map((m) => m.subject).sort()).toEqual([wf.first, newSubject].sort());
  });

  test('a disabled workflow starts no runs from events; a deleted contact ends its run', async () => {
    const wf = await twoEmails(2);
    await ok(await call('PATCH', `/workflows/${wf.id}`, { enabled: false }), 200);
    const email = `off-${tag()}@example.com`;
    await ok(await api('POST', '/v1/track', { key: project.publicKey, body: { email, event: wf.trigger } }), 200);
    await new Promise((r) => setTimeout(r, 1500));
    expect((await ok(await call('GET', `/workflows/${wf.id}/executions`), 200)).total).toBe(0);
    const c = await contact();
    const x = await ok(await call('POST', `/workflows/${wf.id}/executions`, { contactId: c.id }), 201);
    await waitForStatus(wf.id, x.id, 'WAITING');
    expect((await call('DELETE', `/contacts/${c.id}`)).status).toBe(204);
    let ended = await waitForStatus(wf.id, x.id, 'CANCELLED', 20_000);
    expect(ended.statusReason).toBe('The contact was deleted');
    await new Promise((r) => setTimeout(r, 2500)); // past the delay: nothing more is sent
    ended = await ok(await call('GET', `/workflows/${wf.id}/executions/${x.id}`), 200);
    expect(await messagesTo(c.email)).toHaveLength(1);
    // The delay ran out; the run found the contact gone before the second email.
    expect(ended.steps.map((s: any) => s.type)).toEqual(['SEND_EMAIL', 'DELAY']);
  });
});
