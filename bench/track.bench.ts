// `npm run bench:track`: POST /v1/track throughput with realistic payloads on the real stack, then a check that
// every accepted event is in the database. Loopback only; stops by itself.
// Options (env): DURATION seconds (20), CONNECTIONS (64), CONTACTS distinct emails (20000).
import autocannon from 'autocannon';
import { startBenchStack, benchProject } from './stack';

const DURATION = Number(process.env.DURATION ?? 20);
const CONNECTIONS = Number(process.env.CONNECTIONS ?? 64);
const CONTACTS = Number(process.env.CONTACTS ?? 20_000);

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
  const stack = await startBenchStack({ smtpUrl: 'smtp://127.0.0.1:9' });
  try {
    const { publicKey } = await benchProject(stack.apiUrl, stack.db, 'track.example.test');
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
    const result = await autocannon(opts(CONNECTIONS, DURATION));
    // Requests still in flight when autocannon stopped may have been stored without being counted.
    await new Promise((r) => setTimeout(r, 1000));
    const after = Number((await stack.db.query('select count(*) from events')).rows[0].count);
    const contacts = Number((await stack.db.query('select count(*) from contacts')).rows[0].count);
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
