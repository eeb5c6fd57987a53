// `npm run bench:contacts`: first-page latency of GET /contacts on a project seeded (set-based) with 1,000,000
// contacts, on the real stack. Loopback only; stops by itself. Options (env): CONTACTS (1000000), REQUESTS (300).
import { performance } from 'node:perf_hooks';
import { startBenchStack, benchProject } from './stack';
import { measure } from './latency';

const CONTACTS = Number(process.env.CONTACTS ?? 1_000_000);
const REQUESTS = Number(process.env.REQUESTS ?? 300);

/** Inserts `n` contacts in one statement with UUIDv7-style ids in creation order and realistic data. */
export async function seedContactsSql(db: import('pg').Pool, projectId: string, n: number): Promise<void> {
  await db.query(`
    insert into contacts (id, project_id, email, subscribed, data, created_at, updated_at)
    select
      encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid()) placing substring(int8send((extract(epoch from t) * 1000)::bigint) from 3) from 1 for 6), 52, 1), 53, 1), 'hex')::uuid,
      $1, 'user' || i || '@' || (array['gmail.com','yahoo.com','outlook.com','example.com','company.io'])[1 + i % 5],
      i % 10 <> 0,
      jsonb_build_object(
        'firstName', (array['Ada','Grace','Linus','Ken','Barbara','Alan','Margaret','Dennis'])[1 + i % 8],
        'plan', (array['free','free','free','starter','pro','team'])[1 + i % 6],
        'age', 18 + i % 60,
        'country', (array['NO','DE','US','FR','BR','IN','JP'])[1 + i % 7],
        'signupDate', to_char(t, 'YYYY-MM-DD'),
        'score', (i * 37) % 1000
      ) || case when i % 4 = 0 then jsonb_build_object('company', 'Company ' || (i % 5000)) else '{}'::jsonb end,
      t, t
    from generate_series(1, $2::int) as i, lateral (select now() - make_interval(secs => ($2::int - i) * 0.05)) as x(t)`,
    [projectId, n],
  );
  await db.query('vacuum analyze contacts');
}

async function main() {
  const stack = await startBenchStack({ smtpUrl: 'smtp://127.0.0.1:9' });
  try {
    const { secretKey, projectId } = await benchProject(stack.apiUrl, stack.db, 'list.example.test');
    const t0 = performance.now();
    await seedContactsSql(stack.db, projectId, CONTACTS);
    const seedSeconds = Math.round((performance.now() - t0) / 100) / 10;
    const base = `${stack.apiUrl}/contacts`;
    await measure(base, secretKey, 20); // warm-up
    const firstPage = await measure(base, secretKey, REQUESTS);
    const subscribedFirstPage = await measure(`${base}?subscribed=false`, secretKey, REQUESTS);
    const page = (await (await fetch(`${base}?limit=100`, { headers: { authorization: `Bearer ${secretKey}` } })).json()) as { cursor: string; total: number };
    const nextPage = await measure(`${base}?limit=100&cursor=${page.cursor}`, secretKey, REQUESTS);
    const search = await measure(`${base}?search=user12345`, secretKey, Math.min(REQUESTS, 100));
    console.log(
      JSON.stringify(
        { date: new Date().toISOString().slice(0, 10), contacts: CONTACTS, total: page.total, seedSeconds, latencyMs: { firstPage, subscribedFirstPage, nextPage100: nextPage, search } },
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
