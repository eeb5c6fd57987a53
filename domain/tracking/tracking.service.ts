import type { EntityManager } from '@mikro-orm/postgresql';
import { sql, statement, type Statement } from '../db/sql';
import { SUBSCRIPTION_EVENT_NAME_SQL, insertEventsSql, sqlName, type RecordedEvent, type SystemEventData } from '../events/event-writer';
import { uuidv7 } from '../ids';

/**
 * What the public endpoints write. Each hit is one statement (counter update and event insert together), run as a
 * prepared statement because the open pixel is the hottest public path; the event outbox is written with it.
 */

type EngagementRow = { projectId: string; contactId: string; createdAt: Date };

/**
 * One statement: count the hit on the email (first_*_at set once, by the first hit), and record the event on the
 * email's contact. An email whose contact was deleted is still counted; an unknown email changes nothing.
 */
const engagementSql = (counter: 'open_count' | 'click_count', first: 'first_opened_at' | 'first_clicked_at', name: 'email.open' | 'email.click') => `
with hit as (
  update emails set ${counter} = ${counter} + 1, ${first} = coalesce(${first}, now())
  where id = $1::uuid
  returning project_id, contact_id
)
${insertEventsSql(
  { id: '$2::uuid', projectId: 'hit.project_id', contactId: 'hit.contact_id', name: sqlName(name), data: '$3::jsonb', source: 'SYSTEM', emailId: '$1::uuid' },
  'from hit where hit.contact_id is not null',
  'project_id as "projectId", contact_id as "contactId", created_at as "createdAt"',
)}`;

const OPEN = statement('mailwright_track_open', engagementSql('open_count', 'first_opened_at', 'email.open'));
const CLICK = statement('mailwright_track_click', engagementSql('click_count', 'first_clicked_at', 'email.click'));

async function recordEngagement(
  em: EntityManager,
  hit: Statement,
  event: { name: 'email.open'; emailId: string; data: SystemEventData['email.open'] } | { name: 'email.click'; emailId: string; data: SystemEventData['email.click'] },
): Promise<RecordedEvent | null> {
  const id = uuidv7();
  const [row] = await sql(em).query<EngagementRow>(hit, [event.emailId, id, JSON.stringify(event.data)]);
  if (!row) return null;
  return { id, ...row, ...event, source: 'SYSTEM' };
}

/** An open of the email (the pixel was fetched): `email.open`, open_count + 1, first_opened_at once. */
export function recordOpen(em: EntityManager, emailId: string): Promise<RecordedEvent | null> {
  return recordEngagement(em, OPEN, { name: 'email.open', emailId, data: {} });
}

/** A click on a link of the email: `email.click` with `{ url }`, click_count + 1, first_clicked_at once. */
export function recordClick(em: EntityManager, emailId: string, url: string): Promise<RecordedEvent | null> {
  return recordEngagement(em, CLICK, { name: 'email.click', emailId, data: { url } });
}

/** What the subscription pages show. */
export interface SubscriptionView {
  contactId: string;
  email: string;
  subscribed: boolean;
  projectName: string;
}

const MAILWRIGHT_FIND_SUBSCRIPTION = statement(
  'mailwright_find_subscription',
  `select c.id as "contactId", c.email, c.subscribed, p.name as "projectName"
  from contacts c join projects p on p.id = c.project_id where c.id = $1::uuid`,
);

export async function findSubscription(em: EntityManager, contactId: string): Promise<SubscriptionView | null> {
  const [row] = await sql(em).query<SubscriptionView>(
    MAILWRIGHT_FIND_SUBSCRIPTION,
    [contactId],
  );
  return row ?? null;
}

/** Whom a public link names: its contact and, for links composed into an email, that email. */
export interface LinkTarget {
  contactId: string;
  emailId?: string;
}

const MAILWRIGHT_CHANGE_SUBSCRIPTION = statement(
  'mailwright_change_subscription',
  `with updated as (
    update contacts set subscribed = $2::boolean, updated_at = now()
    where id = $1::uuid and subscribed <> $2::boolean
    returning id, project_id
  ),
  ev as (
    ${insertEventsSql(
      { id: '$3::uuid', projectId: 'u.project_id', contactId: 'u.id', name: SUBSCRIPTION_EVENT_NAME_SQL('$2::boolean'), data: '$4::jsonb', source: 'SYSTEM', emailId: '$5::uuid' },
      'from updated u',
      'created_at',
    )}
  )
  select c.id as "contactId", c.email, p.name as "projectName", ev.created_at as "eventAt"
  from contacts c join projects p on p.id = c.project_id left join ev on true
  where c.id = $1::uuid`,
);

/**
 * Sets a contact's subscription from a public link. The change and its `contact.subscribed` /
 * `contact.unsubscribed` event (data `source`, e.g. `{ via: 'unsubscribe_link' }`; `email_id` the link's email, so a
 * campaign's unsubscribes are attributed to it) are one statement, and the update only matches a row still in the
 * other state, so concurrent or repeated posts record the change once. Null when the contact does not exist.
 */
export async function changeSubscription(
  em: EntityManager,
  target: LinkTarget,
  subscribed: boolean,
  source: SystemEventData['contact.subscribed'],
): Promise<{ view: SubscriptionView; changed: boolean } | null> {
  const eventId = uuidv7();
  const [row] = await sql(em).query<Omit<SubscriptionView, 'subscribed'> & { eventAt: Date | null }>(
    MAILWRIGHT_CHANGE_SUBSCRIPTION,
    [target.contactId, subscribed, eventId, JSON.stringify(source), target.emailId ?? null],
  );
  if (!row) return null;
  const { eventAt, ...view } = row;
  return { view: { ...view, subscribed }, changed: eventAt !== null };
}
