import { randomUUID } from 'node:crypto';
import { Connection, Client } from '@temporalio/client';
import { api } from '../helpers/api';
import { closeDb, db } from '../helpers/db';
import { addVerifiedDomain, createTestProject, uniqueDomain, type TestProject } from '../helpers/fixtures';
import { messagesTo, refusals, waitForMail } from '../helpers/mailbox';
import { stackEnv } from '../stack-env';
import { maybeRecordHistory } from '../helpers/histories';

let project: TestProject;
let domain: string;
const tag = () => randomUUID().slice(0, 8);

beforeAll(async () => {
  project = await createTestProject();
  domain = uniqueDomain();
  await addVerifiedDomain(project.projectId, domain);
});
afterAll(closeDb);

async function sendTo(to: string | string[]) {
  const res = await api('POST', '/v1/send', { key: project.secretKey, body: { to, from: `hi@${domain}`, subject: 'Delivery', body: '<p>d</p>' } });
  expect(res.status).toBe(200);
  return res.body.data.emails.map((e: { email: string }) => e.email) as string[];
}

async function waitForFinal(emailId: string, timeoutMs = 45_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { rows } = await db().query('select * from emails where id = $1', [emailId]);
    if (rows[0] && !['QUEUED', 'SENDING'].includes(rows[0].status)) return rows[0];
    if (Date.now() > deadline) throw new Error(`email ${emailId} still ${rows[0]?.status}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

const eventsOf = async (emailId: string) =>
  (await db().query('select name, data from events where email_id = $1 order by created_at, id', [emailId])).rows;

describe('delivery lifecycle against real SMTP replies', () => {
  test('a 5xx reply is permanent: BOUNCED with the reply recorded, an email.bounced event, no retry', async () => {
    const to = `bounce-${tag()}@example.com`;
    const [emailId] = await sendTo(to);
    const row = await waitForFinal(emailId!);
    expect(row.status).toBe('BOUNCED');
    expect(row.smtp_response).toMatch(/550/);
    expect(row.attempts).toBe(1);
    expect(await messagesTo(to)).toHaveLength(0);
    const events = await eventsOf(emailId!);
    expect(events.map((e) => e.name)).toEqual(['email.bounced']);
    expect(events[0].data.response).toMatch(/Mailbox does not exist/);
    expect(events[0].data.attempt).toBe(1);
    await maybeRecordHistory(row.workflow_id, 'email-delivery-bounce');
  });

  test('a 4xx reply is retried with backoff, then delivered exactly once', async () => {
    const to = `tempfail-1-${tag()}@example.com`;
    const [emailId] = await sendTo(to);
    // Between the attempts (a 5 s backoff) the row keeps the transient failure.
    const deadline = Date.now() + 10_000;
    let pending: Record<string, any> | undefined;
    while (!pending?.error && Date.now() < deadline) {
      pending = (await db().query('select status, error from emails where id = $1', [emailId])).rows[0];
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(pending).toMatchObject({ status: 'SENDING', error: expect.stringMatching(/^Attempt 1: 4\d\d /) });
    const row = await waitForFinal(emailId!);
    expect(row.status).toBe('SENT');
    expect(row.error).toBeNull();
    expect(row.attempts).toBe(2);
    expect((await refusals())[to]).toBe(2); // refused once, accepted on the second try
    expect(await messagesTo(to)).toHaveLength(1);
    expect((await eventsOf(emailId!)).map((e) => e.name)).toEqual(['email.sent']);
    await maybeRecordHistory(row.workflow_id, 'email-delivery-tempfail-retry');
  });

  test('one call with mixed recipients: each email gets its own outcome and only deliverable ones arrive', async () => {
    const ok = `ok-${tag()}@example.com`;
    const bad = `bounce-${tag()}@example.com`;
    const [okId, badId] = await sendTo([ok, bad]);
    expect((await waitForFinal(okId!)).status).toBe('SENT');
    expect((await waitForFinal(badId!)).status).toBe('BOUNCED');
    await waitForMail(ok);
    expect(await messagesTo(bad)).toHaveLength(0);
  });

  test('the workflow result reports each outcome, and a replayed start of the same workflow id sends nothing twice', async () => {
    const to = `once-${tag()}@example.com`;
    const [emailId] = await sendTo(to);
    const row = await waitForFinal(emailId!);
    const connection = await Connection.connect({ address: stackEnv().temporalAddress });
    try {
      const client = new Client({ connection });
      expect(await client.workflow.getHandle(row.workflow_id).result()).toMatchObject({ sent: 1 });
      // An operator (or a bug) delivering the same emails again: already-SENT emails are skipped, never re-sent.
      const again = await client.workflow.execute('emailDelivery', {
        taskQueue: 'mailwright',
        workflowId: `redeliver-${tag()}`,
        args: [{ projectId: project.projectId, emailIds: [emailId] }],
      });
      expect(again).toEqual({ sent: 0, rejected: 0, failed: 0, skipped: 1 });
      expect(await messagesTo(to)).toHaveLength(1);
    } finally {
      await connection.close();
    }
  });
});
