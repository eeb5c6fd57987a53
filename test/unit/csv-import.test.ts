import { parse as parseSync } from 'csv-parse/sync';
import {
  checkCsvBytes,
  csvRecords,
  csvRows,
  CsvRejected,
  detectDelimiter,
  inferValue,
  parseSubscribed,
  readLayout,
  type CsvLayout,
} from '../../domain/contacts/contact-import-csv';

function rows(text: string | Buffer, mapping?: Record<string, string>) {
  const buf = Buffer.isBuffer(text) ? text : Buffer.from(text);
  return csvRows(buf, readLayout(buf, mapping));
}

const rejected = (fn: () => unknown) => {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(CsvRejected);
    return (err as Error).message;
  }
  throw new Error('expected CsvRejected');
};

/** Only what csvRecords reads of a layout: the data starts at byte 0 of the buffer. */
const bareLayout = (delimiter: CsvLayout['delimiter']) => ({ delimiter, dataOffset: 0, headerEndLine: 0 }) as CsvLayout;

describe('CSV import parsing', () => {
  test.each([
    ['a,b;c', ','],
    ['email;name;plan', ';'],
    ['email\tname\tplan', '\t'],
    ['"a;b;c",d', ','],
    ['email', ','],
  ])('delimiter of header %j is %j', (line, d) => expect(detectDelimiter(line)).toBe(d));

  test.each([
    ['42', 42],
    ['-3.5', -3.5],
    ['007', '007'],
    ['true', true],
    ['FALSE', false],
    ['True ', true],
    ['trues', 'trues'],
    ['2024-05-01', '2024-05-01'],
    ['2024-05-01T10:00:00Z', '2024-05-01T10:00:00Z'],
    ['', undefined],
    ['  ', undefined],
    ['12345678901234567890', '12345678901234567890'],
    [' hello ', 'hello'],
    ['-', '-'],
    ['1e3', 1000],
  ])('cell %j is inferred as %j', (raw, v) => expect(inferValue(raw)).toEqual(v));

  test.each([
    ['yes', true],
    ['No', false],
    ['1', true],
    ['0', false],
    ['TRUE', true],
    ['', undefined],
    ['maybe', null],
  ])('subscribed %j -> %j', (raw, v) => expect(parseSubscribed(raw)).toBe(v));

  test('whole-file problems are refused with a clear message: empty, header only, binary, invalid UTF-8, no email column', () => {
    expect(rejected(() => checkCsvBytes(Buffer.from('')))).toMatch(/empty/);
    expect(rejected(() => readLayout(Buffer.from('\uFEFF\n\n')))).toMatch(/empty/);
    expect(rejected(() => readLayout(Buffer.from(' \u00a0\r\n\t')))).toMatch(/empty/);
    expect(rejected(() => readLayout(Buffer.from('email,name\n')))).toMatch(/no rows/);
    expect(rejected(() => readLayout(Buffer.from('email,name\r\n \u00a0\n')))).toMatch(/no rows/);
    expect(rejected(() => readLayout(Buffer.from([0x50, 0x4b, 0x03, 0x04, 0x00, 0x00, 0x65])))).toMatch(/NUL/);
    expect(rejected(() => readLayout(Buffer.from([0x65, 0x6d, 0x61, 0x69, 0x6c, 0x0a, 0xff, 0xfe, 0x41])))).toMatch(/UTF-8/);
    expect(rejected(() => readLayout(Buffer.from('name,plan\nA,pro\n')))).toMatch(/no email column.*name, plan/);
    expect(rejected(() => readLayout(Buffer.from('a,b\nx,y\n'), { c: 'email' }))).toMatch(/"c".*not in the header/);
    expect(rejected(() => readLayout(Buffer.from('a,b\nx,y\n'), { a: 'phone' }))).toMatch(/must be "email"/);
  });

  test('BOM stripped, email header matched in any case, rows typed and normalized, data rules applied (reserved keys dropped, empty ignored)', () => {
    const r = rows('\uFEFFEMAIL,Subscribed,plan,seats,id,note,mailwright_email\n A@Example.com ,no,pro,3,xyz,,x\nb@example.com,,free,,,hi,\n');
    expect(r.map(({ endOffset: _o, endLine: _l, ...x }) => x)).toEqual([
      { line: 2, email: 'a@example.com', subscribed: false, data: { plan: 'pro', seats: 3 } },
      { line: 3, email: 'b@example.com', subscribed: undefined, data: { plan: 'free', note: 'hi' } },
    ]);
  });

  test('quoted newlines keep line numbers right; invalid email, bad subscribed and bad column count are row errors with their line', () => {
    const r = rows('email;bio;city;subscribed\na@x.io;"line one\nline two\nline three";Paris;\n\nnot-an-email;x;y;1\nb@x.io;only three;z\nc@x.io;"q";Rome;maybe\nd@x.io;;;yes\n');
    expect(r.map((x) => [x.line, x.email ?? null, x.error ?? null])).toEqual([
      [2, 'a@x.io', null],
      [6, 'not-an-email', 'Invalid email address "not-an-email"'],
      [7, null, 'Expected 4 columns, found 3'],
      [8, 'c@x.io', 'Invalid subscribed value "maybe" (use true/false, yes/no or 1/0)'],
      [9, 'd@x.io', null],
    ]);
    expect(r[0]!.data).toEqual({ bio: 'line one\nline two\nline three', city: 'Paris' });
    expect(r[2]!.data).toEqual({});
  });

  test('line numbers count CRLF, CR and LF as one break each, quoted or not, and skipped empty lines', () => {
    // The first break (CRLF) is the record delimiter; a lone LF inside an unquoted field is content, but still a line.
    const r = csvRecords(Buffer.from('a\r\n\r\n"x\ry\r\nz",b\r\nc\nd\r\ne'), bareLayout(','));
    expect(r.map((x) => [x.fields, x.line, x.endLine])).toEqual([
      [['a'], 1, 1],
      [['x\ry\r\nz', 'b'], 3, 5],
      [['c\nd'], 6, 7],
      [['e'], 8, 8],
    ]);
  });

  test('a parse resumed at a row boundary yields the same rows with the same line numbers', () => {
    const text = 'email,bio\r\na@x.io,"multi\r\nline"\r\nb@x.io,é\r\nc@x.io,z';
    const all = rows(text);
    const buf = Buffer.from(text);
    const resumed = csvRows(buf, readLayout(buf), all[0]!.endOffset, all[0]!.endLine);
    expect(resumed).toEqual(all.slice(1));
    expect(all.map((x) => x.line)).toEqual([2, 4, 5]);
    expect(all.at(-1)!.endOffset).toBe(buf.length);
  });

  test('mapping renames columns, ignores some and picks the email column', () => {
    const r = rows('E-Mail Address,Plan,Secret\na@x.io,pro,s3cr3t\n', { 'E-Mail Address': 'email', Plan: 'data.tier', Secret: 'ignore' });
    expect(r[0]).toMatchObject({ email: 'a@x.io', data: { tier: 'pro' } });
  });

  test.each([
    ['an unclosed quote', 'email,name\na@x.io,ok\nb@x.io,"never closed\nc@x.io,z\n', /near line 3\): the quoted field that starts on line 3 is never closed/],
    ['a quote inside an unquoted field', 'email,name\na@x.io,say "hi"\n', /near line 2\): a quote inside an unquoted field/],
    ['text after a closing quote', 'email,name\na@x.io,ok\nb@x.io,"hi" there\n', /near line 3\): a closing quote must be followed by the delimiter/],
  ])('%s makes the whole file invalid, with the line', (_name, text, message) => {
    const buf = Buffer.from(text);
    expect(rejected(() => csvRows(buf, readLayout(buf)))).toMatch(message);
  });

  test('records are exactly what csv-parse reads (same options as the header): 30,000 random inputs, errors in the same cases', () => {
    // A seeded generator: a failure names an input that reproduces.
    let seed = 20261122;
    const random = () => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff;
    const alphabet = ['a', 'b', ',', ';', '\t', '"', '"', '""', '\n', '\r', '\r\n', ' ', 'é'];
    let agreedOnErrors = 0;
    for (let t = 0; t < 10_000; t++) {
      let text = '';
      for (let k = Math.floor(random() * 14); k > 0; k--) text += alphabet[Math.floor(random() * alphabet.length)];
      const buf = Buffer.from(text);
      for (const delimiter of [',', ';', '\t'] as const) {
        let expected: unknown;
        try {
          const records = parseSync(buf, { delimiter, relax_column_count: true, skip_empty_lines: true, info: true }) as unknown as { record: string[]; info: { bytes: number } }[];
          expected = records.map((r) => ({ fields: r.record, endOffset: r.info.bytes }));
        } catch {
          expected = 'error';
        }
        let actual: unknown;
        try {
          actual = csvRecords(buf, bareLayout(delimiter)).map((r) => ({ fields: r.fields, endOffset: r.endOffset }));
        } catch (err) {
          if (!(err instanceof CsvRejected)) throw err;
          actual = 'error';
        }
        if (expected === 'error' && actual === 'error') agreedOnErrors++;
        // expect() only on a difference: it would cost more than both parsers together.
        else if (JSON.stringify(actual) !== JSON.stringify(expected)) expect({ text, delimiter, records: actual }).toEqual({ text, delimiter, records: expected });
      }
    }
    expect(agreedOnErrors).toBeGreaterThan(500); // malformed input was generated too
  });
});
