import type { Info } from 'csv-parse';
import { parse as parseSync } from 'csv-parse/sync';
import { z } from 'zod';
import { splitContactData } from './contact-data';
import { normalizeEmail } from './email-address';
import type { ContactData } from './contact.entity';

/** SPEC.md › Limits: CSV import file at most 5 MB. */
export const MAX_IMPORT_BYTES = 5 * 1024 * 1024;
/** Per-row errors kept on the job; the rest are only counted. */
export const MAX_STORED_ROW_ERRORS = 100;

/** Where a CSV column goes: `email`, `subscribed`, `data.<key>` or `ignore` (the `mapping` field of an import). */
export type ColumnTarget = { kind: 'email' } | { kind: 'subscribed' } | { kind: 'data'; key: string } | { kind: 'ignore' };
export type ColumnMapping = Record<string, string>;

/** A problem with the whole file (not one row): the upload is refused or the job fails with this message. */
export class CsvRejected extends Error {
  constructor(
    message: string,
    readonly field = 'file',
  ) {
    super(message);
    this.name = 'CsvRejected';
  }
}

export interface CsvLayout {
  delimiter: ',' | ';' | '\t';
  /** Header names as written. */
  columns: string[];
  targets: ColumnTarget[];
  /** Byte offset of the first data row (after BOM and header). */
  dataOffset: number;
  /** Line number (1-based) where the header record ends. */
  headerEndLine: number;
}

export interface CsvRow {
  /** Line number (1-based) where the record starts in the file. */
  line: number;
  email?: string;
  subscribed?: boolean;
  data: ContactData;
  error?: string;
  /** Byte offset just after this record, and the line it ends on: where a resumed parse starts. */
  endOffset: number;
  endLine: number;
}

const BREAKS = /\r\n|\r|\n/g;
const breaks = (s: string) => s.match(BREAKS)?.length ?? 0;

const EMAIL_RE = z.regexes.email;
const UTF8 = new TextDecoder('utf-8', { fatal: true });

/** Binary or non-UTF-8 content, and empty files, are refused before anything is parsed. */
export function checkCsvBytes(buf: Buffer): void {
  const start = buf[0] === 0xef && buf[1] === 0xbb && buf[2] === 0xbf ? 3 : 0;
  if (buf.subarray(start).toString('utf8').trim().length === 0) throw new CsvRejected('The file is empty: a CSV import needs a header line with an email column and at least one row');
  if (buf.includes(0)) throw new CsvRejected('The file is not a CSV text file (it contains NUL bytes; binary files such as spreadsheets must be exported as CSV)');
  try {
    UTF8.decode(buf);
  } catch {
    throw new CsvRejected('The file is not valid UTF-8 text; save the CSV with UTF-8 encoding');
  }
}

/** `,` `;` or tab, whichever occurs most often outside quotes on the header line (ties and none: `,`). */
export function detectDelimiter(text: string): ',' | ';' | '\t' {
  const counts = { ',': 0, ';': 0, '\t': 0 };
  let quoted = false;
  for (const ch of text) {
    if (ch === '"') quoted = !quoted;
    else if (!quoted && (ch === '\n' || ch === '\r')) break;
    else if (!quoted && ch in counts) counts[ch as keyof typeof counts]++;
  }
  if (counts[';'] > counts[','] && counts[';'] >= counts['\t']) return ';';
  if (counts['\t'] > counts[','] && counts['\t'] > counts[';']) return '\t';
  return ',';
}

function parseTarget(value: string, column: string): ColumnTarget {
  if (value === 'email' || value === 'subscribed' || value === 'ignore') return { kind: value };
  if (value.startsWith('data.') && value.length > 5) return { kind: 'data', key: value.slice(5) };
  throw new CsvRejected(`mapping for column "${column}" must be "email", "subscribed", "data.<key>" or "ignore"`, 'mapping');
}

function defaultTarget(header: string): ColumnTarget {
  const name = header.trim();
  if (name.toLowerCase() === 'email') return { kind: 'email' };
  if (name.toLowerCase() === 'subscribed') return { kind: 'subscribed' };
  if (name === '') return { kind: 'ignore' };
  return { kind: 'data', key: name };
}

/** Reads the header line: delimiter, columns and where each goes. Throws CsvRejected with a clear message. */
export function readLayout(buf: Buffer, mapping: ColumnMapping = {}): CsvLayout {
  checkCsvBytes(buf);
  const delimiter = detectDelimiter(buf.subarray(0, 64 * 1024).toString('utf8').replace(/^\uFEFF/, ''));
  let header: { record: string[]; info: Info } | undefined;
  try {
    const records = parseSync(buf, { bom: true, delimiter, info: true, to: 1, skip_empty_lines: true, relax_column_count: true }) as unknown as { record: string[]; info: Info }[];
    header = records[0];
  } catch (err) {
    throw new CsvRejected(`The header line could not be read as CSV: ${(err as Error).message}`);
  }
  if (!header) throw new CsvRejected('The file is empty: a CSV import needs a header line with an email column');
  const columns = header.record;
  const byName = new Map<string, number>();
  columns.forEach((c, i) => {
    byName.set(c, i);
    if (!byName.has(c.trim().toLowerCase())) byName.set(c.trim().toLowerCase(), i);
  });
  const targets = columns.map(defaultTarget);
  for (const [column, value] of Object.entries(mapping)) {
    const index = byName.get(column) ?? byName.get(column.trim().toLowerCase());
    if (index === undefined) throw new CsvRejected(`mapping names the column "${column}", which is not in the header (${columns.join(', ')})`, 'mapping');
    targets[index] = parseTarget(value, column);
  }
  const emailColumns = targets.filter((t) => t.kind === 'email').length;
  if (emailColumns === 0) {
    throw new CsvRejected(`The CSV has no email column: the header must have a column named "email" (any case), or map one with {"<column>": "email"}. Columns found: ${columns.join(', ')}`);
  }
  if (emailColumns > 1) throw new CsvRejected('More than one column is mapped to email', 'mapping');
  if (targets.filter((t) => t.kind === 'subscribed').length > 1) throw new CsvRejected('More than one column is mapped to subscribed', 'mapping');
  if (buf.subarray(header.info.bytes).toString('utf8').trim() === '') throw new CsvRejected('The file has a header line but no rows to import');
  const headerText = buf.subarray(0, header.info.bytes).toString('utf8').replace(/(?:\r\n|\r|\n)$/, '');
  return { delimiter, columns, targets, dataOffset: header.info.bytes, headerEndLine: 1 + breaks(headerText) };
}

const NUMBER_RE = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?$/;

/** Cell text -> data value: numbers and booleans are typed, everything else (ISO dates too) stays a string. */
export function inferValue(raw: string): string | number | boolean | undefined {
  const v = raw.trim();
  if (v === '') return undefined; // rule 3: an empty value never overwrites
  const lower = v.toLowerCase();
  if (lower === 'true') return true;
  if (lower === 'false') return false;
  if (NUMBER_RE.test(v)) {
    const n = Number(v);
    if (Number.isFinite(n) && (!/^-?\d+$/.test(v) || Number.isSafeInteger(n))) return n;
  }
  return v;
}

/** true/false/yes/no/1/0 (any case); empty -> undefined; anything else -> null (a row error). */
export function parseSubscribed(raw: string): boolean | undefined | null {
  const v = raw.trim().toLowerCase();
  if (v === '') return undefined;
  if (v === 'true' || v === 'yes' || v === '1') return true;
  if (v === 'false' || v === 'no' || v === '0') return false;
  return null;
}

/** Turns one record into a row: email checked and normalized, subscribed parsed, data typed and filtered by the data rules. */
export function toRow(layout: CsvLayout, record: string[], line: number): Omit<CsvRow, 'endOffset' | 'endLine'> {
  if (record.length !== layout.columns.length) {
    return { line, data: {}, error: `Expected ${layout.columns.length} columns, found ${record.length}` };
  }
  const raw: ContactData = {};
  let email: string | undefined;
  let subscribed: boolean | undefined;
  let error: string | undefined;
  layout.targets.forEach((t, i) => {
    const cell = record[i]!;
    if (t.kind === 'email') email = normalizeEmail(cell);
    else if (t.kind === 'subscribed') {
      const s = parseSubscribed(cell);
      if (s === null) error ??= `Invalid subscribed value "${cell.slice(0, 50)}" (use true/false, yes/no or 1/0)`;
      else subscribed = s;
    } else if (t.kind === 'data') {
      const v = inferValue(cell);
      if (v !== undefined) raw[t.key] = v;
    }
  });
  if (!email) return { line, data: {}, error: 'Missing email' };
  if (email.length > 320 || !EMAIL_RE.test(email)) return { line, email: email.slice(0, 320), data: {}, error: `Invalid email address "${email.slice(0, 100)}"` };
  if (error) return { line, email, data: {}, error };
  return { line, email, subscribed, data: splitContactData(raw).set };
}

/**
 * Rows of the file from `offset` (a byte offset where a data record starts; `lineBefore` is the line the previous
 * record ended on), each with the offset and line after it, which is what a resumed import starts from. Line numbers
 * are counted from the bytes (CRLF, CR and LF are one line break each; quoted line breaks count), so they match what
 * an editor shows. The whole rest of the file is parsed first, so a malformed file throws CsvRejected before any row
 * is used.
 */
export function csvRows(buf: Buffer, layout: CsvLayout, offset: number, lineBefore: number): CsvRow[] {
  let records: { record: string[]; info: Info }[];
  try {
    records = parseSync(buf.subarray(offset), { delimiter: layout.delimiter, info: true, relax_column_count: true, skip_empty_lines: true }) as unknown as typeof records;
  } catch (err) {
    const e = err as Error & { lines?: number };
    const line = typeof e.lines === 'number' ? lineBefore + e.lines : undefined;
    throw new CsvRejected(`The file is not valid CSV${line ? ` (near line ${line})` : ''}: ${e.message}`);
  }
  const rows: CsvRow[] = new Array(records.length);
  let start = offset;
  let lastLine = lineBefore;
  records.forEach((item, i) => {
    const end = offset + item.info.bytes;
    // Scanned on the bytes (no string per record): skipped blank lines before the record, then breaks inside it.
    let p = start;
    let lead = 0;
    while (p < end && (buf[p] === 0x0a || buf[p] === 0x0d)) {
      if (!(buf[p] === 0x0d && buf[p + 1] === 0x0a)) lead++;
      p++;
    }
    let bodyEnd = end;
    if (bodyEnd > p && buf[bodyEnd - 1] === 0x0a) bodyEnd--;
    if (bodyEnd > p && buf[bodyEnd - 1] === 0x0d) bodyEnd--;
    let inner = 0;
    for (let q = p; q < bodyEnd; q++) {
      const b = buf[q];
      if (b === 0x0a || (b === 0x0d && buf[q + 1] !== 0x0a)) inner++;
    }
    const line = lastLine + lead + 1;
    lastLine = line + inner;
    start = end;
    rows[i] = { ...toRow(layout, item.record, line), endOffset: end, endLine: lastLine };
  });
  return rows;
}
