import { SUBSCRIPTION_EVENT_NAME_SQL, insertEventsSql } from '../events/event-writer';

/**
 * The contact merge rule (SPEC.md › Contact) as SQL, written once and used by every statement that writes a contact:
 * the intake batch (/v1/track, /v1/send, POST /contacts: contact.repository.ts), the CSV import's chunks
 * (contact-import.ts) and PATCH /contacts/:id (contact.service.ts). Values arrive already split by
 * `splitContactData` (contact-data.ts: reserved keys dropped, "" ignored, nulls as keys to remove, transient values
 * kept out), so the rule left for SQL is the merge itself, the subscription, "write only on a real change" and its
 * event. test/integration/contact-upsert-contract.test.ts runs the same cases through every path.
 */

/**
 * The row lock every writer of existing contacts takes, in email order: the strength of the UPDATE itself, so it does
 * not wait on the FOR KEY SHARE locks that rows referring to a contact hold (the analytics consumer's
 * contact_last_event rows, in contact-id order: FOR UPDATE against them deadlocked, see contact-intake.ts). A write
 * that changes the email changes a key and locks FOR UPDATE instead.
 */
export const CONTACT_ROW_LOCK = 'for no key update';

/** The stored data after a write: set keys replace, removed keys go (`unsetKeys` a text[] expression). */
export const mergedData = (old: string, set: string, unsetKeys: string): string => `(${old} || ${set}) - ${unsetKeys}`;

/** The subscription after a write: the given state, or the stored one when none is given. */
export const mergedSubscribed = (old: string, given: string): string => `coalesce(${given}, ${old})`;

/** The subscription of a new contact: the given state, or the path's default. */
export const newSubscribed = (given: string, fallback: string): string => `coalesce(${given}, ${fallback})`;

/** Whether a write changes anything (only then is the row updated and `updated_at` moved). */
export const contactChanged = (c: { oldData: string; newData: string; oldSubscribed: string; newSubscribed: string; extra?: string }): string =>
  `(${c.newData} <> ${c.oldData} or ${c.newSubscribed} <> ${c.oldSubscribed}${c.extra ? ` or ${c.extra}` : ''})`;

/**
 * The insert of `contact.subscribed` / `contact.unsubscribed` for the rows of `from` whose subscription really changed
 * (`from` must end with a condition on the old and new states, e.g. `... where new <> old`).
 */
export function subscriptionEventSql(row: { id: string; projectId: string; contactId: string; newSubscribed: string; data: string }, from: string, returning?: string): string {
  return insertEventsSql(
    { id: row.id, projectId: row.projectId, contactId: row.contactId, name: SUBSCRIPTION_EVENT_NAME_SQL(row.newSubscribed), data: row.data, source: 'SYSTEM' },
    from,
    returning,
  );
}
