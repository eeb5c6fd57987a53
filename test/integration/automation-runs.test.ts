import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { api } from '../helpers/api';
import { expectStatus, projectWithDomain } from '../helpers/automations';
import { closeDb, db } from '../helpers/db';
import { type TestProject } from '../helpers/fixtures';
import { messagesTo, waitForMail } from '../helpers/mailbox';
import { verifyWebhookSignature } from '../../domain/automations/webhook';
import { maybeRecordHistory } from '../helpers/histories';

/**
 * Automation runs end to end: workflows built through the API, triggered by /v1/track events through the event
 * outbox on the real worker, one Temporal run per contact, emails asserted in the SMTP capture server.
 */

let project: TestProject;
let domain: string;
const call = (method: string, path: string, body?: unknown, p = project) => api(method, path, { key: p.secretKey, body });
const tag = () => randomUUID().slice(0, 8);

beforeAll(async () => {
  ({ project, domain } = await projectWithDomain('automation runs'));
});
afterAll(closeDb);

const ok = expectStatus;

async function template(subject: string, body: string, type = 'TRANSACTIONAL'): Promise<string> {
  return (await ok(await call('POST', '/templates', { name: `T ${tag()}`, subject, body, type, from: `auto@${domain}` }), 201)).id;
}

type StepSpec = { type: string; config?: Record<string, unknown>; name?: string };

/** A workflow triggered by `event`, its steps in a chain (CONDITION/WAIT branches added by the caller); returns ids. */
async function workflow(event: string, steps: StepSpec[], opts: { chain?: boolean; allowReentry?: boolean } = {}) {
  const wf = await ok(await call('POST', '/workflows', { name: `W ${tag()}`, triggerEvent: event, allowReentry: opts.allowReentry ?? false }), 201);
  const ids: string[] = [];
  for (const s of steps) ids.push((await ok(await call('POST', `/workflows/${wf.id}/steps`, s), 201)).id);
  if (opts.chain !== false) {
    for (let i = 0; i + 1 < ids.length; i++) await ok(await call('POST', `/workflows/${wf.id}/transitions`, { fromStepId: ids[i], toStepId: ids[i + 1] }), 201);
  }
  return { id: wf.id as string, steps: ids };
}

const enable = async (id: string) => ok(await call('PATCH', `/workflows/${id}`, { enabled: true }), 200);
const track = async (email: string, event: string, data: Record<string, unknown> = {}) => ok(await api('POST', '/v1/track', { key: project.publicKey, body: { email, event, data } }), 200);

async function executions(workflowId: string, query = ''): Promise<any[]> {
  return (await ok(await call('GET', `/workflows/${workflowId}/executions?limit=100${query}`), 200)).data;
}

/** Waits until the workflow has an execution for the contact in one of `statuses`; returns it in full. */
async function waitForExecution(workflowId: string, contactEmail: string, statuses: string[], timeoutMs = 30_000): Promise<any> {
  const deadline = Date.now() + timeoutMs;
  const { rows } = await db().query<{ id: string }>('select id from contacts where project_id = $1 and email = $2', [project.projectId, contactEmail]);
  for (;;) {
    const contactId = rows[0]?.id ?? (await db().query<{ id: string }>('select id from contacts where project_id = $1 and email = $2', [project.projectId, contactEmail])).rows[0]?.id;
    if (contactId) {
      const list = await executions(workflowId, `&contactId=${contactId}`);
      const hit = list.find((x) => statuses.includes(x.status));
      if (hit) return ok(await call('GET', `/workflows/${workflowId}/executions/${hit.id}`), 200);
    }
    if (Date.now() > deadline) throw new Error(`no execution of ${workflowId} for ${contactEmail} in ${statuses.join('/')}`);
    await new Promise((r) => setTimeout(r, 150));
  }
}

describe('event-triggered runs', () => {
  test('SEND_EMAIL -> DELAY -> SEND_EMAIL: both emails once, with contact data and the event as context; steps recorded', async () => {
    const event = `signed-up-${tag()}`;
    const welcome = await template('Welcome {{ first }}', '<p>Hi {{ first }}, plan {{ context.plan }}</p>');
    const followUp = await template('Day two, {{ first }}', '<p>Still there?</p>');
    const wf = await workflow(event, [
      { type: 'SEND_EMAIL', config: { templateId: welcome } },
      { type: 'DELAY', config: { duration: { amount: 1, unit: 'seconds' } } },
      { type: 'SEND_EMAIL', config: { templateId: followUp } },
    ]);
    const enabled = await enable(wf.id);
    expect(enabled).toMatchObject({ enabled: true, problems: [], publishedVersion: enabled.version });
    const email = `run-${tag()}@example.com`;
    await ok(await call('POST', '/contacts', { email, data: { first: 'Ada' } }), 201);
    await track(email, event, { plan: 'pro' });
    const mails = await waitForMail(email, { count: 2 });
    const subjects = mails.map((m) => m.subject).sort();
    expect(subjects).toEqual(['Day two, Ada', 'Welcome Ada']);
    expect(mails.find((m) => m.subject === 'Welcome Ada')!.html).toContain('plan pro');
    const x = await waitForExecution(wf.id, email, ['COMPLETED']);
    expect(x.steps.map((s: any) => s.type)).toEqual(['SEND_EMAIL', 'DELAY', 'SEND_EMAIL']);
    expect(x.steps[0].outcome).toMatchObject({ status: 'SENT' });
    expect(x.temporalWorkflowId).toBe(`automation/${wf.id}/${x.contactId}/1`);
    expect(x.triggerEventId).toEqual(expect.any(String));
    expect(x.context).toEqual({ plan: 'pro' });
    await maybeRecordHistory(x.temporalWorkflowId, 'automation-run-send-delay-send-folded');
    // A second event: no re-entry by default.
    await track(email, event);
    await new Promise((r) => setTimeout(r, 1500));
    expect(await executions(wf.id, `&contactId=${x.contactId}`)).toHaveLength(1);
    expect(await messagesTo(email)).toHaveLength(2);
  });

  test('re-entry allowed: a second event after the first run ended starts run 2', async () => {
    const event = `reentry-${tag()}`;
    const t = await template('Hello again', '<p>x</p>');
    const wf = await workflow(event, [{ type: 'SEND_EMAIL', config: { templateId: t } }], { allowReentry: true });
    await enable(wf.id);
    const email = `re-${tag()}@example.com`;
    await track(email, event);
    await waitForExecution(wf.id, email, ['COMPLETED']);
    await track(email, event);
    await waitForMail(email, { count: 2 });
    const { rows } = await db().query<{ id: string }>('select id from contacts where project_id = $1 and email = $2', [project.projectId, email]);
    const deadline = Date.now() + 15_000;
    let list: any[] = [];
    while (Date.now() < deadline) {
      list = await executions(wf.id, `&contactId=${rows[0]!.id}&status=COMPLETED`);
      if (list.length === 2) break;
      await new Promise((r) => setTimeout(r, 150));
    }
    expect(list.map((x) => x.run).sort()).toEqual([1, 2]);
  });

  test('trigger filter on event data: only matching events start runs', async () => {
    const event = `purchase-${tag()}`;
    const t = await template('Thanks for going pro', '<p>x</p>');
    const wf = await workflow(event, [{ type: 'SEND_EMAIL', config: { templateId: t } }]);
    await ok(await call('PATCH', `/workflows/${wf.id}`, { triggerFilter: { operator: 'AND', conditions: [{ field: 'data.plan', operator: 'equals', value: 'pro' }] } }), 200);
    await enable(wf.id);
    const basic = `basic-${tag()}@example.com`;
    const pro = `pro-${tag()}@example.com`;
    await track(basic, event, { plan: 'basic' });
    await track(pro, event, { plan: 'pro' });
    await waitForMail(pro);
    await waitForExecution(wf.id, pro, ['COMPLETED']);
    expect(await messagesTo(basic)).toHaveLength(0);
    expect(await executions(wf.id)).toHaveLength(1);
  });
});

describe('WAIT_FOR_EVENT and CONDITION', () => {
  async function waitWorkflow(trigger: string, awaited: string, timeout: Record<string, unknown>) {
    const onEvent = await template('You did it', '<p>event branch</p>');
    const onTimeout = await template('Reminder', '<p>timeout branch</p>');
    const wf = await workflow(
      trigger,
      [
        { type: 'WAIT_FOR_EVENT', config: { event: awaited, timeout } },
        { type: 'SEND_EMAIL', config: { templateId: onEvent } },
        { type: 'SEND_EMAIL', config: { templateId: onTimeout } },
      ],
      { chain: false },
    );
    await ok(await call('POST', `/workflows/${wf.id}/transitions`, { fromStepId: wf.steps[0], toStepId: wf.steps[1], branch: 'event' }), 201);
    await ok(await call('POST', `/workflows/${wf.id}/transitions`, { fromStepId: wf.steps[0], toStepId: wf.steps[2], branch: 'timeout' }), 201);
    await enable(wf.id);
    return wf;
  }

  test('the awaited event takes the event branch', async () => {
    const trigger = `cart-${tag()}`;
    const awaited = `checkout-${tag()}`;
    const wf = await waitWorkflow(trigger, awaited, { amount: 1, unit: 'hours' });
    const email = `wait-${tag()}@example.com`;
    await track(email, trigger);
    const waiting = await waitForExecution(wf.id, email, ['WAITING']);
    expect(waiting).toMatchObject({ waitingFor: awaited, currentStepId: wf.steps[0] });
    expect(Date.parse(waiting.nextWakeAt)).toBeGreaterThan(Date.now() + 50 * 60_000);
    await track(email, awaited);
    const [mail] = await waitForMail(email);
    expect(mail!.subject).toBe('You did it');
    const done = await waitForExecution(wf.id, email, ['COMPLETED']);
    expect(done.steps[0].outcome).toMatchObject({ branch: 'event', eventName: awaited });
    await maybeRecordHistory(done.temporalWorkflowId, 'automation-run-wait-event');
  });

  test('no event: the timeout branch', async () => {
    const trigger = `cart-${tag()}`;
    const wf = await waitWorkflow(trigger, `never-${tag()}`, { amount: 2, unit: 'seconds' });
    const email = `timeout-${tag()}@example.com`;
    await track(email, trigger);
    const [mail] = await waitForMail(email, { timeoutMs: 20_000 });
    expect(mail!.subject).toBe('Reminder');
    const done = await waitForExecution(wf.id, email, ['COMPLETED']);
    expect(done.steps[0].outcome).toMatchObject({ branch: 'timeout' });
    await maybeRecordHistory(done.temporalWorkflowId, 'automation-run-wait-timeout');
  });

  test('CONDITION takes yes or no by the contact at that moment; UPDATE_CONTACT changes the contact', async () => {
    const trigger = `check-${tag()}`;
    const yes = await template('VIP', '<p>yes</p>');
    const no = await template('Regular', '<p>no</p>');
    const wf = await workflow(
      trigger,
      [
        { type: 'CONDITION', config: { filter: { operator: 'AND', conditions: [{ field: 'data.vip', operator: 'equals', value: true }] } } },
        { type: 'SEND_EMAIL', config: { templateId: yes } },
        { type: 'SEND_EMAIL', config: { templateId: no } },
        { type: 'UPDATE_CONTACT', config: { data: { greeted: true, vip: null } } },
      ],
      { chain: false },
    );
    await ok(await call('POST', `/workflows/${wf.id}/transitions`, { fromStepId: wf.steps[0], toStepId: wf.steps[1], branch: 'yes' }), 201);
    await ok(await call('POST', `/workflows/${wf.id}/transitions`, { fromStepId: wf.steps[0], toStepId: wf.steps[2], branch: 'no' }), 201);
    await ok(await call('POST', `/workflows/${wf.id}/transitions`, { fromStepId: wf.steps[1], toStepId: wf.steps[3] }), 201);
    await enable(wf.id);
    const vip = `vip-${tag()}@example.com`;
    const plain = `plain-${tag()}@example.com`;
    await ok(await call('POST', '/contacts', { email: vip, data: { vip: true } }), 201);
    await track(vip, trigger);
    await track(plain, trigger);
    expect((await waitForMail(vip))[0]!.subject).toBe('VIP');
    expect((await waitForMail(plain))[0]!.subject).toBe('Regular');
    const done = await waitForExecution(wf.id, vip, ['COMPLETED']);
    expect(done.steps.map((s: any) => s.type)).toEqual(['CONDITION', 'SEND_EMAIL', 'UPDATE_CONTACT']);
    const { rows } = await db().query('select data from contacts where project_id = $1 and email = $2', [project.projectId, vip]);
    expect(rows[0].data).toEqual({ greeted: true });
    await maybeRecordHistory(done.temporalWorkflowId, 'automation-run-condition-update');
  });
});

describe('WEBHOOK', () => {
  test('signed payload; a 500 is retried until it succeeds', async () => {
    const received: { headers: http.IncomingHttpHeaders; body: string }[] = [];
    let failuresLeft = 1;
    const server = http.createServer((req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        received.push({ headers: req.headers, body });
        if (failuresLeft-- > 0) return void res.writeHead(500).end('not yet');
        res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const trigger = `hook-${tag()}`;
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
      const wf = await workflow(trigger, [{ type: 'WEBHOOK', config: { url, headers: { Authorization: 'Bearer abc' } } }]);
      const full = await enable(wf.id);
      const email = `hook-${tag()}@example.com`;
      await track(email, trigger, { source: 'test' });
      const done = await waitForExecution(wf.id, email, ['COMPLETED'], 40_000);
      expect(done.steps[0].outcome).toMatchObject({ ok: true, status: 200 });
      expect(received).toHaveLength(2);
      const last = received[1]!;
      expect(last.headers.authorization).toBe('Bearer abc');
      expect(last.headers['mailwright-webhook-id']).toBe(received[0]!.headers['mailwright-webhook-id']);
      expect(verifyWebhookSignature(full.webhookSecret, last.headers['mailwright-signature'] as string, last.body)).toBe(true);
      expect(verifyWebhookSignature('whsec_wrong', last.headers['mailwright-signature'] as string, last.body)).toBe(false);
      const payload = JSON.parse(last.body);
      expect(payload).toMatchObject({ type: 'workflow.webhook', workflow: { id: wf.id }, contact: { email, id: done.contactId }, context: { source: 'test' } });
      await maybeRecordHistory(done.temporalWorkflowId, 'automation-run-webhook-retry');
    } finally {
      server.close();
    }
  });

  test('SSRF: link-local and private addresses are refused (only the loopback range is allowed here); the run records it and goes on', async () => {
    const trigger = `ssrf-${tag()}`;
    const after = await template('After the hooks', '<p>x</p>');
    const wf = await workflow(trigger, [
      { type: 'WEBHOOK', config: { url: 'http://169.254.169.254/latest/meta-data/' } },
      { type: 'WEBHOOK', config: { url: 'http://10.0.0.1:8080/internal' } },
      { type: 'SEND_EMAIL', config: { templateId: after } },
    ]);
    await enable(wf.id);
    const email = `ssrf-${tag()}@example.com`;
    await track(email, trigger);
    const done = await waitForExecution(wf.id, email, ['COMPLETED'], 20_000);
    expect(done.steps.map((s: any) => s.type)).toEqual(['WEBHOOK', 'WEBHOOK', 'SEND_EMAIL']);
    expect(done.steps[0].outcome).toMatchObject({ ok: false, error: expect.stringMatching(/169\.254\.169\.254 is refused: .*link-local/) });
    expect(done.steps[1].outcome).toMatchObject({ ok: false, error: expect.stringMatching(/10\.0\.0\.1 is refused: .*private/) });
    expect((await waitForMail(email))[0]!.subject).toBe('After the hooks');
  });
});
