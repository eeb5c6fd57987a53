import fs from 'node:fs';
import path from 'node:path';
import { renderSnapshots, SNAPSHOT_DIR } from '../../scripts/sql-snapshots';

/** The committed SQL of the hot statements (domain/db/queries/) is the code's: run `npm run sql:snapshots` after a change. */
test('domain/db/queries/ holds exactly the hot statements the code declares', async () => {
  const expected = await renderSnapshots();
  expect(expected.size).toBeGreaterThan(5);
  const committed = new Map(
    fs
      .readdirSync(SNAPSHOT_DIR)
      .filter((f) => f.endsWith('.sql'))
      .map((f) => [f, fs.readFileSync(path.join(SNAPSHOT_DIR, f), 'utf8')] as const),
  );
  expect([...committed.keys()].sort()).toEqual([...expected.keys()].sort());
  for (const [name, content] of expected) expect(`${name}:\n${committed.get(name)}`).toBe(`${name}:\n${content}`);
});
