import { randomUUID } from 'node:crypto';
import { api } from '../helpers/api';
import { closeDb, db, waitForEmailStatus } from '../helpers/db';
import { expectStatus, projectWithDomain } from '../helpers/automations';
import { createTestProject, type TestProject } from '../helpers/fixtures';

/**
 * Analytics from the hourly rollups the `analytics` outbox consumer keeps: after a mixed load (sends, a bounce, tracked
 * events) the rollups equal a scan of emails and events exactly; days follow the requested zone across daylight saving
 * changes; empty ranges are zeros; bad zones and ranges are 422; another project sees nothing.
 */

let project: TestProject;
let other: TestProject;
let domain: string;
const call = (path: string, p = project) => api('GET', path, { key: p.secretKey });

beforeAll(async () => {
  ({ project, domain } = await projectWithDomain('analytics'));
  other = await createTestProject('analytics-other');
});
afterAll(closeDb);

/** The scan the rollups must equal: the same metrics counted from the stored events and the campaign rows. */
async function scan(projectId: string): Promise<{ metrics: Record<string, number>; names: Record<string, number> }> {
  const { rows } = await db().query<{ metric: string; n: number }>(
    `select metric, count(*)::int as n from (
       select case name when 'email.sent' then 'sent' when 'email.delivered' then 'delivered' when 'email.open' then 'opened'
                        when 'email.click' then 'clicked' when 'email.bounced' then 'bounced' when 'email.complained' then 'complained'
                        when 'contact.unsubscribed' then 'unsubscribed' when 'email.failed' then 'failed' end as metric
       from events where project_id = $1 and (name <> 'email.bounced' or coalesce(data ->> 'transient', 'false') <> 'true')
       union all select 'sent' from emails where project_id = $1 and campaign_id is not null and sent_at is not null
     ) x where metric is not null group by 1`,
    [projectId],
  );
  const names = await db().query<{ name: string; n: number }>(
    `select name, count(*)::int as n from events where project_id = $1 group by 1`,
    [projectId],
  );
  return { metrics: Object.fromEntries(rows.map((r) => [r.metric, r.n])), names: Object.fromEntries(names.rows.map((r) => [r.name, r.n])) };
}

const sorted = (o: Record<string, number>) => Object.fromEntries(Object.entries(o).sort(([a], [b]) => a.localeCompare(b)));

async function rollupNames(projectId: string): Promise<Record<string, number>> {
  const { rows } = await db().query<{ name: string; n: number }>('select name, sum(count)::int as n from event_name_hourly where project_id = $1 group by 1', [projectId]);
  return Object.fromEntries(rows.map((r) => [r.name, r.n]));
}

test('after a mixed load the timeseries equals a scan of emails and events, per metric and per event name', async () => {
  const tag = randomUUID().slice(0, 8);
  const ids: string[] = [];
  for (const to of [`a-${tag}@example.com`, `b-${tag}@example.com`, `bounce-${tag}@example.com`]) {
    const res = expectStatus(await api('POST', '/v1/send', { key: project.secretKey, body: { to, from: `hi@${domain}`, subject: 'Hi', body: '<p>x</p>' } }), 200);
    ids.push(res.data.emails[0].email);
  }
  for (let i = 0; i < 5; i++) {
    expectStatus(await api('POST', '/v1/track', { key: project.publicKey, body: { email: `t${i % 2}-${tag}@example.com`, event: i % 2 ? 'viewed' : 'clicked_cta' } }), 200);
  }
  await waitForEmailStatus(ids[0]!, 'SENT');
  await waitForEmailStatus(ids[2]!, 'BOUNCED');
  const from = new Date(Date.now() - 3 * 3_600_000).toISOString();
  const to = new Date(Date.now() + 3_600_000).toISOString();
  const deadline = Date.now() + 20_000;
  for (;;) {
    const expected = await scan(project.projectId);
    const series = expectStatus(await call(`/analytics/timeseries?interval=hour&from=${from}&to=${to}`), 200);
    const names = await rollupNames(project.projectId);
    const got = sorted(Object.fromEntries(Object.entries(series.totals as Record<string, number>).filter(([, n]) => n > 0)));
    if (JSON.stringify(got) === JSON.stringify(sorted(expected.metrics)) && JSON.stringify(sorted(names)) === JSON.stringify(sorted(expected.names))) {
      expect(got).toMatchObject({ sent: 2, bounced: 1 });
      // Every event per name, the service's own too (event stats and activity stats read them).
      expect(names).toMatchObject({ clicked_cta: 3, viewed: 2, 'email.sent': 2, 'email.bounced': 1 });
      const top = expectStatus(await call(`/analytics/top-events?from=${from}&to=${to}`), 200);
      expect(top.data).toEqual([{ name: 'clicked_cta', count: 3 }, { name: 'viewed', count: 2 }]);
      expect(expectStatus(await call(`/analytics/top-events?limit=1&from=${from}&to=${to}`), 200).data).toEqual([{ name: 'clicked_cta', count: 3 }]);
      expect(expectStatus(await call(`/analytics/top-events?from=${from}&to=${to}`, other), 200).data).toEqual([]);
      break;
    }
    if (Date.now() > deadline) {
      expect({ rollup: got, names: sorted(names) }).toEqual({ rollup: sorted(expected.metrics), names: sorted(expected.names) });
    }
    await new Promise((r) => setTimeout(r, 250));
  }
});

describe('time zones and ranges', () => {
  let seeded: TestProject;
  beforeAll(async () => {
    seeded = await createTestProject('analytics-dst');
    // One `sent` in every UTC hour around both 2026 daylight saving changes in Europe/Berlin (March 29, October 25).
    await db().query(
      `insert into analytics_hourly (project_id, metric, hour, count)
       select $1::uuid, 'sent', h, 1 from generate_series('2026-03-27T00:00:00Z'::timestamptz, '2026-04-01T00:00:00Z', interval '1 hour') h
       union all
       select $1::uuid, 'sent', h, 1 from generate_series('2026-10-23T00:00:00Z'::timestamptz, '2026-10-28T00:00:00Z', interval '1 hour') h`,
      [seeded.projectId],
    );
  });

  test('days follow the zone: 23 hours on the spring change, 25 on the autumn one', async () => {
    const spring = expectStatus(await call('/analytics/timeseries?interval=day&timezone=Europe/Berlin&from=2026-03-28T00:00:00%2B01:00&to=2026-03-31T00:00:00%2B02:00', seeded), 200);
    expect(spring.data.map((d: any) => [d.local, d.start, d.values.sent])).toEqual([
      ['2026-03-28', '2026-03-27T23:00:00.000Z', 24],
      ['2026-03-29', '2026-03-28T23:00:00.000Z', 23],
      ['2026-03-30', '2026-03-29T22:00:00.000Z', 24],
    ]);
    const autumn = expectStatus(await call('/analytics/timeseries?interval=day&timezone=Europe/Berlin&from=2026-10-24T00:00:00%2B02:00&to=2026-10-27T00:00:00%2B01:00&metrics=sent', seeded), 200);
    expect(autumn.data.map((d: any) => [d.local, d.values.sent])).toEqual([
      ['2026-10-24', 24],
      ['2026-10-25', 25],
      ['2026-10-26', 24],
    ]);
    expect(autumn.metrics).toEqual(['sent']);
    const utc = expectStatus(await call('/analytics/timeseries?interval=day&from=2026-03-29T00:00:00Z&to=2026-03-30T00:00:00Z', seeded), 200);
    expect(utc.data.map((d: any) => [d.local, d.values.sent])).toEqual([['2026-03-29', 24]]);
    const hours = expectStatus(await call('/analytics/timeseries?interval=hour&timezone=America/New_York&from=2026-03-28T00:00:00Z&to=2026-03-28T03:00:00Z', seeded), 200);
    expect(hours.data.map((d: any) => [d.local, d.values.sent])).toEqual([
      ['2026-03-27T20:00', 1],
      ['2026-03-27T21:00', 1],
      ['2026-03-27T22:00', 1],
    ]);
  });

  test('an empty range is all zeros; another project sees none of it', async () => {
    const empty = expectStatus(await call('/analytics/timeseries?interval=day&from=2025-01-01T00:00:00Z&to=2025-01-04T00:00:00Z', seeded), 200);
    expect(empty.data).toHaveLength(3);
    expect(empty.data.every((d: any) => Object.values(d.values).every((n) => n === 0))).toBe(true);
    const theirs = expectStatus(await call('/analytics/timeseries?interval=day&from=2026-03-28T00:00:00Z&to=2026-03-31T00:00:00Z', other), 200);
    expect(theirs.totals.sent).toBe(0);
  });

  test('422: unknown zone, reversed or too large range, unknown metric', async () => {
    for (const q of [
      'timezone=Mars/Olympus_Mons',
      'from=2026-03-02T00:00:00Z&to=2026-03-01T00:00:00Z',
      'interval=hour&from=2026-01-01T00:00:00Z&to=2026-03-01T00:00:00Z',
      'metrics=sent,revenue',
      'from=yesterday',
    ]) {
      const res = await call(`/analytics/timeseries?${q}`, seeded);
      expect({ q, status: res.status }).toEqual({ q, status: 422 });
    }
  });
});

describe('campaign analytics', () => {
  let p: TestProject;
  const ids: Record<string, string> = {};
  beforeAll(async () => {
    p = await createTestProject('analytics-campaigns');
    const seed = async (key: string, startedDaysAgo: number | null, stats: { sent: number; opened: number; clicked: number } | null) => {
      const id = randomUUID();
      ids[key] = id;
      await db().query(
        `insert into campaigns (id, project_id, name, from_email, audience_type, status, started_at)
         values ($1, $2, $3, 'news@example.test', 'ALL', $4, case when $5::int is null then null else now() - make_interval(days => $5::int) end)`,
        [id, p.projectId, `Campaign ${key}`, stats ? 'SENT' : 'DRAFT', startedDaysAgo],
      );
      if (stats) {
        await db().query(
          'insert into campaign_stats (campaign_id, audience, sent, opened_unique, opened_total, clicked_unique, clicked_total) values ($1, $2, $2, $3, $3, $4, $4)',
          [id, stats.sent, stats.opened, stats.clicked],
        );
      }
    };
    await seed('a', 2, { sent: 100, opened: 50, clicked: 10 });
    await seed('b', 1, { sent: 10, opened: 8, clicked: 1 });
    await seed('old', 200, { sent: 1000, opened: 900, clicked: 500 });
    await seed('draft', null, null);
  });

  test('top-campaigns ranks by a rate or a counter within the range; minSent leaves out small sends', async () => {
    const byOpen = expectStatus(await call('/analytics/top-campaigns?by=openRate', p), 200);
    expect(byOpen.data.map((c: any) => [c.campaignId, c.openRate])).toEqual([[ids.b, 0.8], [ids.a, 0.5]]);
    expect(byOpen.data[1]).toMatchObject({ name: 'Campaign a', status: 'SENT', sent: 100, openedUnique: 50, clickRate: 0.1, clickToOpenRate: 0.2 });
    expect(expectStatus(await call('/analytics/top-campaigns?by=openRate&minSent=50', p), 200).data.map((c: any) => c.campaignId)).toEqual([ids.a]);
    expect(expectStatus(await call('/analytics/top-campaigns?by=sent&limit=1', p), 200).data.map((c: any) => c.campaignId)).toEqual([ids.a]);
    const all = expectStatus(await call(`/analytics/top-campaigns?by=clickedUnique&from=${new Date(Date.now() - 365 * 86_400_000).toISOString()}`, p), 200);
    expect(all.data.map((c: any) => c.campaignId)).toEqual([ids.old, ids.a, ids.b]);
    expect((await call('/analytics/top-campaigns?by=revenue', p)).status).toBe(422);
    expect(expectStatus(await call('/analytics/top-campaigns', other), 200).data).toEqual([]);
  });

  test('campaign-stats lists the campaigns that started in the range, newest first, with counters and rates', async () => {
    const list = expectStatus(await call('/analytics/campaign-stats', p), 200);
    expect(list.data.map((c: any) => c.campaignId)).toEqual([ids.b, ids.a]);
    expect(list.data[0]).toMatchObject({ name: 'Campaign b', sent: 10, openRate: 0.8, clickRate: 0.1, startedAt: expect.any(String) });
    expect(expectStatus(await call('/analytics/campaign-stats', other), 200).data).toEqual([]);
  });
});

