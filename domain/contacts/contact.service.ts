import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../db/sql';
import type { SystemEventData } from '../events/event-writer';
import { CONTACT_ROW_LOCK, contactChanged, mergedData, mergedSubscribed, subscriptionEventSql } from './contact-merge';
import { UniqueConstraintViolationException } from '@mikro-orm/core';
import type { ContactData } from './contact.entity';
import { upsertContact, type ContactRow, type UpsertResult } from './contact.repository';
import { splitContactData } from './contact-data';
import { normalizeEmail } from './email-address';
import { conflict, notFound } from '../errors';
import { decodeCursor, likeEscape, toPage, type CursorPage } from '../pagination';
import { uuidv7 } from '../ids';
import { countContacts } from './contact-counts';

const COLUMNS = 'id, email, subscribed, data, created_at as "createdAt", updated_at as "updatedAt"';

/** POST /contacts: create or upsert by email; new contacts are subscribed unless told otherwise. */
export async function createOrUpdateContact(
  em: EntityManager,
  projectId: string,
  input: { email: string; subscribed?: boolean; data?: ContactData },
): Promise<UpsertResult> {
  return upsertContact(em, { projectId, ...input, defaultSubscribed: true, source: { via: 'api' } });
}

export async function getContact(em: EntityManager, projectId: string, id: string): Promise<ContactRow> {
  const [row] = await sql(em).query<ContactRow>(`select ${COLUMNS} from contacts where project_id = $1 and id = $2`, [projectId, id]);
  if (!row) throw notFound('Contact');
  return row;
}

/**
 * PATCH /contacts/:id. `data` follows the same rules as everywhere (merge; null deletes; "" is ignored); a changed
 * `subscribed` records contact.subscribed / contact.unsubscribed with the change; a new `email` must be free in the
 * project (409 EMAIL_TAKEN).
 */
export async function updateContact(
  em: EntityManager,
  projectId: string,
  id: string,
  patch: { email?: string; subscribed?: boolean; data?: ContactData },
): Promise<ContactRow> {
  const changes = splitContactData(patch.data);
  const source: SystemEventData['contact.subscribed'] = { via: 'api' };
  // The lock every contact writer takes (contact-merge.ts); a new email changes a key, so FOR UPDATE then.
  const lock = patch.email === undefined ? CONTACT_ROW_LOCK : 'for update';
  const newData = mergedData('l.data', 'i.set_data', 'i.unset_keys');
  const subscribed = mergedSubscribed('l.subscribed', 'i.subscribed');
  let rows: ContactRow[];
  try {
    rows = await sql(em).query(
      `with input as (
         select $1::uuid as project_id, $2::uuid as id, $3::text as new_email, $4::jsonb as set_data,
                array(select jsonb_array_elements_text($5::jsonb)) as unset_keys, $6::boolean as subscribed,
                $7::uuid as sub_event_id, $8::jsonb as sub_event_data
       ),
       locked as (
         select c.id, c.email, c.subscribed, c.data from contacts c join input i on c.project_id = i.project_id and c.id = i.id
         ${lock} of c
       ),
       updated as (
         update contacts c
         set email = coalesce(i.new_email, l.email), data = ${newData}, subscribed = ${subscribed}, updated_at = now()
         from locked l, input i
         where c.id = l.id
           and ${contactChanged({ oldData: 'l.data', newData, oldSubscribed: 'l.subscribed', newSubscribed: subscribed, extra: 'coalesce(i.new_email, l.email) <> l.email' })}
         returning c.id, c.email, c.subscribed, c.data, c.created_at, c.updated_at
       ),
       sub_event as (
         ${subscriptionEventSql(
           { id: 'i.sub_event_id', projectId: 'i.project_id', contactId: 'u.id', newSubscribed: 'u.subscribed', data: 'i.sub_event_data' },
           'from updated u join locked l on l.id = u.id, input i where u.subscribed <> l.subscribed',
         )}
       )
       select c.id, c.email, c.subscribed, c.data, c.created_at as "createdAt", c.updated_at as "updatedAt"
       from (select * from updated union all
             select c.id, c.email, c.subscribed, c.data, c.created_at, c.updated_at from contacts c join locked l on l.id = c.id
             where not exists (select 1 from updated)) c`,
      [
        projectId,
        id,
        patch.email === undefined ? null : normalizeEmail(patch.email),
        JSON.stringify(changes.set),
        JSON.stringify(changes.unset),
        patch.subscribed ?? null,
        uuidv7(),
        JSON.stringify(source),
      ],
    );
  } catch (err) {
    if (err instanceof UniqueConstraintViolationException) {
      throw conflict('EMAIL_TAKEN', `Another contact in this project already has the email ${patch.email}`, 'Update or delete that contact instead.');
    }
    throw err;
  }
  const [row] = rows;
  if (!row) throw notFound('Contact');
  return row;
}

/** Deletes the contact and its events. */
export async function deleteContact(em: EntityManager, projectId: string, id: string): Promise<void> {
  const rows = await sql(em).query<{ id: string }>('delete from contacts where project_id = $1 and id = $2 returning id', [projectId, id]);
  if (rows.length === 0) throw notFound('Contact');
}

export interface ContactListQuery {
  limit: number;
  cursor?: string;
  search?: string;
  subscribed?: boolean;
}

/** Newest first, by id (UUIDv7). `total` is counted on the first page only. */
export async function listContacts(em: EntityManager, projectId: string, q: ContactListQuery): Promise<CursorPage<ContactRow>> {
  const after = decodeCursor(q.cursor);
  const params: unknown[] = [projectId];
  const where = ['project_id = $1'];
  if (q.subscribed !== undefined) where.push(`subscribed = $${params.push(q.subscribed)}`);
  if (q.search) where.push(`email like $${params.push(`%${likeEscape(q.search.trim().toLowerCase())}%`)} escape '\\'`);
  const filter = where.join(' and ');
  const page = [...params];
  const before = after ? ` and id < $${page.push(after)}` : '';
  const rows = await sql(em).query<ContactRow>(`select ${COLUMNS} from contacts where ${filter}${before} order by id desc limit $${page.push(q.limit + 1)}`, page);
  let total = 0;
  if (!after) {
    if (q.search) {
      const [count] = await sql(em).query<{ n: string }>(`select count(*) as n from contacts where ${filter}`, params);
      total = Number(count!.n);
    } else {
      total = await countContacts(em, projectId, q.subscribed);
    }
  }
  return toPage(rows, q.limit, total);
}

/** Which of up to 500 emails exist in the project; answers in the order asked, emails normalized. */
export async function lookupContacts(
  em: EntityManager,
  projectId: string,
  emails: string[],
): Promise<{ email: string; exists: boolean; id: string | null }[]> {
  const normalized = emails.map(normalizeEmail);
  const rows = await sql(em).query<{ id: string; email: string }>(
    `select id, email from contacts where project_id = $1 and email = any(array(select jsonb_array_elements_text($2::jsonb)))`,
    [projectId, JSON.stringify([...new Set(normalized)])],
  );
  const byEmail = new Map(rows.map((r) => [r.email, r.id]));
  return normalized.map((email) => ({ email, exists: byEmail.has(email), id: byEmail.get(email) ?? null }));
}
