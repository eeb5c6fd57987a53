// `npm run bench:track`: POST /v1/track throughput with realistic payloads on the real stack, then a check that
// every accepted event is in the database and the dispatch lag of the event outbox: the worker runs the probe
// consumer (EVENTS_PROBE), which records when each event reached it; lag = that time minus the event's created_at
// (the start of the transaction that recorded it, so commit time plus a little). Loopback only; stops by itself.
// Options (env): DURATION seconds (20), CONNECTIONS (64), CONTACTS distinct emails (20000), PROBE (1; 0 = no
// consumer registered, the outbox trigger then writes nothing).
import fs from 'node:fs';
import autocannon from 'autocannon';
import { startBenchStack, benchProject } from './stack';

const DURATION = Number(process.env.DURATION ?? 20);
const CONNECTIONS = Number(process.env.CONNECTIONS ?? 64);
const CONTACTS = Number(process.env.CONTACTS ?? 20_000);
const PROBE = process.env.PROBE !== '0';

const EVENTS = ['page_view', 'page_view', 'page_view', 'clicked_cta', 'signed_up', 'added_to_cart', 'checkout_started', 'purchase'];
const PAGES = ['/', '/pricing', '/docs', '/blog/launch', '/features', '/signup'];
const PLANS = ['free', 'starter', 'pro', 'team'];

/** A payload like a browser snippet or a backend would send: a known user, an event, a few properties. */
function payload(i: number): string {
  const user = (i * 7919) % CONTACTS;
  const event = EVENTS[i % EVENTS.length]!;
  return JSON.stringify({
    email: `user${user}@example.com`,
    event,
    data: {
      plan: PLANS[user % PLANS.length],
      page: PAGES[i % PAGES.length],
      utm_source: i % 5 === 0 ? 'newsletter' : 'organic',
      visits: i % 100,
      ...(event === 'purchase' ? { amount: { value: 49 + (i % 50), persistent: false }, currency: 'EUR' } : {}),
    },
  });
}

async function main() {
  const stack = await startBenchStack({ smtpUrl: 'smtp://127.0.0.1:9', workerEnv: PROBE ? { EVENTS_PROBE: 'true' } : {} });
  try {
    const { publicKey } = await benchProject(stack.apiUrl, stack.db, 'track.example.test');
    if (PROBE) await waitFor(async () => (await stack.db.query(`select 1 from event_consumers where name = 'probe'`)).rowCount === 1, 120_000, 'the worker to register the probe consumer');
    let n = 0;
    const opts = (connections: number, duration: number) => ({
      url: `${stack.apiUrl}/v1/track`,
      method: 'POST' as const,
      connections,
      duration,
      headers: { authorization: `Bearer ${publicKey}`, 'content-type': 'application/json' },
      requests: [{ setupRequest: (r: object) => ({ ...r, body: payload(n++) }) }],
    });
    await autocannon(opts(8, 3)); // warm-up
    const before = Number((await stack.db.query('select count(*) from events')).rows[0].count);
    const loadStart = new Date();
    const cpuBefore = stackCpuMs();
    const result = await autocannon(opts(CONNECTIONS, DURATION));
    const loadEnd = Date.now();
    const cpuAfter = stackCpuMs();
    // Requests still in flight when autocannon stopped may have been stored without being counted.
    await new Promise((r) => setTimeout(r, 1000));
    const after = Number((await stack.db.query('select count(*) from events')).rows[0].count);
    const contacts = Number((await stack.db.query('select count(*) from contacts')).rows[0].count);
    let dispatch: Record<string, unknown> | undefined;
    if (PROBE) {
      await waitFor(async () => (await stack.db.query(`select 1 from event_outbox limit 1`)).rowCount === 0, 300_000, 'the outbox to drain');
      const drainedS = (Date.now() - loadEnd) / 1000;
      const { rows } = await stack.db.query(
        `select count(*)::int as events, count(r.event_id)::int as received, max(r.deliveries)::int as "maxDeliveries",
                percentile_cont(array[0.5, 0.9, 0.99]) within group (order by extract(epoch from r.received_at - e.created_at) * 1000) as lag,
                max(extract(epoch from r.received_at - e.created_at) * 1000) as "maxLag"
         from events e left join event_probe_receipts r on r.event_id = e.id where e.created_at >= $1`,
        [loadStart],
      );
      const r = rows[0];
      const ms = (v: number) => Math.round(v * 10) / 10;
      dispatch = {
        events: r.events,
        everyEventReceived: r.received === r.events,
        maxDeliveries: r.maxDeliveries,
        lagMs: { p50: ms(r.lag[0]), p90: ms(r.lag[1]), p99: ms(r.lag[2]), max: ms(r.maxLag) },
        outboxEmptyAfterLoadS: drainedS,
      };
    }
    console.log(
      JSON.stringify(
        {
          date: new Date().toISOString().slice(0, 10),
          connections: CONNECTIONS,
          durationS: DURATION,
          accepted: result['2xx'],
          non2xx: result.non2xx,
          errors: result.errors,
          requestsPerSecond: Math.round(result['2xx'] / result.duration),
          latencyMs: { p50: result.latency.p50, p97_5: result.latency.p97_5, p99: result.latency.p99 },
          eventsStored: after - before,
          everyAcceptedEventStored: after - before >= result['2xx'],
          contacts,
          // CPU time of the stack's processes (API, worker, Postgres, Temporal) per accepted call: comparable between
          // runs on a machine that other work shares, unlike requests/s.
          ...(cpuBefore !== undefined && cpuAfter !== undefined ? { stackCpuMsPerCall: Math.round(((cpuAfter - cpuBefore) / result['2xx']) * 1000) / 1000 } : {}),
          ...(dispatch ? { dispatch } : {}),
        },
        null,
        2,
      ),
    );
  } finally {
    await stack.stop();
  }
}

/** CPU time (user + system) so far of every process below this one, from /proc (Linux); undefined elsewhere. */
function stackCpuMs(): number | undefined {
  try {
    const parent = new Map<number, number>();
    const ticks = new Map<number, number>();
    for (const entry of fs.readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      try {
        const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
        const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' '); // fields from the 3rd on
        parent.set(Number(entry), Number(fields[1]));
        ticks.set(Number(entry), Number(fields[11]) + Number(fields[12]));
      } catch {
        // the process ended meanwhile
      }
    }
    const below = (pid: number): boolean => {
      for (let p = parent.get(pid); p !== undefined && p > 1; p = parent.get(p)) if (p === process.pid) return true;
      return false;
    };
    let total = 0;
    for (const [pid, t] of ticks) if (below(pid)) total += t;
    return total * 10; // USER_HZ is 100 on Linux
  } catch {
    return undefined;
  }
}

async function waitFor(check: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
