import type { EntityManager } from '@mikro-orm/postgresql';
import type { ContactData } from './contact.entity';
import { splitContactData } from './contact-data';
import { normalizeEmail } from './email-address';
import { uuidv7 } from '../ids';
import type { RecordedEvent } from '../events/event.service';

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
  /** Set when an existing contact's subscription changed. */
  subscriptionChange?: 'subscribed' | 'unsubscribed';
  /** Stored data plus this call's non-persistent values: the template variables of this call. */
  variables: ContactData;
  /** The contact.subscribed / contact.unsubscribed event recorded with the change (when asked for). */
  subscriptionEvent?: RecordedEvent;
}

/**
 * One statement does the whole upsert: lock the existing row (FOR UPDATE sees the latest committed version), insert
 * when there is none, otherwise apply the data changes (`||` sets top-level keys, `-` removes the null ones) and the
 * subscription, writing only when something changed. When `emit_subscription_events` is set and an existing
 * contact's subscription changed, the same statement records contact.subscribed / contact.unsubscribed, so the
 * change and its event commit together, exactly once per real change.
 */
const UPSERT_SQL = `
with input as (
  select ?::uuid as project_id, ?::text as email, ?::jsonb as set_data,
         array(select jsonb_array_elements_text(?::jsonb)) as unset_keys,
         ?::boolean as subscribed, ?::boolean as default_subscribed, ?::uuid as new_id,
         ?::boolean as emit_subscription_events, ?::uuid as event_id, ?::jsonb as event_data
),
locked as (
  select c.id, c.email, c.subscribed, c.data, c.created_at, c.updated_at
  from contacts c join input i on c.project_id = i.project_id and c.email = i.email
  for update of c
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
event as (
  insert into events (id, project_id, contact_id, name, data, source, created_at)
  select i.event_id, i.project_id, u.id, case when u.subscribed then 'contact.subscribed' else 'contact.unsubscribed' end,
         i.event_data, 'SYSTEM', now()
  from updated u join locked l on l.id = u.id, input i
  where i.emit_subscription_events and u.subscribed <> l.subscribed
  returning id, name, created_at
)
select 'inserted' as outcome, id, email, subscribed, data, created_at as "createdAt", updated_at as "updatedAt", null::boolean as "previousSubscribed",
       null::uuid as "eventId", null::timestamptz as "eventAt" from inserted
union all
select 'updated', u.id, u.email, u.subscribed, u.data, u.created_at, u.updated_at, l.subscribed, e.id, e.created_at
from updated u join locked l on l.id = u.id left join event e on true
union all
select 'unchanged', l.id, l.email, l.subscribed, l.data, l.created_at, l.updated_at, l.subscribed, null, null
from locked l where not exists (select 1 from updated)`;

type UpsertRow = ContactRow & {
  outcome: 'inserted' | 'updated' | 'unchanged';
  previousSubscribed: boolean | null;
  eventId: string | null;
  eventAt: Date | null;
};

/**
 * Creates or updates a contact by (project, email), applying the contact data rules (SPEC.md › Contact). Safe under
 * concurrency: the row lock serializes upserts of one email, and a lost insert race is retried.
 */
export async function upsertContact(
  em: EntityManager,
  input: {
    projectId: string;
    email: string;
    subscribed?: boolean;
    data?: ContactData;
    defaultSubscribed: boolean;
    /** Record contact.subscribed / contact.unsubscribed when an existing contact's subscription changes. */
    subscriptionEvents?: { data: Record<string, unknown> };
  },
): Promise<UpsertResult> {
  const email = normalizeEmail(input.email);
  const changes = splitContactData(input.data);
  const params = [
    input.projectId,
    email,
    JSON.stringify(changes.set),
    JSON.stringify(changes.unset), // as JSON: the query builder would expand a JS array into a list
    input.subscribed ?? null,
    input.defaultSubscribed,
  ];
  for (let attempt = 0; attempt < 3; attempt++) {
    const [row] = await em.execute<UpsertRow[]>(UPSERT_SQL, [
      ...params,
      uuidv7(),
      Boolean(input.subscriptionEvents),
      uuidv7(),
      JSON.stringify(input.subscriptionEvents?.data ?? {}),
    ]);
    if (!row) continue; // another transaction inserted this email between our lock and our insert: run again
    const { outcome, previousSubscribed, eventId, eventAt, ...contact } = row;
    const changed = outcome === 'updated' && previousSubscribed !== contact.subscribed;
    const change = changed ? (contact.subscribed ? 'subscribed' : 'unsubscribed') : undefined;
    return {
      contact,
      isNew: outcome === 'inserted',
      isUpdate: outcome === 'updated',
      subscriptionChange: change,
      variables: { ...contact.data, ...changes.transient },
      subscriptionEvent:
        eventId && change
          ? { id: eventId, createdAt: eventAt!, projectId: input.projectId, contactId: contact.id, name: `contact.${change}`, source: 'SYSTEM', data: input.subscriptionEvents!.data }
          : undefined,
    };
  }
  throw new Error(`Could not upsert contact ${email} after 3 attempts`);
}
