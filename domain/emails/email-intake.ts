import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import { sql, statement } from '../db/sql';
import { persistThenStart } from '../workflow-start';
import type { EmailRow } from './email.entity';
import { ProjectBatcher } from '../project-batcher';

const EMAIL_INTAKE_INSERT = statement(
  'email_intake_insert',
  `insert into emails (id, project_id, contact_id, kind, template_id, to_email, to_name, from_email, from_name, reply_to, subject, html, text, headers, attachment_ids, workflow_id)
  select t.id, $1, t.contact_id, t.kind, t.template_id, t.to_email, t.to_name, t.from_email, t.from_name, t.reply_to, t.subject, t.html, t.text, t.headers,
    t.attachment_ids::uuid[], $2
  from unnest($3::uuid[], $4::uuid[], $5::text[], $6::uuid[], $7::text[], $8::text[], $9::text[], $10::text[], $11::text[], $12::text[], $13::text[],
    $14::text[], $15::jsonb[], $16::text[])
    as t(id, contact_id, kind, template_id, to_email, to_name, from_email, from_name, reply_to, subject, html, text, headers, attachment_ids)`,
);

/**
 * Stores accepted emails with one statement, under the delivery workflow's id. The id is stored with the emails, so
 * the sweeper can restart exactly this delivery if the process dies before the start (a second start of a running id
 * is refused: never two deliveries of one email). A prepared statement over arrays (planned once per connection): a
 * batch carries every email's HTML and text, which the ORM's raw queries would inline into a new SQL text each time.
 */
export async function insertEmails(em: EntityManager, projectId: string, workflowId: string, emails: NewEmail[]): Promise<void> {
  await sql(em).query(
    EMAIL_INTAKE_INSERT,
    [
      projectId,
      workflowId,
      ...columns(emails, [
        (e) => e.id, (e) => e.contactId, (e) => e.kind, (e) => e.templateId, (e) => e.toEmail, (e) => e.toName, (e) => e.fromEmail, (e) => e.fromName,
        (e) => e.replyTo, (e) => e.subject, (e) => e.html, (e) => e.text, (e) => JSON.stringify(e.headers), (e) => `{${e.attachmentIds.join(',')}}`,
      ]),
    ],
  );
}

/** Column arrays of rows, one per getter, for an `unnest($n::type[], ...)` statement. */
const columns = <T>(rows: T[], getters: ((row: T) => unknown)[]): unknown[][] => getters.map((get) => rows.map(get));

/** An accepted email as stored: the row of `emails` before delivery. */
export type NewEmail = Pick<
  EmailRow,
  'id' | 'projectId' | 'kind' | 'templateId' | 'toEmail' | 'toName' | 'fromEmail' | 'fromName' | 'replyTo' | 'subject' | 'html' | 'headers' | 'attachmentIds'
> & {
  /** Null for a message to no contact (a campaign's test send to an address that is not a contact). */
  contactId: string | null;
  text: string;
};

export type StartDelivery = (batch: { projectId: string; emailIds: string[] }) => Promise<unknown>;

/**
 * Where accepted emails enter delivery. Emails of one project that arrive within `maxWaitMs` of each other are
 * stored with one INSERT and handed to one delivery workflow; each caller's promise resolves only after both
 * happened, so a /v1/send response still means "stored and its delivery started". If the workflow cannot be
 * started the stored rows are marked FAILED and every caller in the batch gets a 503: nothing is reported accepted
 * that will not be sent, and nothing is sent that was not reported.
 */
export class EmailIntake {
  private readonly batcher: ProjectBatcher<NewEmail>;

  constructor(
    private readonly orm: MikroORM,
    private readonly delivery: { workflowIdFor: (firstEmailId: string) => string; start: StartDelivery },
    opts: { maxBatch: number; maxWaitMs: number },
  ) {
    this.batcher = new ProjectBatcher((projectId, emails) => this.persistAndStart(projectId, emails), opts);
  }

  /** Resolves once the emails are stored and their delivery workflow has started. */
  submit(projectId: string, emails: NewEmail[]): Promise<void> {
    return this.batcher.add(projectId, emails);
  }

  private async persistAndStart(projectId: string, emails: NewEmail[]): Promise<void> {
    const em = this.orm.em.fork();
    const emailIds = emails.map((e) => e.id);
    await persistThenStart({
      persist: () => insertEmails(em, projectId, this.delivery.workflowIdFor(emails[0]!.id), emails),
      start: () => this.delivery.start({ projectId, emailIds }),
      compensate: (_, err) =>
        sql(em).run(`update emails set status = 'FAILED', error = $1, updated_at = now() where id = any($2::uuid[])`, [
          `Could not be queued for delivery: ${(err as Error).message}`,
          emailIds,
        ]),
      unavailable: 'Delivery is temporarily unavailable; nothing was sent. Retry the request.',
      log: { projectId, emails: emailIds.length },
    });
  }

  /** Stores and starts whatever is waiting (on shutdown). */
  flushAll(): void {
    this.batcher.flushAll();
  }
}
