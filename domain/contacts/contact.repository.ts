import type { EntityManager } from '@mikro-orm/postgresql';
import type { ContactData } from './contact.entity';
import { splitContactData, type DataChanges } from './contact-data';
import { normalizeEmail } from './email-address';
import { CONTACT_ROW_LOCK, contactChanged, mergedData, mergedSubscribed, newSubscribed, subscriptionEventSql } from './contact-merge';
import { uuidv7 } from '../ids';
import { logger } from '../logger';
import { insertEventsSql, type RecordedEvent, type SystemEventData } from '../events/event-writer';
import { sql, statement, type Sql } from '../db/sql';

export interface ContactRow {
  id: string;
  email: string;
  subscribed: boolean;
  data: ContactData;
  createdAt: Date;
  updatedAt: Date;
}

export interface UpsertResult {
  contact: ContactRow;
  isNew: boolean;
  /** True when an existing contact changed (data or subscription). */
  isUpdate: boolean;
  /** Stored data plus this call's non-persistent values: the template variables of this call. */
  variables: ContactData;
  /** contact.subscribed / contact.unsubscribed, recorded when an existing contact's subscription changed. */
  subscriptionEvent?: RecordedEvent;
  /** The tracked event, when one was asked for. */
  trackedEvent?: RecordedEvent;
}

export interface UpsertInput {
  projectId: string;
  email: string;
  subscribed?: boolean;
  data?: ContactData;
  /** Subscription of a new contact when `subscribed` is not given. */
  defaultSubscribed: boolean;
  /** Where the change came from, recorded on contact.subscribed / contact.unsubscribed (e.g. `{ via: 'send' }`). */
  source: SystemEventData['contact.subscribed'];
  /** A tracked event to record for the contact in the same statement. */
  track?: { name: string; data: Record<string, unknown> };
}

/** One contact's write as the batch statement takes it: the call, its normalised email and its split data. */
export interface BatchItem {
  input: UpsertInput;
  email: string;
  changes: DataChanges;
  ids: { contact: string; subEvent: string; track: string };
}

/** An upsert call made ready for the batch statement. */
export function batchItem(input: UpsertInput, changes: DataChanges = splitContactData(input.data)): BatchItem {
  return { input, email: normalizeEmail(input.email), changes, ids: { contact: uuidv7(), subEvent: uuidv7(), track: uuidv7() } };
}

/**
 * Many contacts of one project in one statement (contact-merge.ts has the rule): lock the existing rows in email order
 * (two batches never wait on each other in opposite orders), insert the missing ones, merge data and subscription,
 * write only real changes, and record each call's contact.subscribed / contact.unsubscribed and, when it has one, its
 * tracked event, all in the same statement, so a change and its events commit together, exactly once. Every email
 * appears once per batch. A row whose insert lost a race to another transaction comes back without a contact.
 */
const CONTACT_BATCH = statement(
  'mailwright_contact_batch',
  `
with input as (
  select * from unnest($2::text[], $3::jsonb[], $4::jsonb[], $5::boolean[], $6::boolean[], $7::uuid[], $8::uuid[], $9::jsonb[], $10::text[], $11::uuid[], $12::jsonb[])
    as t(email, set_data, unset_json, subscribed, default_subscribed, new_id, sub_event_id, sub_event_data, track_name, track_id, track_data)
),
locked as (
  select c.id, c.email, c.subscribed, c.data from contacts c
  where c.project_id = $1 and c.email = any($2::text[]) -- an array, not a subquery: the cached plan keeps the index
  order by c.email ${CONTACT_ROW_LOCK} of c
),
inserted as (
  insert into contacts (id, project_id, email, subscribed, data)
  select i.new_id, $1, i.email, ${newSubscribed('i.subscribed', 'i.default_subscribed')}, i.set_data
  from input i where not exists (select 1 from locked l where l.email = i.email)
  order by i.email
  on conflict (project_id, email) do nothing
  returning id, email, subscribed, data, created_at, updated_at
),
changes as (
  select l.id, l.email, l.subscribed as old_subscribed, ${mergedSubscribed('l.subscribed', 'i.subscribed')} as new_subscribed,
         l.data as old_data, ${mergedData('l.data', 'i.set_data', 'array(select jsonb_array_elements_text(i.unset_json))')} as new_data
  from locked l join input i on i.email = l.email
),
updated as (
  update contacts c set data = ch.new_data, subscribed = ch.new_subscribed, updated_at = now()
  from changes ch
  where c.id = ch.id and ${contactChanged({ oldData: 'ch.old_data', newData: 'ch.new_data', oldSubscribed: 'ch.old_subscribed', newSubscribed: 'ch.new_subscribed' })}
  returning c.id, c.created_at, c.updated_at
),
sub_event as (
  ${subscriptionEventSql(
    { id: 'i.sub_event_id', projectId: '$1', contactId: 'ch.id', newSubscribed: 'ch.new_subscribed', data: 'i.sub_event_data' },
    'from changes ch join input i on i.email = ch.email where ch.new_subscribed <> ch.old_subscribed',
    'id, contact_id, created_at',
  )}
),
contact as (
  select id, email, subscribed, data, created_at, updated_at, 'inserted' as outcome from inserted
  union all
  select ch.id, ch.email, ch.new_subscribed, ch.new_data, c.created_at, coalesce(u.updated_at, c.updated_at),
         case when u.id is null then 'unchanged' else 'updated' end
  from changes ch join contacts c on c.id = ch.id left join updated u on u.id = ch.id
),
tracked as (
  ${insertEventsSql(
    { id: 'i.track_id', projectId: '$1', contactId: 'c.id', name: 'i.track_name', data: 'i.track_data', source: 'TRACKED' },
    'from input i join contact c on c.email = i.email where i.track_name is not null',
    'id, contact_id, created_at',
  )}
)
select i.email, c.id as "contactId", c.subscribed, c.data, c.created_at as "createdAt", c.updated_at as "updatedAt", c.outcome,
       t.id as "eventId", t.created_at as "eventAt", s.id as "subEventId", s.created_at as "subEventAt"
from input i
left join contact c on c.email = i.email
left join tracked t on t.contact_id = c.id
left join sub_event s on s.contact_id = c.id`,
);

interface BatchRow {
  email: string;
  contactId: string | null;
  subscribed: boolean | null;
  data: ContactData | null;
  createdAt: Date | null;
  updatedAt: Date | null;
  outcome: 'inserted' | 'updated' | 'unchanged' | null;
  eventId: string | null;
  eventAt: Date | null;
  subEventId: string | null;
  subEventAt: Date | null;
}

/**
 * A batch chosen as a deadlock victim (40P01) or a serialization failure (40001) was rolled back whole, so it runs
 * again, up to three times. The locks are taken in email order, but not every writer of the same contacts keeps to it
 * (a CSV import chunk's statement may insert before it locks): rare, and not the callers' fault.
 */
async function retryOnDeadlock<T>(run: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await run();
    } catch (err) {
      const code = (err as { code?: unknown }).code;
      if (attempt >= 3 || (code !== '40P01' && code !== '40001')) throw err;
      logger.warn({ err, attempt }, 'contact batch rolled back by a lock conflict; running it again');
      await new Promise((r) => setTimeout(r, 5 + Math.random() * 20 * attempt));
    }
  }
}

/**
 * Writes the batch; returns each item's result in order, or null for an item whose contact another transaction
 * created (or deleted) while the statement ran: the caller runs that one again alone.
 */
export async function writeContactBatch(db: Sql, projectId: string, items: BatchItem[]): Promise<(UpsertResult | null)[]> {
  const rows = await retryOnDeadlock(() =>
    db.query<BatchRow>(CONTACT_BATCH, [
      projectId,
      items.map((i) => i.email),
      items.map((i) => JSON.stringify(i.changes.set)),
      items.map((i) => JSON.stringify(i.changes.unset)),
      items.map((i) => i.input.subscribed ?? null),
      items.map((i) => i.input.defaultSubscribed),
      items.map((i) => i.ids.contact),
      items.map((i) => i.ids.subEvent),
      items.map((i) => JSON.stringify(i.input.source)),
      items.map((i) => i.input.track?.name ?? null),
      items.map((i) => i.ids.track),
      items.map((i) => JSON.stringify(i.input.track?.data ?? {})),
    ]),
  );
  const byEmail = new Map(rows.map((r) => [r.email, r]));
  return items.map((item) => {
    const row = byEmail.get(item.email);
    if (!row?.contactId || (item.input.track && !row.eventId)) return null;
    const base = { projectId, contactId: row.contactId };
    const contact = { id: row.contactId, email: row.email, subscribed: row.subscribed!, data: row.data!, createdAt: row.createdAt!, updatedAt: row.updatedAt! };
    return {
      contact,
      isNew: row.outcome === 'inserted',
      isUpdate: row.outcome === 'updated',
      variables: { ...contact.data, ...item.changes.transient },
      subscriptionEvent: row.subEventId
        ? { ...base, id: row.subEventId, createdAt: row.subEventAt!, name: contact.subscribed ? 'contact.subscribed' : 'contact.unsubscribed', source: 'SYSTEM', data: item.input.source }
        : undefined,
      trackedEvent: row.eventId
        ? { ...base, id: row.eventId, createdAt: row.eventAt!, name: item.input.track!.name, source: 'TRACKED', data: item.input.track!.data }
        : undefined,
    };
  });
}

/**
 * Creates or updates one contact by (project, email), applying the contact data rules (SPEC.md › Contact): the batch
 * statement with one item. Safe under concurrency: the row lock serializes writes of one email, and a lost insert
 * race is run again.
 */
export async function upsertContact(em: EntityManager, input: UpsertInput, changes?: DataChanges): Promise<UpsertResult> {
  const item = batchItem(input, changes);
  for (let attempt = 0; attempt < 3; attempt++) {
    const [result] = await writeContactBatch(sql(em), input.projectId, [{ ...item, ids: attempt === 0 ? item.ids : batchItem(input, item.changes).ids }]);
    if (result) return result;
  }
  throw new Error(`Could not upsert contact ${item.email} after 3 attempts`);
}
