import fs from 'node:fs';
import path from 'node:path';
import { buildRoutes } from '../../api/app';
import type { ApiDeps } from '../../api/context';
import { loadConfig } from '../../domain/config';

/**
 * The data-access rules of README › Architecture › Data access, kept by reading the source: raw SQL runs only through
 * domain/db/sql.ts (one helper, `$n` placeholders), `events` is inserted only by the event writer, and a write route
 * runs in one transaction unless it is one of the reviewed routes that keep their own units of work.
 */

const ROOT = path.join(__dirname, '..', '..');
const DIRS = ['api', 'domain', 'temporal', 'scripts'];

function sources(): { file: string; text: string }[] {
  const out: { file: string; text: string }[] = [];
  const walk = (dir: string): void => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(p);
      else if (/\.ts$/.test(entry.name) && !entry.name.endsWith('.d.ts')) out.push({ file: path.relative(ROOT, p), text: fs.readFileSync(p, 'utf8') });
    }
  };
  for (const d of DIRS) walk(path.join(ROOT, d));
  return out;
}

/** Lines of `text` matching `re`, as `file:line: text`. */
function hits(files: { file: string; text: string }[], re: RegExp, except: (file: string) => boolean): string[] {
  const found: string[] = [];
  for (const { file, text } of files) {
    if (except(file)) continue;
    text.split('\n').forEach((line, i) => {
      if (re.test(line)) found.push(`${file}:${i + 1}: ${line.trim()}`);
    });
  }
  return found;
}

const files = sources();
// Scripts that manage services (Postgres, Temporal's schema) run SQL before any of the app exists.
const SERVICE_SCRIPTS = (f: string) => f.startsWith(path.join('scripts', 'services'));

describe('data access', () => {
  test('raw SQL runs only through domain/db/sql.ts ($n placeholders): no ORM execute() (knex `?` placeholders), no pg query() elsewhere', () => {
    const helper = path.join('domain', 'db', 'sql.ts');
    // `Sql` values are named `tx` or `db`, or are `sql(...)` calls (no name right before `.query`); pg's pools and
    // connections never are. A Temporal workflow `handle`'s query() is a workflow query, not SQL.
    const execute = hits(files, /\.execute\s*[<(]|\.getKnex\(\)|\.acquireConnection\(/, (f) => f === helper);
    const pgQuery = hits(files, /\b(?!tx\b|db\b|handle\b)[A-Za-z_$][\w$]*\.query\s*[<(]|\bquery\(\{/, (f) => f === helper || SERVICE_SCRIPTS(f));
    expect([...execute, ...pgQuery]).toEqual([]);
  });

  test('`events` is inserted only by the event writer', () => {
    const writer = path.join('domain', 'events', 'event-writer.ts');
    expect(hits(files, /insert\s+into\s+events\b/i, (f) => f === writer)).toEqual([]);
  });

  test('the rollups are written only by the analytics consumer (campaign sends reach them as tallies through the outbox)', () => {
    const consumer = path.join('domain', 'analytics', 'analytics-consumer.ts');
    expect(hits(files, /(insert\s+into|update)\s+(analytics_hourly|event_name_hourly|contact_last_event)\b/i, (f) => f === consumer)).toEqual([]);
  });
});

describe('request transactions', () => {
  const routes = buildRoutes({ config: loadConfig({ DATABASE_URL: 'postgres://unused/routes', NODE_ENV: 'test' }) } as ApiDeps);

  test('every write route runs in one transaction, except the reviewed ones, each of which says why', () => {
    const writes = routes.defs.filter((d) => d.method !== 'get');
    const own = writes.filter((d) => !d.transactional);
    for (const d of own) expect(d.ownTransactions).toMatch(/\w{3,}.*\w{3,}/);
    // A new exception is a decision for review: add it here with its reason in the route's `ownTransactions`.
    expect(own.map((d) => `${d.method.toUpperCase()} ${d.path}`).sort()).toEqual(
      [
        'POST /v1/send',
        'POST /v1/track',
        'POST /events/track',
        'PUT /campaigns/:id',
        'PATCH /campaigns/:id',
        'POST /campaigns/:id/send',
        'POST /campaigns/:id/pause',
        'POST /campaigns/:id/resume',
        'POST /campaigns/:id/cancel',
        'POST /campaigns/:id/test',
        'POST /campaigns/:id/winner',
        'POST /workflows/:id/executions',
        'POST /workflows/:id/executions/cancel-all',
        'DELETE /workflows/:id/executions/:executionId',
        'POST /contacts/import',
        'POST /contacts/import/:jobId/cancel',
        'POST /contacts/bulk-subscribe',
        'POST /contacts/bulk-unsubscribe',
        'POST /contacts/bulk-delete',
        'POST /contacts/bulk/:jobId/cancel',
        'POST /domains',
        'DELETE /domains/:id',
        'POST /users/@me/projects/:id/reset',
        'POST /segments/:id/compute',
        'POST /users/@me/projects/:id/checkout',
        'POST /users/@me/projects/:id/billing-portal',
        'POST /webhooks/incoming/sendgrid',
        'POST /webhooks/incoming/mailgun',
        'POST /webhooks/incoming/postmark',
        'POST /webhooks/incoming/resend',
      ].sort(),
    );
    expect(writes.filter((d) => d.transactional).length).toBeGreaterThan(40);
    expect(routes.defs.filter((d) => d.method === 'get' && d.transactional)).toEqual([]);
  });
});
