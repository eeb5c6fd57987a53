import { SQL_UUIDV7, uuidv7 } from '../ids';
import { statement, type Sql } from '../db/sql';

/**
 * The one writer of `events` (README › Architecture › Events). Every event the service records goes through
 * `recordEvents` (rows built in JavaScript) or `insertEventsSql` (set-based statements whose rows come from a CTE);
 * a unit test fails when anything else inserts into `events`. Whatever is inserted, the `events_outbox` trigger queues
 * it for the registered consumers in the same transaction, and the worker's dispatcher hands it over after the commit.
 */

/**
 * Who reported a delivery outcome: the relay's own SMTP reply while sending, a provider's report (Amazon SES, or a
 * relay's webhook: SendGrid, Mailgun, Postmark, Resend), or
 * mail that came back to the inbound server: a delivery status notification (`dsn`, RFC 3464 or a mail system's
 * text), a feedback report (`arf`, RFC 5965).
 */
type ReportSource = 'smtp' | 'ses' | 'dsn' | 'arf' | ReportProvider;

/** Relays whose webhooks post delivery reports (domain/webhooks/provider-reports.ts). */
export type ReportProvider = 'sendgrid' | 'mailgun' | 'postmark' | 'resend';

/** What a provider webhook adds to a report: the provider's ids of the event and of the message. */
interface ProviderIds {
  providerEventId?: string;
  providerMessageId?: string;
}

/** What the inbound server adds to a report it took from mail (domain/inbound): the stored message it came in. */
interface InboundReport {
  /** The `inbound_messages` row (GET /inbound/:id shows it). */
  inboundId?: string;
  /** `rfc3464`: read from a delivery-status report; `heuristic`: inferred from a mail system's text. */
  format?: 'rfc3464' | 'heuristic' | 'arf';
}

/** How a subscription changed: the API, a form or link, a job, or a report. */
type SubscriptionVia = 'api' | 'send' | 'track' | 'import' | 'bulk' | 'unsubscribe_link' | 'complaint' | 'email' | (string & {});

/**
 * The payload of each event the service emits, one shape per name. Optional keys are left out when unknown (never
 * null). `email.*` events carry the email's id in the row's `email_id`, not in the payload.
 */
export interface SystemEventData {
  'email.sent': { messageId: string; response: string };
  'email.delivered': {
    source: ReportSource;
    smtpResponse?: string;
    reportingMTA?: string;
    processingTimeMillis?: number;
    timestamp?: string;
    sesMessageId?: string;
  } & ProviderIds;
  'email.bounced': {
    source: ReportSource;
    /** `Permanent` ends the email as BOUNCED; `Transient` and `Undetermined` are recorded and the status stays. */
    bounceType: 'Permanent' | 'Transient' | 'Undetermined';
    /** Set for a bounce that is not permanent (the provider keeps retrying). */
    transient?: true;
    /** The relay's reply (source `smtp`). */
    response?: string;
    /** The delivery attempt the relay refused (source `smtp`, transactional mail). */
    attempt?: number;
    /** The campaign of a campaign message (source `smtp`). */
    campaignId?: string;
    bounceSubType?: string;
    diagnosticCode?: string;
    status?: string;
    action?: string;
    reportingMTA?: string;
    feedbackId?: string;
    timestamp?: string;
    sesMessageId?: string;
  } & InboundReport &
    ProviderIds;
  'email.complained': {
    source: ReportSource;
    complaintFeedbackType?: string;
    complaintSubType?: string;
    userAgent?: string;
    arrivalDate?: string;
    feedbackId?: string;
    timestamp?: string;
    sesMessageId?: string;
  } & InboundReport &
    ProviderIds;
  /** A person answered the email (the inbound server received the reply). */
  'email.replied': { inboundId: string; from: string; subject: string; excerpt: string };
  /** An automatic answer to the email (RFC 3834 responders, out-of-office): never a bounce. */
  'email.auto_replied': { inboundId: string; from?: string; subject: string; reason: string };
  'email.failed': { reason: string };
  'email.open': Record<string, never>;
  'email.click': { url: string };
  'contact.subscribed': { via: SubscriptionVia } & Record<string, unknown>;
  'contact.unsubscribed': { via: SubscriptionVia } & Record<string, unknown>;
}

export type SystemEventName = keyof SystemEventData;

/** `segment.<slug>.entry` / `.exit`: one payload for both. */
export interface SegmentEventData {
  segmentId: string;
  segmentName: string;
  via: 'segment.compute' | (string & {});
}

interface EventBase {
  projectId: string;
  contactId: string;
  emailId?: string;
}

/** An event to record: a service event with its payload, a segment transition, or a client's tracked event. */
export type NewEvent =
  | { [N in SystemEventName]: EventBase & { source: 'SYSTEM'; name: N; data: SystemEventData[N] } }[SystemEventName]
  | (EventBase & { source: 'SYSTEM'; name: `segment.${string}.${'entry' | 'exit'}`; data: SegmentEventData })
  | (EventBase & { source: 'TRACKED'; name: string; data?: Record<string, unknown> });

export type RecordedEvent = NewEvent & { id: string; createdAt: Date };

const COLUMNS = 'id, project_id, contact_id, name, data, source, email_id, created_at';

const EVENTS_RECORD = statement(
  'events_record',
  `insert into events (${COLUMNS})
  select id, project_id, contact_id, name, data, source, email_id, $8::timestamptz
  from unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::text[], $5::jsonb[], $6::text[], $7::uuid[])
    as v(id, project_id, contact_id, name, data, source, email_id)`,
);

/** Records the events in one statement, in the caller's transaction when `db` is one; returns them with id and time. */
export async function recordEvents(db: Sql, events: readonly NewEvent[]): Promise<RecordedEvent[]> {
  if (events.length === 0) return [];
  const now = new Date();
  const recorded = events.map((e) => ({ ...e, id: uuidv7(), createdAt: now }) as RecordedEvent);
  await db.run(
    EVENTS_RECORD,
    [
      recorded.map((e) => e.id),
      recorded.map((e) => e.projectId),
      recorded.map((e) => e.contactId),
      recorded.map((e) => e.name),
      recorded.map((e) => JSON.stringify(e.data ?? {})),
      recorded.map((e) => e.source),
      recorded.map((e) => e.emailId ?? null),
      now,
    ],
  );
  return recorded;
}

/** A payload in SQL: each key of the event's payload type given as an SQL expression (`null` drops the key). */
export type EventDataSql<N extends SystemEventName> = { [K in keyof SystemEventData[N]]-?: string };

/**
 * `jsonb_build_object(...)` of a payload whose values come from SQL: the keys are checked against the payload type of
 * `name`. Keys whose expression is null at run time are dropped, as `recordEvents` drops undefined ones.
 */
export function eventDataSql<N extends SystemEventName>(_name: N, fields: Partial<EventDataSql<N>>): string {
  const pairs = Object.entries(fields as Record<string, string>).map(([k, expr]) => `'${k.replace(/'/g, "''")}', ${expr}`);
  return `jsonb_strip_nulls(jsonb_build_object(${pairs.join(', ')}))`;
}

/** The SQL of one event row of a set-based insert: each column an SQL expression over the statement's `from`. */
export interface EventRowSql {
  /** Defaults to a UUIDv7 made in SQL per row. */
  id?: string;
  projectId: string;
  contactId: string;
  /** An SQL expression: a quoted literal (`sqlName('email.sent')`) or a column holding the name. */
  name: string;
  data: string;
  source: 'SYSTEM' | 'TRACKED';
  emailId?: string;
}

/**
 * `insert into events ... select <row> <from> [returning ...]` for a statement (or a CTE of one) whose rows come
 * from SQL. `from` is the rest of the select: `from upd where contact_id is not null`.
 */
export function insertEventsSql(row: EventRowSql, from: string, returning?: string): string {
  return `insert into events (${COLUMNS})
    select ${row.id ?? SQL_UUIDV7}, ${row.projectId}, ${row.contactId}, ${row.name}, ${row.data}, '${row.source}', ${row.emailId ?? 'null'}, now()
    ${from}${returning ? `\n    returning ${returning}` : ''}`;
}

/** A service event's name as an SQL literal, checked against the payload types. */
export function sqlName(name: SystemEventName): string {
  return `'${name}'`;
}

/** `contact.subscribed` or `contact.unsubscribed` in SQL, by a boolean expression of the new state. */
export const SUBSCRIPTION_EVENT_NAME_SQL = (subscribed: string): string =>
  `case when ${subscribed} then ${sqlName('contact.subscribed')} else ${sqlName('contact.unsubscribed')} end`;
