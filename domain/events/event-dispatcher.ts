import { createHash } from 'node:crypto';
import { Client, Pool } from 'pg';
import { onConnection, sql, statement, transaction, type Sql } from '../db/sql';
import { logger } from '../logger';
import { outboxLag } from '../metrics';
import { TALLY_BATCH, type EventConsumer, type OutboxEvent, type RetryPolicy } from './event-consumer';

/** Contacts are spread over this many queues per consumer (the trigger in migration 20261123100000 says 64 too). */
const OUTBOX_SHARDS = 64;
export const OUTBOX_CHANNEL = 'mailwright_outbox';

export interface DispatcherOptions {
  /** Fallback wake-up when no notification arrives (a lost LISTEN connection, due retries of another process). */
  pollIntervalMs: number;
  /** Events handed over per round (one transaction) and consumer. */
  batchSize: number;
  /** Default retry policy; a consumer may override parts of it. */
  retry: RetryPolicy;
  /** Shards one round locks at most, so several dispatchers share the work (default: half of them). */
  shardsPerRound?: number;
  /**
   * Under steady load, the least time from the start of one drain to the next (default 50 ms): notifications that
   * arrive meanwhile are served together, in larger batches, instead of by a drain per commit. An idle dispatcher
   * still starts at once.
   */
  minDrainIntervalMs?: number;
  /** Connections of the dispatcher's pool. */
  poolMax?: number;
  /**
   * The least time from the start of one fold of tallies to the next when only tallies woke the dispatcher (default
   * 1 s). A campaign inserts a tally with every batch of outcomes it records, 25-60 a second, and a fold per
   * notification was a transaction each (three statements): more of the worker's main thread than recording the outcomes
   * (BENCHMARKS.md › Issue 28, fifteenth stop). The rollups are hourly; a second's delay does not show.
   */
  tallyIntervalMs?: number;
}

export const DEFAULT_RETRY: RetryPolicy = { maxAttempts: 12, baseDelayMs: 1_000, maxDelayMs: 10 * 60_000 };
const DEFAULT_CONSUMER_TIMEOUT_MS = 60_000;
const IDLE_IN_ROUND_TIMEOUT_MS = 15 * 60_000;
/** Bound on counting the outbox rows for /metrics. */
const BACKLOG_TIMEOUT_MS = 2_000;

// The outbox statements are planned on every call (`prepare: false`): prepared, Postgres switched to a generic plan for
// the batch read after five calls, and draining 29,000 events after `npm run bench:track` took 17.8 s instead of 1.0 s.

// Locks up to $3 shards of consumer $4, in the (shuffled) order given, that have something due. The CASE keeps the
// lock behind the check: a shard with nothing to do is never locked. LIMIT stops taking locks once enough are held.
const LOCK_SQL = statement('outbox_lock_shards', `
select s::int as shard from unnest($2::int[]) as s
where case when exists (select 1 from event_outbox o where o.consumer = $4 and o.shard = s and o.parked_at is null
                         and (o.next_attempt_at is null or o.next_attempt_at <= now()))
           then pg_try_advisory_xact_lock($1, s) else false end
limit $3`, { prepare: false });

// The next $3 events of each locked shard in outbox order (a contact's events are all in one shard, so only the
// order within a shard matters; each shard is read in its index order, however long its backlog), without those of
// a contact whose earlier event is waiting for a retry or parked. Runs as its own statement after LOCK_SQL, so its
// snapshot includes everything the previous holder of these shards committed.
const BATCH_SQL = statement('outbox_batch', `
select o.seq::text as seq, o.shard, o.event_id as "eventId", o.contact_id as "contactId", o.attempts, e.id is not null as found,
       e.project_id as "projectId", e.name, e.data, e.source, e.email_id as "emailId", e.created_at as "createdAt"
from unnest($2::int[]) as s(shard)
cross join lateral (
  select o.seq, o.shard, o.event_id, o.contact_id, o.attempts from event_outbox o
  where o.consumer = $1 and o.shard = s.shard and o.parked_at is null and (o.next_attempt_at is null or o.next_attempt_at <= now())
    and not exists (select 1 from event_outbox b where b.consumer = $1 and b.contact_id = o.contact_id and b.seq < o.seq
                    and b.attempts > 0 and (b.parked_at is not null or b.next_attempt_at > now()))
  order by o.seq
  limit $3
) o
left join events e on e.id = o.event_id
order by o.seq`, { prepare: false });

const DONE_SQL = statement('outbox_done', `
delete from event_outbox o using unnest($2::smallint[], $3::bigint[]) as d(shard, seq)
where o.consumer = $1 and o.shard = d.shard and o.seq = d.seq`, { prepare: false });

const FAIL_SQL = statement('outbox_fail', `
update event_outbox o set attempts = o.attempts + 1, last_error = f.error,
  next_attempt_at = case when f.park then null else clock_timestamp() + f.delay_ms * interval '1 millisecond' end,
  parked_at = case when f.park then clock_timestamp() end
from unnest($2::smallint[], $3::bigint[], $4::int[], $5::boolean[], $6::text[]) as f(shard, seq, delay_ms, park, error)
where o.consumer = $1 and o.shard = f.shard and o.seq = f.seq`, { prepare: false });

interface BatchRow {
  seq: string;
  shard: number;
  eventId: string;
  contactId: string;
  attempts: number;
  found: boolean;
  projectId: string;
  name: string;
  data: Record<string, unknown>;
  source: 'TRACKED' | 'SYSTEM';
  emailId: string | null;
  createdAt: Date;
}

/** An outbox row's key within its consumer. */
interface RowKey {
  shard: number;
  seq: string;
}

interface Delivery extends RowKey {
  event: OutboxEvent;
}

interface Outcome {
  accepted: RowKey[];
  failed: { delivery: Delivery; error: unknown }[];
}

/** What one round did, for the drain loop. */
interface Round {
  locked: number[];
  /** Whether a locked shard may have more due right now (it filled its share of the batch). */
  more: boolean;
  handed: number;
  /** Locked shards that had nothing deliverable (every due row waits behind a retrying or parked event). */
  idle: number[];
}

class ConsumerTimeout extends Error {}
/** A transactional consumer's call timed out: the round is rolled back whole and its events come again. */
class RoundAborted extends Error {}

/** The exponential backoff after the `attempt`-th failure (1-based), with up to 10% jitter. */
export function retryDelayMs(policy: RetryPolicy, attempt: number): number {
  const base = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** Math.min(attempt - 1, 30));
  return Math.round(base * (1 + Math.random() * 0.1));
}

function lockKey(consumer: string): number {
  return createHash('sha1').update(`mailwright.outbox:${consumer}`).digest().readInt32BE(0);
}

function shuffled(values: number[]): number[] {
  const a = [...values];
  for (let i = a.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [a[i], a[j]] = [a[j]!, a[i]!];
  }
  return a;
}

function errorText(err: unknown): string {
  const text = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
  return text.slice(0, 2_000);
}

/**
 * Drains the event outbox (`event_outbox`, written by a trigger in the same transaction as each event) into the
 * registered consumers; runs in the worker. Each consumer's rows are spread over OUTBOX_SHARDS shards by contact; a
 * round locks some shards (transaction-scoped advisory locks, skipped when another dispatcher holds them), hands
 * their next events to the consumer in outbox order, and deletes what it accepted in the same transaction. A
 * contact's events therefore only ever pass through one dispatcher at a time, in order; a crash rolls the round back
 * and its events come again (at least once). Woken by NOTIFY mailwright_outbox, with a poll as the fallback.
 */
export class EventDispatcher {
  private readonly pool: Pool;
  private readonly shardsPerRound: number;
  private listener?: Client;
  private pollTimer?: NodeJS.Timeout;
  private retryTimer?: NodeJS.Timeout;
  private retryAt = Infinity;
  private running?: Promise<void>;
  /** What was asked for while a drain ran: another drain after it (`all` wins over `tallies`). */
  private again: 'all' | 'tallies' | null = null;
  private stopped = false;
  /** A fold of tallies due when the interval since the last one has passed (tallyIntervalMs). */
  private tallyTimer?: NodeJS.Timeout;
  /** When the last fold of tallies started. */
  private talliesStartedAt = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly databaseUrl: string,
    private readonly consumers: readonly EventConsumer[],
    private readonly opts: DispatcherOptions,
  ) {
    this.pool = new Pool({ connectionString: databaseUrl, application_name: 'mailwright-outbox', max: opts.poolMax ?? Math.max(2, consumers.length * 2 + 1) });
    this.pool.on('error', (err) => logger.warn({ err }, 'event dispatcher: idle connection failed'));
    // The pool listens on idle connections only: one checked out (a round's transaction, while a consumer runs) that the
    // server closes (Postgres restarted) emits 'error' on the client, which without a listener kills the worker.
    // The query in flight, or the next one, fails and the round is retried.
    this.pool.on('connect', (client) => client.on('error', (err) => logger.warn({ err }, 'event dispatcher: connection failed')));
    this.shardsPerRound = opts.shardsPerRound ?? OUTBOX_SHARDS / 2;
  }

  /** Registers the consumers, listens, and drains. */
  async start(): Promise<void> {
    if (this.consumers.length === 0) return;
    await this.register();
    await this.listen();
    this.pollTimer = setInterval(() => this.kick(), this.opts.pollIntervalMs);
    this.pollTimer.unref();
    this.kick();
  }

  /**
   * Adds the consumers to `event_consumers` with the event names each handles (and whether only listed projects'
   * events): the trigger writes outbox rows for them from then on.
   */
  async register(): Promise<void> {
    const names = this.consumers.map((c) => c.name);
    // Each consumer's event names as one JSON value (null: every event): text[] cannot hold a null per row in unnest.
    const filters = this.consumers.map((c) => (c.eventNames ? JSON.stringify(c.eventNames) : null));
    await sql(this.pool).run(
      `insert into event_consumers (name, event_names, project_scoped)
       select n, case when f is null then null else array(select jsonb_array_elements_text(f::jsonb)) end, s
       from unnest($1::text[], $2::text[], $3::boolean[]) as t(n, f, s)
       on conflict (name) do update set event_names = excluded.event_names, project_scoped = excluded.project_scoped`,
      [names, filters, this.consumers.map((c) => c.projectScoped ?? false)],
    );
    const rows = await sql(this.pool).query<{ consumer: string; n: string }>(
      `select o.consumer, count(*)::text as n from event_outbox o where o.consumer <> all($1::text[]) group by 1`,
      [names],
    );
    for (const r of rows) {
      logger.warn({ consumer: r.consumer, pending: Number(r.n) }, 'event outbox: consumer not registered in this worker has pending events (retire it if it is gone: npm run events:outbox -- retire <name>)');
    }
  }

  /**
   * This dispatcher's consumers' outbox rows: pending (due, or waiting for a retry) and parked. Bounded by a statement
   * timeout, as /metrics reads it at every scrape and a large backlog makes the count slow.
   */
  async backlog(): Promise<{ consumer: string; pending: number; parked: number }[]> {
    return sql(this.pool).withConnection(async (conn) => {
      const db = onConnection(conn, true);
      try {
        await db.run(`begin read only; set local statement_timeout = '${BACKLOG_TIMEOUT_MS}ms'`);
        return await db.query<{ consumer: string; pending: number; parked: number }>(
          `select c.name as consumer, count(o.seq) filter (where o.parked_at is null)::int as pending, count(o.seq) filter (where o.parked_at is not null)::int as parked
           from unnest($1::text[]) as c(name) left join event_outbox o on o.consumer = c.name group by c.name`,
          [this.consumers.map((c) => c.name)],
        );
      } finally {
        await db.run('rollback').catch(() => undefined);
      }
    });
  }

  /** Stops waking up, waits for the round in progress, closes the connections. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.pollTimer);
    clearTimeout(this.retryTimer);
    clearTimeout(this.tallyTimer);
    await this.running;
    await this.listener?.end().catch(() => undefined);
    await this.pool.end();
  }

  /**
   * Asks for a drain: starts one, or another one after the one in progress. `tallies`: only tallies were added (their
   * trigger's notification), so the drain folds tallies and runs no consumer round, at most once per
   * `tallyIntervalMs` (the rows wait in their table meanwhile); a full drain folds them too.
   */
  kick(what: 'all' | 'tallies' = 'all'): void {
    if (this.stopped) return;
    if (what === 'tallies') {
      if (this.tallyTimer) return;
      const wait = this.talliesStartedAt + (this.opts.tallyIntervalMs ?? 1_000) - Date.now();
      if (wait > 0) {
        this.tallyTimer = setTimeout(() => {
          this.tallyTimer = undefined;
          this.startDrain('tallies');
        }, wait);
        return;
      }
    }
    this.startDrain(what);
  }

  /** Starts a drain, or asks for another one after the one in progress. */
  private startDrain(what: 'all' | 'tallies'): void {
    if (this.stopped) return;
    if (this.running) {
      if (this.again !== 'all') this.again = what;
      return;
    }
    this.running = (async () => {
      const gap = this.opts.minDrainIntervalMs ?? 50;
      let next: 'all' | 'tallies' | null = what;
      while (next && !this.stopped) {
        this.again = null;
        const started = Date.now();
        try {
          if (next === 'all') await this.drain();
          else await this.drainTallies();
        } catch (err) {
          logger.error({ err }, 'event dispatcher: drain failed; retrying at the next wake-up');
        }
        const wait = started + gap - Date.now();
        if (this.again && wait > 0 && !this.stopped) await new Promise((r) => setTimeout(r, wait));
        next = this.again;
      }
    })().finally(() => {
      this.running = undefined;
    });
  }

  /**
   * Hands over everything due now, every consumer in parallel, and the tallies to the consumer that takes them;
   * returns how many events were handed over.
   */
  async drain(): Promise<number> {
    const [counts] = await Promise.all([Promise.all(this.consumers.map((c) => this.drainConsumer(c))), this.drainTallies()]);
    return counts.reduce((a, b) => a + b, 0);
  }

  /**
   * Tallies, batch after batch while they come back full. Each batch is its own transaction (without waiting for the
   * WAL flush: a batch lost in a crash is taken again, its removal lost with its counts); tallies are not per contact,
   * so any number of dispatchers take disjoint batches (the taker skips locked rows).
   */
  private async drainTallies(): Promise<number> {
    const taker = this.consumers.find((c) => c.takeTallies);
    this.talliesStartedAt = Date.now();
    let total = 0;
    while (taker && !this.stopped) {
      const n = await transaction(this.pool, (tx) => taker.takeTallies!(tx), { synchronousCommit: false });
      total += n;
      if (n < TALLY_BATCH) break;
    }
    return total;
  }

  private async drainConsumer(consumer: EventConsumer): Promise<number> {
    const policy = { ...this.opts.retry, ...consumer.retry };
    const idle = new Set<number>();
    let handed = 0;
    while (!this.stopped) {
      const candidates = shuffled([...Array(OUTBOX_SHARDS).keys()].filter((s) => !idle.has(s)));
      if (candidates.length === 0) break;
      const round = await this.round(consumer, policy, candidates);
      handed += round.handed;
      for (const s of round.idle) idle.add(s);
      // Done when the round took every shard that had work and was free (the others' holders keep draining them) and
      // everything due in them: work committed since then comes with its own notification.
      if (!round.more && (round.locked.length < this.shardsPerRound || round.locked.length === candidates.length)) break;
    }
    return handed;
  }

  private async round(consumer: EventConsumer, policy: RetryPolicy, shards: number[]): Promise<Round> {
    const client = await this.pool.connect();
    const db = onConnection(client, true);
    let open = false;
    try {
      // A round lost in a database crash only means its events come again (at least once): no WAL flush to wait for.
      // A worker that vanished mid-round without closing its connection (a network partition) must not hold its
      // shards for long: the server ends a session idle in the transaction for longer than any consumer call may take.
      await db.run(`begin; set local synchronous_commit = off; set local idle_in_transaction_session_timeout = '${IDLE_IN_ROUND_TIMEOUT_MS}ms'`);
      open = true;
      const locked = (await db.query<{ shard: number }>(LOCK_SQL, [lockKey(consumer.name), shards, this.shardsPerRound, consumer.name])).map((r) => r.shard);
      if (locked.length === 0) {
        await db.run('commit');
        open = false;
        return { locked, more: false, handed: 0, idle: [] };
      }
      const perShard = Math.ceil(this.opts.batchSize / locked.length);
      const rows = await db.query<BatchRow>(BATCH_SQL, [consumer.name, locked, perShard]);
      const gone = rows.filter((r) => !r.found); // deleted since (contact deleted, DELETE /events/:name)
      const deliveries: Delivery[] = rows
        .filter((r) => r.found)
        .map((r) => ({
          shard: r.shard,
          seq: r.seq,
          event: { id: r.eventId, projectId: r.projectId, contactId: r.contactId, name: r.name, data: r.data, source: r.source, emailId: r.emailId, createdAt: r.createdAt, attempts: r.attempts },
        }));
      const now = Date.now();
      for (const d of deliveries) outboxLag.observe({ consumer: consumer.name }, Math.max(0, now - d.event.createdAt.getTime()) / 1000);
      const outcome = deliveries.length ? await this.deliver(consumer, deliveries, db) : { accepted: [], failed: [] };
      await this.record(db, policy, consumer, [...gone, ...outcome.accepted], outcome.failed);
      await db.run('commit');
      open = false;
      const perShardRows = new Map<number, number>();
      for (const r of rows) perShardRows.set(r.shard, (perShardRows.get(r.shard) ?? 0) + 1);
      return {
        locked,
        more: [...perShardRows.values()].some((n) => n >= perShard),
        handed: deliveries.length,
        idle: locked.filter((s) => !perShardRows.has(s)),
      };
    } finally {
      if (open) await db.run('rollback').catch(() => undefined);
      client.release();
    }
  }

  /**
   * Hands the batch over; if the consumer throws, narrows the failure down: each contact's events alone, then, for a
   * contact that still fails, one event at a time up to the one that fails. That event is the failure; the contact's
   * later events stay untouched (held back by it). After three contacts in a row failed and none succeeded, the
   * consumer is taken to be down and the remaining contacts' first events fail with the same error without a call.
   */
  private async deliver(consumer: EventConsumer, batch: Delivery[], tx: Sql): Promise<Outcome> {
    const ctx = consumer.transactional ? { pool: this.pool, tx } : { pool: this.pool };
    const timeoutMs = consumer.timeoutMs ?? DEFAULT_CONSUMER_TIMEOUT_MS;
    const call = async (part: Delivery[]) => {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new ConsumerTimeout(`${consumer.name} did not answer within ${timeoutMs} ms`)), timeoutMs);
      });
      if (consumer.transactional) await tx.run('savepoint consumer_call');
      try {
        await Promise.race([consumer.handle(part.map((d) => d.event), ctx), timeout]);
        if (consumer.transactional) await tx.run('release savepoint consumer_call');
      } catch (err) {
        // A transactional consumer still running after its timeout could write into the round later: end the round
        // (rolled back whole: its events come again) rather than go on beside it.
        if (consumer.transactional && err instanceof ConsumerTimeout) throw new RoundAborted(err.message);
        if (consumer.transactional) await tx.run('rollback to savepoint consumer_call');
        throw err;
      } finally {
        clearTimeout(timer);
      }
    };
    try {
      await call(batch);
      return { accepted: batch, failed: [] };
    } catch (err) {
      if (err instanceof RoundAborted) throw err;
      const groups = new Map<string, Delivery[]>();
      for (const d of batch) {
        const g = groups.get(d.event.contactId);
        if (g) g.push(d);
        else groups.set(d.event.contactId, [d]);
      }
      const outcome: Outcome = { accepted: [], failed: [] };
      let failedInARow = 0;
      for (const group of groups.values()) {
        if (groups.size === 1 || failedInARow >= 3) {
          if (groups.size === 1 && group.length > 1) await this.oneByOne(call, group, outcome);
          else outcome.failed.push({ delivery: group[0]!, error: err });
          continue;
        }
        try {
          await call(group);
          outcome.accepted.push(...group);
          failedInARow = -Infinity; // something got through: the consumer is up
        } catch (groupErr) {
          if (groupErr instanceof RoundAborted) throw groupErr;
          failedInARow++;
          if (group.length === 1) outcome.failed.push({ delivery: group[0]!, error: groupErr });
          else await this.oneByOne(call, group, outcome);
        }
      }
      return outcome;
    }
  }

  private async oneByOne(call: (part: Delivery[]) => Promise<void>, group: Delivery[], outcome: Outcome): Promise<void> {
    for (const d of group) {
      try {
        await call([d]);
        outcome.accepted.push(d);
      } catch (err) {
        if (err instanceof RoundAborted) throw err;
        outcome.failed.push({ delivery: d, error: err });
        return;
      }
    }
  }

  private async record(db: Sql, policy: RetryPolicy, consumer: EventConsumer, done: RowKey[], failed: Outcome['failed']): Promise<void> {
    if (done.length) await db.run(DONE_SQL, [consumer.name, done.map((d) => d.shard), done.map((d) => d.seq)]);
    if (failed.length === 0) return;
    const shards: number[] = [];
    const seqs: string[] = [];
    const delays: number[] = [];
    const parks: boolean[] = [];
    const errors: string[] = [];
    for (const { delivery, error } of failed) {
      const attempt = delivery.event.attempts + 1;
      const park = attempt >= policy.maxAttempts;
      const delay = park ? 0 : retryDelayMs(policy, attempt);
      shards.push(delivery.shard);
      seqs.push(delivery.seq);
      delays.push(delay);
      parks.push(park);
      errors.push(errorText(error));
      const log = { consumer: consumer.name, eventId: delivery.event.id, contactId: delivery.event.contactId, attempt, err: error };
      if (park) logger.error(log, 'event outbox: consumer keeps failing on this event; parked (npm run events:outbox -- parked)');
      else {
        logger.warn({ ...log, retryInMs: delay }, 'event outbox: consumer failed; will retry');
        this.scheduleRetry(delay);
      }
    }
    await db.run(FAIL_SQL, [consumer.name, shards, seqs, delays, parks, errors]);
  }

  /** Wakes up when this process's earliest retry is due (retries of other processes are found by the poll). */
  private scheduleRetry(delayMs: number): void {
    const at = Date.now() + delayMs;
    if (this.stopped || at >= this.retryAt) return;
    clearTimeout(this.retryTimer);
    this.retryAt = at;
    this.retryTimer = setTimeout(() => {
      this.retryAt = Infinity;
      this.kick();
    }, delayMs + 5);
    this.retryTimer.unref();
  }

  private async listen(): Promise<void> {
    if (this.stopped) return;
    const client = new Client({ connectionString: this.databaseUrl, application_name: 'mailwright-outbox' });
    const retry = () => {
      if (this.stopped) return;
      setTimeout(() => void this.listen(), 1_000).unref();
    };
    client.on('notification', (msg) => this.kick(msg.payload === 'tallies' ? 'tallies' : 'all'));
    client.on('error', (err) => {
      logger.warn({ err }, 'event dispatcher lost its LISTEN connection; polling until it is back');
      client.end().catch(() => undefined);
      retry();
    });
    try {
      await client.connect();
      await onConnection(client).run(`LISTEN ${OUTBOX_CHANNEL}`);
      this.listener = client;
      this.kick(); // whatever was committed while not listening
    } catch (err) {
      logger.warn({ err }, 'event dispatcher could not LISTEN; retrying');
      client.end().catch(() => undefined);
      retry();
    }
  }
}
