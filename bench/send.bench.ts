// `npm run bench:send`: /v1/send accept rate (one recipient per call) and delivery rate to an SMTP server, on the
// real stack (embedded Postgres, Temporal dev server, API and worker processes). Loopback only; stops by itself.
// Options (env): DURATION seconds (20), CONNECTIONS (64), TEMPLATED=1 to send a stored template with data (Liquid
// with defaults and a loop, two tracked links, the open pixel, unsubscribe links, a plain-text part); STACK=rehearsal
// to run it on the production rehearsal (two APIs behind the balancer, two workers, the real Temporal server).
import os from 'node:os';
import autocannon from 'autocannon';
import { startSmtpSink } from './smtp-sink';
import { startBenchStack, benchProject } from './stack';
import { freePort } from '../scripts/services/process';
import { cpuByProcess } from './proc';

const DURATION = Number(process.env.DURATION ?? 20);
const CONNECTIONS = Number(process.env.CONNECTIONS ?? 64);
const TEMPLATED = process.env.TEMPLATED === '1';
const DOMAIN = 'bench.example.test';

async function main() {
  const sink = await startSmtpSink(await freePort());
  const stack = await startBenchStack({
    smtpUrl: sink.url,
    // e.g. API_NODE_ARGS='--cpu-prof --cpu-prof-dir=/tmp/prof' to profile the API under load
    apiNodeArgs: process.env.API_NODE_ARGS?.split(' ').filter(Boolean),
    workerNodeArgs: process.env.WORKER_NODE_ARGS?.split(' ').filter(Boolean),
  });
  try {
    const { secretKey } = await benchProject(stack.apiUrl, stack.db, DOMAIN);
    const headers = { authorization: `Bearer ${secretKey}`, 'content-type': 'application/json' };
    let templateId: string | undefined;
    if (TEMPLATED) {
      const res = await fetch(`${stack.apiUrl}/templates`, {
        method: 'POST',
        headers,
        body: JSON.stringify({
          name: 'Order receipt',
          type: 'TRANSACTIONAL',
          from: `news@${DOMAIN}`,
          fromName: 'Bench',
          subject: 'Hello {{ first_name ?? there }}, your {{ plan }} plan',
          body:
            '<html><body><h1>Hi {{ first_name ?? "friend" }}</h1>{% for item in items %}<p>{{ item.name }}: {{ item.price }}</p>{% endfor %}' +
            '<p><a href="https://example.com/orders/{{ order }}">Your order</a> · <a href="https://example.com/help">Help</a></p>' +
            '<p>Sent to {{ email }}. <a href="{{ manageUrl }}">Preferences</a></p></body></html>',
        }),
      });
      if (res.status !== 201) throw new Error(`template: ${res.status} ${await res.text()}`);
      templateId = ((await res.json()) as { id: string }).id;
    }
    let n = 0;
    const body = () =>
      JSON.stringify(
        TEMPLATED
          ? {
              to: { name: 'Reader', email: `reader-${n++}@example.com` },
              template: templateId,
              data: { first_name: 'Ada', plan: 'pro', order: { value: `A-${n}`, persistent: false }, items: [{ name: 'A', price: 1 }, { name: 'B', price: 2 }] },
            }
          : { to: `reader-${n++}@example.com`, from: `news@${DOMAIN}`, subject: 'Benchmark', body: '<p>Hello from the benchmark</p>' },
      );
    // Warm-up: JIT, connection pools, the worker's workflow cache.
    await autocannon({ url: `${stack.apiUrl}/v1/send`, method: 'POST', connections: 8, duration: 3, headers, requests: [{ setupRequest: (r) => ({ ...r, body: body() }) }] });
    const sentBefore = sink.state.received;
    // CPU per process over the load and the drain: each API and worker by name, Postgres and Temporal by command.
    const pids = { ...stack.pids(), bench: process.pid };
    const cpuBefore = cpuByProcess(pids);
    const loadBefore = os.loadavg()[0]!;
    const started = Date.now();
    const result = await autocannon({
      url: `${stack.apiUrl}/v1/send`,
      method: 'POST',
      connections: CONNECTIONS,
      duration: DURATION,
      headers,
      requests: [{ setupRequest: (r) => ({ ...r, body: body() }) }],
    });
    const accepted = result['2xx'];
    const acceptRate = accepted / (result.duration || DURATION);
    // Every accepted email (including requests still in flight when the load stopped) must reach the SMTP server.
    const deadline = Date.now() + 10 * 60_000;
    const pendingCount = async () => Number((await stack.db.query(`select count(*) from emails where status in ('QUEUED', 'SENDING')`)).rows[0].count);
    while ((await pendingCount()) > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 250));
    const totalAccepted = Number((await stack.db.query(`select count(*) from emails`)).rows[0].count);
    const drainedAt = Date.now();
    const cpuAfter = cpuByProcess(pids);
    const delivered = sink.state.received - sentBefore;
    const { rows } = await stack.db.query(`select status, count(*)::int as n from emails group by status order by status`);
    const workflows = Number((await stack.db.query(`select count(distinct workflow_id) from emails`)).rows[0].count);
    const report = {
      date: new Date().toISOString().slice(0, 10),
      templated: TEMPLATED,
      connections: CONNECTIONS,
      durationS: DURATION,
      accepted,
      non2xx: result.non2xx,
      errors: result.errors,
      acceptedPerSecond: Math.round(acceptRate),
      latencyMs: { p50: result.latency.p50, p97_5: result.latency.p97_5, p99: result.latency.p99 },
      deliveredDuringAndAfter: delivered,
      deliveredPerSecondEndToEnd: Math.round(delivered / ((drainedAt - started) / 1000)),
      secondsUntilAllDelivered: Math.round((drainedAt - started) / 100) / 10,
      emailStatuses: Object.fromEntries(rows.map((r) => [r.status, r.n])),
      // The API hands the emails of calls that arrive together to one delivery workflow (EmailIntake).
      deliveryWorkflows: workflows,
      emailsPerWorkflow: Math.round((totalAccepted / workflows) * 10) / 10,
      allAcceptedDelivered: sink.state.received === totalAccepted,
      stack: stack.stack,
      cpuSeconds: Object.fromEntries(Object.entries(cpuAfter).map(([k, v]) => [k, Math.round((v - (cpuBefore[k] ?? 0)) * 10) / 10])),
      cpuMsPerAcceptedEmail: Object.fromEntries(Object.entries(cpuAfter).map(([k, v]) => [k, Math.round(((v - (cpuBefore[k] ?? 0)) / Math.max(1, totalAccepted)) * 100_000) / 100])),
      loadAverage1m: { before: Math.round(loadBefore * 100) / 100, after: Math.round(os.loadavg()[0]! * 100) / 100 },
    };
    console.log(JSON.stringify(report, null, 2));
  } finally {
    await stack.stop();
    await sink.stop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
