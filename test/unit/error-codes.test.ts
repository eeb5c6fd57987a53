import fs from 'node:fs';
import path from 'node:path';
import { ERROR_CODES } from '../../domain/errors';

/** README's error table lists exactly the codes of `ErrorCode`, each with its status and meaning. */
test("README's error table is the ErrorCode list", () => {
  const readme = fs.readFileSync(path.join(__dirname, '../../README.md'), 'utf8');
  const table = /<!-- error-codes:start -->([\s\S]*?)<!-- error-codes:end -->/.exec(readme)?.[1];
  expect(table).toBeDefined();
  const rows = [...table!.matchAll(/^\s*\| `([A-Z_]+)` \| (\d{3}) \| (.+?) \|\s*$/gm)].map((m) => [m[1], Number(m[2]), m[3]]);
  const expected = Object.entries(ERROR_CODES).map(([code, [status, meaning]]) => [code, status, meaning]);
  const byCode = (a: unknown[], b: unknown[]) => String(a[0]).localeCompare(String(b[0]));
  expect(rows.sort(byCode)).toEqual(expected.sort(byCode));
});
