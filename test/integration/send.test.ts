import { randomUUID } from 'node:crypto';
import { Connection, Client } from '@temporalio/client';
import { api } from '../helpers/api';
import { closeDb, db, waitForEmailStatus } from '../helpers/db';
import { addVerifiedDomain, createTestProject, uniqueDomain, type TestProject } from '../helpers/fixtures';
import { waitForMail } from '../helpers/mailbox';
import { stackEnv } from '../stack-env';

let project: TestProject;
let domain: string;
const rcpt = (tag = 'rcpt') => `${tag}-${randomUUID().slice(0, 8)}@example.com`;

beforeAll(async () => {
  project = await createTestProject();
  domain = uniqueDomain();
  await addVerifiedDomain(project.projectId, domain);
});
afterAll(closeDb);

const send = (body: Record<string, unknown>, key = project.secretKey) => api('POST', '/v1/send', { key, body });

describe('POST /v1/send', () => {
  test('delivers through the workflow: the captured message has from, reply-to, to, subject and html', async () => {
    const to = rcpt();
    const res = await send({
      to: { name: 'Ada Lovelace', email: to },
      from: { name: 'Acme Support', email: `support@${domain}` },
      reply: `replies@${domain}`,
      subject: 'Your order {{ order }}',
      body: '<h1>Hello {{ first | default: "friend" }}</h1><p>Order {{ order }}</p>',
      data: { first: 'Ada', order: 'A-17' },
    });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      success: true,
      data: { emails: [{ contact: { id: expect.any(String), email: to }, email: expect.any(String), status: 'QUEUED' }], timestamp: expect.any(String) },
    });
    const [mail] = await waitForMail(to);
    expect(mail!.from!.value).toEqual([{ name: 'Acme Support', address: `support@${domain}` }]);
    expect(mail!.replyTo!.value[0]!.address).toBe(`replies@${domain}`);
    expect(mail!.to).toMatchObject({ value: [{ name: 'Ada Lovelace', address: to }] });
    expect(mail!.subject).toBe('Your order A-17');
    expect(mail!.html).toContain('<h1>Hello Ada</h1><p>Order A-17</p>');
    const emailId = res.body.data.emails[0].email;
    expect(mail!.messageId).toBe(`<${emailId}@${domain}>`);

    const row = await waitForEmailStatus(emailId, 'SENT');
    expect(row.message_id).toBe(`<${emailId}@${domain}>`);
    expect(row.smtp_response).toMatch(/^250 /);
    expect(row.attempts).toBe(1);
    const { rows: events } = await db().query(`select name from events where email_id = $1`, [emailId]);
    expect(events.map((e) => e.name)).toEqual(['email.sent']);
  });

  test('the delivery workflow is findable in Temporal by its id and ProjectId search attribute', async () => {
    const to = rcpt();
    const res = await send({ to, from: `hi@${domain}`, subject: 'Temporal', body: '<p>t</p>' });
    const emailId = res.body.data.emails[0].email;
    const row = await waitForEmailStatus(emailId, 'SENT');
    expect(row.workflow_id).toMatch(/^email-delivery\//);
    const connection = await Connection.connect({ address: stackEnv().temporalAddress });
    try {
      const handle = new Client({ connection }).workflow.getHandle(row.workflow_id);
      expect(await handle.result()).toMatchObject({ rejected: 0, failed: 0 });
      const desc = await handle.describe();
      expect(desc.type).toBe('emailDelivery');
      expect(desc.searchAttributes.ProjectId).toEqual([project.projectId]);
      expect(desc.searchAttributes.EmailIds).toContain(emailId);
      // Visibility (what Web UI searches) is eventually consistent: poll briefly.
      let found: string[] = [];
      for (let i = 0; i < 50 && found.length === 0; i++) {
        if (i > 0) await new Promise((r) => setTimeout(r, 200));
        found = [];
        for await (const wf of new Client({ connection }).workflow.list({ query: `EmailIds = '${emailId}'` })) found.push(wf.workflowId);
      }
      expect(found).toEqual([row.workflow_id]);
    } finally {
      await connection.close();
    }
  });

  test('an array `to` is processed in sequence: one contact and one rendered email per recipient', async () => {
    const a = rcpt('a');
    const b = rcpt('b');
    await api('POST', '/v1/send', { key: project.secretKey, body: { to: b, from: `hi@${domain}`, subject: 's', body: 'b', data: { first: 'Bea' } } });
    const res = await send({ to: [a, { email: b.toUpperCase(), name: 'Bea' }], from: `hi@${domain}`, subject: 'Hi {{ first }}', body: '<p>{{ email }}</p>' });
    expect(res.status).toBe(200);
    const emails = res.body.data.emails;
    expect(emails.map((e: { contact: { email: string } }) => e.contact.email)).toEqual([a, b]);
    expect(new Set(emails.map((e: { email: string }) => e.email)).size).toBe(2);
    const [mailA] = await waitForMail(a);
    expect(mailA!.subject!.trim()).toBe('Hi'); // no `first` for this contact: unknown variables render empty
    expect(mailA!.html).toContain(`<p>${a}</p>`);
    const mailsB = await waitForMail(b, { count: 2 });
    expect(mailsB.map((m) => m.subject)).toContain('Hi Bea');
  });

  test('a new recipient becomes an unsubscribed contact unless `subscribed` says otherwise', async () => {
    const plain = rcpt();
    const opted = rcpt();
    await send({ to: plain, from: `hi@${domain}`, subject: 's', body: 'b' });
    await send({ to: opted, from: `hi@${domain}`, subject: 's', body: 'b', subscribed: true });
    const { rows } = await db().query('select email, subscribed from contacts where project_id = $1 and email = any($2) order by email', [project.projectId, [plain, opted].sort()]);
    expect(Object.fromEntries(rows.map((r) => [r.email, r.subscribed]))).toEqual({ [plain]: false, [opted]: true });
  });

  test('an explicit change of `subscribed` on an existing contact emits contact.subscribed / contact.unsubscribed', async () => {
    const to = rcpt();
    await send({ to, from: `hi@${domain}`, subject: 's', body: 'b' });
    await send({ to, from: `hi@${domain}`, subject: 's', body: 'b', subscribed: true });
    await send({ to, from: `hi@${domain}`, subject: 's', body: 'b' }); // no `subscribed`: unchanged, no event
    await send({ to, from: `hi@${domain}`, subject: 's', body: 'b', subscribed: false });
    const { rows } = await db().query(
      `select e.name from events e join contacts c on c.id = e.contact_id where c.email = $1 and e.name like 'contact.%' order by e.created_at, e.id`,
      [to],
    );
    expect(rows.map((r) => r.name)).toEqual(['contact.subscribed', 'contact.unsubscribed']);
  });

  test('data is stored on the contact; non-persistent values render but are not stored; reserved keys are dropped', async () => {
    const to = rcpt();
    await send({
      to,
      from: `hi@${domain}`,
      subject: 'Code {{ code }}',
      body: '<p>{{ plan }}</p>',
      data: { plan: 'pro', code: { value: '1234', persistent: false }, email: 'evil@example.com', mailwright_id: 'x' },
    });
    const [mail] = await waitForMail(to);
    expect(mail!.subject).toBe('Code 1234');
    const { rows } = await db().query('select data from contacts where email = $1', [to]);
    expect(rows[0].data).toEqual({ plan: 'pro' });
  });

  test('the deprecated `name` names a string `from`', async () => {
    const to = rcpt();
    await send({ to, from: `news@${domain}`, name: 'Newsroom', subject: 's', body: 'b' });
    const [mail] = await waitForMail(to);
    expect(mail!.from!.value[0]).toEqual({ name: 'Newsroom', address: `news@${domain}` });
  });

  test('custom headers are sent; header injection and structural headers are refused', async () => {
    const to = rcpt();
    const ok = await send({ to, from: `hi@${domain}`, subject: 's', body: 'b', headers: { 'X-Campaign': 'spring' } });
    expect(ok.status).toBe(200);
    const [mail] = await waitForMail(to);
    expect(mail!.headers.get('x-campaign')).toBe('spring');
    const injected = await send({ to, from: `hi@${domain}`, subject: 's', body: 'b', headers: { 'X-A': 'v\r\nBcc: victim@example.com' } });
    expect(injected.status).toBe(422);
    expect(injected.body.error.errors[0].code).toBe('header_injection');
    const structural = await send({ to, from: `hi@${domain}`, subject: 's', body: 'b', headers: { Bcc: 'x@example.com' } });
    expect(structural.status).toBe(422);
    expect(structural.body.error.errors[0].code).toBe('reserved_header');
  });

  test('a subject with a newline is refused', async () => {
    const res = await send({ to: rcpt(), from: `hi@${domain}`, subject: 'a\nBcc: x@y.z', body: 'b' });
    expect(res.status).toBe(422);
    expect(res.body.error.errors[0].field).toBe('subject');
  });

  test('a `from` on a domain the project has not added -> 403 DOMAIN_NOT_VERIFIED naming the domain, nothing stored', async () => {
    const to = rcpt();
    const res = await send({ to, from: 'ceo@not-ours.example', subject: 's', body: 'b' });
    expect(res.status).toBe(403);
    expect(res.body.error.code).toBe('DOMAIN_NOT_VERIFIED');
    expect(res.body.error.message).toContain('not-ours.example');
    expect(res.body.error.suggestion).toMatch(/POST \/domains/);
    const { rowCount } = await db().query('select 1 from contacts where email = $1', [to]);
    expect(rowCount).toBe(0);
  });

  test('a domain verified after a refused send works at once (the domain cache is invalidated)', async () => {
    const later = uniqueDomain();
    const first = await send({ to: rcpt(), from: `a@${later}`, subject: 's', body: 'b' });
    expect(first.status).toBe(403);
    await addVerifiedDomain(project.projectId, later);
    const second = await send({ to: rcpt(), from: `a@${later}`, subject: 's', body: 'b' });
    expect(second.status).toBe(200);
  });

  test('a pending domain is refused with a suggestion to finish verification', async () => {
    const pending = uniqueDomain();
    await db().query(`insert into domains (id, project_id, name, status) values ($1, $2, $3, 'PENDING')`, [randomUUID(), project.projectId, pending]);
    const res = await send({ to: rcpt(), from: `a@${pending}`, subject: 's', body: 'b' });
    expect(res.status).toBe(403);
    expect(res.body.error.message).toContain('not verified yet');
  });

  test("another project's verified domain is not usable", async () => {
    const other = await createTestProject();
    const res = await send({ to: rcpt(), from: `hi@${domain}`, subject: 's', body: 'b' }, other.secretKey);
    expect(res.status).toBe(403);
  });

  test('more than 50 recipients -> 422', async () => {
    const to = Array.from({ length: 51 }, (_, i) => `r${i}@example.com`);
    const res = await send({ to, from: `hi@${domain}`, subject: 's', body: 'b' });
    expect(res.status).toBe(422);
    expect(res.body.error.errors[0].field).toBe('to');
  });
});
