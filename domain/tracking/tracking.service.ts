import type { EntityManager } from '@mikro-orm/postgresql';
import type { RecordedEvent } from '../events/event.service';
import { uuidv7 } from '../ids';
import { preparedQuery } from '../prepared';

/**
 * What the public endpoints write. Each hit is one statement (counter update and event insert together), run as a
 * prepared statement because the open pixel is the hottest public path; the event outbox is written with it.
 */

type EngagementRow = { projectId: string; contactId: string; createdAt: Date };

/**
 * One statement: count the hit on the email (first_*_at set once, by the first hit), and record the event on the
 * email's contact. An email whose contact was deleted is still counted; an unknown email changes nothing.
 */
const engagementSql = (counter: 'open_count' | 'click_count', first: 'first_opened_at' | 'first_clicked_at', name: string) => `
with hit as (
  update emails set ${counter} = ${counter} + 1, ${first} = coalesce(${first}, now())
  where id = $1::uuid
  returning project_id, contact_id
)
insert into events (id, project_id, contact_id, name, data, source, email_id, created_at)
select $2::uuid, hit.project_id, hit.contact_id, '${name}', $3::jsonb, 'SYSTEM', $1::uuid, now()
from hit where hit.contact_id is not null
returning project_id as "projectId", contact_id as "contactId", created_at as "createdAt"`;

const OPEN_SQL = engagementSql('open_count', 'first_opened_at', 'email.open');
const CLICK_SQL = engagementSql('click_count', 'first_clicked_at', 'email.click');

async function recordEngagement(
  em: EntityManager,
  statement: { name: string; sql: string },
  event: { name: 'email.open' | 'email.click'; emailId: string; data: Record<string, unknown> },
): Promise<RecordedEvent | null> {
  const id = uuidv7();
  const [row] = await preparedQuery<EngagementRow>(em, statement.name, statement.sql, [event.emailId, id, JSON.stringify(event.data)]);
  if (!row) return null;
  return { id, ...row, name: event.name, data: event.data, source: 'SYSTEM', emailId: event.emailId };
}

/** An open of the email (the pixel was fetched): `email.open`, open_count + 1, first_opened_at once. */
export function recordOpen(em: EntityManager, emailId: string): Promise<RecordedEvent | null> {
  return recordEngagement(em, { name: 'mailwright_track_open', sql: OPEN_SQL }, { name: 'email.open', emailId, data: {} });
}

/** A click on a link of the email: `email.click` with `{ url }`, click_count + 1, first_clicked_at once. */
export function recordClick(em: EntityManager, emailId: string, url: string): Promise<RecordedEvent | null> {
  return recordEngagement(em, { name: 'mailwright_track_click', sql: CLICK_SQL }, { name: 'email.click', emailId, data: { url } });
}

/** What the subscription pages show. */
export interface SubscriptionView {
  contactId: string;
  email: string;
  subscribed: boolean;
  projectName: string;
}

export async function findSubscription(em: EntityManager, contactId: string): Promise<SubscriptionView | null> {
  const [row] = await preparedQuery<SubscriptionView>(
    em,
    'mailwright_find_subscription',
    `select c.id as "contactId", c.email, c.subscribed, p.name as "projectName"
     from contacts c join projects p on p.id = c.project_id where c.id = $1::uuid`,
    [contactId],
  );
  return row ?? null;
}

/** Whom a public link names: its contact and, for links composed into an email, that email. */
export interface LinkTarget {
  contactId: string;
  emailId?: string;
}

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
  source: Record<string, unknown>,
): Promise<{ view: SubscriptionView; changed: boolean } | null> {
  const eventId = uuidv7();
  const [row] = await preparedQuery<Omit<SubscriptionView, 'subscribed'> & { eventAt: Date | null }>(
    em,
    'mailwright_change_subscription',
    `with updated as (
       update contacts set subscribed = $2::boolean, updated_at = now()
       where id = $1::uuid and subscribed <> $2::boolean
       returning id, project_id
     ),
     ev as (
       insert into events (id, project_id, contact_id, name, data, source, email_id, created_at)
       select $3::uuid, u.project_id, u.id, case when $2::boolean then 'contact.subscribed' else 'contact.unsubscribed' end,
              $4::jsonb, 'SYSTEM', $5::uuid, now()
       from updated u
       returning created_at
     )
     select c.id as "contactId", c.email, p.name as "projectName", ev.created_at as "eventAt"
     from contacts c join projects p on p.id = c.project_id left join ev on true
     where c.id = $1::uuid`,
    [target.contactId, subscribed, eventId, JSON.stringify(source), target.emailId ?? null],
  );
  if (!row) return null;
  const { eventAt, ...view } = row;
  return { view: { ...view, subscribed }, changed: eventAt !== null };
}
