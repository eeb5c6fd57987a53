import { randomUUID } from 'node:crypto';
import { ScheduleOverlapPolicy } from '@temporalio/client';
import { api, type ApiResponse } from '../helpers/api';
import { closeDb, db } from '../helpers/db';
import { startExtraApi } from '../helpers/extra-api';
import { connectGateway, expectStatus, projectWithDomain } from '../helpers/automations';
import type { TestProject } from '../helpers/fixtures';
import { freePort, type ManagedProcess } from '../../scripts/services/process';
import type { TemporalGateway } from '../../temporal/client';
import { EMAIL_SWEEPER_SCHEDULE_ID, workflowIds } from '../../temporal/definitions';

/**
 * The one cancel shape and the start rule with Temporal unreachable (issue 24, point 5): a second API process on the
 * stack's database whose TEMPORAL_ADDRESS is a closed port. Its cancels of a campaign, an import job, a bulk job and an
 * automation execution, and its campaign send, answer 503 SERVICE_UNAVAILABLE in the error envelope and leave the row
 * as it was (nothing recorded, nothing told); the same request through the stack's own API, Temporal reachable,
 * then succeeds and the run ends. Reads need no Temporal and never write (point 6).
 */

let project: TestProject;
let domain: string;
let down: { url: string; process: ManagedProcess };
let gateway: TemporalGateway;

beforeAll(async () => {
  ({ project, domain } = await projectWithDomain('Temporal unavailable'));
  gateway = await connectGateway();
  // Nothing listens on a port just handed out and closed again: every call to Temporal is refused.
  down = await startExtraApi('api-temporal-down', { TEMPORAL_ADDRESS: `127.0.0.1:${await freePort()}`, RATE_LIMIT_PER_MINUTE: '0' });
}, 180_000);

afterAll(async () => {
  await down?.process.stop();
  await gateway?.close();
  await closeDb();
});

const up = (method: string, path: string, body?: unknown) => api(method, path, { key: project.secretKey, body });
const away = (method: string, path: string, body?: unknown) => api(method, path, { key: project.secretKey, body, baseUrl: down.url });
const tag = () => randomUUID().slice(0, 8);

/** 503 SERVICE_UNAVAILABLE in SPEC's envelope. */
function expectUnavailable(res: ApiResponse): void {
  expect(res.status).toBe(503);
  expect(res.body).toEqual({
    success: false,
    error: expect.objectContaining({ code: 'SERVICE_UNAVAILABLE', message: expect.stringMatching(/Temporal is unavailable/), requestId: expect.any(String) }),
    timestamp: expect.any(String),
  });
}

async function row(table: 'campaigns' | 'jobs' | 'automation_executions', id: string) {
  const cols = table === 'jobs' ? 'status, message, finished_at' : table === 'campaigns' ? 'status, status_reason, finished_at, workflow_id, scheduled_at' : 'status, status_reason, finished_at';
  const { rows } = await db().query(`select ${cols}, xmin::text as xmin from ${table} where id = $1`, [id]);
  return rows[0];
}

/** The Temporal status of a run once it has closed (within `timeoutMs`). */
async function closedStatus(workflowId: string, timeoutMs = 30_000): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const status = (await gateway.client.workflow.getHandle(workflowId).describe()).status.name;
    if (status !== 'RUNNING' || Date.now() > deadline) return status;
    await new Promise((r) => setTimeout(r, 200));
  }
}

async function draftCampaign(): Promise<string> {
  const body = { name: `C ${tag()}`, from: `news@${domain}`, subject: 'Hi', body: '<p>Hi</p>', audienceType: 'FILTERED', audienceFilter: { operator: 'AND', conditions: [{ field: 'data.tag', operator: 'equals', value: tag() }] } };
  return expectStatus(await up('POST', '/campaigns', body), 201).id as string;
}

const inAnHour = () => new Date(Date.now() + 3_600_000).toISOString();

describe('Temporal unreachable', () => {
  test('POST /campaigns/:id/send: 503, the campaign is still a DRAFT without a run; sent once Temporal is back', async () => {
    const id = await draftCampaign();
    const before = await row('campaigns', id);
    expectUnavailable(await away('POST', `/campaigns/${id}/send`, { scheduledFor: inAnHour() }));
    expect(await row('campaigns', id)).toMatchObject({ status: 'DRAFT', workflow_id: null, scheduled_at: null, status_reason: before.status_reason });

    const sent = expectStatus(await up('POST', `/campaigns/${id}/send`, { scheduledFor: inAnHour() }), 200);
    expect(sent.status).toBe('SCHEDULED');
    expect((await gateway.client.workflow.getHandle(workflowIds.campaignSend(id)).describe()).status.name).toBe('RUNNING');
    expectStatus(await up('POST', `/campaigns/${id}/cancel`), 200);
  });

  test('POST /campaigns/:id/cancel: 503 and the campaign unchanged (still SCHEDULED, its run running); cancelled once Temporal is back', async () => {
    const id = await draftCampaign();
    expectStatus(await up('POST', `/campaigns/${id}/send`, { scheduledFor: inAnHour() }), 200);
    const before = await row('campaigns', id);
    expectUnavailable(await away('POST', `/campaigns/${id}/cancel`));
    expect(await row('campaigns', id)).toEqual(before); // not even rewritten: the transaction rolled back
    expect((await gateway.client.workflow.getHandle(workflowIds.campaignSend(id)).describe()).status.name).toBe('RUNNING');

    const cancelled = expectStatus(await up('POST', `/campaigns/${id}/cancel`), 200);
    expect(cancelled).toMatchObject({ status: 'CANCELLED' });
    expect(await row('campaigns', id)).toMatchObject({ status: 'CANCELLED', status_reason: 'Cancelled through the API', finished_at: expect.any(Date) });
    expect(await closedStatus(workflowIds.campaignSend(id))).toBe('CANCELLED'); // it settled the rest and ended
  });

  test.each([
    ['import', 'IMPORT', '/contacts/import'],
    ['bulk', 'BULK_SUBSCRIBE', '/contacts/bulk'],
  ] as const)('POST %s job cancel: 503 and the job unchanged (QUEUED); cancelled once Temporal is back', async (_kind, type, path) => {
    // A job as stored before its workflow picks it up; its workflow is not running, which Temporal answers as "not found".
    const jobId = randomUUID();
    await db().query(`insert into jobs (id, project_id, type, options) values ($1, $2, $3, '{}')`, [jobId, project.projectId, type]);
    const before = await row('jobs', jobId);
    expectUnavailable(await away('POST', `${path}/${jobId}/cancel`));
    expect(await row('jobs', jobId)).toEqual(before);
    expect(before).toMatchObject({ status: 'QUEUED', finished_at: null });

    const cancelled = expectStatus(await up('POST', `${path}/${jobId}/cancel`), 200);
    expect(cancelled).toMatchObject({ jobId, status: 'CANCELLED' });
    expect(await row('jobs', jobId)).toMatchObject({ status: 'CANCELLED', finished_at: expect.any(Date) });
  });

  test('DELETE /workflows/:id/executions/:executionId: 503 and the execution unchanged (WAITING, its run waiting); cancelled once Temporal is back; cancel-all 503', async () => {
    const wf = expectStatus(await up('POST', '/workflows', { name: `W ${tag()}`, triggerEvent: `never-${tag()}` }), 201);
    expectStatus(await up('POST', `/workflows/${wf.id}/steps`, { type: 'DELAY', config: { duration: { amount: 1, unit: 'hours' } } }), 201);
    expectStatus(await up('PATCH', `/workflows/${wf.id}`, { enabled: true }), 200);
    const contact = expectStatus(await up('POST', '/contacts', { email: `x-${tag()}@example.com` }), 201);
    const x = expectStatus(await up('POST', `/workflows/${wf.id}/executions`, { contactId: contact.id }), 201);
    const deadline = Date.now() + 30_000;
    while ((await row('automation_executions', x.id)).status !== 'WAITING' && Date.now() < deadline) await new Promise((r) => setTimeout(r, 150));
    const before = await row('automation_executions', x.id);
    expect(before.status).toBe('WAITING');

    expectUnavailable(await away('DELETE', `/workflows/${wf.id}/executions/${x.id}`));
    expect(await row('automation_executions', x.id)).toEqual(before);
    expect((await gateway.client.workflow.getHandle(x.temporalWorkflowId).describe()).status.name).toBe('RUNNING');
    expectUnavailable(await away('POST', `/workflows/${wf.id}/executions/cancel-all`));

    const cancelled = expectStatus(await up('DELETE', `/workflows/${wf.id}/executions/${x.id}`), 200);
    expect(cancelled).toMatchObject({ status: 'CANCELLED', statusReason: 'Cancelled through the API' });
    expect(await closedStatus(x.temporalWorkflowId)).toBe('CANCELLED');
    // The run's own end record leaves the row as the API wrote it.
    expect(await row('automation_executions', x.id)).toMatchObject({ status: 'CANCELLED', status_reason: 'Cancelled through the API' });
    expect((await up('DELETE', `/workflows/${wf.id}/executions/${x.id}`)).status).toBe(409);
  });
});

describe('reads never write', () => {
  test('GET /campaigns and GET /campaigns/:id answer from the row, without Temporal, and leave it untouched even when its run was terminated', async () => {
    const id = await draftCampaign();
    expectStatus(await up('POST', `/campaigns/${id}/send`, { scheduledFor: inAnHour() }), 200);
    await gateway.client.workflow.getHandle(workflowIds.campaignSend(id)).terminate('reads-never-write test');
    const before = await row('campaigns', id);
    for (const base of [up, away]) {
      expect(expectStatus(await base('GET', `/campaigns/${id}`), 200).status).toBe('SCHEDULED');
      expect(expectStatus(await base('GET', '/campaigns?limit=100'), 200).data.find((c: { id: string }) => c.id === id).status).toBe('SCHEDULED');
    }
    expect(await row('campaigns', id)).toEqual(before); // same xmin: no UPDATE ran

    // The email sweeper is where Temporal is mirrored: run now (Temporal's list of closed runs may lag a moment).
    const deadline = Date.now() + 30_000;
    let now = before;
    while (now.status === 'SCHEDULED' && Date.now() < deadline) {
      await gateway.client.schedule.getHandle(EMAIL_SWEEPER_SCHEDULE_ID).trigger(ScheduleOverlapPolicy.ALLOW_ALL);
      await new Promise((r) => setTimeout(r, 1_500));
      now = await row('campaigns', id);
    }
    expect(now).toMatchObject({ status: 'FAILED', status_reason: 'The campaign-send workflow was terminated in Temporal' });
  });
});
