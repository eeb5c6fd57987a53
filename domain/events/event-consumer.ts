import type { Pool } from 'pg';
import type { Sql } from '../db/sql';

/** An event as a consumer receives it from the outbox. */
export interface OutboxEvent {
  id: string;
  projectId: string;
  contactId: string;
  name: string;
  data: Record<string, unknown>;
  source: 'TRACKED' | 'SYSTEM';
  emailId: string | null;
  createdAt: Date;
  /** How often this consumer failed on this event before (0 on its first delivery). */
  attempts: number;
}

interface ConsumerContext {
  /** The dispatcher's connections (a consumer's own writes run outside the dispatcher's transaction). */
  pool: Pool;
  /**
   * For a `transactional` consumer: the round's own connection, inside its transaction (and a savepoint per call).
   * Writes made through it commit together with the outbox rows' removal, or not at all: exactly once.
   */
  tx?: Sql;
}

export interface RetryPolicy {
  /** Failed deliveries after which an event is parked for an operator. */
  maxAttempts: number;
  /** Delay after the first failure; doubles with each further one (plus up to 10% jitter)... */
  baseDelayMs: number;
  /** ...up to this. */
  maxDelayMs: number;
}

/**
 * Something that reacts to recorded events (automation triggers, campaign stats, analytics rollups). Delivery is at
 * least once, so `handle` must be idempotent by event id. A contact's events arrive in the order they were recorded:
 * within a call, and never before an earlier event of the same contact was accepted. `handle` should process a batch
 * in order and throw at the first event it cannot take; throwing means nothing of the call was accepted (what it
 * did before the throw comes again), and the dispatcher then narrows the failure down to that event, which is
 * retried with backoff and finally parked, holding back only that contact's later events.
 */
export interface EventConsumer {
  /** Stable (outbox rows carry it); 1-100 characters of `a-z0-9._-`. A new name is a new consumer. */
  readonly name: string;
  handle(events: OutboxEvent[], ctx: ConsumerContext): Promise<void>;
  /**
   * The event names this consumer handles; the outbox then holds only those for it (recorded in `event_consumers`
   * when a worker registers it, so a changed list takes effect from that worker's start). Absent: every event.
   */
  readonly eventNames?: readonly string[];
  /**
   * Only events of the projects listed for this consumer in `event_consumer_projects` are queued for it (recorded in
   * `event_consumers.project_scoped` when a worker registers it). Whoever lists the projects keeps the list in the
   * transaction that changes their interest (for `webhooks-out`: a trigger on `webhook_endpoints`).
   */
  readonly projectScoped?: boolean;
  /**
   * Writes through `ctx.tx`, in the dispatcher's transaction: what a call wrote commits with the removal of the events
   * it accepted, and a call that throws is rolled back to its savepoint. Such a consumer needs no receipts to be
   * exactly once (analytics rollups). It must do all its work through `ctx.tx`, and quickly: it holds the round.
   */
  readonly transactional?: boolean;
  /**
   * Takes a batch of tallies (`event_tallies`: counts recorded without an event each, such as a campaign's sends) in
   * `tx`, a transaction of the dispatcher's own: what it applies commits with their removal. Returns how many it took
   * (the dispatcher asks again while a batch of TALLY_BATCH comes back full). One registered consumer at most takes
   * tallies.
   */
  readonly takeTallies?: (tx: Sql) => Promise<number>;
  /** Overrides of the dispatcher's retry policy. */
  readonly retry?: Partial<RetryPolicy>;
  /** A call that takes longer counts as failed (default 60 s); the dispatcher holds the contacts' shards meanwhile. */
  readonly timeoutMs?: number;
}

/** Tallies a consumer takes per call (`takeTallies`). */
export const TALLY_BATCH = 1000;

const NAME_RE = /^[a-z0-9][a-z0-9._-]{0,99}$/;

/** The consumers of one process, each name once. */
export class EventConsumerRegistry {
  private readonly consumers = new Map<string, EventConsumer>();

  register(consumer: EventConsumer): void {
    if (!NAME_RE.test(consumer.name)) throw new Error(`event consumer name "${consumer.name}" must match ${NAME_RE}`);
    if (this.consumers.has(consumer.name)) throw new Error(`event consumer "${consumer.name}" is registered twice`);
    this.consumers.set(consumer.name, consumer);
  }

  list(): EventConsumer[] {
    return [...this.consumers.values()];
  }
}
