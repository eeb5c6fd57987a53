import { randomUUID } from 'node:crypto';
import { Connection, Client } from '@temporalio/client';
import { closeDb, db } from '../helpers/db';
import { addVerifiedDomain, createTestProject, uniqueDomain } from '../helpers/fixtures';
import { waitForMail } from '../helpers/mailbox';
import { stackEnv } from '../stack-env';
import { uuidv7 } from '../../domain/ids';
import { SA } from '../../temporal/search-attributes';

afterAll(closeDb);

describe('email sweeper', () => {
  test('the worker keeps an email-sweeper schedule', async () => {
    const connection = await Connection.connect({ address: stackEnv().temporalAddress });
    try {
      const desc = await new Client({ connection }).schedule.getHandle('email-sweeper').describe();
      expect(desc.action).toMatchObject({ type: 'startWorkflow', workflowType: 'emailSweeper' });
    } finally {
      await connection.close();
    }
  });

  test('emails left QUEUED without a workflow (API died after storing them) are delivered by the sweeper, once, findable by ProjectId and EmailIds', async () => {
    const p = await createTestProject();
    const domain = uniqueDomain();
    await addVerifiedDomain(p.projectId, domain);
    const to = `stranded-${randomUUID().slice(0, 8)}@example.com`;
    const { rows } = await db().query(`insert into contacts (id, project_id, email, subscribed) values ($1, $2, $3, false) returning id`, [uuidv7(), p.projectId, to]);
    const emailId = uuidv7();
    // As the intake stores it (with its delivery workflow id), but 20 minutes ago and with that workflow never started.
    await db().query(
      `insert into emails (id, project_id, contact_id, kind, to_email, from_email, subject, html, workflow_id, created_at, queued_at)
       values ($1, $2, $3, 'TRANSACTIONAL', $4, $5, 'Stranded', '<p>late but delivered</p>', $6, now() - interval '20 minutes', now() - interval '20 minutes')`,
      [emailId, p.projectId, rows[0].id, to, `hi@${domain}`, `email-delivery/${emailId}`],
    );
    const fresh = uuidv7(); // a recent QUEUED email is not the sweeper's business yet
    await db().query(
      `insert into emails (id, project_id, contact_id, kind, to_email, from_email, subject, html, queued_at) values ($1, $2, $3, 'TRANSACTIONAL', $4, $5, 'Fresh', '<p>x</p>', now())`,
      [fresh, p.projectId, rows[0].id, to, `hi@${domain}`],
    );
    const connection = await Connection.connect({ address: stackEnv().temporalAddress });
    try {
      const client = new Client({ connection });
      const result = await client.workflow.execute('emailSweeper', { taskQueue: 'mailwright', workflowId: `sweep-${randomUUID()}`, args: [{}] });
      expect(result.restarted).toBeGreaterThanOrEqual(1);
      const [mail] = await waitForMail(to);
      expect(mail!.subject).toBe('Stranded');
      // Started with the search attributes of a first start (emailDeliveryStart), so Web UI finds it as it finds any delivery.
      const swept = await client.workflow.getHandle(`email-delivery/${emailId}`).describe();
      expect(swept.typedSearchAttributes.get(SA.ProjectId)).toBe(p.projectId);
      expect(swept.typedSearchAttributes.get(SA.EmailIds)).toEqual([emailId]);
      const again = await client.workflow.execute('emailSweeper', { taskQueue: 'mailwright', workflowId: `sweep-${randomUUID()}`, args: [{}] });
      expect(again.restarted).toBe(0);
    } finally {
      await connection.close();
    }
    const { rows: states } = await db().query('select id, status, workflow_id, queued_at from emails where id = any($1)', [[emailId, fresh]]);
    const byId = Object.fromEntries(states.map((r) => [r.id, r]));
    // The delivery's claim cleared queued_at: the sweeper no longer sees it, whatever happens to it next.
    expect(byId[emailId]).toMatchObject({ status: 'SENT', workflow_id: `email-delivery/${emailId}`, queued_at: null });
    expect(byId[fresh].status).toBe('QUEUED');
    expect(byId[fresh].queued_at).not.toBeNull();
  });
});
