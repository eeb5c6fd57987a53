import { randomUUID } from 'node:crypto';
import { api } from '../helpers/api';
import { closeDb, db } from '../helpers/db';
import { createTestProject, type TestProject } from '../helpers/fixtures';
import { stackEnv } from '../stack-env';

/**
 * Every path that writes a contact's data and subscription keeps one merge rule (domain/contacts/contact-merge.ts):
 * POST /contacts and the batched intake of /v1/track and /v1/send (one statement, contact.repository.ts), the CSV
 * import's chunks (contact-import.ts) and PATCH /contacts/:id (contact.service.ts). This contract runs the same cases
 * through each, so they cannot drift apart: emails normalised, reserved keys dropped, data merged, "" ignored, the
 * default subscription of a new contact, and one subscription event per real change.
 */
type Write = (p: TestProject, email: string, change: { subscribed?: boolean; data: Record<string, string | number> }) => Promise<void>;

async function waitForImport(p: TestProject, jobId: string) {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const job = (await api('GET', `/contacts/import/${jobId}`, { key: p.secretKey })).body;
    if (job.status === 'COMPLETED') return job;
    if (job.status === 'FAILED' || Date.now() > deadline) throw new Error(`import ${jobId}: ${JSON.stringify(job)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const csvCell = (v: string | number | boolean) => (typeof v === 'string' && /[",\n]/.test(v) ? `"${v.replace(/"/g, '""')}"` : String(v));

const paths: [string, string, Write][] = [
  [
    'POST /contacts (contact.repository.ts)',
    'api',
    async (p, email, { subscribed, data }) => {
      const res = await api('POST', '/contacts', { key: p.secretKey, body: { email, data, ...(subscribed === undefined ? {} : { subscribed }) } });
      expect([200, 201]).toContain(res.status);
    },
  ],
  [
    '/v1/track (contact-intake.ts)',
    'track',
    async (p, email, { subscribed, data }) => {
      const res = await api('POST', '/v1/track', { key: p.secretKey, body: { email, event: 'contract', data, ...(subscribed === undefined ? {} : { subscribed }) } });
      expect(res.status).toBe(200);
    },
  ],
  [
    'PATCH /contacts/:id (contact.service.ts)',
    'api',
    async (p, email, { subscribed, data }) => {
      // PATCH changes a contact that exists: a new one is created bare first, then patched.
      const normalized = email.toLowerCase();
      const found = await db().query<{ id: string }>('select id from contacts where project_id = $1 and email = $2', [p.projectId, normalized]);
      let id = found.rows[0]?.id;
      if (!id) {
        const created = await api('POST', '/contacts', { key: p.secretKey, body: { email } });
        expect(created.status).toBe(201);
        id = created.body.id as string;
      }
      const res = await api('PATCH', `/contacts/${id}`, { key: p.secretKey, body: { data, ...(subscribed === undefined ? {} : { subscribed }) } });
      expect(res.status).toBe(200);
    },
  ],
  [
    'CSV import (contact-import.ts)',
    'import',
    async (p, email, { subscribed, data }) => {
      const columns = ['email', ...(subscribed === undefined ? [] : ['subscribed']), ...Object.keys(data)];
      const values = [email, ...(subscribed === undefined ? [] : [subscribed]), ...Object.values(data)];
      const form = new FormData();
      form.append('file', new Blob([`${columns.join(',')}\n${values.map(csvCell).join(',')}\n`], { type: 'text/csv' }), 'c.csv');
      const res = await fetch(`${stackEnv().apiUrl}/contacts/import`, { method: 'POST', headers: { authorization: `Bearer ${p.secretKey}` }, body: form });
      expect(res.status).toBe(202);
      await waitForImport(p, ((await res.json()) as { jobId: string }).jobId);
    },
  ],
];

let project: TestProject;
beforeAll(async () => {
  project = await createTestProject('upsert contract');
});
afterAll(closeDb);

describe.each(paths)('%s', (_name, via, write) => {
  const tag = randomUUID().slice(0, 8);
  const email = `contract-${via}-${tag}@example.com`;
  const rows = async () => (await db().query('select id, email, subscribed, data from contacts where project_id = $1 and email = $2', [project.projectId, email])).rows;
  const subscriptionEvents = async () =>
    (
      await db().query(
        `select e.name, e.data from events e join contacts c on c.id = e.contact_id where c.project_id = $1 and c.email = $2 and e.name like 'contact.%' order by e.id`,
        [project.projectId, email],
      )
    ).rows;

  test('a new contact: email normalised, reserved keys dropped, subscribed by default, no subscription event', async () => {
    await write(project, `Contract-${via}-${tag}@EXAMPLE.com`, { data: { plan: 'pro', seats: 3, note: 'keep', id: 'x', mailwright_id: 'y', unsubscribeUrl: 'z' } });
    expect(await rows()).toEqual([{ id: expect.any(String), email, subscribed: true, data: { plan: 'pro', seats: 3, note: 'keep' } }]);
    expect(await subscriptionEvents()).toEqual([]);
  });

  test('the same contact again: data merged, "" ignored, an explicit unsubscribe applied with one contact.unsubscribed', async () => {
    await write(project, email, { subscribed: false, data: { plan: 'team', note: '' } });
    expect(await rows()).toEqual([{ id: expect.any(String), email, subscribed: false, data: { plan: 'team', seats: 3, note: 'keep' } }]);
    expect(await subscriptionEvents()).toEqual([{ name: 'contact.unsubscribed', data: expect.objectContaining({ via }) }]);
  });

  test('the same state again records no second event; a resubscribe records contact.subscribed', async () => {
    await write(project, email, { subscribed: false, data: { plan: 'team' } });
    expect((await subscriptionEvents()).map((e) => e.name)).toEqual(['contact.unsubscribed']);
    await write(project, email, { subscribed: true, data: { plan: 'team' } });
    expect((await subscriptionEvents()).map((e) => e.name)).toEqual(['contact.unsubscribed', 'contact.subscribed']);
    expect((await rows())[0].subscribed).toBe(true);
  });
});
