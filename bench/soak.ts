// `npm run soak`: a long run of mixed traffic on the real stack (embedded Postgres, Temporal dev server, API and
// worker processes) into a loopback SMTP sink: transactional sends, tracked events, a campaign every few minutes, and
// events that start automation runs (SEND_EMAIL -> DELAY -> SEND_EMAIL). Every minute it samples the RSS of the API
// and the worker. At the end it waits for the work to drain and checks: no error response, every accepted send and
// every automation email at the sink exactly as many times as expected, every tracked event stored, every campaign
// SENT, no automation run or workflow still open. Prints one JSON report (RELIABILITY.md records it).
// Loopback only; request loops bounded by SOAK_MINUTES; stops by itself.
// Options (env): SOAK_MINUTES (30), SEND_RATE (sends per second, 50), TRACK_RATE (events per second, 200),
// AUTOMATION_RATE (trigger events per second, 5), CAMPAIGN_EVERY (minutes, 5), CAMPAIGN_CONTACTS (2000).
// The defaults are about half of what the stack sustains on this machine with all of it at once (each benchmark in
// BENCHMARKS.md loads one path alone).
import { startBenchStack, benchProject } from './stack';
import { freePort } from '../scripts/services/process';
import { rssMb } from './proc';
import { startTimingSink } from './smtp-sink';
import { Client, Connection } from '@temporalio/client';

const MINUTES = Number(process.env.SOAK_MINUTES ?? 30);
const SEND_RATE = Number(process.env.SEND_RATE ?? 50);
const TRACK_RATE = Number(process.env.TRACK_RATE ?? 200);
const AUTOMATION_RATE = Number(process.env.AUTOMATION_RATE ?? 5);
const CAMPAIGN_EVERY = Number(process.env.CAMPAIGN_EVERY ?? 5);
const CAMPAIGN_CONTACTS = Number(process.env.CAMPAIGN_CONTACTS ?? 2000);
const DOMAIN = 'soak.example.test';

async function main() {
  const sink = await startTimingSink(await freePort());
  const stack = await startBenchStack({ smtpUrl: sink.url });
  const errors: Record<string, number> = {};
  const noteError = (what: string) => void (errors[what] = (errors[what] ?? 0) + 1);
  try {
    const { secretKey, publicKey, projectId } = await benchProject(stack.apiUrl, stack.db, DOMAIN);
    const call = async (method: string, path: string, body?: unknown, key = secretKey): Promise<Record<string, any> | undefined> => {
      try {
        const res = await fetch(`${stack.apiUrl}${path}`, { method, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
        const text = await res.text();
        if (!res.ok) {
          noteError(`${method} ${path.split('?')[0]} ${res.status}`);
          return undefined;
        }
        return text ? (JSON.parse(text) as Record<string, any>) : {};
      } catch {
        noteError(`${method} ${path.split('?')[0]} network`);
        return undefined;
      }
    };
    const must = async (method: string, path: string, body?: unknown) => {
      const r = await call(method, path, body);
      if (!r) throw new Error(`${method} ${path} failed during set-up`);
      return r;
    };
    // The automation: SEND_EMAIL -> DELAY 5 s -> SEND_EMAIL on `soak-signup`.
    const template = (await must('POST', '/templates', { name: 'Welcome', subject: 'Welcome', body: '<p>Hi {{ first | default: "there" }}</p>', type: 'TRANSACTIONAL', from: `hello@${DOMAIN}` })).id;
    const wf = await must('POST', '/workflows', { name: 'Soak onboarding', triggerEvent: 'soak-signup' });
    const s1 = (await must('POST', `/workflows/${wf.id}/steps`, { type: 'SEND_EMAIL', config: { templateId: template } })).id;
    const s2 = (await must('POST', `/workflows/${wf.id}/steps`, { type: 'DELAY', config: { duration: { amount: 5, unit: 'seconds' } } })).id;
    const s3 = (await must('POST', `/workflows/${wf.id}/steps`, { type: 'SEND_EMAIL', config: { templateId: template } })).id;
    await must('POST', `/workflows/${wf.id}/transitions`, { fromStepId: s1, toStepId: s2 });
    await must('POST', `/workflows/${wf.id}/transitions`, { fromStepId: s2, toStepId: s3 });
    await must('PATCH', `/workflows/${wf.id}`, { enabled: true });
    // The campaign audience: CAMPAIGN_CONTACTS subscribed contacts (a segment of their own, static).
    const segment = (await must('POST', '/segments', { name: 'Soak audience', type: 'STATIC' })).id;
    const audience: string[] = [];
    for (let i = 0; i < CAMPAIGN_CONTACTS; i += 1000) {
      const batch = Array.from({ length: Math.min(1000, CAMPAIGN_CONTACTS - i) }, (_, j) => `camp-${i + j}@example.com`);
      await must('POST', `/segments/${segment}/members`, { emails: batch, createMissing: true, subscribed: true });
      audience.push(...batch);
    }

    const pids = { api: stack.api.child.pid!, worker: stack.workers[0]!.child.pid! };
    const samples: { minute: number; apiMb: number; workerMb: number; errors: number }[] = [];
    const sample = (minute: number) => samples.push({ minute, apiMb: rssMb(pids.api, 'VmRSS'), workerMb: rssMb(pids.worker, 'VmRSS'), errors: Object.values(errors).reduce((a, b) => a + b, 0) });
    sample(0);

    const accepted = { sends: new Set<string>(), tracked: 0, triggers: new Set<string>(), campaigns: [] as string[] };
    const started = Date.now();
    const end = started + MINUTES * 60_000;
    let n = 0;
    /** Runs `fn` `rate` times a second until the end, at most 64 in flight. */
    const paced = async (rate: number, fn: (i: number) => Promise<void>) => {
      if (rate <= 0) return;
      const inFlight = new Set<Promise<void>>();
      for (let i = 0; Date.now() < end; i++) {
        const due = started + (i * 1000) / rate;
        const wait = due - Date.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        while (inFlight.size >= 64) await Promise.race(inFlight);
        const p = fn(i).finally(() => inFlight.delete(p));
        inFlight.add(p);
      }
      await Promise.all(inFlight);
    };
    const sends = paced(SEND_RATE, async (i) => {
      const to = `send-${i}@example.com`;
      const r = await call('POST', '/v1/send', { to, from: `receipts@${DOMAIN}`, subject: `Receipt ${i}`, body: `<p>Order ${i}</p>` });
      if (r) accepted.sends.add(to);
    });
    const tracks = paced(TRACK_RATE, async (i) => {
      const r = await call('POST', '/v1/track', { email: `visitor-${i % 5000}@example.com`, event: ['page_view', 'clicked_cta', 'added_to_cart'][i % 3], data: { page: `/p/${i % 40}` } }, publicKey);
      if (r) accepted.tracked++;
    });
    const triggers = paced(AUTOMATION_RATE, async (i) => {
      const email = `signup-${i}@example.com`;
      const r = await call('POST', '/v1/track', { email, event: 'soak-signup', data: { plan: 'pro' } }, publicKey);
      if (r) accepted.triggers.add(email);
    });
    const campaigns = (async () => {
      for (let c = 0; Date.now() < end; c++) {
        const campaign = await call('POST', '/campaigns', { name: `Soak ${c}`, subject: `Issue ${c}`, body: '<p>News {{ first | default: "friend" }}</p>', from: `news@${DOMAIN}`, audienceType: 'SEGMENT', segmentId: segment });
        if (campaign && (await call('POST', `/campaigns/${campaign.id}/send`))) accepted.campaigns.push(campaign.id);
        const next = started + (c + 1) * CAMPAIGN_EVERY * 60_000;
        while (Date.now() < Math.min(next, end)) await new Promise((r) => setTimeout(r, 1_000));
      }
    })();
    const sampler = setInterval(() => sample(Math.round((Date.now() - started) / 60_000)), 60_000);
    await Promise.all([sends, tracks, triggers, campaigns]);
    clearInterval(sampler);
    n = Math.round((Date.now() - started) / 1000);

    // Drain: every expected message at the sink, every campaign SENT, every run COMPLETED (15 minutes at most).
    const expected = (to: string) => (to.startsWith('signup-') ? 2 : to.startsWith('camp-') ? accepted.campaigns.length : 1);
    const drainStart = Date.now();
    let campaignsSent = 0;
    let runsOpen = -1;
    for (;;) {
      const { rows: c } = await stack.db.query<{ n: number }>(`select count(*)::int as n from campaigns where id = any($1::uuid[]) and status = 'SENT'`, [accepted.campaigns]);
      const { rows: r } = await stack.db.query<{ n: number }>(`select count(*)::int as n from automation_executions where status in ('RUNNING', 'WAITING')`);
      campaignsSent = c[0]!.n;
      runsOpen = r[0]!.n;
      const sendsIn = [...accepted.sends].every((to) => (sink.arrivals.get(to)?.length ?? 0) >= 1);
      const runsIn = [...accepted.triggers].every((to) => (sink.arrivals.get(to)?.length ?? 0) >= 2);
      if (campaignsSent === accepted.campaigns.length && runsOpen === 0 && sendsIn && runsIn) break;
      if (Date.now() - drainStart > 15 * 60_000) break;
      await new Promise((res) => setTimeout(res, 2_000));
    }
    sample(Math.round((Date.now() - started) / 60_000));
    const { rows: stored } = await stack.db.query<{ n: number }>(`select count(*)::int as n from events where project_id = $1 and source = 'TRACKED' and name <> 'soak-signup'`, [projectId]);
    const { rows: open } = await stack.db.query<{ n: number }>(`select count(*)::int as n from emails where project_id = $1 and status in ('QUEUED', 'SENDING')`, [projectId]);
    // No workflow left open (the schedules' own runs end by themselves; a long-lived loop would be a domain's, and the
    // soak's domain has none).
    const connection = await Connection.connect({ address: stack.temporalAddress });
    const openWorkflows: string[] = [];
    try {
      for await (const w of new Client({ connection }).workflow.list({ query: 'ExecutionStatus = "Running"' })) openWorkflows.push(`${w.type}:${w.workflowId}`);
    } finally {
      await connection.close();
    }
    let missing = 0;
    let duplicated = 0;
    const everyone = [...accepted.sends, ...accepted.triggers, ...audience];
    for (const to of everyone) {
      const got = sink.arrivals.get(to)?.length ?? 0;
      const want = expected(to);
      if (got < want) missing += want - got;
      if (got > want) duplicated += got - want;
    }
    console.log(
      JSON.stringify(
        {
          date: new Date().toISOString().slice(0, 10),
          minutes: MINUTES,
          loadSeconds: n,
          rates: { send: SEND_RATE, track: TRACK_RATE, automation: AUTOMATION_RATE, campaignEveryMinutes: CAMPAIGN_EVERY, campaignContacts: CAMPAIGN_CONTACTS },
          accepted: { sends: accepted.sends.size, tracked: accepted.tracked, automationTriggers: accepted.triggers.size, campaigns: accepted.campaigns.length },
          errors,
          drainSeconds: Math.round((Date.now() - drainStart) / 1000),
          checks: {
            messagesMissing: missing,
            messagesDuplicated: duplicated,
            trackedStored: stored[0]!.n,
            trackedAccepted: accepted.tracked,
            campaignsSent,
            automationRunsOpen: runsOpen,
            emailsStillQueuedOrSending: open[0]!.n,
            workflowsOpen: openWorkflows,
          },
          rssMb: samples,
        },
        null,
        2,
      ),
    );
  } finally {
    await stack.stop();
    await sink.stop();
  }
}

if (require.main === module) {
  main().catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
