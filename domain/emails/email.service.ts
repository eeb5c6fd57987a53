import type { EntityManager } from '@mikro-orm/postgresql';
import { notFound } from '../errors';
import type { EmailStatus } from './email.entity';

export interface EmailRecord {
  id: string;
  kind: 'TRANSACTIONAL' | 'MARKETING';
  status: EmailStatus;
  contactId: string | null;
  templateId: string | null;
  toEmail: string;
  toName: string | null;
  fromEmail: string;
  fromName: string | null;
  replyTo: string | null;
  subject: string;
  messageId: string | null;
  smtpResponse: string | null;
  error: string | null;
  attempts: number;
  attachments: number;
  sentAt: Date | null;
  deliveredAt: Date | null;
  firstOpenedAt: Date | null;
  firstClickedAt: Date | null;
  openCount: number;
  clickCount: number;
  createdAt: Date;
  updatedAt: Date;
}

/** One email of the project; 404 for another project's. */
export async function getEmail(em: EntityManager, projectId: string, id: string): Promise<EmailRecord> {
  const [row] = await em.execute<EmailRecord[]>(
    `select id, kind, status, contact_id as "contactId", template_id as "templateId", to_email as "toEmail", to_name as "toName",
       from_email as "fromEmail", from_name as "fromName", reply_to as "replyTo", subject, message_id as "messageId",
       smtp_response as "smtpResponse", error, attempts, cardinality(attachment_ids) as attachments, sent_at as "sentAt",
       delivered_at as "deliveredAt", first_opened_at as "firstOpenedAt", first_clicked_at as "firstClickedAt",
       open_count as "openCount", click_count as "clickCount", created_at as "createdAt", updated_at as "updatedAt"
     from emails where id = ? and project_id = ?`,
    [id, projectId],
  );
  if (!row) throw notFound('Email');
  return row;
}
