import type { EntityManager } from '@mikro-orm/postgresql';
import type { Transporter } from 'nodemailer';
import { insertEvents, dispatchEvents } from '../events/event.service';
import { emailDomain } from '../contacts/email-address';

export type DeliveryOutcome =
  | { status: 'SENT'; messageId: string; response: string }
  | { status: 'SKIPPED'; reason: string }
  | { status: 'REJECTED'; response: string };

interface EmailRow {
  id: string;
  projectId: string;
  contactId: string | null;
  status: string;
  toEmail: string;
  toName: string | null;
  fromEmail: string;
  fromName: string | null;
  replyTo: string | null;
  subject: string;
  html: string;
  text: string | null;
  headers: Record<string, string>;
}

/** Nodemailer's error for a reply the SMTP server gave (`responseCode`) or a connection problem (`code`). */
interface SmtpError extends Error {
  responseCode?: number;
  response?: string;
  code?: string;
}

/** A 5xx SMTP reply is permanent; everything else (4xx, timeouts, refused connections) is worth retrying. */
export function isPermanentSmtpFailure(err: unknown): boolean {
  const code = (err as SmtpError).responseCode;
  return typeof code === 'number' && code >= 500;
}

/**
 * Sends one stored email through the transport and records the outcome. Idempotent per email: an email already
 * in a final state is not sent again, and the Message-ID is derived from the email id so receivers can
 * de-duplicate the one case a retry cannot rule out (a crash after the relay accepted the message).
 */
export async function deliverStoredEmail(
  em: EntityManager,
  transport: Transporter,
  emailId: string,
  attempt: number,
): Promise<DeliveryOutcome> {
  const [row] = await em.execute<EmailRow[]>(
    `update emails set status = 'SENDING', attempts = attempts + 1, updated_at = now()
     where id = ? and status in ('QUEUED', 'SENDING')
     returning id, project_id as "projectId", contact_id as "contactId", status, to_email as "toEmail", to_name as "toName",
       from_email as "fromEmail", from_name as "fromName", reply_to as "replyTo", subject, html, text, headers`,
    [emailId],
  );
  if (!row) {
    const [current] = await em.execute<{ status: string }[]>('select status from emails where id = ?', [emailId]);
    return { status: 'SKIPPED', reason: current ? `already ${current.status}` : 'email no longer exists' };
  }
  const messageId = `<${row.id}@${emailDomain(row.fromEmail) || 'mailwright.local'}>`;
  try {
    const info = await transport.sendMail({
      messageId,
      from: row.fromName ? { name: row.fromName, address: row.fromEmail } : row.fromEmail,
      to: row.toName ? { name: row.toName, address: row.toEmail } : row.toEmail,
      replyTo: row.replyTo ?? undefined,
      subject: row.subject,
      html: row.html,
      text: row.text ?? undefined,
      headers: row.headers,
    });
    const response = String(info.response ?? '');
    await em.execute(
      `update emails set status = 'SENT', message_id = ?, smtp_response = ?, error = null, sent_at = now(), updated_at = now() where id = ?`,
      [messageId, response, row.id],
    );
    await recordEmailEvent(em, row, 'email.sent', { messageId, response });
    return { status: 'SENT', messageId, response };
  } catch (err) {
    const e = err as SmtpError;
    const detail = e.response ?? e.message;
    if (isPermanentSmtpFailure(err)) {
      await em.execute(
        `update emails set status = 'BOUNCED', smtp_response = ?, error = ?, updated_at = now() where id = ?`,
        [detail, `Rejected by the SMTP server (${e.responseCode})`, row.id],
      );
      await recordEmailEvent(em, row, 'email.bounced', { response: detail, responseCode: e.responseCode, attempt });
      return { status: 'REJECTED', response: detail };
    }
    await em.execute(`update emails set error = ?, updated_at = now() where id = ?`, [`Attempt ${attempt}: ${detail}`, row.id]);
    throw err;
  }
}

/** Marks an email FAILED once delivery has given up on it (retries exhausted or cancelled). */
export async function markEmailFailed(em: EntityManager, emailId: string, reason: string): Promise<void> {
  const [row] = await em.execute<EmailRow[]>(
    `update emails set status = 'FAILED', error = ?, updated_at = now() where id = ? and status in ('QUEUED', 'SENDING')
     returning id, project_id as "projectId", contact_id as "contactId"`,
    [reason, emailId],
  );
  if (row) await recordEmailEvent(em, row, 'email.failed', { reason });
}

async function recordEmailEvent(
  em: EntityManager,
  row: Pick<EmailRow, 'id' | 'projectId' | 'contactId'>,
  name: string,
  data: Record<string, unknown>,
): Promise<void> {
  if (!row.contactId) return;
  const events = await insertEvents(em, [
    { projectId: row.projectId, contactId: row.contactId, name, data, source: 'SYSTEM', emailId: row.id },
  ]);
  await dispatchEvents(events);
}
