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
  [project, other] = await Promise.all([createTestProject('Import'), createTestProject('Import other')]);
});
afterAll(closeDb);

async function upload(p: TestProject, content: string | Buffer, fields: Record<string, string> = {}, fileName = 'contacts.csv') {
  const form = new FormData();
  form.append('file', new Blob([content]), fileName);
  for (const [k, v] of Object.entries(fields)) form.append(k, v);
  const res = await fetch(`${stackEnv().apiUrl}/contacts/import`, { method: 'POST', headers: { authorization: `Bearer ${p.secretKey}` }, body: form });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

async function waitForJob(p: TestProject, jobId: string, timeoutMs = 60_000, until = (j: any) => ['COMPLETED', 'FAILED', 'CANCELLED'].includes(j.status)) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const res = await api('GET', `/contacts/import/${jobId}`, { key: p.secretKey });
    expect(res.status).toBe(200);
    if (until(res.body)) return res.body;
    if (Date.now() > deadline) throw new Error(`job ${jobId} still ${res.body.status}: ${JSON.stringify(res.body)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const contactsOf = async (projectId: string, like: string) =>
  (await db().query('select email, subscribed, data from contacts where project_id = $1 and email like $2 order by email', [projectId, like])).rows;

describe('POST /contacts/import (CSV)', () => {
  test('BOM, semicolons, quoted newlines, invalid emails and duplicates: rows imported with typed data, errors with the right lines, duplicates last-wins', async () => {
    const tag = randomUUID().slice(0, 8);
    const csv =
      '\uFEFFEmail;Subscribed;plan;seats;signup;bio;id\r\n' +
      `a-${tag}@example.com;yes;pro;3;2024-05-01;"two\nlines";x\r\n` +
      `not-an-email;no;free;1;;;\r\n` +
      `b-${tag}@example.com;0;free;;;;\r\n` +
      `A-${tag}@Example.com;;team;5;;;\r\n` +
      `c-${tag}@example.com;maybe;free;;;;\r\n`;
    const res = await upload(project, csv);
    expect(res.status).toBe(202);
    expect(res.body.jobId).toMatch(/^[0-9a-f-]{36}$/);
    const job = await waitForJob(project, res.body.jobId);
    expect(job).toMatchObject({ jobId: res.body.jobId, status: 'COMPLETED', total: 5, processed: 5, created: 2, updated: 0, skipped: 1, failed: 2 });
    expect(job.errors).toEqual([
      { line: 4, email: 'not-an-email', message: 'Invalid email address "not-an-email"' },
      { line: 7, email: `c-${tag}@example.com`, message: expect.stringMatching(/Invalid subscribed value "maybe"/) },
    ]);
    expect(job.startedAt).toBeTruthy();
    expect(job.finishedAt).toBeTruthy();
    expect(await contactsOf(project.projectId, `%-${tag}@example.com`)).toEqual([
      // the later row for a-... wins: its subscribed is empty (new contact -> default true), seats 5, plan team
      { email: `a-${tag}@example.com`, subscribed: true, data: { plan: 'team', seats: 5 } },
      { email: `b-${tag}@example.com`, subscribed: false, data: { plan: 'free' } },
    ]);
  });

  test('existing contacts: data merged (empty cells keep values), a subscription change records contact.unsubscribed via import', async () => {
    const email = `e-${randomUUID().slice(0, 8)}@example.com`;
    const created = await api('POST', '/contacts', { key: project.secretKey, body: { email, data: { plan: 'free', city: 'Oslo' } } });
    const res = await upload(project, `email,plan,city,subscribed\n${email},pro,,false\n`);
    const job = await waitForJob(project, res.body.jobId);
    expect(job).toMatchObject({ status: 'COMPLETED', created: 0, updated: 1, failed: 0 });
    expect(await contactsOf(project.projectId, email)).toEqual([{ email, subscribed: false, data: { plan: 'pro', city: 'Oslo' } }]);
    const events = await db().query(`select name, data, source from events where contact_id = $1`, [created.body.id]);
    expect(events.rows).toEqual([{ name: 'contact.unsubscribed', data: { via: 'import' }, source: 'SYSTEM' }]);
  });

  test("isolation: emails that exist in another project are new contacts here; the other project's contacts are not read or changed", async () => {
    const tag = randomUUID().slice(0, 8);
    const emails = [`s1-${tag}@example.com`, `s2-${tag}@example.com`];
    await seedContacts(other.projectId, 2, (i) => ({ email: emails[i]!, subscribed: true, data: { plan: 'other' } }));
    const mine = await seedContacts(project.projectId, 1, () => ({ email: emails[1]!, subscribed: true, data: { city: 'Oslo' } }));
    const res = await upload(project, `email,plan,subscribed\n${emails[0]},pro,no\n${emails[1]},team,no\n`);
    expect(await waitForJob(project, res.body.jobId)).toMatchObject({ status: 'COMPLETED', created: 1, updated: 1 });
    expect(await contactsOf(project.projectId, `%-${tag}@example.com`)).toEqual([
      { email: emails[0], subscribed: false, data: { plan: 'pro' } },
      { email: emails[1], subscribed: false, data: { city: 'Oslo', plan: 'team' } },
    ]);
    expect(await contactsOf(other.projectId, `%-${tag}@example.com`)).toEqual(emails.map((email) => ({ email, subscribed: true, data: { plan: 'other' } })));
    const events = await db().query(`select contact_id, name from events where project_id = $1 and contact_id = $2`, [project.projectId, mine[0]]);
    expect(events.rows).toEqual([{ contact_id: mine[0], name: 'contact.unsubscribed' }]);
    expect((await db().query(`select count(*)::int as n from events where project_id = $1`, [other.projectId])).rows[0].n).toBe(0);
  });

  test('tab delimiter, a mapping and the subscribed default for new contacts', async () => {
    const tag = randomUUID().slice(0, 8);
    const res = await upload(project, `E-Mail Address\tTier\tSecret\nm-${tag}@example.com\tgold\ts3\n`, {
      mapping: JSON.stringify({ 'E-Mail Address': 'email', Tier: 'data.tier', Secret: 'ignore' }),
      subscribed: 'false',
    });
    expect(res.status).toBe(202);
    expect(await waitForJob(project, res.body.jobId)).toMatchObject({ status: 'COMPLETED', created: 1 });
    expect(await contactsOf(project.projectId, `m-${tag}@example.com`)).toEqual([{ email: `m-${tag}@example.com`, subscribed: false, data: { tier: 'gold' } }]);
  });

  test.each([
    ['an empty file', '', /empty/],
    ['a header without rows', 'email,name\n', /no rows/],
    ['a binary file (NUL bytes)', Buffer.from([0x50, 0x4b, 0x03, 0x04, 0x14, 0x00, 0x00, 0x00]), /NUL bytes/],
    ['invalid UTF-8', Buffer.concat([Buffer.from('email,name\nx@example.com,'), Buffer.from([0xc3, 0x28, 0xff])]), /UTF-8/],
    ['no email column', 'name,plan\nAda,pro\n', /no email column/],
  ])('%s -> 422 VALIDATION_ERROR with a clear message, no job', async (_name, content, message) => {
    const before = (await db().query('select count(*)::int as n from jobs where project_id = $1', [project.projectId])).rows[0].n;
    const res = await upload(project, content);
    expect(res.status).toBe(422);
    expect(res.body.success).toBe(false);
    expect(res.body.error.code).toBe('VALIDATION_ERROR');
    expect(res.body.error.message).toMatch(message);
    expect(res.body.error.errors[0]).toMatchObject({ field: 'file', code: 'invalid_csv' });
    expect((await db().query('select count(*)::int as n from jobs where project_id = $1', [project.projectId])).rows[0].n).toBe(before);
  });

  test('missing file field, bad mapping JSON, mapping of an unknown column -> 422', async () => {
    const noFile = await fetch(`${stackEnv().apiUrl}/contacts/import`, { method: 'POST', headers: { authorization: `Bearer ${project.secretKey}` }, body: (() => { const f = new FormData(); f.append('subscribed', 'true'); return f; })() });
    expect(noFile.status).toBe(422);
    expect(((await noFile.json()) as any).error.errors[0].field).toBe('file');
    const badJson = await upload(project, 'email\na@example.com\n', { mapping: '{nope' });
    expect(badJson.status).toBe(422);
    expect(badJson.body.error.errors[0].field).toBe('mapping');
    const unknown = await upload(project, 'email\na@example.com\n', { mapping: JSON.stringify({ Mail: 'email' }) });
    expect(unknown.status).toBe(422);
    expect(unknown.body.error.errors[0]).toMatchObject({ field: 'mapping', code: 'invalid_mapping' });
    const json = await api('POST', '/contacts/import', { key: project.secretKey, body: { file: 'x' } });
    expect(json.status).toBe(422);
  });

  test('a file over 5 MB -> 413 PAYLOAD_TOO_LARGE in the error envelope', async () => {
    const big = Buffer.alloc(5 * 1024 * 1024 + 10, 'a');
    const res = await upload(project, Buffer.concat([Buffer.from('email\n'), big]));
    expect(res.status).toBe(413);
    expect(res.body.error.code).toBe('PAYLOAD_TOO_LARGE');
  });

  test('a malformed CSV (unclosed quote) -> job FAILED with a message naming the problem, no contact written', async () => {
    const tag = randomUUID().slice(0, 8);
    const res = await upload(project, `email,name\nok-${tag}@example.com,Ada\nbad-${tag}@example.com,"never closed\nz-${tag}@example.com,x\n`);
    expect(res.status).toBe(202);
    const job = await waitForJob(project, res.body.jobId);
    expect(job.status).toBe('FAILED');
    expect(job.message).toMatch(/not valid CSV/);
    expect(job.finishedAt).toBeTruthy();
    expect(await contactsOf(project.projectId, `%-${tag}@example.com`)).toEqual([]);
  });

  test("another project's job id -> 404; a bulk job id is not an import job; a malformed id -> 422", async () => {
    const res = await upload(project, `email\ni-${randomUUID().slice(0, 8)}@example.com\n`);
    await waitForJob(project, res.body.jobId);
    expect((await api('GET', `/contacts/import/${res.body.jobId}`, { key: other.secretKey })).status).toBe(404);
    expect((await api('GET', `/contacts/bulk/${res.body.jobId}`, { key: project.secretKey })).status).toBe(404);
    expect((await api('GET', `/contacts/import/${randomUUID()}`, { key: project.secretKey })).status).toBe(404);
    expect((await api('GET', '/contacts/import/nope', { key: project.secretKey })).status).toBe(422);
    expect((await api('GET', `/contacts/import/${res.body.jobId}`, { key: project.publicKey })).status).toBe(401);
  });

  test('the import and job endpoints are in /openapi.json, the upload described as multipart/form-data', async () => {
    const doc = (await api('GET', '/openapi.json')).body;
    const body = doc.paths['/contacts/import'].post.requestBody.content['multipart/form-data'].schema;
    const schema = body.$ref ? doc.components.schemas[body.$ref.split('/').pop()] : body;
    expect(schema.properties.file).toMatchObject({ type: 'string', format: 'binary' });
    expect(schema.required).toContain('file');
    for (const path of ['/contacts/import/{jobId}', '/contacts/bulk/{jobId}']) expect(doc.paths[path].get).toBeTruthy();
    for (const path of ['/contacts/bulk-subscribe', '/contacts/bulk-unsubscribe', '/contacts/bulk-delete']) expect(doc.paths[path].post.responses['202']).toBeTruthy();
    for (const path of ['/contacts/import/{jobId}/cancel', '/contacts/bulk/{jobId}/cancel']) expect(doc.paths[path].post.responses['409']).toBeTruthy();
  });

  test('across chunks (written in parallel): the last row of an email wins whole, earlier ones are skipped; the first 100 errors by line are kept', async () => {
    const p = await createTestProject('Import chunks');
    const lines = ['email,city,plan'];
    for (let i = 0; i < 2_500; i++) {
      if (i % 20 === 7) lines.push(`broken-${i},Oslo,free`); // 125 invalid emails, in every chunk
      else if (i === 2_400) lines.push('x10@example.com,,team'); // row 10 again, in the third chunk
      else lines.push(`x${i}@example.com,Oslo,free`);
    }
    const res = await upload(p, lines.join('\n') + '\n');
    const job = await waitForJob(p, res.body.jobId);
    expect(job).toMatchObject({ status: 'COMPLETED', total: 2_500, processed: 2_500, failed: 125, skipped: 1, created: 2_374, updated: 0 });
    const brokenLines = Array.from({ length: 2_500 }, (_, i) => i).filter((i) => i % 20 === 7).map((i) => i + 2);
    expect(job.errors).toHaveLength(100);
    expect(job.errors.map((e: { line: number }) => e.line)).toEqual(brokenLines.slice(0, 100));
    expect(job.errors[0]).toEqual({ line: 9, email: 'broken-7', message: 'Invalid email address "broken-7"' });
    // Not merged with row 10's city: a superseded row is not imported at all.
    expect(await contactsOf(p.projectId, 'x10@example.com')).toEqual([{ email: 'x10@example.com', subscribed: true, data: { plan: 'team' } }]);
    const counts = await db().query('select count(*)::int as n from contacts where project_id = $1', [p.projectId]);
    expect(counts.rows[0].n).toBe(2_374);
  });

  test('cancelling a large import mid-way: CANCELLED at once, the committed chunks stay, nothing is written after; 409 once ended, 404 elsewhere', async () => {
    const p = await createTestProject('Import cancel');
    const rows = 80_000;
    const lines = ['email,plan'];
    for (let i = 0; i < rows; i++) lines.push(`c${i}@example.com,pro`);
    const res = await upload(p, lines.join('\n') + '\n');
    expect(res.status).toBe(202);
    await waitForJob(p, res.body.jobId, 60_000, (j) => j.processed > 0 || !['QUEUED', 'RUNNING'].includes(j.status));
    expect((await api('POST', `/contacts/import/${res.body.jobId}/cancel`, { key: other.secretKey })).status).toBe(404);
    const cancelled = await api('POST', `/contacts/import/${res.body.jobId}/cancel`, { key: p.secretKey });
    expect(cancelled.status).toBe(200);
    expect(cancelled.body).toMatchObject({ jobId: res.body.jobId, status: 'CANCELLED', total: rows, message: 'The import was cancelled' });
    expect(cancelled.body.processed).toBeGreaterThan(0);
    expect(cancelled.body.processed).toBeLessThan(rows);
    expect(cancelled.body.finishedAt).toBeTruthy();
    // The workflow ends cancelled (visible as such in Temporal Web UI).
    const connection = await Connection.connect({ address: stackEnv().temporalAddress });
    try {
      const handle = new Client({ connection }).workflow.getHandle(`contact-import/${res.body.jobId}`);
      await expect(handle.result()).rejects.toThrow();
      expect((await handle.describe()).status.name).toBe('CANCELLED');
    } finally {
      await connection.close();
    }
    const job = (await api('GET', `/contacts/import/${res.body.jobId}`, { key: p.secretKey })).body;
    expect(job).toMatchObject({ status: 'CANCELLED', processed: cancelled.body.processed, created: cancelled.body.processed });
    const stored = await db().query('select count(*)::int as n from contacts where project_id = $1', [p.projectId]);
    const chunks = await db().query('select coalesce(sum(rows), 0)::int as r from job_chunks where job_id = $1', [res.body.jobId]);
    expect(stored.rows[0].n).toBe(cancelled.body.processed);
    expect(chunks.rows[0].r).toBe(cancelled.body.processed);
    const again = await api('POST', `/contacts/import/${res.body.jobId}/cancel`, { key: p.secretKey });
    expect(again.status).toBe(409);
    expect(again.body.error.code).toBe('JOB_ENDED');
  }, 120_000);

  test('cancel: a completed import -> 409 JOB_ENDED; an unknown id or a bulk job id -> 404', async () => {
    const res = await upload(project, `email\ndone-${randomUUID().slice(0, 8)}@example.com\n`);
    expect((await waitForJob(project, res.body.jobId)).status).toBe('COMPLETED');
    const ended = await api('POST', `/contacts/import/${res.body.jobId}/cancel`, { key: project.secretKey });
    expect(ended.status).toBe(409);
    expect(ended.body.error).toMatchObject({ code: 'JOB_ENDED', message: expect.stringMatching(/COMPLETED/) });
    expect((await api('POST', `/contacts/import/${randomUUID()}/cancel`, { key: project.secretKey })).status).toBe(404);
    expect((await api('POST', `/contacts/bulk/${res.body.jobId}/cancel`, { key: project.secretKey })).status).toBe(404);
    expect((await api('POST', `/contacts/import/${res.body.jobId}/cancel`, { key: project.publicKey })).status).toBe(401);
  });

  test('a worker killed in the middle of a large import: the import resumes, no duplicate rows, exact final counts', async () => {
    const p = await createTestProject('Import restart');
    const rows = 60_000;
    const lines = ['email,plan,score,city'];
    for (let i = 0; i < rows; i++) lines.push(`r${i}@example.com,${i % 2 ? 'pro' : 'free'},${i},"City ${i % 50}"`);
    lines.push('r5@example.com,vip,5,"City 5"'); // a duplicate in the last chunk: it wins, row 5 (first chunk) is skipped
    const res = await upload(p, lines.join('\n') + '\n');
    expect(res.status).toBe(202);
    const midway = await waitForJob(p, res.body.jobId, 60_000, (j) => j.processed > 0 || j.status !== 'QUEUED' && j.status !== 'RUNNING');
    expect(midway.status).toBe('RUNNING');
    expect(midway.processed).toBeLessThan(rows);
    const restart = await fetch(`${stackEnv().workerControlUrl}/restart`, { method: 'POST' });
    expect(restart.status).toBe(204);
    const afterKill = (await api('GET', `/contacts/import/${res.body.jobId}`, { key: p.secretKey })).body;
    expect(afterKill.processed).toBeLessThan(rows + 1);
    const job = await waitForJob(p, res.body.jobId, 120_000);
    expect(job).toMatchObject({ status: 'COMPLETED', total: rows + 1, processed: rows + 1, created: rows, updated: 0, skipped: 1, failed: 0 });
    const counts = await db().query(`select count(*)::int as n, count(distinct email)::int as d from contacts where project_id = $1`, [p.projectId]);
    expect(counts.rows[0]).toEqual({ n: rows, d: rows });
    const r5 = await db().query(`select data from contacts where project_id = $1 and email = 'r5@example.com'`, [p.projectId]);
    expect(r5.rows[0].data).toEqual({ plan: 'vip', score: 5, city: 'City 5' });
    const chunks = await db().query(`select count(*)::int as n, sum(rows)::int as r from job_chunks where job_id = $1`, [res.body.jobId]);
    expect(chunks.rows[0]).toEqual({ n: Math.ceil((rows + 1) / 1000), r: rows + 1 });
  }, 180_000);
});
