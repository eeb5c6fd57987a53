// `npm run bench:webhooks`: webhooks out on the real stack (issue 29). A local receiver (in this process) takes the
// deliveries of one endpoint (`*`) of a project whose events are recorded straight into `events` (as any writer does;
// the outbox trigger queues them), so the API's own cost is not in the figures.
// 1. Throughput: EVENTS events over CONTACTS contacts, recorded at RATE per second; measured: deliveries per second
//    (first event recorded to last delivery received), the lag from an event's recording to its first successful
//    delivery (p50, p99, max) and the part of it until its delivery row was made (queuedLagMs: the outbox and the
//    consumer), CPU seconds per process (bench/proc.ts).
// 2. Outage: the receiver answers 500 for OUTAGE_MINUTES (default 10) while OUTAGE_EVENTS_PER_SECOND events (default 5)
//    over OUTAGE_CONTACTS contacts (default 500) are recorded, then 200 again; measured: every event delivered (none
//    lost), how long after the recovery the last one arrived, and whether each contact's events arrived in recorded
//    order (by each delivery's first successful receipt). OUTAGE_MINUTES=0 skips it.
// Loopback only; stops by itself (bounded by DEADLINE_MINUTES, default 60).
import http from 'node:http';
import os from 'node:os';
import type { AddressInfo } from 'node:net';
import type { Pool } from 'pg';
import { uuidv7s } from '../domain/ids';
import { benchProject, startBenchStack } from './stack';
import { cpuByProcess } from './proc';

const EVENTS = Number(process.env.EVENTS ?? 20_000);
const CONTACTS = Number(process.env.CONTACTS ?? 5_000);
const RATE = Number(process.env.RATE ?? 1_500);
const OUTAGE_MINUTES = Number(process.env.OUTAGE_MINUTES ?? 10);
const OUTAGE_RATE = Number(process.env.OUTAGE_EVENTS_PER_SECOND ?? 5);
const OUTAGE_CONTACTS = Number(process.env.OUTAGE_CONTACTS ?? 500);
const DEADLINE_MS = Number(process.env.DEADLINE_MINUTES ?? 60) * 60_000;
const started = Date.now();

interface Receipt {
  /** webhook-id */
  id: string;
  atMs: number;
  contactId: string;
  n: number;
  ok: boolean;
}

/** The receiver: records every request; answers 500 while `failing()`, else 200 at once. */
function startReceiver(failing: () => boolean): Promise<{ url: string; receipts: Receipt[]; close: () => void }> {
  const receipts: Receipt[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const ok = !failing();
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { data: { contact: { id: string }; properties: { n: number } } };
      receipts.push({ id: String(req.headers['webhook-id']), atMs: Date.now(), contactId: body.data.contact.id, n: body.data.properties.n, ok });
      res.writeHead(ok ? 200 : 500).end();
    });
  });
  server.keepAliveTimeout = 30_000;
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`, receipts, close: () => server.close() })));
}

async function createContacts(db: Pool, projectId: string, prefix: string, n: number): Promise<string[]> {
  const { rows } = await db.query<{ id: string }>(
    `insert into contacts (id, project_id, email, subscribed, data) select gen_random_uuid(), $1, $2 || i || '@example.com', true, '{}' from generate_series(1, $3) i returning id`,
    [projectId, prefix, n],
  );
  return rows.map((r) => r.id);
}

/**
 * Records `total` events at `perSecond` (a statement every 100 ms), round-robin over `contacts`, each with its
 * contact's running number `n` (ids in recording order, so a contact's `n` rise with its events' ids).
 */
async function recordEvents(db: Pool, projectId: string, contacts: string[], total: number, perSecond: number, next: Map<string, number>): Promise<void> {
  const t0 = Date.now();
  for (let sent = 0, tick = 0; sent < total; tick++) {
    // What is due by the end of this tick (a rate below 10/s records every few ticks).
    const count = Math.min(Math.floor(((tick + 1) * perSecond) / 10) - sent, total - sent);
    if (count <= 0) {
      await new Promise((r) => setTimeout(r, Math.max(0, t0 + (tick + 1) * 100 - Date.now())));
      continue;
    }
    const ids = uuidv7s(count);
    const who = ids.map((_, i) => contacts[(sent + i) % contacts.length]!);
    const data = who.map((c) => {
      const n = next.get(c) ?? 0;
      next.set(c, n + 1);
      return JSON.stringify({ n, plan: 'pro' });
    });
    await db.query(
      `insert into events (id, project_id, contact_id, name, data, source) select id, $1, c, 'bench_event', d::jsonb, 'TRACKED' from unnest($2::uuid[], $3::uuid[], $4::text[]) as t(id, c, d)`,
      [projectId, ids, who, data],
    );
    sent += count;
    const wait = t0 + (tick + 1) * 100 - Date.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
  }
}

async function waitFor(check: () => Promise<boolean> | boolean, what: string): Promise<void> {
  while (!(await check())) {
    if (Date.now() - started > DEADLINE_MS) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? NaN;

/** First successful receipt per webhook-id. */
function firstSuccesses(receipts: Receipt[]): Map<string, Receipt> {
  const first = new Map<string, Receipt>();
  for (const r of receipts) if (r.ok && !first.has(r.id)) first.set(r.id, r);
  return first;
}

/** Contacts whose events' first successful receipts are not in recorded order (`n` rising). */
function outOfOrder(first: Map<string, Receipt>): number {
  const byContact = new Map<string, Receipt[]>();
  for (const r of first.values()) byContact.set(r.contactId, [...(byContact.get(r.contactId) ?? []), r]);
  let bad = 0;
  for (const list of byContact.values()) {
    const ns = list.sort((a, b) => a.atMs - b.atMs).map((r) => r.n);
    if (ns.some((n, i) => i > 0 && n < ns[i - 1]!)) bad++;
  }
  return bad;
}

async function main() {
  process.env.WEBHOOK_ALLOWED_NETWORKS = '127.0.0.0/8'; // the receiver is on loopback (passed on to the API and worker)
  let failUntil = 0;
  const receiver = await startReceiver(() => Date.now() < failUntil);
  const stack = await startBenchStack({ smtpUrl: 'smtp://127.0.0.1:9' });
  const load = () => os.loadavg().map((l) => Math.round(l * 100) / 100);
  try {
    const { secretKey, projectId } = await benchProject(stack.apiUrl, stack.db, 'webhooks.example.test');
    const res = await fetch(`${stack.apiUrl}/webhook-endpoints`, {
      method: 'POST',
      headers: { authorization: `Bearer ${secretKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ url: receiver.url, eventTypes: ['*'] }),
    });
    if (res.status !== 201) throw new Error(`endpoint: ${res.status} ${await res.text()}`);
    const endpointId = ((await res.json()) as { id: string }).id;
    await waitFor(async () => (await stack.db.query(`select 1 from event_consumers where name = 'webhooks-out' and project_scoped`)).rowCount === 1, 'the worker to register webhooks-out');
    const pids = { api: stack.api.child.pid!, worker: stack.workers[0]!.child.pid! };
    const next = new Map<string, number>();
    const delivered = () => firstSuccesses(receiver.receipts).size;

    // 1. Throughput.
    const contacts = await createContacts(stack.db, projectId, 'tp-', CONTACTS);
    const loadBefore = load();
    const cpu0 = cpuByProcess(pids);
    const t0 = Date.now();
    await recordEvents(stack.db, projectId, contacts, EVENTS, RATE, next);
    const recordedS = (Date.now() - t0) / 1000;
    await waitFor(() => delivered() >= EVENTS, 'every event of the throughput run delivered');
    const first = firstSuccesses(receiver.receipts);
    const lastAt = Math.max(...[...first.values()].map((r) => r.atMs));
    const cpu1 = cpuByProcess(pids);
    const lagRows = await stack.db.query<{ wid: string; at: number; queuedAt: number }>(
      `select 'msg_' || replace(d.id::text, '-', '') as wid, extract(epoch from e.created_at) * 1000 as at, extract(epoch from d.created_at) * 1000 as "queuedAt"
       from webhook_deliveries d join events e on e.id = d.event_id where d.endpoint_id = $1`,
      [endpointId],
    );
    const lags = lagRows.rows.map((r) => (first.get(r.wid)?.atMs ?? NaN) - Number(r.at)).filter((x) => !Number.isNaN(x)).sort((a, b) => a - b);
    // Where the lag is: the outbox and its consumer (event recorded -> delivery row), then the delivery (row -> received).
    const queueLags = lagRows.rows.map((r) => Number(r.queuedAt) - Number(r.at)).sort((a, b) => a - b);
    const perSecond = new Map<number, number>();
    for (const r of first.values()) perSecond.set(Math.floor(r.atMs / 1000), (perSecond.get(Math.floor(r.atMs / 1000)) ?? 0) + 1);
    const cpu = Object.fromEntries(Object.entries(cpu1).map(([k, v]) => [k, Math.round((v - (cpu0[k] ?? 0)) * 10) / 10]));
    const throughput = {
      events: EVENTS,
      contacts: CONTACTS,
      recordedPerSecond: Math.round(EVENTS / recordedS),
      deliveriesPerSecond: Math.round(EVENTS / ((lastAt - t0) / 1000)),
      bestSecond: Math.max(...perSecond.values()),
      lagMs: { p50: Math.round(pct(lags, 0.5)), p99: Math.round(pct(lags, 0.99)), max: Math.round(lags[lags.length - 1] ?? NaN) },
      queuedLagMs: { p50: Math.round(pct(queueLags, 0.5)), p99: Math.round(pct(queueLags, 0.99)) },
      requests: receiver.receipts.length,
      cpuSeconds: cpu,
      cpuMsPerDelivery: Math.round((Object.values(cpu).reduce((a, b) => a + b, 0) / EVENTS) * 1000 * 100) / 100,
      loadBefore,
      loadAfter: load(),
    };
    console.log(JSON.stringify({ throughput }, null, 2));

    // 2. Outage.
    let outage: Record<string, unknown> | undefined;
    if (OUTAGE_MINUTES > 0) {
      receiver.receipts.length = 0;
      const oc = await createContacts(stack.db, projectId, 'out-', OUTAGE_CONTACTS);
      const total = Math.round(OUTAGE_MINUTES * 60 * OUTAGE_RATE);
      const outageStart = Date.now();
      failUntil = outageStart + OUTAGE_MINUTES * 60_000;
      const cpuO0 = cpuByProcess(pids);
      await recordEvents(stack.db, projectId, oc, total, OUTAGE_RATE, next);
      await waitFor(() => delivered() >= total, 'every event of the outage run delivered');
      const got = firstSuccesses(receiver.receipts);
      const lastAtO = Math.max(...[...got.values()].map((r) => r.atMs));
      const cpuO1 = cpuByProcess(pids);
      const status = await stack.db.query<{ status: string; n: number }>(
        `select d.status, count(*)::int as n from webhook_deliveries d join events e on e.id = d.event_id join contacts c on c.id = e.contact_id
         where d.endpoint_id = $1 and c.email like 'out-%' group by 1`,
        [endpointId],
      );
      outage = {
        minutes: OUTAGE_MINUTES,
        events: total,
        contacts: OUTAGE_CONTACTS,
        delivered: got.size,
        lost: total - got.size,
        deliveries: Object.fromEntries(status.rows.map((r) => [r.status, r.n])),
        requests: receiver.receipts.length,
        failedRequests: receiver.receipts.filter((r) => !r.ok).length,
        duplicateSuccesses: receiver.receipts.filter((r) => r.ok).length - got.size,
        lastDeliveredAfterRecoveryS: Math.round((lastAtO - failUntil) / 1000),
        contactsOutOfOrder: outOfOrder(got),
        cpuSeconds: Object.fromEntries(Object.entries(cpuO1).map(([k, v]) => [k, Math.round((v - (cpuO0[k] ?? 0)) * 10) / 10])),
        loadAfter: load(),
      };
      console.log(JSON.stringify({ outage }, null, 2));
    }
    console.log(JSON.stringify({ date: new Date().toISOString(), throughput, outage, contactsOutOfOrderThroughput: outOfOrder(first) }));
  } finally {
    receiver.close();
    await stack.stop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
