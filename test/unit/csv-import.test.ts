import { checkCsvBytes, csvRows, CsvRejected, detectDelimiter, inferValue, parseSubscribed, readLayout, type CsvRow } from '../../domain/contacts/contact-import-csv';

async function rows(text: string | Buffer, mapping?: Record<string, string>): Promise<CsvRow[]> {
  const buf = Buffer.isBuffer(text) ? text : Buffer.from(text);
  const layout = readLayout(buf, mapping);
  const out: CsvRow[] = [];
  for await (const r of csvRows(buf, layout, layout.dataOffset, layout.headerEndLine)) out.push(r);
  return out;
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
    ['2024-05-01', '2024-05-01'],
    ['2024-05-01T10:00:00Z', '2024-05-01T10:00:00Z'],
    ['', undefined],
    ['  ', undefined],
    ['12345678901234567890', '12345678901234567890'],
    [' hello ', 'hello'],
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
    expect(rejected(() => readLayout(Buffer.from('email,name\n')))).toMatch(/no rows/);
    expect(rejected(() => readLayout(Buffer.from([0x50, 0x4b, 0x03, 0x04, 0x00, 0x00, 0x65])))).toMatch(/NUL/);
    expect(rejected(() => readLayout(Buffer.from([0x65, 0x6d, 0x61, 0x69, 0x6c, 0x0a, 0xff, 0xfe, 0x41])))).toMatch(/UTF-8/);
    expect(rejected(() => readLayout(Buffer.from('name,plan\nA,pro\n')))).toMatch(/no email column.*name, plan/);
    expect(rejected(() => readLayout(Buffer.from('a,b\nx,y\n'), { c: 'email' }))).toMatch(/"c".*not in the header/);
    expect(rejected(() => readLayout(Buffer.from('a,b\nx,y\n'), { a: 'phone' }))).toMatch(/must be "email"/);
  });

  test('BOM stripped, email header matched in any case, rows typed and normalized, data rules applied (reserved keys dropped, empty ignored)', async () => {
    const r = await rows('\uFEFFEMAIL,Subscribed,plan,seats,id,note\n A@Example.com ,no,pro,3,xyz,\nb@example.com,,free,,,hi\n');
    expect(r.map(({ endOffset: _o, endLine: _l, ...x }) => x)).toEqual([
      { line: 2, email: 'a@example.com', subscribed: false, data: { plan: 'pro', seats: 3 } },
      { line: 3, email: 'b@example.com', subscribed: undefined, data: { plan: 'free', note: 'hi' } },
    ]);
  });

  test('quoted newlines keep line numbers right; invalid email and bad column count are row errors with their line', async () => {
    const r = await rows('email;bio;city\na@x.io;"line one\nline two\nline three";Paris\n\nnot-an-email;x;y\nb@x.io;only two\nc@x.io;"q";Rome\n');
    expect(r.map((x) => [x.line, x.email ?? null, x.error ?? null])).toEqual([
      [2, 'a@x.io', null],
      [6, 'not-an-email', 'Invalid email address "not-an-email"'],
      [7, null, 'Expected 3 columns, found 2'],
      [8, 'c@x.io', null],
    ]);
    expect(r[0]!.data).toEqual({ bio: 'line one\nline two\nline three', city: 'Paris' });
  });

  test('a parse resumed at a row boundary yields the same rows with the same line numbers', async () => {
    const text = 'email,bio\r\na@x.io,"multi\r\nline"\r\nb@x.io,é\r\nc@x.io,z';
    const all = await rows(text);
    const buf = Buffer.from(text);
    const layout = readLayout(buf);
    const resumed: CsvRow[] = [];
    for await (const r of csvRows(buf, layout, all[0]!.endOffset, all[0]!.endLine)) resumed.push(r);
    expect(resumed).toEqual(all.slice(1));
    expect(all.map((x) => x.line)).toEqual([2, 4, 5]);
  });

  test('mapping renames columns, ignores some and picks the email column', async () => {
    const r = await rows('E-Mail Address,Plan,Secret\na@x.io,pro,s3cr3t\n', { 'E-Mail Address': 'email', Plan: 'data.tier', Secret: 'ignore' });
    expect(r[0]).toMatchObject({ email: 'a@x.io', data: { tier: 'pro' } });
  });

  test('an unclosed quote makes the whole file invalid, with the line', () => {
    const buf = Buffer.from('email,name\na@x.io,ok\nb@x.io,"never closed\nc@x.io,z\n');
    const layout = readLayout(buf);
    expect(rejected(() => csvRows(buf, layout, layout.dataOffset, layout.headerEndLine))).toMatch(/not valid CSV \(near line \d+\)/);
  });
});
