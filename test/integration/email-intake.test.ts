import { randomUUID } from 'node:crypto';
import { initOrm, type MikroORM } from '../../domain/orm';
import { acceptSend, type SendRequest } from '../../domain/emails/send.service';
import { EmailIntake, type StartDelivery } from '../../domain/emails/email-intake';
import { ContactIntake } from '../../domain/contacts/contact-intake';
import { DEFAULT_PROJECT_SETTINGS } from '../../domain/projects/project.entity';
import { stackEnv } from '../stack-env';
import { closeDb, db } from '../helpers/db';
import { addVerifiedDomain, createTestProject, uniqueDomain, type TestProject } from '../helpers/fixtures';

/**
 * The intake between /v1/send and delivery, against the real database, with the workflow start played by the test:
 * sends that arrive together share one INSERT and one delivery, and when the delivery cannot be started the caller
 * gets a 503 and nothing stays behind that could be sent or that holds the call's files.
 */
let orm: MikroORM;
let contacts: ContactIntake;
let project: TestProject;
let domain: string;
const limits = { attachmentsBytes: 10 * 1024 * 1024, messageBytes: 40 * 1024 * 1024 };

beforeAll(async () => {
  // Rendering signs each recipient's links with the configuration of this process.
  process.env.DATABASE_URL ??= stackEnv().databaseUrl;
  orm = await initOrm(stackEnv().databaseUrl, 4);
  contacts = new ContactIntake(orm, { maxBatch: 100, maxWaitMs: 2 });
  project = await createTestProject('intake');
  domain = uniqueDomain();
  await addVerifiedDomain(project.projectId, domain);
});
afterAll(async () => {
  // Nothing here was handed to a real delivery: keep the sweeper from restarting these rows in a long run.
  await db().query(`update emails set status = 'CANCELLED', queued_at = null where project_id = $1 and status = 'QUEUED'`, [project.projectId]);
  await orm.close();
  await closeDb();
});

const request = (to: string, extra: Partial<SendRequest> = {}): SendRequest => ({
  projectId: project.projectId,
  settings: DEFAULT_PROJECT_SETTINGS,
  to: [{ email: to }],
  from: { email: `hello@${domain}` },
  subject: 'Intake',
  body: '<p>Hello {{ email }}</p>',
  ...extra,
});

const intakeWith = (start: StartDelivery) =>
  new EmailIntake(orm, { workflowIdFor: (id) => `email-delivery/${id}`, start }, { maxBatch: 40, maxWaitMs: 30 });

test('sends that arrive together are stored by one statement and handed to one delivery, under the first email id', async () => {
  const starts: { projectId: string; emailIds: string[] }[] = [];
  const intake = intakeWith(async (batch) => void starts.push(batch));
  const to = [0, 1, 2].map((i) => `together-${i}-${randomUUID().slice(0, 6)}@example.com`);
  const accepted = (await Promise.all(to.map((t) => acceptSend(orm.em.fork(), { intake, contacts, limits }, request(t))))).flat();
  expect(starts).toHaveLength(1);
  expect(starts[0]!.projectId).toBe(project.projectId);
  expect(new Set(starts[0]!.emailIds)).toEqual(new Set(accepted.map((a) => a.emailId)));
  const { rows } = await db().query(
    'select id, status, workflow_id, to_email, html, queued_at = created_at as "queuedAtAcceptance" from emails where id = any($1::uuid[]) order by to_email',
    [accepted.map((a) => a.emailId)],
  );
  expect(rows.map((r) => [r.to_email, r.status, r.workflow_id])).toEqual(to.map((t) => [t, 'QUEUED', `email-delivery/${starts[0]!.emailIds[0]}`]));
  expect(rows[0].html).toContain(`<p>Hello ${to[0]}</p>`);
  // What the stranded-mail sweeper watches: set at acceptance, until a delivery attempt claims the email.
  expect(rows.map((r) => r.queuedAtAcceptance)).toEqual([true, true, true]);
});

test('when the delivery cannot be started the call is a 503, its emails are FAILED (never sent) and its attachments are removed', async () => {
  const intake = intakeWith(async () => {
    throw new Error('connect ECONNREFUSED 127.0.0.1:7233');
  });
  const to = `refused-${randomUUID().slice(0, 6)}@example.com`;
  const attachments = [{ filename: 'notes.txt', content: Buffer.from('attached').toString('base64') }];
  await expect(acceptSend(orm.em.fork(), { intake, contacts, limits }, request(to, { attachments }))).rejects.toMatchObject({
    statusCode: 503,
    code: 'SERVICE_UNAVAILABLE',
  });
  const { rows } = await db().query('select status, error, attachment_ids, queued_at from emails where project_id = $1 and to_email = $2', [project.projectId, to]);
  expect(rows).toHaveLength(1);
  expect(rows[0].status).toBe('FAILED');
  expect(rows[0].queued_at).toBeNull(); // nothing for the sweeper to restart
  expect(rows[0].error).toBe('Could not be queued for delivery: connect ECONNREFUSED 127.0.0.1:7233');
  expect(rows[0].attachment_ids).toHaveLength(1);
  const files = await db().query('select 1 from email_attachments where id = any($1::uuid[])', [rows[0].attachment_ids]);
  expect(files.rows).toHaveLength(0);
});

test('a call stored in two batches, one of which started, keeps its attachments for the emails still to be sent', async () => {
  let starts = 0;
  const intake = intakeWith(async () => {
    if (++starts === 2) throw new Error('connect ECONNREFUSED 127.0.0.1:7233');
  });
  const tag = randomUUID().slice(0, 6);
  const to = Array.from({ length: 45 }, (_, i) => ({ email: `split-${tag}-${i}@example.com` }));
  const attachments = [{ filename: 'notes.txt', content: Buffer.from('attached').toString('base64') }];
  await expect(acceptSend(orm.em.fork(), { intake, contacts, limits }, request('unused@example.com', { to, attachments }))).rejects.toMatchObject({ statusCode: 503 });
  expect(starts).toBe(2);
  const { rows } = await db().query(
    `select status, count(*)::int as n, min(attachment_ids::text) as ids from emails where project_id = $1 and to_email like $2 group by status order by status`,
    [project.projectId, `split-${tag}-%`],
  );
  expect(rows.map((r) => [r.status, r.n])).toEqual([['FAILED', 5], ['QUEUED', 40]]);
  const files = await db().query('select 1 from email_attachments where id = any($1::uuid[])', [rows[0].ids]);
  expect(files.rows).toHaveLength(1);
});
