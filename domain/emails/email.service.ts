import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../db/sql';
import { notFound } from '../errors';
import type { EmailRow } from './email.entity';
import { selectList } from '../db/rows';

const RECORD_COLUMNS = [
  'id', 'kind', 'status', 'contactId', 'templateId', 'toEmail', 'toName', 'fromEmail', 'fromName', 'replyTo', 'subject', 'messageId', 'smtpResponse',
  'error', 'attempts', 'sentAt', 'deliveredAt', 'firstOpenedAt', 'firstClickedAt', 'openCount', 'clickCount', 'createdAt', 'updatedAt',
] as const satisfies readonly (keyof EmailRow)[];

/** What GET /emails/:id shows: the row's history columns and how many attachments it carries. */
export type EmailRecord = Pick<EmailRow, (typeof RECORD_COLUMNS)[number]> & { attachments: number };

/** One email of the project; 404 for another project's. */
export async function getEmail(em: EntityManager, projectId: string, id: string): Promise<EmailRecord> {
  const [row] = await sql(em).query<EmailRecord>(
    `select ${selectList<EmailRow>(RECORD_COLUMNS)}, cardinality(attachment_ids) as attachments from emails where id = $1 and project_id = $2`,
    [id, projectId],
  );
  if (!row) throw notFound('Email');
  return row;
}
