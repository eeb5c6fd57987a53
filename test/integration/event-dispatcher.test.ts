import { randomUUID } from 'node:crypto';
import { uuidv7 } from '../../domain/ids';
import { EventDispatcher, type DispatcherOptions } from '../../domain/events/event-dispatcher';
import type { EventConsumer, OutboxEvent } from '../../domain/events/event-consumer';
import { discardParked, listParked, replayParked, retireConsumer } from '../../domain/events/outbox-admin';
import { closeDb, db } from '../helpers/db';
import { createTestProject } from '../helpers/fixtures';
import { seedContacts } from '../helpers/seed';
import { stackEnv } from '../stack-env';

// The dispatcher in this process, against the test stack's Postgres, with consumers of its own (unique names: the
// stack's worker delivers only to the consumers it registered itself, so it never touches these).

let projectId: string;
const dispatchers: EventDispatcher[] = [];
const consumerNames: string[] = [];

beforeAll(async () => {
  projectId = (await createTestProject('Dispatcher')).projectId;
});

afterAll(async () => {
  await Promise.all(dispatchers.map((d) => d.stop()));
  for (const name of consumerNames) await retireConsumer(db(), name);
  await closeDb();
});

const OPTS: DispatcherOptions = { pollIntervalMs: 60_000, batchSize: 50, retry: { maxAttempts: 3, baseDelayMs: 100, maxDelayMs: 1_000 }, shardsPerRound: 4 };

function consumerName(tag: string): string {
  const name = `test-${tag}-${randomUUID().slice(0, 8)}`;
  consumerNames.push(name);
  return name;
}

async function dispatcherFor(consumer: EventConsumer, opts: Partial<DispatcherOptions> = {}): Promise<EventDispatcher> {
  const d = new EventDispatcher(stackEnv().databaseUrl, [consumer], { ...OPTS, ...opts });
  dispatchers.push(d);
  await d.register();
  return d;
}

async function contacts(n: number): Promise<string[]> {
  return seedContacts(projectId, n, () => ({ email: `d-${randomUUID()}@example.com` }));
}

/** Waits up to 10 s for `done`; throws naming `what` if it never holds. */
async function waitFor(what: string, done: () => boolean): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`no ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** One tally row (its trigger notifies the dispatchers with the payload `tallies`). */
function insertTally() {
  return db().query(`insert into event_tallies (project_id, rollup, key, hour, count) values ($1, 'analytics_hourly', 'sent', date_trunc('hour', now(), 'UTC'), 1)`, [projectId]);
}

/** Records one event per contact in one statement (as the set-based paths do); returns the ids in contact order. */
async function record(contactIds: string[], name: string): Promise<string[]> {
  const ids = contactIds.map(() => uuidv7());
  await db().query(
    `insert into events (id, project_id, contact_id, name, data, source)
     select id, $1, contact_id, $4, '{}', 'TRACKED' from unnest($2::uuid[], $3::uuid[]) as t(id, contact_id)`,
    [projectId, ids, contactIds, name],
  );
  return ids;
}

async function outboxRows(consumer: string) {
  return (
    await db().query<{ event_id: string; attempts: number; next_attempt_at: Date | null; parked_at: Date | null; last_error: string | null }>(
      'select event_id, attempts, next_attempt_at, parked_at, last_error from event_outbox where consumer = $1 order by seq',
      [consumer],
    )
  ).rows;
}

/** Outbox rows of the consumer that are neither parked nor held back by an earlier parked event of their contact. */
async function deliverableRows(consumer: string): Promise<number> {
  const { rows } = await db().query<{ n: number }>(
    `select count(*)::int as n from event_outbox o
     where o.consumer = $1 and o.parked_at is null
       and not exists (select 1 from event_outbox p where p.consumer = o.consumer and p.contact_id = o.contact_id and p.parked_at is not null and p.seq < o.seq)`,
    [consumer],
  );
  return rows[0]!.n;
}

/**
 * Drains until nothing is left to hand over: no rows, or only parked ones and those they hold back. The rows are the
 * judge, not what this call handed over: the dispatcher's own wake-ups (a notification, a retry timer) drain beside
 * it, and a round of theirs that has called the consumer but not yet committed still shows its rows.
 */
async function drainAll(ds: EventDispatcher[], consumer: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    await Promise.all(ds.map((d) => d.drain()));
    const left = await deliverableRows(consumer);
    if (left === 0) return;
    if (Date.now() > deadline) throw new Error(`${left} deliverable outbox rows left for ${consumer}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('event outbox dispatcher', () => {
  test('the trigger queues an event for every registered consumer in the inserting transaction (a rollback leaves nothing)', async () => {
    const name = consumerName('tx');
    await dispatcherFor({ name, handle: async () => undefined });
    const [contact] = await contacts(1);
    const client = await db().connect();
    try {
      await client.query('begin');
      const id = uuidv7();
      await client.query(`insert into events (id, project_id, contact_id, name, source) values ($1, $2, $3, 'x', 'TRACKED')`, [id, projectId, contact]);
      const inside = await client.query('select count(*)::int as n from event_outbox where consumer = $1 and event_id = $2', [name, id]);
      expect(inside.rows[0].n).toBe(1);
      await client.query('rollback');
    } finally {
      client.release();
    }
    expect(await outboxRows(name)).toEqual([]);
  });

  test('a consumer that declares its event names gets outbox rows for those events only; a new declaration takes effect on registering', async () => {
    const name = consumerName('names');
    const got: string[] = [];
    const d = await dispatcherFor({ name, eventNames: ['wanted', 'also_wanted'], handle: async (events) => void got.push(...events.map((e) => e.name)) });
    const cs = await contacts(3);
    await record(cs, 'wanted');
    await record(cs, 'ignored');
    await record(cs, 'also_wanted');
    expect((await outboxRows(name)).length).toBe(6);
    await drainAll([d], name);
    expect(got.sort()).toEqual(['also_wanted', 'also_wanted', 'also_wanted', 'wanted', 'wanted', 'wanted']);
    // Every event again, once the consumer no longer declares names.
    const all = new EventDispatcher(stackEnv().databaseUrl, [{ name, handle: async () => undefined }], OPTS);
    dispatchers.push(all);
    await all.register();
    await record(cs, 'ignored');
    expect((await outboxRows(name)).length).toBe(3);
  });

  test('hands every event over once, each contact in recorded order, and removes what the consumer accepted', async () => {
    const name = consumerName('order');
    const got: OutboxEvent[] = [];
    const d = await dispatcherFor({ name, handle: async (events) => void got.push(...events) });
    const cs = await contacts(20);
    const recorded: string[][] = [];
    for (let step = 0; step < 5; step++) recorded.push(await record(cs, `step_${step}`));
    await drainAll([d], name);
    expect(got.map((e) => e.id).sort()).toEqual(recorded.flat().sort());
    cs.forEach((c, i) => expect(got.filter((e) => e.contactId === c).map((e) => e.id)).toEqual(recorded.map((ids) => ids[i])));
    expect(got[0]).toMatchObject({ projectId, source: 'TRACKED', data: {}, emailId: null, attempts: 0, createdAt: expect.any(Date) });
    expect(await outboxRows(name)).toEqual([]);
  });

  test('a failing event is retried with backoff, then parked where an operator sees it; only its contact waits; replay delivers it, then the rest in order', async () => {
    const name = consumerName('park');
    let poisonFails = true;
    const accepted: string[] = [];
    const calls: string[][] = [];
    const [a, b] = await contacts(2);
    const d = await dispatcherFor({
      name,
      async handle(events) {
        calls.push(events.map((e) => e.id));
        for (const e of events) {
          if (e.name === 'poison' && poisonFails) throw new Error(`cannot take ${e.id}`);
          accepted.push(e.id);
        }
      },
    });
    const [a1] = await record([a!], 'ok');
    const [x] = await record([a!], 'poison');
    const [a3, b1] = await record([a!, b!], 'ok');
    const [b2] = await record([b!], 'ok');

    // The failure is recorded between t0 and t1, so the delay it set is within [next - t1, next - t0].
    const t0 = Date.now();
    // First failure: the contact's events before it and the other contact's events are accepted.
    await d.drain();
    const t1 = Date.now();
    expect(accepted).toEqual(expect.arrayContaining([a1, b1, b2]));
    expect(accepted).not.toContain(x);
    expect(accepted).not.toContain(a3);
    let rows = await outboxRows(name);
    expect(rows.map((r) => [r.event_id, r.attempts])).toEqual([
      [x, 1],
      [a3, 0],
    ]);
    expect(rows[0]!.last_error).toBe(`Error: cannot take ${x}`);
    const next = rows[0]!.next_attempt_at!.getTime();
    expect(next - t0).toBeGreaterThanOrEqual(100); // base delay
    expect(next - t1).toBeLessThanOrEqual(111); // plus at most 10% jitter (and 1 ms of rounding)
    const wait1 = next - Date.now();

    // Not due yet: a drain now does not call the consumer with it (nor with the contact's later event).
    const callsBefore = calls.length;
    if (wait1 > 30) {
      await d.drain();
      expect(calls.length).toBe(callsBefore);
    }

    // Second failure once the first delay has passed (the dispatcher wakes itself up for its retries), with a
    // doubled delay: it was recorded at or after the first next_attempt_at, and before we saw it.
    const waitForAttempt = async (n: number) => {
      const deadline = Date.now() + 5_000;
      for (;;) {
        const r = await outboxRows(name);
        if (r[0]!.attempts >= n) return { rows: r, seen: Date.now() };
        if (Date.now() > deadline) throw new Error(`attempt ${n} did not happen`);
        await new Promise((resolve) => setTimeout(resolve, 10));
        await d.drain();
      }
    };
    const second = await waitForAttempt(2);
    expect(second.rows[0]).toMatchObject({ event_id: x, attempts: 2, parked_at: null });
    const next2 = second.rows[0]!.next_attempt_at!.getTime();
    expect(next2 - next).toBeGreaterThanOrEqual(200); // doubled
    expect(next2 - second.seen).toBeLessThanOrEqual(221);

    // Third failure: parked (maxAttempts 3); the contact's later event still waits behind it.
    rows = (await waitForAttempt(3)).rows;
    expect(rows[0]).toMatchObject({ event_id: x, attempts: 3, next_attempt_at: null, parked_at: expect.any(Date) });
    expect(rows[1]).toMatchObject({ event_id: a3, attempts: 0, parked_at: null });
    const calledWithX = calls.filter((c) => c.includes(x!)).length;
    await d.drain();
    expect(calls.filter((c) => c.includes(x!)).length).toBe(calledWithX); // parked: not tried again
    expect(accepted).not.toContain(a3);

    const parked = await listParked(db(), { consumer: name });
    expect(parked).toEqual([
      expect.objectContaining({ consumer: name, eventId: x, contactId: a, projectId, name: 'poison', attempts: 3, lastError: `Error: cannot take ${x}`, heldBack: 1 }),
    ]);

    // The operator fixes the cause and replays: the parked event comes first, then the contact's later one.
    poisonFails = false;
    expect(await replayParked(db(), name)).toBe(1);
    await drainAll([d], name);
    expect(accepted.slice(-2)).toEqual([x, a3]);
    expect(await outboxRows(name)).toEqual([]);
  });

  test('discarding a parked event lets its contact\'s later events go ahead', async () => {
    const name = consumerName('discard');
    const accepted: string[] = [];
    const [c] = await contacts(1);
    const d = await dispatcherFor(
      {
        name,
        async handle(events) {
          for (const e of events) {
            if (e.name === 'poison') throw new Error('never');
            accepted.push(e.id);
          }
        },
      },
      { retry: { maxAttempts: 1, baseDelayMs: 10, maxDelayMs: 10 } },
    );
    const [x] = await record([c!], 'poison');
    const [later] = await record([c!], 'ok');
    await drainAll([d], name);
    expect(accepted).toEqual([]);
    expect((await outboxRows(name)).map((r) => [r.event_id, !!r.parked_at])).toEqual([
      [x, true],
      [later, false],
    ]);
    expect(await discardParked(db(), name, [x!])).toBe(1);
    await drainAll([d], name);
    expect(accepted).toEqual([later]);
  });

  test('events deleted before dispatch (their contact was deleted) are dropped from the outbox without a call', async () => {
    const name = consumerName('gone');
    const got: string[] = [];
    const d = await dispatcherFor({ name, handle: async (events) => void got.push(...events.map((e) => e.id)) });
    const [gone, kept] = await contacts(2);
    const ids = await record([gone!, kept!], 'x');
    await db().query('delete from contacts where id = $1', [gone]);
    await drainAll([d], name);
    expect(got).toEqual([ids[1]]);
    expect(await outboxRows(name)).toEqual([]);
  });

  test('two dispatchers at once and a consumer that fails now and then: every event arrives, and no event of a contact is handed over before the earlier ones were accepted', async () => {
    const name = consumerName('replicas');
    const cs = await contacts(30);
    const order = new Map<string, number>(); // event id -> position in its contact's stream
    const byContact = new Map<string, string[]>(cs.map((c) => [c, []]));
    const processed = new Map<string, string[]>(cs.map((c) => [c, []]));
    const done = new Set<string>();
    const seen = new Map<string, number>();
    const violations: string[] = [];
    const handledBy = [0, 0];
    const consumerOf = (replica: number): EventConsumer => ({
      name,
      async handle(events) {
        handledBy[replica]! += events.length;
        // The guarantee, checked when a call starts: every earlier event of the contact was accepted before, or
        // comes earlier in this very call.
        const inCall = new Set<string>();
        for (const e of events) {
          const stream = byContact.get(e.contactId)!;
          for (const earlier of stream.slice(0, order.get(e.id)!)) {
            if (!done.has(earlier) && !inCall.has(earlier)) violations.push(`${e.id} before ${earlier}`);
          }
          inCall.add(e.id);
        }
        await new Promise((r) => setTimeout(r, 1 + Math.floor(Math.random() * 4)));
        for (const e of events) {
          const n = (seen.get(e.id) ?? 0) + 1;
          seen.set(e.id, n);
          // One event in five fails its first two deliveries.
          if (parseInt(e.id.slice(-2), 16) % 5 === 0 && n <= 2) throw new Error(`flaky ${e.id}`);
          if (!done.has(e.id)) processed.get(e.contactId)!.push(e.id);
          done.add(e.id);
        }
      },
    });
    const retry = { maxAttempts: 100, baseDelayMs: 10, maxDelayMs: 50 };
    const ds = [await dispatcherFor(consumerOf(0), { retry }), await dispatcherFor(consumerOf(1), { retry })];
    // Events keep arriving while both dispatchers drain.
    const draining = (async () => {
      for (let i = 0; i < 40; i++) {
        await Promise.all(ds.map((d) => d.drain()));
        await new Promise((r) => setTimeout(r, 5));
      }
    })();
    for (let step = 0; step < 10; step++) {
      const ids = await record(cs, `step_${step}`);
      ids.forEach((id, i) => {
        order.set(id, step);
        byContact.get(cs[i]!)!.push(id);
      });
      await new Promise((r) => setTimeout(r, 10));
    }
    await draining;
    await drainAll(ds, name);
    expect(violations).toEqual([]);
    expect(done.size).toBe(300);
    for (const c of cs) expect(processed.get(c)).toEqual(byContact.get(c));
    expect(handledBy[0]! + handledBy[1]!).toBeGreaterThanOrEqual(300);
    expect(await outboxRows(name)).toEqual([]);
  }, 60_000);

  test('a transactional consumer writes in the round: a failed call leaves nothing, an accepted one commits once', async () => {
    const name = consumerName('tx');
    const table = `tx_test_${randomUUID().slice(0, 8)}`;
    await db().query(`create table ${table} (event_id uuid primary key)`);
    let failOnce = true;
    const consumer: EventConsumer = {
      name,
      transactional: true,
      async handle(events, { tx }) {
        // Writes first, then fails once: the savepoint must undo the writes of the failed call.
        await tx!.query(`insert into ${table} (event_id) select unnest($1::uuid[])`, [events.map((e) => e.id)]);
        if (failOnce) {
          failOnce = false;
          throw new Error('first call fails after writing');
        }
      },
    };
    const d = await dispatcherFor(consumer);
    const ids = await record(await contacts(3), 'tx.test');
    await drainAll([d], name);
    // A unique violation would have shown a double write; a missing id a lost one.
    const { rows } = await db().query<{ event_id: string }>(`select event_id from ${table} order by event_id`);
    expect(rows.map((r) => r.event_id)).toEqual([...ids].sort());
    expect(await outboxRows(name)).toEqual([]);
    await db().query(`drop table ${table}`);
  });

  test('a tally wakes a listening dispatcher to fold tallies only; an event wakes it for the consumer rounds too', async () => {
    const name = consumerName('tally-wake');
    const got: string[] = [];
    let takes = 0;
    // This consumer counts the calls and takes nothing: the stack's worker folds the row into the rollups as always.
    const d = await dispatcherFor({ name, eventNames: ['tally_wake'], handle: async (events) => void got.push(...events.map((e) => e.id)), takeTallies: async () => (takes++, 0) });
    const rounds = jest.spyOn(d as unknown as { drainConsumer: (c: EventConsumer) => Promise<number> }, 'drainConsumer');
    await d.start();
    // start() drains once; then the tally's notification alone.
    await waitFor('first drain', () => takes > 0 && rounds.mock.calls.length > 0);
    await new Promise((r) => setTimeout(r, 200));
    const roundsBefore = rounds.mock.calls.length;
    const takesBefore = takes;
    await insertTally();
    await waitFor('tally drain', () => takes > takesBefore);
    await new Promise((r) => setTimeout(r, 200));
    expect(rounds.mock.calls.length).toBe(roundsBefore);
    const [contact] = await contacts(1);
    const [id] = await record([contact!], 'tally_wake');
    await waitFor('event delivery', () => got.includes(id!));
    expect(rounds.mock.calls.length).toBeGreaterThan(roundsBefore);
  });

  test('tallies that come faster than tallyIntervalMs are folded together, not once per notification', async () => {
    const name = consumerName('tally-interval');
    const takes: number[] = [];
    // Takes nothing, as above: the stack's worker folds the rows; this counts when this dispatcher folds.
    const d = await dispatcherFor({ name, eventNames: ['tally_interval'], handle: async () => undefined, takeTallies: async () => (takes.push(Date.now()), 0) }, { tallyIntervalMs: 1_000 });
    await d.start();
    await waitFor('first drain', () => takes.length > 0);
    expect(takes.length).toBe(1);
    // Five notifications 100 ms apart: without the interval each one was a fold (a transaction) of its own.
    const firstInsert = Date.now();
    for (let i = 0; i < 5; i++) {
      await insertTally();
      await new Promise((r) => setTimeout(r, 100));
    }
    await new Promise((r) => setTimeout(r, 1_500));
    const later = takes.slice(1);
    // At most one fold at once (if the interval since start() had passed) and one for the rest; none left out. (The
    // times are taken inside the fold's transaction, a round trip after the interval's start: not exactly 1 s apart.)
    expect(later.length).toBeGreaterThanOrEqual(1);
    expect(later.length).toBeLessThanOrEqual(2);
    if (later.length === 2) expect(later[1]! - later[0]!).toBeGreaterThanOrEqual(500);
    expect(later[later.length - 1]).toBeGreaterThanOrEqual(firstInsert);
  });
});

