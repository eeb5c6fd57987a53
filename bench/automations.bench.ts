// `npm run bench:automations`: CONTACTS contacts tracked (`POST /v1/track`) into an enabled workflow
// SEND_EMAIL -> DELAY 1 s -> SEND_EMAIL, through the real stack (embedded Postgres, Temporal dev server, API and worker
// processes) to a loopback SMTP sink that accepts everything. Reports executions started per second, the latency from
// each track call's answer to that contact's first email at the sink (p50/p99), the time until every email arrived,
// the worker's peak RSS, CPU seconds per process, and checks every contact got both emails exactly once.
// Loopback only; stops by itself. Options (env): CONTACTS (10000), CONCURRENCY (track calls in flight, 32), RATE (track
// calls per second at most; default: as fast as CONCURRENCY allows), to see the latency of a stack that keeps up;
// STACK=rehearsal runs it on the production rehearsal (bench/rehearsal-stack.ts) instead of the dev stack;
// WINDOW (seconds per row of eventToFirstEmailByWindow, 10), WORKER_NODE_ARGS (e.g. '--cpu-prof --cpu-prof-dir=/tmp/prof').
import os from 'node:os';
import { startBenchStack, benchProject } from './stack';
import { freePort } from '../scripts/services/process';
import { cpuByProcess, cpuOfPids, mainNodeProcess, rssMb } from './proc';
import { startTimingSink } from './smtp-sink';

const CONTACTS = Number(process.env.CONTACTS ?? 10_000);
const CONCURRENCY = Number(process.env.CONCURRENCY ?? 32);
const RATE = Number(process.env.RATE ?? 0);
const DOMAIN = 'bench.example.test';

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;

async function main() {
  const sink = await startTimingSink(await freePort());
  const stack = await startBenchStack({ smtpUrl: sink.url, workerNodeArgs: process.env.WORKER_NODE_ARGS?.split(' ').filter(Boolean) });
  try {
    const { secretKey, publicKey } = await benchProject(stack.apiUrl, stack.db, DOMAIN);
    const call = async (method: string, path: string, body?: unknown, key = secretKey) => {
      const res = await fetch(`${stack.apiUrl}${path}`, {
        method,
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
      return res.json() as Promise<Record<string, any>>;
    };
    const template = async (subject: string) =>
      (await call('POST', '/templates', { name: subject, subject, body: '<p>Hi {{ first | default: "there" }}, welcome to {{ context.plan }}.</p>', type: 'TRANSACTIONAL', from: `hello@${DOMAIN}` })).id as string;
    const wf = await call('POST', '/workflows', { name: 'Onboarding', triggerEvent: 'signed-up' });
    const first = (await call('POST', `/workflows/${wf.id}/steps`, { type: 'SEND_EMAIL', config: { templateId: await template('Welcome') } })).id;
    const delay = (await call('POST', `/workflows/${wf.id}/steps`, { type: 'DELAY', config: { duration: { amount: 1, unit: 'seconds' } } })).id;
    const second = (await call('POST', `/workflows/${wf.id}/steps`, { type: 'SEND_EMAIL', config: { templateId: await template('Day one') } })).id;
    await call('POST', `/workflows/${wf.id}/transitions`, { fromStepId: first, toStepId: delay });
    await call('POST', `/workflows/${wf.id}/transitions`, { fromStepId: delay, toStepId: second });
    await call('PATCH', `/workflows/${wf.id}`, { enabled: true });

    const workerPid = mainNodeProcess(stack.workers[0]!.child.pid!);
    // Every app process by name (the rehearsal's api-1, api-2, worker-1, worker-2, inbound), Postgres and Temporal by command.
    const pids = { ...stack.pids(), bench: process.pid };
    // PG_STATEMENTS=1 (with pg_stat_statements preloaded, e.g. REHEARSAL_PG_SETTINGS=shared_preload_libraries=pg_stat_statements):
    // the statements that took Postgres' time during the run, per database (Temporal's and ours).
    if (process.env.PG_STATEMENTS) await stack.db.query('create extension if not exists pg_stat_statements; select pg_stat_statements_reset()');
    const cpuBefore = cpuByProcess(pids);
    // Postgres' CPU by database: each backend's CPU, summed by the database it serves (Temporal's, its visibility
    // store's, ours), from the backends there at the end (pools keep theirs; one that ended meanwhile is not counted).
    const backends = async () => (await stack.db.query<{ pid: number; db: string }>('select pid, datname as db from pg_stat_activity where datname is not null')).rows;
    const backendCpuBefore = cpuOfPids((await backends()).map((b) => b.pid));
    const loadBefore = Math.round(os.loadavg()[0]! * 100) / 100;
    const idleRss = rssMb(workerPid, 'VmRSS');
    let maxRss = idleRss;
    const sampler = setInterval(() => (maxRss = Math.max(maxRss, rssMb(workerPid, 'VmRSS'))), 250);

    // Track every contact, CONCURRENCY calls in flight; note when each call was answered (the event is stored then).
    const trackedAt = new Map<string, number>();
    const started = Date.now();
    let next = 0;
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (next < CONTACTS) {
          const i = next++;
          // Paced: call i is due at i / RATE seconds after the start.
          if (RATE > 0) await new Promise((r) => setTimeout(r, Math.max(0, started + (i * 1000) / RATE - Date.now())));
          const email = `user-${i}@example.com`;
          await call('POST', '/v1/track', { email, event: 'signed-up', data: { first: `User ${i}`, plan: 'pro' } }, publicKey);
          trackedAt.set(email, Date.now());
        }
      }),
    );
    const trackSeconds = (Date.now() - started) / 1000;
    console.log(`[bench] ${CONTACTS} events tracked in ${trackSeconds.toFixed(1)} s`);
    for (;;) {
      if ([...trackedAt.keys()].reduce((n, e) => n + (sink.arrivals.get(e)?.length ?? 0), 0) >= 2 * CONTACTS) break;
      if (Date.now() - started > 15 * 60_000) throw new Error(`not every email arrived within 15 minutes (${sink.messages()})`);
      await new Promise((r) => setTimeout(r, 100));
    }
    const allDelivered = (Date.now() - started) / 1000;
    clearInterval(sampler);
    const cpuAfter = cpuByProcess(pids);
    const backendsAfter = await backends();
    const backendCpuAfter = cpuOfPids(backendsAfter.map((b) => b.pid));
    const postgresByDatabase: Record<string, number> = {};
    for (const b of backendsAfter) postgresByDatabase[b.db] = (postgresByDatabase[b.db] ?? 0) + backendCpuAfter.get(b.pid)! - (backendCpuBefore.get(b.pid) ?? 0);
    // Executions started: the rows, stored just before each run starts, from the first to the last.
    const { rows: [x] } = await stack.db.query<{ n: number; first: Date; last: Date }>(
      'select count(*)::int as n, min(started_at) as first, max(started_at) as last from automation_executions where automation_id = $1',
      [wf.id],
    );
    const { rows: statuses } = await stack.db.query<{ status: string; n: number }>(
      'select status, count(*)::int as n from automation_executions where automation_id = $1 group by 1',
      [wf.id],
    );
    // Where the time goes, per run: event stored -> execution row stored (the outbox and the consumer), and execution
    // stored -> first email SENT (the run's start in Temporal, its first steps, the SMTP send).
    const { rows: stages } = await stack.db.query<{ dispatch: number[]; toFirstEmail: number[] }>(
      `select array_agg(extract(epoch from x.started_at - e.created_at) * 1000 order by 1) as dispatch,
              array_agg(extract(epoch from m.sent_at - x.started_at) * 1000 order by 1) as "toFirstEmail"
       from automation_executions x join events e on e.id = x.trigger_event_id
       cross join lateral (select min(sent_at) as sent_at from emails where workflow_id = x.workflow_id) m
       where x.automation_id = $1`,
      [wf.id],
    );
    const pct = (values: number[]) => {
      const v = values.map(Number).sort((a, b) => a - b);
      return { p50: Math.round(percentile(v, 50)), p90: Math.round(percentile(v, 90)), p99: Math.round(percentile(v, 99)) };
    };
    const latencies = [...trackedAt].map(([email, at]) => (sink.arrivals.get(email)?.[0] ?? NaN) - at).sort((a, b) => a - b);
    // Where the tail is in time: p50 / p99 / max of the contacts tracked in each WINDOW seconds (10) of the run.
    const firstTracked = Math.min(...trackedAt.values());
    const WINDOW = Number(process.env.WINDOW ?? 10);
    const windows = new Map<number, number[]>();
    for (const [email, at] of trackedAt) {
      const w = Math.floor((at - firstTracked) / (WINDOW * 1000));
      const inWindow = windows.get(w) ?? windows.set(w, []).get(w)!;
      inWindow.push((sink.arrivals.get(email)?.[0] ?? NaN) - at);
    }
    const byWindow = [...windows].sort(([a], [b]) => a - b).map(([w, v]) => {
      const sorted = v.sort((a, b) => a - b);
      return `${w * WINDOW}-${(w + 1) * WINDOW} s: ${Math.round(percentile(sorted, 50))} / ${Math.round(percentile(sorted, 99))} / ${Math.round(sorted[sorted.length - 1]!)} (${sorted.length})`;
    });
    // The contacts' messages only (the bench user's signup verification email reaches the sink too).
    const counts = [...trackedAt.keys()].map((email) => sink.arrivals.get(email)?.length ?? 0);
    const span = (x!.last.getTime() - x!.first.getTime()) / 1000;
    const cpuSeconds = Object.fromEntries(Object.entries(cpuAfter).map(([k, v]) => [k, v - (cpuBefore[k] ?? 0)]));
    const report = {
      date: new Date().toISOString().slice(0, 10),
      stack: stack.stack,
      contacts: CONTACTS,
      trackConcurrency: CONCURRENCY,
      trackRatePerSecond: RATE || 'unpaced',
      trackSeconds: Math.round(trackSeconds * 10) / 10,
      executionsStarted: x!.n,
      executionsStartedPerSecond: Math.round(x!.n / Math.max(span, trackSeconds / CONTACTS)),
      eventToFirstEmailMs: { p50: percentile(latencies, 50), p90: percentile(latencies, 90), p99: percentile(latencies, 99), max: latencies[latencies.length - 1] },
      eventToFirstEmailByWindow: byWindow,
      stagesMs: { eventToExecutionStored: pct(stages[0]!.dispatch), executionStoredToFirstEmailSent: pct(stages[0]!.toFirstEmail) },
      secondsUntilAllEmailsDelivered: Math.round(allDelivered * 10) / 10,
      // Runs completed per second: every run's two emails delivered, from the first track call to the last email.
      runsCompletedPerSecond: Math.round((CONTACTS / allDelivered) * 10) / 10,
      emails: sink.messages(),
      everyContactTwiceExactly: counts.length === CONTACTS && counts.every((c) => c === 2),
      executionStatuses: Object.fromEntries(statuses.map((s) => [s.status, s.n])),
      workerRssMb: { beforeRun: idleRss, maxWhileRunning: maxRss, peakSinceStart: rssMb(workerPid, 'VmHWM') },
      cpuSeconds: Object.fromEntries(Object.entries(cpuSeconds).map(([k, v]) => [k, Math.round(v * 10) / 10])),
      cpuMsPerRun: Object.fromEntries(Object.entries(cpuSeconds).map(([k, v]) => [k, Math.round((v / CONTACTS) * 10_000) / 10])),
      postgresCpuMsPerRunByDatabase: Object.fromEntries(Object.entries(postgresByDatabase).map(([k, v]) => [k, Math.round((v / CONTACTS) * 10_000) / 10])),
      loadAverage1m: { before: loadBefore, after: Math.round(os.loadavg()[0]! * 100) / 100 },
    };
    console.log(JSON.stringify(report, null, 2));
    if (process.env.PG_STATEMENTS) {
      const { rows: top } = await stack.db.query<{ db: string; calls: number; ms: number; query: string }>(
        `select d.datname as db, s.calls::int, round(s.total_exec_time)::int as ms, left(regexp_replace(s.query, '\\s+', ' ', 'g'), 160) as query
         from pg_stat_statements s join pg_database d on d.oid = s.dbid order by s.total_exec_time desc limit 25`,
      );
      const { rows: byDb } = await stack.db.query<{ db: string; calls: number; ms: number }>(
        `select d.datname as db, sum(s.calls)::int as calls, round(sum(s.total_exec_time))::int as ms
         from pg_stat_statements s join pg_database d on d.oid = s.dbid group by 1 order by 3 desc`,
      );
      console.log(JSON.stringify({ statementsByDatabase: byDb, topStatements: top }, null, 1));
    }
  } finally {
    await stack.stop();
    await sink.stop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
