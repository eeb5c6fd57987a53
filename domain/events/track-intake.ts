import type { MikroORM } from '@mikro-orm/postgresql';
import { splitContactData } from '../contacts/contact-data';
import { normalizeEmail } from '../contacts/email-address';
import { upsertContact } from '../contacts/contact.repository';
import type { ContactData } from '../contacts/contact.entity';
import { preparedQuery } from '../prepared';
import { uuidv7 } from '../ids';
import { dispatchEvents, type RecordedEvent } from './event.service';
import { ProjectBatcher } from '../project-batcher';

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
  email: string;
  call: TrackCall;
  setData: ContactData;
  unset: string[];
  eventData: Record<string, unknown>;
  ids: { contact: string; subEvent: string; track: string };
  /** Set by the batch write. */
  result?: TrackResult;
}

/**
 * Many contacts in one statement, with the same rules as the one-contact upsert (contact.repository.ts): lock the
 * existing rows in email order (two batches never wait on each other in opposite orders), insert the missing ones,
 * apply data and subscription changes, and record each call's contact.subscribed / contact.unsubscribed and
 * tracked event. Every email appears once per batch. A row whose insert lost a race comes back without a contact
 * and is retried alone.
 */
const BATCH_SQL = `
with input as (
  select * from unnest($2::text[], $3::jsonb[], $4::jsonb[], $5::boolean[], $6::uuid[], $7::uuid[], $8::text[], $9::uuid[], $10::jsonb[], $11::jsonb[])
    as t(email, set_data, unset_json, subscribed, new_id, sub_event_id, track_name, track_id, track_data, sub_event_data)
),
locked as (
  select c.id, c.email, c.subscribed, c.data from contacts c
  where c.project_id = $1 and c.email = any($2::text[]) -- an array, not a subquery: the cached plan keeps the index
  order by c.email for update of c
),
inserted as (
  insert into contacts (id, project_id, email, subscribed, data)
  select i.new_id, $1, i.email, coalesce(i.subscribed, true), i.set_data
  from input i where not exists (select 1 from locked l where l.email = i.email)
  order by i.email
  on conflict (project_id, email) do nothing
  returning id, email, subscribed
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
  returning c.id
),
sub_event as (
  insert into events (id, project_id, contact_id, name, data, source, created_at)
  select i.sub_event_id, $1, ch.id, case when ch.new_subscribed then 'contact.subscribed' else 'contact.unsubscribed' end,
         i.sub_event_data, 'SYSTEM', now()
  from changes ch join input i on i.email = ch.email
  where ch.new_subscribed <> ch.old_subscribed
  returning id, contact_id, created_at
),
contact as (
  select id, email, subscribed from inserted
  union all
  select id, email, new_subscribed from changes
),
tracked as (
  insert into events (id, project_id, contact_id, name, data, source, created_at)
  select i.track_id, $1, c.id, i.track_name, i.track_data, 'TRACKED', now()
  from input i join contact c on c.email = i.email
  returning id, contact_id, created_at
)
select i.email, c.id as "contactId", c.subscribed, t.id as "eventId", t.created_at as "eventAt", s.id as "subEventId", s.created_at as "subEventAt"
from input i
left join contact c on c.email = i.email
left join tracked t on t.contact_id = c.id
left join sub_event s on s.contact_id = c.id`;

interface BatchRow {
  email: string;
  contactId: string | null;
  subscribed: boolean | null;
  eventId: string | null;
  eventAt: Date | null;
  subEventId: string | null;
  subEventAt: Date | null;
}

/**
 * Where /v1/track calls are recorded. Calls of one project that arrive within `maxWaitMs` are written by one
 * statement (one commit), which is what lets a small machine keep up with a busy site; each call still answers only
 * after its contact and event are committed. New contacts are subscribed unless the call says otherwise; the event
 * carries the call's data values (stored and non-persistent ones alike), the contact keeps only the persistent ones.
 */
export class TrackIntake {
  private readonly batcher: ProjectBatcher<Item>;

  constructor(
    private readonly orm: MikroORM,
    opts: { maxBatch: number; maxWaitMs: number },
  ) {
    // One email per batch: a second call for it goes into the next one.
    this.batcher = new ProjectBatcher((projectId, items) => this.write(projectId, items), { ...opts, key: (item) => item.email });
  }

  async track(projectId: string, call: TrackCall): Promise<TrackResult> {
    const changes = splitContactData(call.data);
    const item: Item = {
      email: normalizeEmail(call.email),
      call,
      setData: changes.set,
      unset: changes.unset,
      eventData: { ...changes.set, ...changes.transient },
      ids: { contact: uuidv7(), subEvent: uuidv7(), track: uuidv7() },
    };
    await this.batcher.add(projectId, [item]);
    return item.result!;
  }

  private async write(projectId: string, items: Item[]): Promise<void> {
    const em = this.orm.em.fork();
    const rows = await preparedQuery<BatchRow>(em, 'mailwright_track_batch', BATCH_SQL, [
      projectId,
      items.map((i) => i.email),
      items.map((i) => JSON.stringify(i.setData)),
      items.map((i) => JSON.stringify(i.unset)),
      items.map((i) => i.call.subscribed ?? null),
      items.map((i) => i.ids.contact),
      items.map((i) => i.ids.subEvent),
      items.map((i) => i.call.event),
      items.map((i) => i.ids.track),
      items.map((i) => JSON.stringify(i.eventData)),
      items.map((i) => JSON.stringify({ via: 'track', event: i.call.event })),
    ]);
    const byEmail = new Map(rows.map((r) => [r.email, r]));
    const recorded: RecordedEvent[] = [];
    const alone: Promise<void>[] = [];
    for (const item of items) {
      const row = byEmail.get(item.email);
      if (!row?.contactId || !row.eventId) {
        // Another transaction created this contact while the batch ran: do this call alone, with its own retry.
        alone.push(this.trackAlone(em, projectId, item).then((r) => void (item.result = r)));
        continue;
      }
      if (row.subEventId) {
        recorded.push({ id: row.subEventId, createdAt: row.subEventAt!, projectId, contactId: row.contactId, name: row.subscribed ? 'contact.subscribed' : 'contact.unsubscribed', source: 'SYSTEM', data: { via: 'track', event: item.call.event } });
      }
      recorded.push({ id: row.eventId, createdAt: row.eventAt!, projectId, contactId: row.contactId, name: item.call.event, source: 'TRACKED', data: item.eventData });
      item.result = { contactId: row.contactId, eventId: row.eventId, timestamp: row.eventAt! };
    }
    await dispatchEvents(recorded);
    await Promise.all(alone);
  }

  private async trackAlone(em: ReturnType<MikroORM['em']['fork']>, projectId: string, item: Item): Promise<TrackResult> {
    const result = await upsertContact(em, {
      projectId,
      email: item.email,
      subscribed: item.call.subscribed,
      data: item.call.data,
      defaultSubscribed: true,
      source: { via: 'track', event: item.call.event },
      track: { name: item.call.event, data: item.eventData },
    });
    await dispatchEvents([result.subscriptionEvent, result.trackedEvent].filter((e): e is RecordedEvent => Boolean(e)));
    return { contactId: result.contact.id, eventId: result.trackedEvent!.id, timestamp: result.trackedEvent!.createdAt };
  }

  /** Writes whatever is waiting (on shutdown). */
  flushAll(): void {
    this.batcher.flushAll();
  }
}
