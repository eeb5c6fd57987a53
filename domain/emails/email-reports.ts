import type { EntityManager } from '@mikro-orm/postgresql';
import { sql, statement } from '../db/sql';
import { uuidv7 } from '../ids';
import { insertEventsSql, recordEvents, sqlName, type NewEvent, type RecordedEvent, type SystemEventData, type SystemEventName } from '../events/event-writer';

/**
 * What a report about one sent email does, whoever reported it (Amazon SES through SNS, a DSN or ARF report that came
 * back to the inbound server, the provider webhooks): one set of state changes and events, so the reputation rates,
 * campaign stats, analytics and activity feed read the same thing from every source. The caller finds and locks the
 * email (`lockEmail`), makes sure the report is applied once (its own idempotency record in the same transaction),
 * and runs `applyEmailReport` inside that transaction.
 */

export interface LockedEmail {
  id: string;
  projectId: string;
  contactId: string | null;
  status: string;
  fromEmail: string;
  toEmail: string;
}

export type EmailReport =
  | { kind: 'delivered'; data: SystemEventData['email.delivered']; at?: string; smtpResponse?: string }
  | {
      kind: 'bounced';
      /** A permanent bounce ends the email as BOUNCED; any other is recorded and the status stays. */
      permanent: boolean;
      data: SystemEventData['email.bounced'];
      /** The remote reply, kept as the email's smtp_response. */
      response?: string;
      /** The email's `error` for people: what bounced and who said so. */
      error: string;
    }
  | { kind: 'complained'; data: SystemEventData['email.complained'] };

export type ReportEventRow = Omit<RecordedEvent, 'source'>;
const RETURNING_COLUMNS = `id, project_id as "projectId", contact_id as "contactId", email_id as "emailId", name, data, created_at as "createdAt"`;

const LOCKED_COLUMNS = `id, project_id as "projectId", contact_id as "contactId", status, from_email as "fromEmail", to_email as "toEmail"`;

/** The email, locked for the report's transaction (a concurrent report of the same email waits). */
export async function lockEmail(tx: EntityManager, emailId: string): Promise<LockedEmail | undefined> {
  return sql(tx).one<LockedEmail>(`select ${LOCKED_COLUMNS} from emails where id = $1 for update`, [emailId]);
}

const EMAILS_LOCK = statement('emails_lock_reports', `select ${LOCKED_COLUMNS} from emails where id = any($1::uuid[]) order by id for update`);

/** Several emails locked at once, in id order (two batches that share emails wait for each other, never deadlock). */
export async function lockEmails(tx: EntityManager, emailIds: readonly string[]): Promise<Map<string, LockedEmail>> {
  if (emailIds.length === 0) return new Map();
  const rows = await sql(tx).query<LockedEmail>(EMAILS_LOCK, [[...new Set(emailIds)]]);
  return new Map(rows.map((r) => [r.id, r]));
}

/**
 * The changes of one report inside the caller's transaction; null when the email's state makes it a no-op (a delivery
 * after a bounce, an event about an email whose contact was deleted).
 */
export async function applyEmailReport(tx: EntityManager, email: LockedEmail, report: EmailReport): Promise<ReportEventRow[] | null> {
  if (report.kind === 'delivered') {
    // Only from SENT: a bounce, failure or cancellation is never overwritten by a later or reordered delivery report.
    if (email.status !== 'SENT') return null;
    const at = report.at && !Number.isNaN(Date.parse(report.at)) ? new Date(report.at).toISOString() : null;
    return sql(tx).query<ReportEventRow>(
      `with upd as (
         update emails set status = 'DELIVERED', delivered_at = coalesce($1::timestamptz, now()), smtp_response = coalesce($2, smtp_response),
           error = null, updated_at = now()
         where id = $3 and status = 'SENT'
         returning id, project_id, contact_id
       )
       ${emailEventSql('$4::uuid', 'email.delivered', '$5::jsonb', 'from upd where contact_id is not null')}`,
      [at, report.smtpResponse ?? null, email.id, uuidv7(), JSON.stringify(report.data)],
    );
  }
  if (report.kind === 'bounced') return (await applyBounceReports(tx, [{ email, report }]))[0]!;
  const unsubscribed: SystemEventData['contact.unsubscribed'] = { via: 'complaint' };
  // The complaint and, when the contact was still subscribed, its unsubscription with contact.unsubscribed: one
  // statement, so a complaint never unsubscribes without its event or records the unsubscription twice.
  const rows = await sql(tx).query<ReportEventRow>(
    `with e as (select id, project_id, contact_id from emails where id = $1 and contact_id is not null),
     complained as (
       ${emailEventSql('$2::uuid', 'email.complained', '$3::jsonb', 'from e')}
     ),
     unsub as (
       update contacts c set subscribed = false, updated_at = now() from e
       where c.id = e.contact_id and c.subscribed
       returning c.id as contact_id, c.project_id, e.id
     ),
     unsub_event as (
       ${emailEventSql('$4::uuid', 'contact.unsubscribed', '$5::jsonb', 'from unsub')}
     )
     select * from complained union all select * from unsub_event`,
    [email.id, uuidv7(), JSON.stringify(report.data), uuidv7(), JSON.stringify(unsubscribed)],
  );
  return nonEmpty(rows);
}

export type BounceReport = Extract<EmailReport, { kind: 'bounced' }>;

const EMAILS_BOUNCE = statement(
  'emails_bounce',
  `update emails e set status = 'BOUNCED', smtp_response = coalesce(v.response, e.smtp_response), error = v.error, updated_at = now()
   from unnest($1::uuid[], $2::text[], $3::text[]) as v(id, response, error)
   where e.id = v.id and e.status in ('SENT', 'DELIVERED')`,
);

/**
 * Bounce reports about locked emails (`lockEmail`, `lockEmails`), applied in order as one by one, in two statements
 * whatever their number (a flood of DSNs is applied a batch at a time): one update of the emails a permanent bounce
 * ends, one insert of the events. Per report, in order: the events it recorded, or null when it changed nothing. A
 * permanent bounce ends an email that was SENT or DELIVERED (a receiver can accept, then bounce) as BOUNCED, and
 * changes nothing after that; any other bounce is recorded and the status stays. The emails' `status` in `items` is updated as the statement updates the rows.
 */
export async function applyBounceReports(tx: EntityManager, items: readonly { email: LockedEmail; report: BounceReport }[]): Promise<(ReportEventRow[] | null)[]> {
  const ended: { id: string; response: string | null; error: string }[] = [];
  const events: NewEvent[] = [];
  const decided = items.map(({ email, report }): NewEvent | [] | null => {
    if (report.permanent) {
      if (email.status !== 'SENT' && email.status !== 'DELIVERED') return null;
      email.status = 'BOUNCED';
      ended.push({ id: email.id, response: report.response ?? null, error: report.error });
    }
    // An email without a contact (deleted) gets no event: a permanent bounce still ended it ([]), any other did nothing.
    if (!email.contactId) return report.permanent ? [] : null;
    const event: NewEvent = { source: 'SYSTEM', projectId: email.projectId, contactId: email.contactId, emailId: email.id, name: 'email.bounced', data: report.data };
    events.push(event);
    return event;
  });
  if (ended.length) await sql(tx).run(EMAILS_BOUNCE, [ended.map((e) => e.id), ended.map((e) => e.response), ended.map((e) => e.error)]);
  const recorded = new Map((await recordEvents(sql(tx), events)).map((r, i) => [events[i], r]));
  return decided.map((e) => (e === null || Array.isArray(e) ? e : [withoutSource(recorded.get(e)!)]));
}

function withoutSource({ source: _source, ...row }: RecordedEvent): ReportEventRow {
  return row;
}

/** The event of a report about an email: rows of `from` carry the email's `id`, `project_id` and `contact_id`. */
function emailEventSql(id: string, name: SystemEventName, data: string, from: string): string {
  return insertEventsSql({ id, projectId: 'project_id', contactId: 'contact_id', name: sqlName(name), data, source: 'SYSTEM', emailId: 'id' }, from, RETURNING_COLUMNS);
}

/** An event-only report of an email whose contact was deleted changes nothing. */
const nonEmpty = (rows: ReportEventRow[]) => (rows.length > 0 ? rows : null);
