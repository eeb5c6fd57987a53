// `npm run bench:campaign`: a campaign to every contact of a project (audience ALL), from `POST /campaigns/:id/send`
// to SENT, through the real stack (embedded Postgres, Temporal dev server, API and worker processes) to a loopback
// SMTP sink that accepts everything. Reports seconds, messages per second, CPU seconds per process, the worker's peak
// RSS, which worker sent which share (from the workflow histories), and checks that the sink got every recipient
// exactly once. Also CPU milliseconds per message for every process (and each worker's by thread: main, render, the
// rest) and the machine's load average (1 min) around the send. Loopback only; stops by itself.
// Options (env): RECIPIENTS (100000), WORKERS (worker processes, 1), BODY (campaign | html: the MJML newsletter of
// bench:render, or its 3.5 KB HTML digest), PARTITIONS (CAMPAIGN_PARTITIONS), any CAMPAIGN_* setting, SMTP_POOL_SIZE,
// WORKER_NODE_ARGS (e.g. '--cpu-prof --cpu-prof-dir=/tmp/prof'), DKIM=1 (send from a domain created through the API,
// with the DKIM key it generates, so every message is signed as production mail is), MAILWRIGHT_RUN_FROM=typescript
// (the API and the workers through tsx instead of compiled, scripts/services/stack.ts).
import os from 'node:os';
import { startBenchStack, benchProject } from './stack';
import { CAMPAIGN_BODY, HTML_BODY } from './bodies';
import { freePort } from '../scripts/services/process';
import { cpuByProcess, cpuByThread, mainNodeProcess, rssMb, threadShares } from './proc';
import type { Pool } from 'pg';
import { startTimingSink } from './smtp-sink';
import { sharesByWorker } from './shares';

const RECIPIENTS = Number(process.env.RECIPIENTS ?? 100_000);
const WORKERS = Number(process.env.WORKERS ?? 1);
const BODY = process.env.BODY === 'html' ? HTML_BODY : CAMPAIGN_BODY;
const DOMAIN = 'bench.example.test';
// QUEUE_IDS=1: the receiver names each message it accepts (`250 OK: queued as <id>`) as Postfix and most relays do,
// and the sender stores each id (emails.provider_message_id, indexed). Off by default, as in every earlier figure.
const QUEUE_IDS = process.env.QUEUE_IDS === '1';

async function main() {
  const sink = await startTimingSink(await freePort(), { queueIds: QUEUE_IDS });
  // The worker's campaign settings (CAMPAIGN_PARTITIONS, CAMPAIGN_CHUNK_SIZE, CAMPAIGN_RENDER_THREADS, ...) and
  // SMTP_POOL_SIZE pass through from this environment.
  const workerEnv = Object.fromEntries(Object.entries(process.env).filter(([k, v]) => v !== undefined && (k.startsWith('CAMPAIGN_') || k === 'SMTP_POOL_SIZE'))) as Record<string, string>;
  if (process.env.PARTITIONS) workerEnv.CAMPAIGN_PARTITIONS = process.env.PARTITIONS;
  const stack = await startBenchStack({
    smtpUrl: sink.url,
    workers: WORKERS,
    workerEnv,
    workerNodeArgs: process.env.WORKER_NODE_ARGS?.split(' ').filter(Boolean),
  });
  try {
    const { secretKey, projectId } = await benchProject(stack.apiUrl, stack.db, DOMAIN);
    const headers = { authorization: `Bearer ${secretKey}`, 'content-type': 'application/json' };
    const call = async (method: string, path: string, body?: unknown) => {
      const res = await fetch(`${stack.apiUrl}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
      if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
      return res.json() as Promise<Record<string, unknown>>;
    };
    // The audience, set-based: personal data of the kind the newsletter reads (a name, a plan, credits, picks).
    const seedStarted = Date.now();
    await stack.db.query(
      `insert into contacts (id, project_id, email, subscribed, data)
       select gen_random_uuid(), $1, 'reader-' || i || '@example.com', true,
         jsonb_build_object('first_name', case when i % 5 = 0 then null else 'Reader ' || i end, 'plan', (array['free','pro','team'])[i % 3 + 1],
           'credits', i % 100, 'recommendations', (select jsonb_agg(jsonb_build_object('url', 'https://blog.example.com/posts/' || k || '?ref=' || i,
             'title', 'A story worth reading, number ' || k || ', about something <interesting> & new',
             'blurb', '<p>Short <b>summary</b> ' || k || ' with enough words to be truncated somewhere around here, eventually, maybe.</p>')) from generate_series(0, 5) k))
       from generate_series(1, $2) i`,
      [projectId, RECIPIENTS],
    );
    await stack.db.query('analyze contacts');
    // DKIM=1: a sender domain made by POST /domains (which generates its DKIM key), marked verified here (no DNS).
    let from = `news@${DOMAIN}`;
    if (process.env.DKIM === '1') {
      const signed = `signed.${DOMAIN}`;
      await call('POST', '/domains', { domain: signed });
      await stack.db.query(`update domains set status = 'VERIFIED', verified_at = now() where project_id = $1 and name = $2`, [projectId, signed]);
      from = `news@${signed}`;
    }
    console.log(`[bench] ${RECIPIENTS} contacts seeded in ${((Date.now() - seedStarted) / 1000).toFixed(1)} s`);
    const campaign = await call('POST', '/campaigns', {
      name: 'November issue',
      subject: '{{ first_name ?? "Hello" }}, the November issue for {{ plan }}',
      body: BODY,
      from,
      fromName: 'Example News',
      audienceType: 'ALL',
    });
    const id = campaign.id as string;
    // Every app process by name (on STACK=rehearsal: each API and worker); Postgres and Temporal go by command.
    const pids: Record<string, number> = { ...stack.pids(), bench: process.pid };
    const cpuBefore = cpuByProcess(pids);
    const loadBefore = os.loadavg()[0];
    // The worker's own node process (on the rehearsal its `npm run` wrapper is the child), for its memory.
    const workerPids = stack.workers.map((w) => mainNodeProcess(w.child.pid!));
    const idleRss = workerPids.map((pid) => rssMb(pid, 'VmRSS'));
    const sendingRss = workerPids.map(() => 0);
    const sampler = setInterval(() => workerPids.forEach((pid, i) => (sendingRss[i] = Math.max(sendingRss[i]!, rssMb(pid, 'VmRSS')))), 250);
    const threadsBefore = workerPids.map((pid) => cpuByThread(pid));
    const updatesBefore = await emailUpdates(stack.db);
    const started = Date.now();
    await call('POST', `/campaigns/${id}/send`, {});
    let status = '';
    for (;;) {
      status = (await call('GET', `/campaigns/${id}`)).status as string;
      if (['SENT', 'FAILED', 'CANCELLED'].includes(status)) break;
      if (Date.now() - started > 15 * 60_000) throw new Error('the campaign did not finish within 15 minutes');
      await new Promise((r) => setTimeout(r, 200));
    }
    const seconds = (Date.now() - started) / 1000;
    clearInterval(sampler);
    const cpuAfter = cpuByProcess(pids);
    const threadsAfter = workerPids.map((pid) => cpuByThread(pid));
    const stats = await call('GET', `/campaigns/${id}/stats`).catch((err: unknown) => ({ error: String(err) }));
    const counts = [...sink.arrivals.values()].map((a) => a.length);
    const workerNames = Object.fromEntries(Object.entries(pids).filter(([k]) => k.startsWith('worker')).map(([k, pid]) => [pid, k]));
    const shares = await sharesByWorker(stack.temporalAddress, id, workerNames).catch((err: unknown) => ({ error: String(err) }));
    const updates = await emailUpdatesSince(stack.db, updatesBefore, sink.messages());
    const report = {
      date: new Date().toISOString().slice(0, 10),
      recipients: RECIPIENTS,
      body: process.env.BODY === 'html' ? 'html digest (3.5 KB)' : 'MJML newsletter (25 KB rendered)',
      workers: WORKERS,
      // How the API and the workers ran: compiled JavaScript (scripts/build.ts, as the image runs them), or TypeScript
      // through tsx with MAILWRIGHT_RUN_FROM=typescript.
      runtime: process.env.MAILWRIGHT_RUN_FROM === 'typescript' ? 'typescript (tsx)' : 'compiled',
      receiverQueueIds: QUEUE_IDS,
      status,
      secondsSendToSent: Math.round(seconds * 10) / 10,
      messagesPerSecond: Math.round(sink.messages() / seconds),
      cpuSeconds: Object.fromEntries(Object.entries(cpuAfter).map(([k, v]) => [k, Math.round((v - (cpuBefore[k] ?? 0)) * 10) / 10])),
      // The same per message sent, in milliseconds, for comparing with any peer's figures (listmonk's harness prints
      // its CPU seconds and its receiver's). `bench` is the receiving SMTP server (smtp-server, in this process) and the
      // status polling (one GET every 200 ms).
      cpuMsPerMessage: Object.fromEntries(Object.entries(cpuAfter).map(([k, v]) => [k, Math.round(((v - (cpuBefore[k] ?? 0)) * 1_000_000) / Math.max(1, sink.messages())) / 1000])),
      // Each worker's CPU per message of the campaign (as cpuMsPerMessage) by thread: main, the render threads
      // (CAMPAIGN_RENDER_THREADS, one per core by default: the busiest others; an unsigned campaign renders on one fewer,
      // so the last is then near 0 or a thread that is not one), and the rest (V8's garbage collection
      // and compilation threads, libuv's, the Temporal core's).
      workerThreadsCpuMsPerMessage: workerPids.map((pid, i) =>
        threadShares(pid, threadsBefore[i]!, threadsAfter[i]!, Number(process.env.CAMPAIGN_RENDER_THREADS ?? os.availableParallelism()), sink.messages()),
      ),
      loadAverage: { before: loadBefore, after: os.loadavg()[0] },
      // The worker's resident memory: before the send, its maximum while sending (sampled every 250 ms), and its peak
      // since start (VmHWM, which includes bundling the workflow code at start-up).
      // Per worker: the share calls (rounds) it completed, which shares, and the messages they sent (from the histories).
      sharesByWorker: shares,
      workerRssMb: { beforeSend: idleRss, maxWhileSending: sendingRss, peakSinceStart: workerPids.map((pid) => rssMb(pid, 'VmHWM')) },
      // Updates of `emails` rows during the send, and how many were HOT (the new version on the row's own page, no
      // index entries), from pg_stat_user_tables.
      emailsUpdates: updates,
      sinkMessages: sink.messages(),
      distinctRecipients: sink.arrivals.size,
      duplicates: counts.reduce((n, c) => n + c - 1, 0),
      everyRecipientOnce: sink.arrivals.size === RECIPIENTS && counts.every((c) => c === 1),
      stats,
    };
    console.log(JSON.stringify(report, null, 2));
  } finally {
    await stack.stop();
    await sink.stop();
  }
}

async function emailUpdates(db: Pool): Promise<{ total: number; hot: number }> {
  const { rows } = await db.query<{ upd: string; hot: string }>(`select n_tup_upd as upd, n_tup_hot_upd as hot from pg_stat_user_tables where relname = 'emails'`);
  return { total: Number(rows[0]!.upd), hot: Number(rows[0]!.hot) };
}

/** A backend reports its counts when it goes idle, up to 10 s late: waits until the send's updates are all counted. */
async function emailUpdatesSince(db: Pool, before: { total: number; hot: number }, atLeast: number): Promise<{ total: number; hot: number }> {
  const waitUntil = Date.now() + 15_000;
  for (;;) {
    const now = await emailUpdates(db);
    const since = { total: now.total - before.total, hot: now.hot - before.hot };
    if (since.total >= atLeast || Date.now() > waitUntil) return since;
    await new Promise((r) => setTimeout(r, 500));
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
