import type { MikroORM } from '@mikro-orm/postgresql';
import { splitContactData, type DataChanges } from './contact-data';
import { normalizeEmail } from './email-address';
import { upsertContact, type UpsertInput, type UpsertResult } from './contact.repository';
import type { ContactData } from './contact.entity';
import { sql, statement } from '../db/sql';
import { SUBSCRIPTION_EVENT_NAME_SQL, insertEventsSql } from '../events/event-writer';
import { uuidv7 } from '../ids';
import { ProjectBatcher } from '../project-batcher';
import { logger } from '../logger';

export interface TrackCall {
  email: string;
  event: string;
  subscribed?: boolean;
  data?: ContactData;
}

export interface TrackResult {
  contactId: string;
  eventId: string;
  timestamp: Date;
}

interface Item {
  input: UpsertInput;
  email: string;
  setData: ContactData;
  unset: string[];
  transient: ContactData;
  ids: { contact: string; subEvent: string; track: string };
  /** Set by the batch write. */
  result?: UpsertResult;
}

/**
 * Many contacts in one statement, with the same rules as the one-contact upsert (contact.repository.ts): lock the
 * existing rows in email order (two batches never wait on each other in opposite orders), insert the missing ones,
 * apply data and subscription changes, and record each call's contact.subscribed / contact.unsubscribed and, when it
 * has one, its tracked event. Every email appears once per batch. A row whose insert lost a race comes back without a
 * contact and is retried alone.
 *
 * The rows are locked FOR NO KEY UPDATE, the strength of the UPDATE itself (no key column changes). FOR UPDATE would
 * also wait on the FOR KEY SHARE locks that every insert referencing a contact takes, among them the analytics
 * consumer's contact_last_event rows, in contact-id order and held until its batch commits: against the email order
 * here, that deadlocked under load (event-outbox.test.ts, 22 of 200 calls answered 500).
 */
const BATCH_SQL = `
with input as (
  select * from unnest($2::text[], $3::jsonb[], $4::jsonb[], $5::boolean[], $6::boolean[], $7::uuid[], $8::uuid[], $9::jsonb[], $10::text[], $11::uuid[], $12::jsonb[])
    as t(email, set_data, unset_json, subscribed, default_subscribed, new_id, sub_event_id, sub_event_data, track_name, track_id, track_data)
),
locked as (
  select c.id, c.email, c.subscribed, c.data from contacts c
  where c.project_id = $1 and c.email = any($2::text[]) -- an array, not a subquery: the cached plan keeps the index
  order by c.email for no key update of c
),
inserted as (
  insert into contacts (id, project_id, email, subscribed, data)
  select i.new_id, $1, i.email, coalesce(i.subscribed, i.default_subscribed), i.set_data
  from input i where not exists (select 1 from locked l where l.email = i.email)
  order by i.email
  on conflict (project_id, email) do nothing
  returning id, email, subscribed, data, created_at, updated_at
),
changes as (
  select l.id, l.email, l.subscribed as old_subscribed, coalesce(i.subscribed, l.subscribed) as new_subscribed,
         l.data as old_data, (l.data || i.set_data) - array(select jsonb_array_elements_text(i.unset_json)) as new_data
  from locked l join input i on i.email = l.email
),
updated as (
  update contacts c set data = ch.new_data, subscribed = ch.new_subscribed, updated_at = now()
  from changes ch
  where c.id = ch.id and (ch.new_data <> ch.old_data or ch.new_subscribed <> ch.old_subscribed)
  returning c.id, c.created_at, c.updated_at
),
sub_event as (
  ${insertEventsSql(
    { id: 'i.sub_event_id', projectId: '$1', contactId: 'ch.id', name: SUBSCRIPTION_EVENT_NAME_SQL('ch.new_subscribed'), data: 'i.sub_event_data', source: 'SYSTEM' },
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
left join sub_event s on s.contact_id = c.id`;

/**
 * A batch chosen as a deadlock victim (40P01) or a serialization failure (40001) was rolled back whole, so it runs
 * again, up to three times. The locks above are taken in email order, but not every writer of the same contacts
 * keeps to it (a CSV import chunk's statement may insert before it locks): rare, and not the callers' fault.
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

const MAILWRIGHT_CONTACT_BATCH = statement('mailwright_contact_batch', BATCH_SQL);

/**
 * Where the hot paths create and update contacts: /v1/track calls and /v1/send recipients. Upserts of one project that
 * arrive within `maxWaitMs` are written by one statement (one commit), which is what lets a small machine keep up
 * with a busy site; each call still answers only after its contact (and event) are committed.
 */
export class ContactIntake {
  private readonly batcher: ProjectBatcher<Item>;

  constructor(
    private readonly orm: MikroORM,
    opts: { maxBatch: number; maxWaitMs: number },
  ) {
    // One email per batch: a second call for it goes into the next one.
    this.batcher = new ProjectBatcher((projectId, items) => this.write(projectId, items), { ...opts, key: (item) => item.email });
  }

  /** The same contract as upsertContact (contact.repository.ts), batched with concurrent calls. */
  upsert(input: UpsertInput): Promise<UpsertResult> {
    return this.enqueue(input, splitContactData(input.data));
  }

  private async enqueue(input: UpsertInput, changes: DataChanges): Promise<UpsertResult> {
    const item: Item = {
      input,
      email: normalizeEmail(input.email),
      setData: changes.set,
      unset: changes.unset,
      transient: changes.transient,
      ids: { contact: uuidv7(), subEvent: uuidv7(), track: uuidv7() },
    };
    await this.batcher.add(input.projectId, [item]);
    return item.result!;
  }

  /**
   * POST /v1/track: new contacts are subscribed unless the call says otherwise; the event carries the call's data
   * values (stored and non-persistent ones alike), the contact keeps only the persistent ones.
   */
  async track(projectId: string, call: TrackCall): Promise<TrackResult> {
    const changes = splitContactData(call.data);
    const result = await this.enqueue(
      {
        projectId,
        email: call.email,
        subscribed: call.subscribed,
        data: call.data,
        defaultSubscribed: true,
        source: { via: 'track', event: call.event },
        track: { name: call.event, data: { ...changes.set, ...changes.transient } },
      },
      changes, // split once: the same split gives the contact's changes and the event's data
    );
    const tracked = result.trackedEvent!;
    return { contactId: result.contact.id, eventId: tracked.id, timestamp: tracked.createdAt };
  }

  private async write(projectId: string, items: Item[]): Promise<void> {
    const em = this.orm.em.fork();
    const rows = await retryOnDeadlock(() => this.writeBatch(em, projectId, items));
    const byEmail = new Map(rows.map((r) => [r.email, r]));
    const alone: Promise<void>[] = [];
    for (const item of items) {
      const row = byEmail.get(item.email);
      if (!row?.contactId || (item.input.track && !row.eventId)) {
        // Another transaction created this contact while the batch ran: do this call alone, with its own retry.
        alone.push(this.upsertAlone(em, item));
        continue;
      }
      const base = { projectId, contactId: row.contactId };
      const contact = { id: row.contactId, email: row.email, subscribed: row.subscribed!, data: row.data!, createdAt: row.createdAt!, updatedAt: row.updatedAt! };
      const result: UpsertResult = {
        contact,
        isNew: row.outcome === 'inserted',
        isUpdate: row.outcome === 'updated',
        variables: { ...contact.data, ...item.transient },
        subscriptionEvent: row.subEventId
          ? { ...base, id: row.subEventId, createdAt: row.subEventAt!, name: contact.subscribed ? 'contact.subscribed' : 'contact.unsubscribed', source: 'SYSTEM', data: item.input.source }
          : undefined,
        trackedEvent: row.eventId
          ? { ...base, id: row.eventId, createdAt: row.eventAt!, name: item.input.track!.name, source: 'TRACKED', data: item.input.track!.data }
          : undefined,
      };
      item.result = result;
    }
    await Promise.all(alone);
  }

  private writeBatch(em: ReturnType<MikroORM['em']['fork']>, projectId: string, items: Item[]): Promise<BatchRow[]> {
    return sql(em).query<BatchRow>(
    MAILWRIGHT_CONTACT_BATCH,
    [
      projectId,
      items.map((i) => i.email),
      items.map((i) => JSON.stringify(i.setData)),
      items.map((i) => JSON.stringify(i.unset)),
      items.map((i) => i.input.subscribed ?? null),
      items.map((i) => i.input.defaultSubscribed),
      items.map((i) => i.ids.contact),
      items.map((i) => i.ids.subEvent),
      items.map((i) => JSON.stringify(i.input.source)),
      items.map((i) => i.input.track?.name ?? null),
      items.map((i) => i.ids.track),
      items.map((i) => JSON.stringify(i.input.track?.data ?? {})),
    ],
  );
  }

  private async upsertAlone(em: ReturnType<MikroORM['em']['fork']>, item: Item): Promise<void> {
    item.result = await upsertContact(em, item.input);
  }

  /** Writes whatever is waiting (on shutdown). */
  flushAll(): void {
    this.batcher.flushAll();
  }
}
