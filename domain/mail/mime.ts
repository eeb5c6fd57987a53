import MimeNode from 'nodemailer/lib/mime-node';
import { buildHeaderValue, foldLines } from 'nodemailer/lib/mime-funcs';
import { detectMimeType } from 'nodemailer/lib/mime-funcs/mime-types';
import * as base64 from 'nodemailer/lib/base64';
import { randomHex } from '../ids';
import { BOUNDARY_MARK, crlf, dotStuff, segmentsEncoding, type HtmlSegments, type WireWriter } from './wire-writer';

interface MimeAddress {
  address: string;
  name?: string | null;
}

export interface MimeAttachment {
  filename: string;
  content: Buffer;
  /** Detected from the filename's extension when absent. */
  contentType?: string | null;
  disposition: 'attachment' | 'inline';
  /** An embedded image's id (`<img src="cid:...">`): such parts go next to the HTML in multipart/related. */
  contentId?: string | null;
}

export interface MimeMessage {
  messageId: string;
  date?: Date;
  from: MimeAddress;
  to: MimeAddress;
  replyTo?: string | null;
  subject: string;
  html: string;
  text?: string | null;
  /** Custom headers, already validated (names are tokens, values have no CR/LF). */
  headers?: Record<string, string>;
  attachments?: MimeAttachment[];
}

/** Only its header encoding is used: nodemailer's rules for addresses (punycode, names), ids, dates and text. */
const encoder = new MimeNode();

/** A header line as nodemailer writes it: the value encoded for its kind of header, folded at 76 characters. */
function header(key: string, value: Parameters<MimeNode['encodeHeaderValue']>[1]): string {
  return foldLines(`${key}: ${encoder.encodeHeaderValue(key, value)}`, 76);
}

/**
 * The per-message headers of a campaign, without nodemailer's encoder where its result is known: it was about a tenth
 * of rendering a message. Each shortcut gives the line nodemailer writes (a differential unit test compares them) and
 * takes only values it leaves unchanged; anything else goes through `header`.
 * - To without a name: a dot-atom address on a lowercase ASCII domain is written as it is.
 * - Subject: printable ASCII that fits one line is written as it is.
 * - Message-ID: an id already in angle brackets, printable, on one line.
 * - Date: the same line for every message of a second.
 * - From and Reply-To (the same for every message of a send): remembered.
 */
/** An RFC 5322 dot-atom local part at a lowercase ASCII domain. */
const PLAIN_ADDRESS = /^[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*@[a-z0-9-]+(?:\.[a-z0-9-]+)+$/;
const PRINTABLE = /^[\x20-\x7e]*$/;
const PLAIN_ID = /^<[\x21-\x3d\x3f-\x7e]+>$/;
const fits = (key: string, value: string) => key.length + 2 + value.length <= 76;

function toHeader(to: MimeAddress): string {
  return !to.name && PLAIN_ADDRESS.test(to.address) && fits('To', to.address) ? `To: ${to.address}` : header('To', { name: to.name ?? '', address: to.address });
}

function subjectHeader(subject: string): string {
  return PRINTABLE.test(subject) && fits('Subject', subject) ? `Subject: ${subject}` : header('Subject', subject);
}

function messageIdHeader(id: string): string {
  return PLAIN_ID.test(id) && fits('Message-ID', id) ? `Message-ID: ${id}` : header('Message-ID', id);
}

let dateLine = { second: Number.NaN, line: '' };
function dateHeader(date: Date): string {
  const second = Math.floor(date.getTime() / 1000);
  if (second !== dateLine.second) dateLine = { second, line: header('Date', date) };
  return dateLine.line;
}

/**
 * The last line of each header name with what it was made of: a send's messages repeat most of their headers (From,
 * Reply-To, Precedence, List-Id) with the same value, so a line is made again only when its value changes. `name`:
 * an address's display name, null for a header given as text.
 */
const lastLines = new Map<string, { value: string; name: string | null; line: string }>();

function lastLine(key: string, value: string, name: string | null): string | undefined {
  const last = lastLines.get(key);
  return last !== undefined && last.value === value && last.name === name ? last.line : undefined;
}

function keepLine(key: string, value: string, name: string | null, line: string): string {
  if (lastLines.size >= 64 && !lastLines.has(key)) lastLines.clear();
  lastLines.set(key, { value, name, line });
  return line;
}

/** From and Reply-To: an address (with its name) or the text of one. */
function sharedHeader(key: 'From' | 'Reply-To', value: string | MimeAddress): string {
  if (typeof value === 'string') return lastLine(key, value, null) ?? keepLine(key, value, null, header(key, value));
  const name = value.name ?? '';
  return lastLine(key, value.address, name) ?? keepLine(key, value.address, name, header(key, { name, address: value.address }));
}

/** A blank other than the space, or a line end: foldLines breaks at any of them. */
const OTHER_BLANK = /[^\S ]/;

/**
 * Where foldLines broke each shape of line met lately: by the line's length and where its spaces are, the offsets at
 * which it put a CRLF. A line with no blank but spaces and no line end is folded by those alone (foldLines cuts at
 * blanks, or after a word longer than a line), so a campaign's multipart boundary line and List-Unsubscribe, whose
 * tokens differ per message but not their lengths, are folded once per send instead of once per message.
 */
const foldShapes = new Map<string, readonly number[]>();

/** foldLines(line, 76), the same string (a unit test compares them over random lines). */
export function foldLine(line: string): string {
  // foldLines breaks even a line of 76 characters at its last blank.
  if (line.length < 76) return line;
  if (OTHER_BLANK.test(line)) return foldLines(line, 76);
  let shape = `${line.length}`;
  for (let at = line.indexOf(' '); at >= 0; at = line.indexOf(' ', at + 1)) shape += `,${at}`;
  let breaks = foldShapes.get(shape);
  if (breaks === undefined) {
    breaks = foldBreaks(line);
    if (foldShapes.size >= 256) foldShapes.clear();
    foldShapes.set(shape, breaks);
  }
  let out = '';
  let from = 0;
  for (const at of breaks) {
    out += `${line.slice(from, at)}\r\n`;
    from = at;
  }
  return out + line.slice(from);
}

/** The offsets of `line` (no line end in it) before which foldLines puts a CRLF. */
function foldBreaks(line: string): number[] {
  const folded = foldLines(line, 76);
  const breaks: number[] = [];
  let removed = 0;
  for (let at = folded.indexOf('\r\n'); at >= 0; at = folded.indexOf('\r\n', at + 2)) {
    breaks.push(at - removed);
    removed += 2;
  }
  return breaks;
}

/** A message's own header (Precedence, List-Id, List-Unsubscribe, ...). */
function customHeader(key: string, value: string): string {
  const known = lastLine(key, value, null);
  if (known !== undefined) return known;
  // List-* headers (RFC 2369, 2919) are structured: an encoded word would hide the <id> or <url> from readers, and
  // nodemailer encodes any value with a long unbroken token. Printable ASCII goes as is, folded.
  return keepLine(key, value, null, /^list-/i.test(key) && /^[\x20-\x7e]*$/.test(value) ? foldLine(`${key}: ${value}`) : header(key, value));
}

/**
 * Content that may go as it is (RFC 2045 `7bit`): ASCII without NUL, no line over 998 octets, and nothing that could
 * be taken for one of our boundaries. Rendered HTML and text are usually all of that, and quoted-printable encoding
 * (JavaScript, byte by byte) was about a fifth of a campaign message's rendering time.
 */
// eslint-disable-next-line no-control-regex -- NUL is what the class leaves out
const ASCII = /^[\x01-\x7f]*$/;
const isSevenBit = (s: string) => ASCII.test(s) && !s.includes(BOUNDARY_MARK) && !hasLineOver(s, 998);


/**
 * Content that may go as UTF-8 octets (`8bit`, RFC 6152) to a relay that offers 8BITMIME: no NUL, no line over 998
 * octets, no boundary look-alike. Checked per line in octets only where a line could be over (3 octets a character at most).
 */
const isEightBitSafe = (s: string) => !s.includes('\0') && !s.includes(BOUNDARY_MARK) && !hasLineOver(s, 998, true);

/**
 * Whether a text whose lines end in LF or CRLF has a line longer than `max` characters (or UTF-8 octets). A search per
 * line end: a regex would backtrack.
 */
function hasLineOver(s: string, max: number, octets = false): boolean {
  for (let start = 0; ; ) {
    const end = s.indexOf('\n', start);
    const stop = end < 0 ? s.length : end > start && s.charCodeAt(end - 1) === 0x0d ? end - 1 : end;
    if (stop - start > max || (octets && (stop - start) * 3 > max && Buffer.byteLength(s.slice(start, stop)) > max)) return true;
    if (end < 0) return false;
    start = end + 1;
  }
}

/** @internal How a part's text (lines ending in LF or CRLF) goes: as it is, as UTF-8 octets (8BITMIME), or quoted-printable. */
export function partEncoding(text: string, eightBit: boolean): '7bit' | '8bit' | 'quoted-printable' {
  return isSevenBit(text) ? '7bit' : eightBit && isEightBitSafe(text) ? '8bit' : 'quoted-printable';
}

/** Runs of characters that quoted-printable writes as `=XX` octets: everything but tab, printable ASCII and CR/LF, and `=`. */
const QP_ENCODED = /[^\t\r\n\x20-\x3c\x3e-\x7e]+/g;
const HEX = Array.from({ length: 256 }, (_, i) => `=${i.toString(16).toUpperCase().padStart(2, '0')}`);

/**
 * Quoted-printable (RFC 2045 6.7) of a CRLF-normalized text, with lines of at most 76 characters. The characters to
 * encode are found by one native regular-expression pass and each run becomes its UTF-8 octets (a lone surrogate
 * becomes U+FFFD, as a UTF-8 encoder makes it); whitespace before a line end is encoded; long lines get soft breaks
 * that never split an `=XX`. nodemailer's encoder, which looks at every byte in JavaScript, was a tenth of a campaign
 * message's rendering; this gives the same decoded text.
 */
export function quotedPrintable(text: string): string {
  const encoded = text.replace(QP_ENCODED, (run) => {
    let out = '';
    // Most runs are one `=` of an HTML attribute: ASCII is its own octet, with no UTF-8 encoding to make.
    for (let i = 0; i < run.length; i++) {
      const code = run.charCodeAt(i);
      if (code > 0x7f) {
        out = '';
        for (const byte of Buffer.from(run, 'utf8')) out += HEX[byte];
        return out;
      }
      out += HEX[code];
    }
    return out;
  });
  const lines = encoded.split('\r\n');
  for (let i = 0; i < lines.length; i++) {
    let line = lines[i]!;
    const last = line.charCodeAt(line.length - 1);
    if (last === 0x20 || last === 0x09) line = `${line.slice(0, -1)}${HEX[last]}`;
    if (line.length > 76) {
      let wrapped = '';
      while (line.length > 76) {
        // 75 characters and the soft break; an `=XX` is never cut.
        let cut = 75;
        if (line[cut - 1] === '=') cut -= 1;
        else if (line[cut - 2] === '=') cut -= 2;
        wrapped += `${line.slice(0, cut)}=\r\n`;
        line = line.slice(cut);
      }
      line = wrapped + line;
    }
    lines[i] = line;
  }
  return lines.join('\r\n');
}

/**
 * A text part: as it is (`7bit`) when its content allows; as UTF-8 octets (`8bit`) when the relay takes them and the
 * content allows; otherwise quoted-printable (7-bit safe whatever the content; lines at most 76 characters). Line
 * ends are CRLF every way.
 */
function textPart(contentType: 'text/plain' | 'text/html', content: string, eightBit: boolean): string {
  const normalized = crlf(content);
  const encoding = partEncoding(normalized, eightBit);
  const encoded = encoding === 'quoted-printable' ? quotedPrintable(normalized) : normalized;
  return `Content-Type: ${contentType}; charset=utf-8\r\nContent-Transfer-Encoding: ${encoding}\r\n\r\n${encoded}`;
}

function attachmentPart(a: MimeAttachment): string {
  const type = a.contentType || detectMimeType(a.filename);
  const lines = [
    foldLines(`Content-Type: ${buildHeaderValue({ value: type, params: { name: a.filename } })}`, 76),
    'Content-Transfer-Encoding: base64',
    foldLines(`Content-Disposition: ${buildHeaderValue({ value: a.disposition, params: { filename: a.filename } })}`, 76),
  ];
  if (a.contentId) lines.push(header('Content-ID', a.contentId));
  return `${lines.join('\r\n')}\r\n\r\n${base64.wrap(base64.encode(a.content), 76)}`;
}

/**
 * A multipart body. The boundary starts with "=_mw_", which quoted-printable output never contains, base64 output
 * cannot start a line with, and a part sent as it is (7bit) is checked not to contain, so no part can contain a
 * delimiter line.
 */
function multipart(subtype: string, boundary: string, parts: string[]): string {
  return `${foldLines(`Content-Type: multipart/${subtype}; boundary="${boundary}"`, 76)}\r\n\r\n${parts.map((p) => `--${boundary}\r\n${p}\r\n`).join('')}--${boundary}--`;
}

/**
 * Builds a whole RFC 5322 message in memory, in one pass over strings, for the delivery activity. The structure is
 * nodemailer's: multipart/mixed (when there are attachments) around multipart/alternative (plain text, then HTML),
 * the HTML in multipart/related with its inline images. Header values are encoded by nodemailer's own MimeNode rules
 * and the parts by its quoted-printable and base64 encoders; what this saves is the stream pipeline nodemailer sets up
 * for every part of every message, which was most of the worker's CPU time per email. The result goes to nodemailer
 * as a raw message (the delivery activity), or, signed and dot-stuffed, to a campaign's pipelined connections.
 * `eightBit`: the relay offers 8BITMIME, so non-ASCII text parts may go as UTF-8 octets instead of quoted-printable.
 */
export function buildMime(msg: MimeMessage, opts: MimeOptions = {}): string {
  const eightBit = opts.eightBit ?? false;
  const attachments = msg.attachments ?? [];
  const related = attachments.filter((a) => a.contentId);
  const mixed = attachments.filter((a) => !related.includes(a));
  const boundary = opts.boundary ?? newBoundary();
  let body = textPart('text/html', msg.html, eightBit);
  if (related.length) body = multipart('related; type="text/html"', `${boundary}_r`, [body, ...related.map(attachmentPart)]);
  if (msg.text) body = multipart('alternative', `${boundary}_a`, [textPart('text/plain', msg.text, eightBit), body]);
  if (mixed.length) body = multipart('mixed', `${boundary}_m`, [body, ...mixed.map(attachmentPart)]);
  // `body` starts with its own Content-Type (and for a single part its encoding): those close the header block.
  return `${headerBlock(msg)}\r\n${body}\r\n`;
}

export interface MimeOptions {
  /** The relay offers 8BITMIME: non-ASCII text parts may go as UTF-8 octets. */
  eightBit?: boolean;
  /** @internal the multipart boundary (tests compare two builds); a random one by default */
  boundary?: string;
}

const newBoundary = () => `${BOUNDARY_MARK}${randomHex(12)}`;

/** The message's header lines (joined by CRLF, without the last line end), up to the body's own Content-Type. */
function headerBlock(msg: MimeMessage): string {
  const headers = [sharedHeader('From', msg.from), toHeader(msg.to)];
  if (msg.replyTo) headers.push(sharedHeader('Reply-To', msg.replyTo));
  headers.push(subjectHeader(msg.subject), messageIdHeader(msg.messageId), dateHeader(msg.date ?? new Date()), 'MIME-Version: 1.0');
  // Like nodemailer, a header whose value is blank is left out.
  for (const [key, value] of Object.entries(msg.headers ?? {})) {
    if (!value.trim()) continue;
    headers.push(customHeader(key, value));
  }
  return headers.join('\r\n');
}

// eslint-disable-next-line no-control-regex -- the 7-bit range is what it leaves out
const NON_ASCII = /[^\x00-\x7f]/;

/** Whether a message has an octet over 127 (MAIL FROM then says BODY=8BITMIME). */
const hasEightBitOctets = (message: string) => NON_ASCII.test(message);

/**
 * The message buildMime makes, dot-stuffed with its terminating line as wireMessage makes it, written into `w` as
 * UTF-8 bytes (wire-writer.ts): the same bytes, for a campaign's render threads, without the message's intermediate
 * strings. Returns whether any of it went as 8-bit octets (MAIL FROM then says BODY=8BITMIME). Messages with
 * attachments (never a campaign's) take the string path.
 */
export function writeWireMessage(w: WireWriter, msg: MimeMessage, opts: MimeOptions = {}, htmlSegments?: HtmlSegments): { eightBit: boolean } {
  if (msg.attachments?.length) {
    const raw = wireMessage(buildMime(msg, opts));
    w.raw(raw);
    return { eightBit: hasEightBitOctets(raw) };
  }
  const eightBit = opts.eightBit ?? false;
  const headers = headerBlock(msg);
  let used8bit = hasEightBitOctets(headers);
  w.text(`${headers}\r\n`, true);
  if (msg.text) {
    const boundary = `${opts.boundary ?? newBoundary()}_a`;
    w.text(`${foldLine(`Content-Type: multipart/alternative; boundary="${boundary}"`)}\r\n\r\n--${boundary}\r\n`, false);
    used8bit = writeTextPart(w, 'text/plain', msg.text, eightBit) || used8bit;
    w.text(`\r\n--${boundary}\r\n`, false);
    used8bit = writeHtmlPart(w, msg, eightBit, htmlSegments) || used8bit;
    w.text(`\r\n--${boundary}--\r\n`, false);
  } else {
    used8bit = writeHtmlPart(w, msg, eightBit, htmlSegments) || used8bit;
    w.text('\r\n', false);
  }
  w.raw('.\r\n');
  return { eightBit: used8bit };
}

/** The HTML part, from its segments when the composer made them; true when it went `8bit`. */
function writeHtmlPart(w: WireWriter, msg: MimeMessage, eightBit: boolean, htmlSegments: HtmlSegments | undefined): boolean {
  return htmlSegments ? writeSegmentedPart(w, htmlSegments, eightBit) : writeTextPart(w, 'text/html', msg.html, eightBit);
}

/** A text part as textPart makes it, written into `w`; true when it went `8bit`. */
function writeTextPart(w: WireWriter, contentType: 'text/plain' | 'text/html', content: string, eightBit: boolean): boolean {
  // Without 8BITMIME a character over ASCII means quoted-printable: known without writing the text first.
  const asIs = eightBit || ASCII.test(content) ? w.asIsPart(crlf(content), eightBit, (encoding) => partHead(contentType, encoding)) : null;
  if (asIs) return asIs === '8bit';
  w.text(partHead(contentType, 'quoted-printable'), false);
  w.load(content);
  w.quotedPrintable();
  return false;
}

const partHead = (contentType: string, encoding: string) => `Content-Type: ${contentType}; charset=utf-8\r\nContent-Transfer-Encoding: ${encoding}\r\n\r\n`;

/**
 * The HTML part from its segments: the same bytes as writeTextPart of the text they join to (quoted-printable for a
 * relay without 8BITMIME and non-ASCII content, or a line over 998 octets).
 */
function writeSegmentedPart(w: WireWriter, segments: HtmlSegments, eightBit: boolean): boolean {
  const encoding = segmentsEncoding(segments, eightBit) ?? 'quoted-printable';
  w.text(partHead('text/html', encoding), false);
  if (encoding === 'quoted-printable') w.segmentsQuotedPrintable(segments);
  else w.segments(segments);
  return encoding === '8bit';
}

/** Dot-stuffs a message (RFC 5321 4.5.2) whose lines end in CRLF and ends it with the terminating `.` line. */
export function wireMessage(message: string): string {
  const body = dotStuff(message);
  return body.endsWith('\r\n') ? `${body}.\r\n` : `${body}\r\n.\r\n`;
}
