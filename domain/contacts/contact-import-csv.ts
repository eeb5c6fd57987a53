import { isUtf8 } from 'node:buffer';
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
type ColumnTarget = { kind: 'email' } | { kind: 'subscribed' } | { kind: 'data'; key: string } | { kind: 'ignore' };
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
  /** Where the email and subscribed values are (subscribed: -1 when no column has them). */
  emailColumn: number;
  subscribedColumn: number;
  /**
   * The data columns whose key the data rules store (reserved keys are dropped). A cell's value is never null, empty
   * or an object (inferValue), so for CSV data the rules depend on the key alone and are applied once per file.
   */
  dataColumns: { index: number; key: string }[];
  /** Byte offset of the first data row (after BOM and header). */
  dataOffset: number;
  /** Line number (1-based) where the header record ends. */
  headerEndLine: number;
}

/** One data record of the file. */
export interface CsvRecord {
  fields: string[];
  /** Line (1-based) where the record starts in the file, and where it ends (quoted line breaks span lines). */
  line: number;
  endLine: number;
  /** Byte offset just after the record and its line break: where a parse of the rest of the file starts. */
  endOffset: number;
}

/** What the import needs of a row before anything is written: its email (normalized), subscribed, or why it fails. */
export interface RowHead {
  line: number;
  email?: string;
  subscribed?: boolean;
  error?: string;
}

export interface CsvRow extends RowHead {
  data: ContactData;
}

const BREAKS = /\r\n|\r|\n/g;
const breaks = (s: string) => s.match(BREAKS)?.length ?? 0;

const EMAIL_RE = z.regexes.email;

/** Nothing but whitespace (what String.trim removes) from `from` on; decodes only when a non-ASCII byte comes first. */
function isBlank(buf: Buffer, from: number): boolean {
  for (let i = from; i < buf.length; i++) {
    const b = buf[i]!;
    if (b === 0x20 || (b >= 0x09 && b <= 0x0d)) continue;
    return b < 0x80 ? false : !/\S/.test(buf.toString('utf8', i));
  }
  return true;
}

/** Binary or non-UTF-8 content, and empty files, are refused before anything is parsed. */
export function checkCsvBytes(buf: Buffer): void {
  const start = buf[0] === 0xef && buf[1] === 0xbb && buf[2] === 0xbf ? 3 : 0;
  if (isBlank(buf, start)) throw new CsvRejected('The file is empty: a CSV import needs a header line with an email column and at least one row');
  if (buf.includes(0)) throw new CsvRejected('The file is not a CSV text file (it contains NUL bytes; binary files such as spreadsheets must be exported as CSV)');
  if (!isUtf8(buf)) throw new CsvRejected('The file is not valid UTF-8 text; save the CSV with UTF-8 encoding');
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
  if (isBlank(buf, header.info.bytes)) throw new CsvRejected('The file has a header line but no rows to import');
  const headerText = buf.subarray(0, header.info.bytes).toString('utf8').replace(/(?:\r\n|\r|\n)$/, '');
  const dataTargets = targets.flatMap((t, index) => (t.kind === 'data' ? [{ index, key: t.key }] : []));
  const stored = splitContactData(Object.fromEntries(dataTargets.map((d) => [d.key, 'x']))).set;
  return {
    delimiter,
    columns,
    targets,
    emailColumn: targets.findIndex((t) => t.kind === 'email'),
    subscribedColumn: targets.findIndex((t) => t.kind === 'subscribed'),
    dataColumns: dataTargets.filter((d) => Object.hasOwn(stored, d.key)),
    dataOffset: header.info.bytes,
    headerEndLine: 1 + breaks(headerText),
  };
}

const NUMBER_RE = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?$/;

/** Cell text -> data value: numbers and booleans are typed, everything else (ISO dates too) stays a string. */
export function inferValue(raw: string): string | number | boolean | undefined {
  const v = raw.trim();
  if (v === '') return undefined; // rule 3: an empty value never overwrites
  if (v.length === 4 || v.length === 5) {
    const lower = v.toLowerCase();
    if (lower === 'true') return true;
    if (lower === 'false') return false;
  }
  const c = v.charCodeAt(0);
  if ((c === 0x2d || (c >= 0x30 && c <= 0x39)) && NUMBER_RE.test(v)) {
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

/** Checks one record: email present, valid and normalized, subscribed parsed, column count right. */
export function rowHead(layout: CsvLayout, record: string[], line: number): RowHead {
  if (record.length !== layout.columns.length) return { line, error: `Expected ${layout.columns.length} columns, found ${record.length}` };
  const email = normalizeEmail(record[layout.emailColumn]!);
  if (!email) return { line, error: 'Missing email' };
  if (email.length > 320 || !EMAIL_RE.test(email)) return { line, email: email.slice(0, 320), error: `Invalid email address "${email.slice(0, 100)}"` };
  if (layout.subscribedColumn < 0) return { line, email, subscribed: undefined };
  const cell = record[layout.subscribedColumn]!;
  const subscribed = parseSubscribed(cell);
  if (subscribed === null) return { line, email, error: `Invalid subscribed value "${cell.slice(0, 50)}" (use true/false, yes/no or 1/0)` };
  return { line, email, subscribed };
}

/** The contact data of a record that passed rowHead: values typed, keys filtered by the data rules. */
export function rowData(layout: CsvLayout, record: string[]): ContactData {
  const data: ContactData = {};
  for (const { index, key } of layout.dataColumns) {
    const v = inferValue(record[index]!);
    if (v !== undefined) data[key] = v;
  }
  return data;
}

/** Turns one record into a row: rowHead, and the data of a row without error. */
function toRow(layout: CsvLayout, record: string[], line: number): CsvRow {
  const head = rowHead(layout, record, line);
  return { ...head, data: head.error ? {} : rowData(layout, record) };
}

const QUOTE = 0x22;
const LF = 0x0a;
const CR = 0x0d;

/** The data part of a file, decoded once, and how its records are delimited (found by the first scan). */
export interface CsvText {
  text: string;
  /** Byte offset of text[0] in the file, and whether character and byte offsets agree (all ASCII). */
  offset: number;
  ascii: boolean;
  delimiter: number;
  /** 0 until the first line break outside quotes is met, then 1 CRLF, 2 LF, 3 CR. */
  recordDelimiter: number;
}

export function csvText(buf: Buffer, layout: CsvLayout, offset = layout.dataOffset): CsvText {
  const text = buf.toString('utf8', offset);
  return { text, offset, ascii: text.length === buf.length - offset, delimiter: layout.delimiter.charCodeAt(0), recordDelimiter: 0 };
}

/** Where a record is: the line it starts on, the line it ends on, the character after it (and its line break) and the line there. */
export interface RecordPosition {
  line: number;
  endLine: number;
  end: number;
  lineAfter: number;
}

/**
 * Tokenizes the records of `src` from character `from` (a record start, on line `line`), at most `max` of them, calling
 * `onRecord` with each record's fields (the array is the callback's to keep). Tokenizes exactly as csv-parse does with
 * the options readLayout uses for the header (test/unit/csv-import.test.ts compares the two on random input): `"`
 * quotes and `""` escapes, the first line break met outside quotes (CRLF, LF or CR) is the record delimiter and other
 * breaks are field content, empty lines are skipped, any column count. It is several times faster than csv-parse,
 * which made the file's parse a fifth of an import. Line numbers count CRLF, CR and LF as one break each (quoted ones
 * too), so they match what an editor shows. Malformed CSV throws CsvRejected.
 */
export function scanRecords(src: CsvText, from: number, line: number, onRecord: (fields: string[], at: RecordPosition) => void, max = Infinity): void {
  const { text, delimiter: delim } = src;
  const n = text.length;
  const invalid = (at: number, why: string) => new CsvRejected(`The file is not valid CSV (near line ${at}): ${why}`);
  /** Length of the record delimiter at `i` (0: none); the first line break outside quotes decides which one it is. */
  const delimiterAt = (i: number): number => {
    const c = text.charCodeAt(i);
    if (c !== CR && c !== LF) return 0;
    if (src.recordDelimiter === 0) src.recordDelimiter = c === LF ? 2 : text.charCodeAt(i + 1) === LF ? 1 : 3;
    if (src.recordDelimiter === 1) return c === CR && text.charCodeAt(i + 1) === LF ? 2 : 0;
    return c === (src.recordDelimiter === 2 ? LF : CR) ? 1 : 0;
  };
  // Counts the line break a character makes: LF, and CR unless an LF follows (CRLF is one break).
  const pass = (i: number) => {
    const c = text.charCodeAt(i);
    if (c === LF || (c === CR && text.charCodeAt(i + 1) !== LF)) line++;
  };
  let i = from;
  for (let count = 0; i < n && count < max; ) {
    const empty = delimiterAt(i);
    if (empty > 0) {
      for (let k = 0; k < empty; k++) pass(i + k);
      i += empty;
      continue;
    }
    const startLine = line;
    const fields: string[] = [];
    let endLine: number;
    for (;;) {
      if (i < n && text.charCodeAt(i) === QUOTE) {
        const openLine = line;
        let value = '';
        let start = i + 1;
        let j = start;
        for (;;) {
          if (j >= n) throw invalid(openLine, `the quoted field that starts on line ${openLine} is never closed`);
          const c = text.charCodeAt(j);
          if (c === QUOTE) {
            if (j + 1 < n && text.charCodeAt(j + 1) === QUOTE) {
              value += text.slice(start, j + 1);
              j += 2;
              start = j;
              continue;
            }
            value += text.slice(start, j);
            j++;
            break;
          }
          if (c === CR || c === LF) pass(j);
          j++;
        }
        i = j;
        if (i < n && text.charCodeAt(i) !== delim && delimiterAt(i) === 0) {
          throw invalid(line, `a closing quote must be followed by the delimiter or the end of the line, found ${JSON.stringify(text[i])}`);
        }
        fields.push(value);
      } else {
        const start = i;
        for (; i < n; i++) {
          const c = text.charCodeAt(i);
          if (c === delim) break;
          if (c === QUOTE) throw invalid(line, 'a quote inside an unquoted field (quote the whole field and double the quotes in it: "say ""hi""")');
          if (c === CR || c === LF) {
            if (delimiterAt(i) > 0) break;
            pass(i);
          }
        }
        fields.push(text.slice(start, i));
      }
      endLine = line;
      if (i >= n) break;
      if (text.charCodeAt(i) === delim) {
        i++;
        continue;
      }
      const len = delimiterAt(i);
      for (let k = 0; k < len; k++) pass(i + k);
      i += len;
      break;
    }
    count++;
    onRecord(fields, { line: startLine, endLine, end: i, lineAfter: line });
  }
}

/** Byte offset in the file of character `end` of `src`, counting from character `from` at byte `fromByte`. */
export function byteOffset(src: CsvText, end: number, from = 0, fromByte = src.offset): number {
  return src.ascii ? src.offset + end : fromByte + Buffer.byteLength(src.text.slice(from, end));
}

/**
 * The data records of the file from `offset` (a byte offset where a record starts; `lineBefore` is the line the
 * previous record or the header ended on), each with the byte offset after it. See scanRecords.
 */
export function csvRecords(buf: Buffer, layout: CsvLayout, offset = layout.dataOffset, lineBefore = layout.headerEndLine): CsvRecord[] {
  const src = csvText(buf, layout, offset);
  const records: CsvRecord[] = [];
  let from = 0;
  let fromByte = offset;
  scanRecords(src, 0, lineBefore + 1, (fields, at) => {
    fromByte = byteOffset(src, at.end, from, fromByte);
    from = at.end;
    records.push({ fields, line: at.line, endLine: at.endLine, endOffset: fromByte });
  });
  return records;
}

/** Every row of the file from `offset` (see csvRecords), checked and typed. */
export function csvRows(buf: Buffer, layout: CsvLayout, offset = layout.dataOffset, lineBefore = layout.headerEndLine): (CsvRow & { endOffset: number; endLine: number })[] {
  return csvRecords(buf, layout, offset, lineBefore).map((r) => ({ ...toRow(layout, r.fields, r.line), endOffset: r.endOffset, endLine: r.endLine }));
}
