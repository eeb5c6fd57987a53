import { randomUUID } from 'node:crypto';
import { api } from '../helpers/api';
import { closeDb, db } from '../helpers/db';
import { createTestProject, type TestProject } from '../helpers/fixtures';
import { seedContacts } from '../helpers/seed';
import { Client, Connection } from '@temporalio/client';
import { stackEnv } from '../stack-env';

let project: TestProject;
let other: TestProject;

beforeAll(async () => {
  [project, other] = await Promise.all([createTestProject('Bulk'), createTestProject('Bulk other')]);
});
afterAll(closeDb);

async function waitForBulk(p: TestProject, jobId: string) {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const res = await api('GET', `/contacts/bulk/${jobId}`, { key: p.secretKey });
    expect(res.status).toBe(200);
    if (['COMPLETED', 'FAILED', 'CANCELLED'].includes(res.body.status)) return res.body;
    if (Date.now() > deadline) throw new Error(`bulk job ${jobId} still ${res.body.status}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const state = async (ids: string[]) =>
  (await db().query('select id, subscribed from contacts where id = any($1::uuid[]) order by id', [ids])).rows.map((r) => [r.id, r.subscribed]);

describe('bulk contact jobs', () => {
  test('bulk-unsubscribe changes only subscribed contacts of the project, records contact.unsubscribed via bulk for each real change, skips the rest', async () => {
    const tag = randomUUID().slice(0, 8);
    const mine = await seedContacts(project.projectId, 4, (i) => ({ email: `u${i}-${tag}@example.com`, subscribed: i !== 3 }));
    const foreign = await seedContacts(other.projectId, 1, () => ({ email: `f-${tag}@example.com`, subscribed: true }));
    const unknown = randomUUID();
    const res = await api('POST', '/contacts/bulk-unsubscribe', { key: project.secretKey, body: { contactIds: [...mine, mine[0]!, foreign[0]!, unknown] } });
    expect(res.status).toBe(202);
    const job = await waitForBulk(project, res.body.jobId);
    expect(job).toMatchObject({ jobId: res.body.jobId, type: 'BULK_UNSUBSCRIBE', status: 'COMPLETED', total: 6, processed: 6, changed: 3, skipped: 3, failed: 0 });
    expect(job.finishedAt).toBeTruthy();
    expect(await state(mine)).toEqual(mine.map((id) => [id, false]).sort());
    expect(await state(foreign)).toEqual([[foreign[0], true]]);
    const events = await db().query(`select contact_id, name, data, source from events where contact_id = any($1::uuid[]) order by contact_id`, [[...mine, ...foreign]]);
    expect(events.rows).toEqual(
      mine.slice(0, 3).sort().map((id) => ({ contact_id: id, name: 'contact.unsubscribed', data: { via: 'bulk' }, source: 'SYSTEM' })),
    );
  });

  test('bulk-subscribe records contact.subscribed only for contacts that were unsubscribed', async () => {
    const tag = randomUUID().slice(0, 8);
    const ids = await seedContacts(project.projectId, 3, (i) => ({ email: `s${i}-${tag}@example.com`, subscribed: i === 0 }));
    const res = await api('POST', '/contacts/bulk-subscribe', { key: project.secretKey, body: { contactIds: ids } });
    const job = await waitForBulk(project, res.body.jobId);
    expect(job).toMatchObject({ type: 'BULK_SUBSCRIBE', status: 'COMPLETED', total: 3, changed: 2, skipped: 1 });
    expect(await state(ids)).toEqual(ids.map((id) => [id, true]).sort());
    const events = await db().query(`select contact_id from events where contact_id = any($1::uuid[]) and name = 'contact.subscribed'`, [ids]);
    expect(events.rows.map((r) => r.contact_id).sort()).toEqual([ids[1], ids[2]].sort());
  });

  test("bulk-delete removes the project's contacts and their events, never another project's", async () => {
    const tag = randomUUID().slice(0, 8);
    const mine = await seedContacts(project.projectId, 2, (i) => ({ email: `d${i}-${tag}@example.com` }));
    const foreign = await seedContacts(other.projectId, 1, () => ({ email: `d-${tag}@example.com` }));
    await db().query(`insert into events (id, project_id, contact_id, name, source) values ($1, $2, $3, 'x', 'TRACKED')`, [randomUUID(), project.projectId, mine[0]]);
    const res = await api('POST', '/contacts/bulk-delete', { key: project.secretKey, body: { contactIds: [...mine, ...foreign] } });
    const job = await waitForBulk(project, res.body.jobId);
    expect(job).toMatchObject({ type: 'BULK_DELETE', status: 'COMPLETED', total: 3, changed: 2, skipped: 1 });
    expect(await state([...mine, ...foreign])).toEqual([[foreign[0], true]]);
    expect((await db().query('select count(*)::int as n from events where contact_id = $1', [mine[0]])).rows[0].n).toBe(0);
  });

  test('bad bodies -> 422: empty list, more than 1000 ids, non-uuid ids, missing field', async () => {
    const ids = Array.from({ length: 1001 }, () => randomUUID());
    for (const body of [{ contactIds: [] }, { contactIds: ids }, { contactIds: ['nope'] }, {}]) {
      const res = await api('POST', '/contacts/bulk-subscribe', { key: project.secretKey, body });
      expect(res.status).toBe(422);
      expect(res.body.error.code).toBe('VALIDATION_ERROR');
    }
    expect((await api('POST', '/contacts/bulk-delete', { key: project.secretKey, body: { contactIds: ids.slice(0, 1000) } })).status).toBe(202);
  });

  test("another project's bulk job -> 404; an import job id is not a bulk job; the workflow carries the job id", async () => {
    const res = await api('POST', '/contacts/bulk-subscribe', { key: project.secretKey, body: { contactIds: [randomUUID()] } });
    const job = await waitForBulk(project, res.body.jobId);
    expect(job).toMatchObject({ total: 1, changed: 0, skipped: 1 });
    expect((await api('GET', `/contacts/bulk/${res.body.jobId}`, { key: other.secretKey })).status).toBe(404);
    expect((await api('GET', `/contacts/import/${res.body.jobId}`, { key: project.secretKey })).status).toBe(404);
    const connection = await Connection.connect({ address: stackEnv().temporalAddress });
    try {
      const desc = await new Client({ connection }).workflow.getHandle(`contact-bulk/${res.body.jobId}`).describe();
      expect(desc.status.name).toBe('COMPLETED');
      expect(desc.searchAttributes).toMatchObject({ JobId: [res.body.jobId], ProjectId: [project.projectId] });
    } finally {
      await connection.close();
    }
  });

  test('a bulk job cancelled before it ran changes nothing, even when its workflow runs afterwards; cancel again -> 409', async () => {
    const tag = randomUUID().slice(0, 8);
    const ids = await seedContacts(project.projectId, 2, (i) => ({ email: `k${i}-${tag}@example.com`, subscribed: true }));
    // A queued job whose workflow has not run yet (stored as POST /contacts/bulk-unsubscribe stores it).
    const jobId = randomUUID();
    await db().query(`insert into jobs (id, project_id, type, contact_ids, total) values ($1, $2, 'BULK_UNSUBSCRIBE', $3::uuid[], 2)`, [jobId, project.projectId, ids]);
    expect((await api('POST', `/contacts/bulk/${jobId}/cancel`, { key: other.secretKey })).status).toBe(404);
    const cancelled = await api('POST', `/contacts/bulk/${jobId}/cancel`, { key: project.secretKey });
    expect(cancelled.status).toBe(200);
    expect(cancelled.body).toMatchObject({ jobId, type: 'BULK_UNSUBSCRIBE', status: 'CANCELLED', processed: 0, message: 'The bulk job was cancelled' });
    const connection = await Connection.connect({ address: stackEnv().temporalAddress });
    try {
      await new Client({ connection }).workflow.execute('contactBulk', { taskQueue: 'mailwright', workflowId: `contact-bulk/${jobId}`, args: [{ projectId: project.projectId, jobId }] });
    } finally {
      await connection.close();
    }
    expect(await state(ids)).toEqual(ids.map((id) => [id, true]).sort());
    expect((await api('GET', `/contacts/bulk/${jobId}`, { key: project.secretKey })).body).toMatchObject({ status: 'CANCELLED', processed: 0, changed: 0 });
    const again = await api('POST', `/contacts/bulk/${jobId}/cancel`, { key: project.secretKey });
    expect(again.status).toBe(409);
    expect(again.body.error.code).toBe('JOB_ENDED');
  });

  test('cancel: a completed bulk job -> 409 JOB_ENDED and stays applied; an import job id -> 404', async () => {
    const tag = randomUUID().slice(0, 8);
    const ids = await seedContacts(project.projectId, 1, () => ({ email: `q-${tag}@example.com`, subscribed: true }));
    const res = await api('POST', '/contacts/bulk-unsubscribe', { key: project.secretKey, body: { contactIds: ids } });
    expect(await waitForBulk(project, res.body.jobId)).toMatchObject({ status: 'COMPLETED', changed: 1 });
    const ended = await api('POST', `/contacts/bulk/${res.body.jobId}/cancel`, { key: project.secretKey });
    expect(ended.status).toBe(409);
    expect(ended.body.error.message).toMatch(/COMPLETED/);
    expect(await state(ids)).toEqual([[ids[0], false]]);
    expect((await api('POST', `/contacts/import/${res.body.jobId}/cancel`, { key: project.secretKey })).status).toBe(404);
  });
});
