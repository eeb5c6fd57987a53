import { randomUUID } from 'node:crypto';
import { campaignThroughRestart, pooled, sleep, useFaultStack, waitUntil } from './support';

/**
 * Postgres stopped and started again (a fast shutdown: every session ends) on a stack of the test's own, under
 * `/v1/track` load and during a campaign. The API and worker are not restarted. Counted: every event whose call got
 * a 200 is stored and reaches the outbox's probe consumer once; while the database is away every refusal is a 503
 * `SERVICE_UNAVAILABLE` in the error envelope (no 500); the API answers 200 again after the restart; the campaign
 * ends SENT with every recipient once. Prints `[fault postgres]`.
 */

const TRACK_CALLS = 4_000;
const TRACK_CONCURRENCY = 8;
const DOWN_MS = 8_000;
const RECIPIENTS = 5_000;


const f = useFaultStack('postgres', { CAMPAIGN_RETRY_DELAYS: '2s,5s,10s' });

/** Whether a refusal is SPEC's envelope: success false, the code, the status, a request id. */
function isEnvelope(body: any, status: number): boolean {
  return body?.success === false && body.error?.statusCode === status && typeof body.error?.code === 'string' && typeof body.error?.requestId === 'string' && typeof body.timestamp === 'string';
}

test('Postgres restarted under /v1/track load: every accepted event stored and dispatched once, 503 in the envelope while it is away, the API recovers by itself', async () => {
  const tag = `p${randomUUID().slice(0, 6)}`;
  const apiPid = f.stack.api!.child.pid;
  let done = 0;
  let restart: Promise<number> | undefined;
  const byStatus: Record<string, number> = {};
  const notEnvelope: string[] = [];
  const internal: string[] = [];
  const t0 = Date.now();
  const results = await pooled(
    Array.from({ length: TRACK_CALLS }, (_, i) => i),
    TRACK_CONCURRENCY,
    async (i) => {
      if (done >= 1_000 && !restart) restart = f.stack.restart('postgres', DOWN_MS);
      let out: { status: number; eventId?: string; at: number };
      try {
        const res = await fetch(`${f.stack.apiUrl}/v1/track`, {
          method: 'POST',
          headers: { authorization: `Bearer ${f.project.publicKey}`, 'content-type': 'application/json' },
          body: JSON.stringify({ email: `${tag}-${i}@example.com`, event: `${tag}-ev`, data: { i } }),
        });
        const body = (await res.json().catch(() => undefined)) as any;
        const key = res.status === 200 ? '200' : `${res.status} ${body?.error?.code ?? ''}`;
        byStatus[key] = (byStatus[key] ?? 0) + 1;
        if (res.status !== 200 && !isEnvelope(body, res.status)) notEnvelope.push(`${res.status} ${JSON.stringify(body).slice(0, 200)}`);
        if (res.status === 500) internal.push(body?.error?.requestId); // in the API's log (KEEP_TEST_DATA=1 keeps it)
        out = { status: res.status, eventId: res.status === 200 ? body.data.event : undefined, at: Date.now() };
      } catch {
        byStatus['connection error'] = (byStatus['connection error'] ?? 0) + 1;
        out = { status: 0, at: Date.now() };
      }
      done++;
      // Keep the load going while the database is away: a refused call comes back at once.
      if (out.status !== 200) await sleep(50);
      return out;
    },
  );
  const downMs = await restart!;
  const loadMs = Date.now() - t0;
  // After the restart, without touching the API: it answers 200 again.
  const recovered = await waitUntil('the API answers /v1/track again', 60_000, async () => {
    const res = await fetch(`${f.stack.apiUrl}/v1/track`, {
      method: 'POST',
      headers: { authorization: `Bearer ${f.project.publicKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ email: `${tag}-after@example.com`, event: `${tag}-after` }),
    });
    return res.status === 200;
  });

  const accepted = results.filter((r) => r.eventId).map((r) => r.eventId!);
  const ids = async (table: string, column: string) =>
    new Map((await f.db.query<{ id: string; n: number }>(`select ${column}::text as id, count(*)::int as n from ${table} where ${column} = any($1::uuid[]) group by 1`, [accepted])).rows.map((r) => [r.id, r.n]));
  const stored = await ids('events', 'id');
  await waitUntil('the probe consumer has every accepted event', 120_000, async () => (await ids('event_probe_receipts', 'event_id')).size === accepted.length, async () => ({ probe: (await ids('event_probe_receipts', 'event_id')).size, accepted: accepted.length }));
  await sleep(3_000); // a late second delivery would show now
  const probe = await ids('event_probe_receipts', 'event_id');
  const storedAll = (await f.db.query<{ n: number }>(`select count(*)::int as n from events where name = $1`, [`${tag}-ev`])).rows[0]!.n;
  const lost = accepted.filter((id) => !stored.has(id)).length;
  const notDispatched = accepted.filter((id) => !probe.has(id)).length;
  const dispatchedTwice = [...probe.values()].filter((n) => n > 1).length;
  const errors500 = Object.entries(byStatus).filter(([k]) => k.startsWith('500')).reduce((n, [, v]) => n + v, 0);
  console.log(
    `[fault postgres] /v1/track ${TRACK_CALLS} calls at concurrency ${TRACK_CONCURRENCY}, Postgres down for ${(downMs / 1000).toFixed(1)} s after call 1,000; load ${(loadMs / 1000).toFixed(1)} s; ` +
      `answers ${JSON.stringify(byStatus)}; not in the envelope ${notEnvelope.length}; API 200 again ${(recovered / 1000).toFixed(1)} s after the load (same process: ${f.stack.api?.child.pid === apiPid}); ` +
      `accepted ${accepted.length}, stored ${stored.size} (events of the run in the table ${storedAll}), lost ${lost}, not dispatched ${notDispatched}, dispatched twice ${dispatchedTwice}`,
  );
  expect(notEnvelope.slice(0, 5)).toEqual([]);
  expect({ errors500, requestIds: internal }).toEqual({ errors500: 0, requestIds: [] });
  expect(byStatus['503 SERVICE_UNAVAILABLE'] ?? 0).toBeGreaterThan(0); // the database was really away under load
  expect(f.stack.api?.child.pid).toBe(apiPid);
  expect(f.stack.api?.child.exitCode).toBeNull();
  expect({ lost, notDispatched, dispatchedTwice }).toEqual({ lost: 0, notDispatched: 0, dispatchedTwice: 0 });
}, 600_000);

test('Postgres restarted during a campaign: the campaign ends SENT with every recipient once', async () => {
  const r = await campaignThroughRestart(f, 'postgres', RECIPIENTS, DOWN_MS);
  expect(r).toEqual({ status: 'SENT', lost: 0, duplicated: 0, stats: { audience: RECIPIENTS, sent: RECIPIENTS, failed: 0, skipped: 0 }, sameWorker: true });
}, 600_000);
