// `npm run bench:segments`: segment counts and a tracked compute at 1,000,000 contacts and a few million events, on
// the real stack. Loopback only; stops by itself. Options (env): CONTACTS (1000000), RUNS (5). A compute is timed from
// its POST until GET /segments/:id/compute shows it COMPLETED (it runs as a workflow).
import { performance } from 'node:perf_hooks';
import { startBenchStack, benchProject } from './stack';
import { seedContactsSql } from './contacts-list.bench';

const CONTACTS = Number(process.env.CONTACTS ?? 1_000_000);
const RUNS = Number(process.env.RUNS ?? 5);

/** About 3.5 events per contact (0-7), spread over the last 90 days: page_view, purchase, login. One statement. */
async function seedEventsSql(db: import('pg').Pool, projectId: string): Promise<number> {
  const { rowCount } = await db.query(
    `insert into events (id, project_id, contact_id, name, data, source, created_at)
     select encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid()) placing substring(int8send((extract(epoch from t) * 1000)::bigint) from 3) from 1 for 6), 52, 1), 53, 1), 'hex')::uuid,
            $1, c.id, (array['page_view','page_view','purchase','login'])[1 + (h + g) % 4], '{}'::jsonb, 'TRACKED', t
     from contacts c,
          lateral (select abs(hashtext(c.id::text)) as h) x,
          lateral generate_series(1, x.h % 8) g,
          lateral (select now() - make_interval(secs => ((h / 8 + g * 7919) % (90 * 86400))::double precision)) y(t)
     where c.project_id = $1`,
    [projectId],
  );
  await db.query('vacuum analyze events');
  return rowCount ?? 0;
}

async function request(apiUrl: string, key: string, method: string, path: string, body?: unknown) {
  const t0 = performance.now();
  const res = await fetch(`${apiUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const json = (await res.json()) as Record<string, unknown>;
  const ms = Math.round(performance.now() - t0);
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(json)}`);
  return { ms, json };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** A compute from its POST (202) until GET /segments/:id/compute shows it finished: the time and its result. */
async function timedCompute(call: (method: string, path: string) => ReturnType<typeof request>, segmentId: string) {
  const t0 = performance.now();
  const started = await call('POST', `/segments/${segmentId}/compute`);
  for (;;) {
    const { json } = await call('GET', `/segments/${segmentId}/compute`);
    if (json.id === started.json.id && json.status !== 'RUNNING') {
      if (json.status !== 'COMPLETED') throw new Error(`compute ${String(json.status)}: ${String(json.error)}`);
      return { ms: Math.round(performance.now() - t0), json: json.result as Record<string, unknown> };
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function main() {
  const stack = await startBenchStack({ smtpUrl: 'smtp://127.0.0.1:9' });
  try {
    const { secretKey, projectId } = await benchProject(stack.apiUrl, stack.db, 'segments.example.test');
    let t0 = performance.now();
    await seedContactsSql(stack.db, projectId, CONTACTS);
    const seedContactsSeconds = Math.round((performance.now() - t0) / 100) / 10;
    t0 = performance.now();
    const events = await seedEventsSql(stack.db, projectId);
    const seedEventsSeconds = Math.round((performance.now() - t0) / 100) / 10;

    const call = (method: string, path: string, body?: unknown) => request(stack.apiUrl, secretKey, method, path, body);
    const segments = {
      planAndCountry: { operator: 'AND', conditions: [{ field: 'data.plan', operator: 'in', value: ['pro', 'team'] }, { field: 'data.country', operator: 'equals', value: 'DE' }] },
      proWithRecentPurchase: { operator: 'AND', conditions: [{ field: 'data.plan', operator: 'equals', value: 'pro' }, { event: 'purchase', operator: 'hasDone', withinDays: 30 }] },
      repeatBuyersOver40: { operator: 'AND', conditions: [{ field: 'data.age', operator: 'gt', value: 40 }, { event: 'purchase', operator: 'hasDone', minCount: 2 }] },
    };
    const counts: Record<string, { memberCount: number; refreshMs: { median: number; max: number } }> = {};
    for (const [name, condition] of Object.entries(segments)) {
      const created = await call('POST', '/segments', { name, type: 'DYNAMIC', condition });
      const id = created.json.id as string;
      const times: number[] = [];
      let memberCount = 0;
      for (let i = 0; i < RUNS; i++) {
        const r = await call('POST', `/segments/${id}/refresh`);
        times.push(r.ms);
        memberCount = r.json.memberCount as number;
      }
      counts[name] = { memberCount, refreshMs: { median: median(times), max: Math.max(...times) } };
    }

    // Tracked segment: plan in [pro, team] (1/3 of the contacts). First compute = every member enters.
    const tracked = await call('POST', '/segments', { name: 'Paying', type: 'DYNAMIC', condition: { operator: 'AND', conditions: [{ field: 'data.plan', operator: 'in', value: ['pro', 'team'] }] }, trackMembership: true });
    const trackedId = tracked.json.id as string;
    const first = await timedCompute(call, trackedId);
    // ~10% churn: members with a low score downgrade (exits), non-members with a low score upgrade (entries).
    t0 = performance.now();
    await stack.db.query(
      `update contacts set data = data || jsonb_build_object('plan', case when data->>'plan' in ('pro','team') then 'free' else 'pro' end)
       where project_id = $1 and ((data->>'plan' in ('pro','team') and (data->>'score')::int < 50) or (data->>'plan' not in ('pro','team') and (data->>'score')::int < 25))`,
      [projectId],
    );
    await stack.db.query('vacuum analyze contacts');
    const churnSeconds = Math.round((performance.now() - t0) / 100) / 10;
    const second = await timedCompute(call, trackedId);
    const unchanged = await timedCompute(call, trackedId);
    const [ev] = (await stack.db.query(`select count(*)::int as n from events where project_id = $1 and name like 'segment.paying.%'`, [projectId])).rows as { n: number }[];

    console.log(
      JSON.stringify(
        {
          date: new Date().toISOString().slice(0, 10),
          contacts: CONTACTS,
          events,
          seedContactsSeconds,
          seedEventsSeconds,
          counts,
          compute: {
            first: { ms: first.ms, ...first.json },
            churnSeconds,
            afterChurn: { ms: second.ms, ...second.json },
            unchanged: { ms: unchanged.ms, ...unchanged.json },
            segmentEventsStored: ev!.n,
          },
        },
        null,
        2,
      ),
    );
  } finally {
    await stack.stop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
