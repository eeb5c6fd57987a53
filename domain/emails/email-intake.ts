import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import { sql, statement } from '../db/sql';
import { persistThenStart } from '../workflow-start';
import type { EmailRow } from './email.entity';
import { ProjectBatcher } from '../project-batcher';
import { suppressedReasonSql } from '../suppressions/suppression.repository';
import { suppressedErrorSql } from '../suppressions/suppression.service';
import type { SuppressionReason } from '../suppressions/suppression.entity';
import { AUTOMATION_RUN_ID_PREFIX } from '../../temporal/workflow-ids';

// The batch's suppressed addresses are found by the insert itself (one probe of the suppressions index per email, no
// round trip of its own): their emails are stored SUPPRESSED, with no delivery workflow, and returned. `sup` holds only
// ids and reasons, so the bodies are not copied into a second CTE.
const EMAIL_INTAKE_INSERT = statement(
  'email_intake_insert',
  `with sup as (
    select u.id, ${suppressedReasonSql('$1', 'u.to_email')} as reason from unnest($3::uuid[], $7::text[]) as u(id, to_email)
  ),
  ins as (
    insert into emails (id, project_id, contact_id, kind, template_id, to_email, to_name, from_email, from_name, reply_to, subject, html, text, headers, attachment_ids,
      workflow_id, status, error, queued_at)
    select t.id, $1, t.contact_id, t.kind, t.template_id, t.to_email, t.to_name, t.from_email, t.from_name, t.reply_to, t.subject, t.html, t.text, t.headers,
      t.attachment_ids::uuid[], case when sup.reason is null then $2 end, case when sup.reason is null then 'QUEUED' else 'SUPPRESSED' end,
      ${suppressedErrorSql('sup.reason')}, case when sup.reason is null and not starts_with($2::text, '${AUTOMATION_RUN_ID_PREFIX}') then now() end
    from unnest($3::uuid[], $4::uuid[], $5::text[], $6::uuid[], $7::text[], $8::text[], $9::text[], $10::text[], $11::text[], $12::text[], $13::text[],
      $14::text[], $15::jsonb[], $16::text[])
      as t(id, contact_id, kind, template_id, to_email, to_name, from_email, from_name, reply_to, subject, html, text, headers, attachment_ids)
    join sup on sup.id = t.id
  )
  select id, reason from sup where reason is not null`,
);

/** The emails of a batch whose address is on the suppression list (stored SUPPRESSED, never delivered), by id. */
export type SuppressedEmails = ReadonlyMap<string, SuppressionReason>;

/**
 * Stores accepted emails with one statement, under the delivery workflow's id. The id is stored with the emails, so
 * the sweeper can restart exactly this delivery if the process dies before the start (a second start of a running id
 * is refused: never two deliveries of one email). A prepared statement over arrays (planned once per connection): a
 * batch carries every email's HTML and text, which the ORM's raw queries would inline into a new SQL text each time.
 * Emails to a suppressed address are stored SUPPRESSED instead (no workflow id): the caller delivers only the others.
 */
export async function insertEmails(em: EntityManager, projectId: string, workflowId: string, emails: NewEmail[]): Promise<SuppressedEmails> {
  const suppressed = await sql(em).query<{ id: string; reason: SuppressionReason }>(
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
  return new Map(suppressed.map((r) => [r.id, r.reason]));
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
 * that will not be sent, and nothing is sent that was not reported. Emails to suppressed addresses are stored
 * SUPPRESSED by the same INSERT and left out of the delivery (a batch of only those starts none); each caller learns
 * which of its emails they were.
 */
export class EmailIntake {
  private readonly batcher: ProjectBatcher<NewEmail, SuppressionReason | null>;

  constructor(
    private readonly orm: MikroORM,
    private readonly delivery: { workflowIdFor: (firstEmailId: string) => string; start: StartDelivery },
    opts: { maxBatch: number; maxWaitMs: number },
  ) {
    this.batcher = new ProjectBatcher((projectId, emails) => this.persistAndStart(projectId, emails), opts);
  }

  /**
   * Resolves once the emails are stored and their delivery workflow has started, with each email's suppression
   * reason, in order: null for an email queued for delivery, the reason for one stored SUPPRESSED.
   */
  submit(projectId: string, emails: NewEmail[]): Promise<(SuppressionReason | null)[]> {
    return this.batcher.add(projectId, emails);
  }

  private async persistAndStart(projectId: string, emails: NewEmail[]): Promise<(email: NewEmail) => SuppressionReason | null> {
    const em = this.orm.em.fork();
    const { suppressed } = await persistThenStart({
      persist: async () => {
        const suppressed = await insertEmails(em, projectId, this.delivery.workflowIdFor(emails[0]!.id), emails);
        const queued = emails.filter((e) => !suppressed.has(e.id)).map((e) => e.id);
        // A delivery's workflow id names its first email; when the batch's first email was suppressed, the next one
        // (what the start derives from the ids it gets), so the sweeper would restart the same workflow id.
        if (queued.length && queued[0] !== emails[0]!.id) {
          await sql(em).run('update emails set workflow_id = $1 where id = any($2::uuid[])', [this.delivery.workflowIdFor(queued[0]!), queued]);
        }
        return { suppressed, queued };
      },
      start: async ({ queued }) => {
        if (queued.length) await this.delivery.start({ projectId, emailIds: queued });
      },
      compensate: ({ queued }, err) =>
        sql(em).run(`update emails set status = 'FAILED', error = $1, queued_at = null, updated_at = now() where id = any($2::uuid[])`, [
          `Could not be queued for delivery: ${(err as Error).message}`,
          queued,
        ]),
      unavailable: 'Delivery is temporarily unavailable; nothing was sent. Retry the request.',
      log: { projectId, emails: emails.length },
    });
    return (email) => suppressed.get(email.id) ?? null;
  }

  /** Stores and starts whatever is waiting (on shutdown). */
  flushAll(): void {
    this.batcher.flushAll();
  }
}
