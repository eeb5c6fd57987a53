import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../db/sql';
import { detectMimeType } from 'nodemailer/lib/mime-funcs/mime-types';
import { uuidv7 } from '../ids';

/** An attachment as the API takes it: base64 content. */
export interface AttachmentInput {
  filename: string;
  content: string;
  contentType?: string;
  disposition?: 'attachment' | 'inline';
  contentId?: string;
}

/** An attachment checked and decoded, before it is stored. */
export interface DecodedAttachment {
  filename: string;
  contentType: string | null;
  disposition: 'attachment' | 'inline';
  contentId: string | null;
  content: Buffer;
}

/** What nodemailer needs to attach a stored file. */
export interface StoredAttachment {
  id: string;
  filename: string;
  contentType: string | null;
  disposition: 'attachment' | 'inline';
  contentId: string | null;
  content: Buffer;
}

/** Stores a send's attachments once (a missing content type comes from the file name's extension) (all its recipients' emails list the same ids); returns the ids in order. */
export async function storeAttachments(em: EntityManager, projectId: string, attachments: DecodedAttachment[]): Promise<string[]> {
  const ids = attachments.map(() => uuidv7());
  await sql(em).query(
    `insert into email_attachments (id, project_id, filename, content_type, disposition, content_id, size, content)
     values ${attachments.map((_, i) => `(${[1, 2, 3, 4, 5, 6, 7, 8].map((k) => `$${i * 8 + k}`).join(', ')})`).join(', ')}`,
    attachments.flatMap((a, i) => [ids[i], projectId, a.filename, a.contentType ?? detectMimeType(a.filename), a.disposition, a.contentId, a.content.length, a.content]),
  );
  return ids;
}

/**
 * Deletes the attachments of a call that was not accepted after all, unless one of its emails may still be sent: a
 * call with more recipients than one delivery batch is stored in several, and one of them may have started, or an
 * email could not be marked FAILED and the sweeper will restart it. Only the call's own emails can hold these ids.
 */
export async function deleteUnsentAttachments(em: EntityManager, ids: string[], emailIds: string[]): Promise<void> {
  await sql(em).query(
    `delete from email_attachments where id = any($1::uuid[])
     and not exists (select 1 from emails where id = any($2::uuid[]) and status <> 'FAILED')`,
    // As array literals: knex would spread a JS array into a list of placeholders.
    [`{${ids.join(',')}}`, `{${emailIds.join(',')}}`],
  );
}

/** Loads attachments by id (each once, however many emails of a batch carry it). */
export async function loadAttachments(em: EntityManager, ids: string[]): Promise<Map<string, StoredAttachment>> {
  if (!ids.length) return new Map();
  const rows = await sql(em).query<StoredAttachment>(
    `select id, filename, content_type as "contentType", disposition, content_id as "contentId", content
     from email_attachments where id = any($1::uuid[])`,
    // As an array literal: knex would spread a JS array into a list of placeholders.
    [`{${[...new Set(ids)].join(',')}}`],
  );
  return new Map(rows.map((r) => [r.id, r]));
}
