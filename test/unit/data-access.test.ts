import fs from 'node:fs';
import path from 'node:path';

/**
 * The data-access rules of README › Architecture › Data access, kept by reading the source: raw SQL runs only through
 * domain/db/sql.ts (one helper, `$n` placeholders), and `events` is inserted only by the event writer.
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
    // connections never are.
    const execute = hits(files, /\.execute\s*[<(]|\.getKnex\(\)|\.acquireConnection\(/, (f) => f === helper);
    const pgQuery = hits(files, /\b(?!tx\b|db\b)[A-Za-z_$][\w$]*\.query\s*[<(]|\bquery\(\{/, (f) => f === helper || SERVICE_SCRIPTS(f));
    expect([...execute, ...pgQuery]).toEqual([]);
  });

  test('`events` is inserted only by the event writer', () => {
    const writer = path.join('domain', 'events', 'event-writer.ts');
    expect(hits(files, /insert\s+into\s+events\b/i, (f) => f === writer)).toEqual([]);
  });
});
