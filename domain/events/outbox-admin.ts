import { sql, type Pool } from '../db/sql';
import { OUTBOX_CHANNEL } from './event-dispatcher';

/** What an operator sees of a consumer's queue. */
export interface ConsumerStatus {
  consumer: string;
  registeredAt: Date;
  /** Waiting for their first delivery. */
  pending: number;
  /** Failed at least once, will be tried again. */
  retrying: number;
  parked: number;
  /** Created at of the oldest event not yet accepted (null when none). */
  oldestAt: Date | null;
}

export interface ParkedEvent {
  consumer: string;
  eventId: string;
  contactId: string;
  projectId: string | null;
  name: string | null;
  createdAt: Date | null;
  attempts: number;
  lastError: string | null;
  parkedAt: Date;
  /** Later events of the same contact this parked event holds back for the consumer. */
  heldBack: number;
}

export async function consumerStatus(pool: Pool): Promise<ConsumerStatus[]> {
  return sql(pool).query<ConsumerStatus>(
    `select c.name as consumer, c.registered_at as "registeredAt",
            count(o.seq) filter (where o.attempts = 0 and o.parked_at is null)::int as pending,
            count(o.seq) filter (where o.attempts > 0 and o.parked_at is null)::int as retrying,
            count(o.seq) filter (where o.parked_at is not null)::int as parked,
            min(e.created_at) as "oldestAt"
     from event_consumers c left join event_outbox o on o.consumer = c.name left join events e on e.id = o.event_id
     group by c.name, c.registered_at order by c.name`,
  );
}

export async function listParked(pool: Pool, opts: { consumer?: string; limit?: number } = {}): Promise<ParkedEvent[]> {
  return sql(pool).query<ParkedEvent>(
    `select o.consumer, o.event_id as "eventId", o.contact_id as "contactId", e.project_id as "projectId", e.name,
            e.created_at as "createdAt", o.attempts, o.last_error as "lastError", o.parked_at as "parkedAt",
            (select count(*) from event_outbox l where l.consumer = o.consumer and l.contact_id = o.contact_id and l.seq > o.seq)::int as "heldBack"
     from event_outbox o left join events e on e.id = o.event_id
     where o.parked_at is not null and ($1::text is null or o.consumer = $1)
     order by o.seq limit $2`,
    [opts.consumer ?? null, opts.limit ?? 100],
  );
}

/**
 * Gives parked events of a consumer (all of them, or those with the given ids) a fresh retry budget and wakes the
 * dispatchers; they are delivered before the later events of their contacts. Returns how many.
 */
export async function replayParked(pool: Pool, consumer: string, eventIds?: string[]): Promise<number> {
  const n = await sql(pool).run(
    `update event_outbox set parked_at = null, next_attempt_at = null, attempts = 0
     where consumer = $1 and parked_at is not null and ($2::uuid[] is null or event_id = any($2::uuid[]))`,
    [consumer, eventIds ?? null],
  );
  await sql(pool).run(`select pg_notify('${OUTBOX_CHANNEL}', '')`);
  return n;
}

/** Drops parked events of a consumer without delivering them (their contacts' later events then go ahead). */
export async function discardParked(pool: Pool, consumer: string, eventIds?: string[]): Promise<number> {
  const n = await sql(pool).run(
    `delete from event_outbox where consumer = $1 and parked_at is not null and ($2::uuid[] is null or event_id = any($2::uuid[]))`,
    [consumer, eventIds ?? null],
  );
  await sql(pool).run(`select pg_notify('${OUTBOX_CHANNEL}', '')`);
  return n;
}

/**
 * Removes a consumer that no worker runs any more, with its queue; events are no longer written for it. (A worker
 * that still has it registers it again at its next start, from then on.)
 */
export async function retireConsumer(pool: Pool, consumer: string): Promise<boolean> {
  const row = await sql(pool).one<{ found: boolean }>(
    `with gone as (delete from event_consumers where name = $1 returning name),
          queue as (delete from event_outbox where consumer = $1)
     select exists (select 1 from gone) as found`,
    [consumer],
  );
  return row!.found;
}
