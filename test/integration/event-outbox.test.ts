import { api } from '../helpers/api';
import { closeDb, db } from '../helpers/db';
import { createTestProject, type TestProject } from '../helpers/fixtures';
import { stackEnv } from '../stack-env';

// The test stack's worker runs the probe consumer (EVENTS_PROBE=true in test/global-setup.ts): a real consumer,
// registered in the real worker process, that records each event id it receives in event_probe_receipts.

afterAll(closeDb);

/** `n` /v1/track calls for `contacts` contacts (several events each), all at once; the event ids answered with 200. */
async function trackMany(project: TestProject, tag: string, n: number, contacts: number): Promise<{ ok: string[]; failed: string[] }> {
  const results = await Promise.allSettled(
    Array.from({ length: n }, (_, i) =>
      api('POST', '/v1/track', { key: project.publicKey, body: { email: `${tag}-${i % contacts}@example.com`, event: `step_${Math.floor(i / contacts)}`, data: { i } } }),
    ),
  );
  const ok: string[] = [];
  // Each failure as what the client saw (status and body, or the fetch error), so that a failing run says why.
  const failed: string[] = [];
  for (const r of results) {
    if (r.status === 'fulfilled' && r.value.status === 200) ok.push(r.value.body.data.event as string);
    else if (r.status === 'fulfilled') failed.push(`${r.value.status} ${r.value.text.slice(0, 300)}`);
    else failed.push(String((r.reason as Error)?.cause ?? r.reason));
  }
  return { ok, failed };
}

/**
 * Waits until the probe has received every event of the project and the dispatcher has committed their removal from
 * the outbox (the probe writes its receipts on its own connection, just before that commit).
 */
async function waitForProbe(projectId: string, timeoutMs = 120_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const events = (await db().query<{ id: string }>('select id from events where project_id = $1', [projectId])).rows.map((r) => r.id);
    const receipts = (
      await db().query<{ event_id: string; deliveries: number }>(
        'select r.event_id, r.deliveries from event_probe_receipts r join events e on e.id = r.event_id where e.project_id = $1',
        [projectId],
      )
    ).rows;
    const left = (await db().query(`select count(*)::int as n from event_outbox o where o.consumer = 'probe' and o.event_id = any($1::uuid[])`, [events])).rows[0].n as number;
    if ((receipts.length >= events.length && left === 0) || Date.now() > deadline) return { events, receipts };
    await new Promise((r) => setTimeout(r, 250));
  }
}

async function expectEveryEventOnce(projectId: string, answered: string[]): Promise<void> {
  const { events, receipts } = await waitForProbe(projectId);
  const received = receipts.map((r) => r.event_id);
  // Count and ids: each event of the project exactly once (event_id is the receipts' primary key), nothing else.
  expect(received.length).toBe(events.length);
  expect(new Set(received)).toEqual(new Set(events));
  // Every call answered 200 is among them.
  expect(answered.filter((id) => !events.includes(id))).toEqual([]);
  const left = await db().query(`select count(*)::int as n from event_outbox o where o.consumer = 'probe' and o.event_id = any($1::uuid[])`, [events]);
  expect(left.rows[0].n).toBe(0);
}

describe('event outbox: every recorded event reaches the registered consumers, also across crashes', () => {
  test('kill -9 of the worker right after /v1/track calls commit, and calls while it is down: each event reaches the probe exactly once', async () => {
    const project = await createTestProject('Outbox worker crash');
    const before = await trackMany(project, 'wk', 300, 60);
    expect(before.failed).toEqual([]);
    const restart = await fetch(`${stackEnv().workerControlUrl}/restart`, { method: 'POST' });
    expect(restart.status).toBe(204);
    // The new worker process was only just spawned: these are recorded while no dispatcher runs.
    const during = await trackMany(project, 'wk', 100, 60);
    expect(during.failed).toEqual([]);
    await expectEveryEventOnce(project.projectId, [...before.ok, ...during.ok]);
  }, 180_000);

  test('kill -9 of the API right after /v1/track calls commit (and with calls in flight): each committed event reaches the probe exactly once', async () => {
    const project = await createTestProject('Outbox API crash');
    const before = await trackMany(project, 'ap', 200, 50);
    expect(before.failed).toEqual([]);
    // A second wave is still in flight when the API dies: whatever of it committed must arrive too.
    const inFlight = trackMany(project, 'ap', 200, 50);
    await new Promise((r) => setTimeout(r, 20));
    const restart = await fetch(`${stackEnv().workerControlUrl}/restart-api`, { method: 'POST' });
    expect(restart.status).toBe(204);
    const wave = await inFlight;
    const after = await trackMany(project, 'ap', 50, 50);
    expect(after.failed).toEqual([]);
    await expectEveryEventOnce(project.projectId, [...before.ok, ...wave.ok, ...after.ok]);
  }, 180_000);
});
