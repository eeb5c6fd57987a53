// `npm run bench:analytics`: latency of every analytics and activity endpoint on a project seeded (set-based) with
// 10,000,000 events and 1,000,000 emails over 90 days, on the real stack (API and worker processes, Postgres).
// The seed writes the rows the way the service would have (ids in time order, campaign ids on the campaign emails'
// events, automation runs with their steps) and fills the rollups from them in one statement each, as the migrations'
// backfills do; the outbox triggers are off during the seed (session_replication_role = replica), so the consumers
// have no backlog to work through while we measure. Then sequential requests per endpoint; p50/p95/p99/max.
// Loopback only; stops by itself. Options (env): EVENTS (10000000), EMAILS (1000000), CONTACTS (200000),
// CAMPAIGNS (40), RUNS (100000, automation runs of two steps each), REQUESTS (200 per endpoint), DAYS (90).
import { performance } from 'node:perf_hooks';
import { startBenchStack, benchProject } from './stack';
import { measure } from './latency';
import { seedContactsSql } from './contacts-list.bench';

const EVENTS = Number(process.env.EVENTS ?? 10_000_000);
const EMAILS = Number(process.env.EMAILS ?? 1_000_000);
const CONTACTS = Number(process.env.CONTACTS ?? 200_000);
const CAMPAIGNS = Number(process.env.CAMPAIGNS ?? 40);
const RUNS = Number(process.env.RUNS ?? 100_000);
const REQUESTS = Number(process.env.REQUESTS ?? 200);
const DAYS = Number(process.env.DAYS ?? 90);

/** A UUIDv7-shaped id whose time part is the SQL timestamp expression `t` (ids in time order, as the service's). */
const uuidAt = (t: string) =>
  `encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid()) placing substring(int8send((extract(epoch from ${t}) * 1000)::bigint) from 3) from 1 for 6), 52, 1), 53, 1), 'hex')::uuid`;

async function seed(db: import('pg').Pool, projectId: string): Promise<Record<string, number>> {
  const seconds: Record<string, number> = {};
  const step = async (name: string, sql: string, params: unknown[] = []) => {
    const t0 = performance.now();
    const client = await db.connect();
    try {
      await client.query(`set session_replication_role = replica; set work_mem = '256MB'; set maintenance_work_mem = '1GB'`);
      await client.query(sql, params);
    } finally {
      await client.query('set session_replication_role = origin').catch(() => undefined);
      client.release();
    }
    seconds[name] = Math.round((performance.now() - t0) / 100) / 10;
    console.error(`[bench analytics] ${name}: ${seconds[name]} s`);
  };
  const t0 = performance.now();
  await seedContactsSql(db, projectId, CONTACTS);
  seconds.contacts = Math.round((performance.now() - t0) / 100) / 10;
  // Campaigns, spread over the period, all sent.
  await step(
    'campaigns',
    `insert into campaigns (id, project_id, name, subject, body, from_email, audience_type, status, audience_size, started_at, finished_at, created_at, updated_at)
     select ${uuidAt('t')}, $1, 'Campaign ' || i, 'Issue ' || i, '<p>News</p>', 'news@analytics.example.test', 'ALL', 'SENT', $3::int / 2 / $2::int, t, t + interval '20 minutes', t, t
     from generate_series(1, $2::int) i, lateral (select now() - make_interval(days => $4) + (i * make_interval(days => $4) / ($2::int + 1))) x(t)`,
    [projectId, CAMPAIGNS, EMAILS, DAYS],
  );
  // Emails: half transactional, half campaign messages; sent over the period.
  await step(
    'emails',
    `with c as (select row_number() over (order by id) as k, id, email from contacts where project_id = $1),
          g as (select row_number() over (order by id) as k, id from campaigns where project_id = $1)
     insert into emails (id, project_id, contact_id, kind, to_email, from_email, subject, html, status, sent_at, campaign_id, created_at, updated_at)
     select ${uuidAt('t')}, $1, c.id, case when i % 2 = 0 then 'TRANSACTIONAL' else 'MARKETING' end, c.email, 'hi@analytics.example.test', 'Hello',
            '', case when i % 50 = 0 then 'BOUNCED' else 'DELIVERED' end, t, case when i % 2 = 1 then g.id end, t, t
     from generate_series(1, $2::int) i
     -- A campaign's messages: a run of consecutive j (one chunk of the period per campaign), each to another contact.
     join c on c.k = 1 + (case when i % 2 = 1 then (i / 2) % $3::int else i % $3::int end)
     join g on g.k = 1 + least($4::int - 1, ((i / 2)::bigint * $4::int / ($2::int / 2 + 1))::int),
     lateral (select now() - make_interval(days => $5) + (i * make_interval(days => $5) / ($2::int + 1))) x(t)`,
    [projectId, EMAILS, CONTACTS, CAMPAIGNS, DAYS],
  );
  // Events: 40% tracked (a dozen names), the rest the service's own about the emails (sent, delivered, opens, clicks,
  // bounces, complaints, unsubscribes), each for an email of its contact, in time order.
  await step(
    'events',
    `with m as (select row_number() over (order by id) as k, id, contact_id, campaign_id from emails where project_id = $1)
     insert into events (id, project_id, contact_id, name, data, source, email_id, campaign_id, created_at)
     select ${uuidAt('t')}, $1, m.contact_id,
            case when i % 10 < 4 then (array['page_view','page_view','page_view','clicked_cta','signed_up','added_to_cart','checkout_started','purchase','viewed_pricing','invited_teammate','exported_report','upgraded'])[1 + i % 12]
                 else (array['email.sent','email.delivered','email.delivered','email.open','email.open','email.open','email.click','email.bounced','email.complained','contact.unsubscribed'])[1 + (i / 10) % 10] end,
            case when i % 10 < 4 then jsonb_build_object('page', '/p/' || (i % 50)) else '{}'::jsonb end,
            case when i % 10 < 4 then 'TRACKED' else 'SYSTEM' end,
            case when i % 10 < 4 then null else m.id end,
            case when i % 10 < 4 then null else m.campaign_id end,
            t
     from generate_series(1, $2::int) i
     join m on m.k = 1 + (i % $3::int),
     lateral (select now() - make_interval(days => $4) + (i * make_interval(days => $4) / ($2::int + 1))) x(t)`,
    [projectId, EVENTS, EMAILS, DAYS],
  );
  // An automation with RUNS completed runs of two steps each, and a thousand runs waiting in a delay.
  await step(
    'automation runs',
    `with a as (
       insert into automations (id, project_id, name, trigger_event, enabled, webhook_secret, created_at, updated_at)
       values (gen_random_uuid(), $1, 'Onboarding', 'signed_up', true, md5(random()::text) || md5(random()::text), now(), now()) returning id
     ),
     c as (select row_number() over (order by id) as k, id from contacts where project_id = $1),
     x as (
       insert into automation_executions (id, project_id, automation_id, contact_id, n, version, workflow_id, status, started_at, finished_at, next_wake_at, updated_at)
       select ${uuidAt('t')}, $1, a.id, c.id, 1 + i / $3::int, 1, 'automation-run/bench-' || i, case when i <= $2::int then 'COMPLETED' else 'WAITING' end,
              t, case when i <= $2::int then t + interval '1 second' end, case when i > $2::int then now() + make_interval(secs => i) end, t
       from a, generate_series(1, $2::int + 1000) i
       join c on c.k = 1 + (i % $3::int),
       lateral (select now() - make_interval(days => $4) + (i * make_interval(days => $4) / ($2::int + 1001))) y(t)
       returning id, automation_id, started_at, status
     )
     insert into automation_execution_steps (execution_id, seq, step_id, type, started_at, finished_at, outcome, project_id, automation_id)
     select x.id, s, gen_random_uuid(), case s when 1 then 'SEND_EMAIL' else 'EXIT' end, x.started_at, x.started_at + s * interval '100 milliseconds', '{}'::jsonb, $1, x.automation_id
     from x, generate_series(1, 2) s where x.status = 'COMPLETED'`,
    [projectId, RUNS, CONTACTS, DAYS],
  );
  // The rollups, from what was seeded (as the migrations' backfills).
  await step(
    'rollups',
    `insert into analytics_hourly (project_id, metric, hour, count)
       select project_id, metric, hour, count(*) from (
         select e.project_id, date_trunc('hour', e.created_at, 'UTC') as hour,
                case e.name when 'email.sent' then 'sent' when 'email.delivered' then 'delivered' when 'email.open' then 'opened' when 'email.click' then 'clicked'
                            when 'email.bounced' then 'bounced' when 'email.complained' then 'complained' when 'contact.unsubscribed' then 'unsubscribed' end as metric
         from events e where e.project_id = $1 and e.source = 'SYSTEM'
       ) y where metric is not null group by 1, 2, 3;
     insert into event_name_hourly (project_id, name, hour, system, count)
       select project_id, name, date_trunc('hour', created_at, 'UTC'), source = 'SYSTEM', count(*) from events where project_id = $1 group by 1, 2, 3, 4;
     insert into contact_last_event (contact_id, project_id, at) select contact_id, $1, max(created_at) from events where project_id = $1 group by contact_id;
     insert into contact_last_event_hourly (project_id, hour, contacts) select project_id, date_trunc('hour', at, 'UTC'), count(*) from contact_last_event where project_id = $1 group by 1, 2;
     insert into campaign_stats (campaign_id, audience, sent, delivered, opened_unique, opened_total, clicked_unique, clicked_total, bounced, complained, unsubscribed, failed, skipped)
       select c.id, c.audience_size, count(m.id), count(m.id) filter (where m.status = 'DELIVERED'), count(m.id) / 4, count(m.id) / 3, count(m.id) / 20, count(m.id) / 15,
              count(m.id) filter (where m.status = 'BOUNCED'), count(m.id) / 1000, count(m.id) / 500, 0, 0
       from campaigns c left join emails m on m.campaign_id = c.id where c.project_id = $1 group by c.id
       on conflict (campaign_id) do nothing;`.replace(/\$1/g, `'${projectId}'`),
  );
  const tv = performance.now();
  for (const table of ['events', 'emails', 'campaigns', 'automation_execution_steps', 'automation_executions', 'contact_last_event', 'contact_last_event_hourly', 'event_name_hourly', 'analytics_hourly', 'campaign_stats']) {
    await db.query(`vacuum analyze ${table}`);
  }
  seconds.vacuum = Math.round((performance.now() - tv) / 100) / 10;
  return seconds;
}

async function main() {
  const stack = await startBenchStack({ smtpUrl: 'smtp://127.0.0.1:9' });
  try {
    const { secretKey, projectId } = await benchProject(stack.apiUrl, stack.db, 'analytics.example.test');
    const seedSeconds = await seed(stack.db, projectId);
    const { rows: counts } = await stack.db.query<{ events: string; emails: string; steps: string }>(
      `select (select count(*) from events where project_id = $1)::text as events, (select count(*) from emails where project_id = $1)::text as emails,
              (select count(*) from automation_execution_steps where project_id = $1)::text as steps`,
      [projectId],
    );
    const get = async (path: string) => {
      const res = await fetch(`${stack.apiUrl}${path}`, { headers: { authorization: `Bearer ${secretKey}` } });
      return (await res.json()) as Record<string, any>;
    };
    const page1 = await get('/activity?limit=50');
    const { rows: pick } = await stack.db.query<{ contact: string; campaign: string; automation: string }>(
      `select (select contact_id from events where project_id = $1 order by created_at desc limit 1 offset 1000)::text as contact,
              (select id from campaigns where project_id = $1 order by started_at limit 1 offset ${Math.floor(CAMPAIGNS / 2)})::text as campaign,
              (select id from automations where project_id = $1 limit 1)::text as automation`,
      [projectId],
    );
    const hourAgo = new Date(Date.now() - 3_600_000).toISOString();
    const dayAgo = new Date(Date.now() - 86_400_000).toISOString();
    const endpoints: Record<string, string> = {
      'timeseries day 30d UTC': '/analytics/timeseries',
      'timeseries day 90d Europe/Berlin': `/analytics/timeseries?interval=day&timezone=Europe/Berlin&from=${new Date(Date.now() - DAYS * 86_400_000).toISOString()}`,
      'timeseries hour 48h': '/analytics/timeseries?interval=hour',
      'timeseries hour 30d': `/analytics/timeseries?interval=hour&from=${new Date(Date.now() - 30 * 86_400_000).toISOString()}`,
      'top-events 30d': '/analytics/top-events',
      'top-campaigns openRate': '/analytics/top-campaigns?by=openRate',
      'campaign-stats 90d': '/analytics/campaign-stats',
      'events/stats 30d': '/events/stats?days=30',
      'events/stats 90d': `/events/stats?days=${DAYS}`,
      'activity first page (50)': '/activity?limit=50',
      'activity next page (50)': `/activity?limit=50&cursor=${encodeURIComponent(page1.cursor)}`,
      'activity types=email.complained': '/activity?limit=50&types=email.complained',
      'activity types=campaign.started': '/activity?limit=50&types=campaign.started',
      'activity types=automation.step,email.bounced': '/activity?limit=50&types=automation.step,email.bounced',
      'activity contactId': `/activity?limit=50&contactId=${pick[0]!.contact}`,
      'activity campaignId': `/activity?limit=50&campaignId=${pick[0]!.campaign}`,
      'activity automationId': `/activity?limit=50&automationId=${pick[0]!.automation}`,
      'activity from/to (a day, 30 days ago)': `/activity?limit=50&from=${new Date(Date.now() - 31 * 86_400_000).toISOString()}&to=${new Date(Date.now() - 30 * 86_400_000).toISOString()}`,
      'activity/stats 30d': '/activity/stats',
      'activity/stats 90d': `/activity/stats?from=${new Date(Date.now() - DAYS * 86_400_000).toISOString()}`,
      'activity/recent-count 1h': `/activity/recent-count?since=${hourAgo}`,
      'activity/recent-count 24h': `/activity/recent-count?since=${dayAgo}`,
      'activity/types': '/activity/types',
      'activity/upcoming': '/activity/upcoming',
    };
    const latencyMs: Record<string, unknown> = {};
    for (const [name, path] of Object.entries(endpoints)) {
      await measure(`${stack.apiUrl}${path}`, secretKey, 10); // warm-up
      latencyMs[name] = await measure(`${stack.apiUrl}${path}`, secretKey, REQUESTS);
      console.error(`[bench analytics] ${name}: ${JSON.stringify(latencyMs[name])}`);
    }
    const worstP95 = Math.max(...Object.values(latencyMs).map((v) => (v as { p95: number }).p95));
    console.log(
      JSON.stringify(
        { date: new Date().toISOString().slice(0, 10), seeded: { events: Number(counts[0]!.events), emails: Number(counts[0]!.emails), automationSteps: Number(counts[0]!.steps), contacts: CONTACTS, campaigns: CAMPAIGNS, days: DAYS }, seedSeconds, requestsPerEndpoint: REQUESTS, worstP95, latencyMs },
        null,
        2,
      ),
    );
  } finally {
    await stack.stop();
  }
}

if (require.main === module) {
  main().catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
