import type { EntityManager } from '@mikro-orm/postgresql';
import type { ContactData } from './contact.entity';
import { splitContactData } from './contact-data';
import { normalizeEmail } from './email-address';
import { uuidv7 } from '../ids';
import { SUBSCRIPTION_EVENT_NAME_SQL, insertEventsSql, type RecordedEvent, type SystemEventData } from '../events/event-writer';
import { sql, statement } from '../db/sql';

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

/**
 * One statement does the whole upsert: lock the existing row (FOR NO KEY UPDATE, as in contact-intake.ts; it sees the
 * latest committed version), insert when there is none, otherwise apply the data changes (`||` sets top-level keys,
 * `-` removes the null ones) and the subscription, writing only when something changed. When an existing contact's
 * subscription changes, the same statement records contact.subscribed / contact.unsubscribed, and when `track_name`
 * is given it records that tracked event too: the change and its events commit together, exactly once.
 */
const UPSERT_SQL = `
with input as (
  select $1::uuid as project_id, $2::text as email, $3::jsonb as set_data,
         array(select jsonb_array_elements_text($4::jsonb)) as unset_keys,
         $5::boolean as subscribed, $6::boolean as default_subscribed, $7::uuid as new_id,
         $8::uuid as sub_event_id, $9::jsonb as sub_event_data,
         $10::text as track_name, $11::uuid as track_id, $12::jsonb as track_data
),
locked as (
  select c.id, c.email, c.subscribed, c.data, c.created_at, c.updated_at
  from contacts c join input i on c.project_id = i.project_id and c.email = i.email
  for no key update of c
),
inserted as (
  insert into contacts (id, project_id, email, subscribed, data)
  select i.new_id, i.project_id, i.email, coalesce(i.subscribed, i.default_subscribed), i.set_data
  from input i where not exists (select 1 from locked)
  on conflict (project_id, email) do nothing
  returning id, email, subscribed, data, created_at, updated_at
),
updated as (
  update contacts c
  set data = (l.data || i.set_data) - i.unset_keys, subscribed = coalesce(i.subscribed, l.subscribed), updated_at = now()
  from locked l, input i
  where c.id = l.id
    and ((l.data || i.set_data) - i.unset_keys <> l.data or coalesce(i.subscribed, l.subscribed) <> l.subscribed)
  returning c.id, c.email, c.subscribed, c.data, c.created_at, c.updated_at
),
sub_event as (
  ${insertEventsSql({ id: 'i.sub_event_id', projectId: 'i.project_id', contactId: 'u.id', name: SUBSCRIPTION_EVENT_NAME_SQL('u.subscribed'), data: 'i.sub_event_data', source: 'SYSTEM' }, 'from updated u join locked l on l.id = u.id, input i where u.subscribed <> l.subscribed', 'id, created_at')}
),
tracked as (
  ${insertEventsSql(
    { id: 'i.track_id', projectId: 'i.project_id', contactId: 'c.id', name: 'i.track_name', data: 'i.track_data', source: 'TRACKED' },
    'from (select id from inserted union all select id from locked) c, input i where i.track_name is not null',
    'id, created_at',
  )}
),
result as (
  select 'inserted' as outcome, id, email, subscribed, data, created_at, updated_at from inserted
  union all
  select 'updated', u.id, u.email, u.subscribed, u.data, u.created_at, u.updated_at from updated u
  union all
  select 'unchanged', l.id, l.email, l.subscribed, l.data, l.created_at, l.updated_at from locked l where not exists (select 1 from updated)
)
select r.outcome, r.id, r.email, r.subscribed, r.data, r.created_at as "createdAt", r.updated_at as "updatedAt",
       s.id as "subEventId", s.created_at as "subEventAt",
       t.id as "trackedId", t.created_at as "trackedAt"
from result r left join sub_event s on true left join tracked t on true`;

type UpsertRow = ContactRow & {
  outcome: 'inserted' | 'updated' | 'unchanged';
  subEventId: string | null;
  subEventAt: Date | null;
  trackedId: string | null;
  trackedAt: Date | null;
};

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

const MAILWRIGHT_UPSERT_CONTACT = statement('mailwright_upsert_contact', UPSERT_SQL);

/**
 * Creates or updates a contact by (project, email), applying the contact data rules (SPEC.md › Contact). Safe under
 * concurrency: the row lock serializes upserts of one email, and a lost insert race is retried.
 */
export async function upsertContact(em: EntityManager, input: UpsertInput): Promise<UpsertResult> {
  const email = normalizeEmail(input.email);
  const changes = splitContactData(input.data);
  for (let attempt = 0; attempt < 3; attempt++) {
    const row = await sql(em).one<UpsertRow>(
    MAILWRIGHT_UPSERT_CONTACT,
    [
      input.projectId,
      email,
      JSON.stringify(changes.set),
      JSON.stringify(changes.unset), // as JSON: the query builder would expand a JS array into a list
      input.subscribed ?? null,
      input.defaultSubscribed,
      uuidv7(),
      uuidv7(),
      JSON.stringify(input.source),
      input.track?.name ?? null,
      uuidv7(),
      JSON.stringify(input.track?.data ?? {}),
    ],
  );
    if (!row) continue; // another transaction inserted this email between our lock and our insert: run again
    const { outcome, subEventId, subEventAt, trackedId, trackedAt, ...contact } = row;
    const base = { projectId: input.projectId, contactId: contact.id };
    return {
      contact,
      isNew: outcome === 'inserted',
      isUpdate: outcome === 'updated',
      variables: { ...contact.data, ...changes.transient },
      subscriptionEvent: subEventId
        ? { ...base, id: subEventId, createdAt: subEventAt!, name: contact.subscribed ? 'contact.subscribed' : 'contact.unsubscribed', source: 'SYSTEM', data: input.source }
        : undefined,
      trackedEvent: trackedId
        ? { ...base, id: trackedId, createdAt: trackedAt!, name: input.track!.name, source: 'TRACKED', data: input.track!.data }
        : undefined,
    };
  }
  throw new Error(`Could not upsert contact ${email} after 3 attempts`);
}
