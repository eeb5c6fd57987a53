/**
 * A campaign message written straight to the bytes SMTP sends after DATA, in one pass per part.
 *
 * buildMime (mime.ts) makes the message as a string and wireMessage dot-stuffs it; a render thread then measured it
 * and encoded it to UTF-8 into the batch's buffer. For a 9 KB message that was six passes over the text and as many
 * strings of its size (line-end normalisation, the 7-bit checks, quoted-printable with its split into lines and soft
 * breaks, the multipart join, dot-stuffing, the UTF-8 encoding): about a third of rendering a campaign message
 * (BENCHMARKS.md › Issue 28). Here each part is written once into a buffer reused across a batch: as it is by native
 * replaces (line ends, dot-stuffing), or quoted-printable from its UTF-8 octets in one loop. The
 * bytes are exactly those of `wireMessage(buildMime(...))` (a unit test compares them over a corpus and random texts).
 */

/** ASCII `=`, `.`, CR, LF, space, tab. */
const EQ = 0x3d;
const DOT = 0x2e;
const CR = 0x0d;
const LF = 0x0a;
const SP = 0x20;
const TAB = 0x09;
const HEX_DIGITS = Buffer.from('0123456789ABCDEF', 'latin1');

/**
 * How every multipart boundary of ours starts (mime.ts): quoted-printable output never contains it, and a part sent
 * as it is (7bit, 8bit) is checked not to.
 */
export const BOUNDARY_MARK = '=_mw_';

/** CRLF line ends (CR LF, a lone CR and a lone LF each end a line); a text without CR needs only a native replace. */
export const crlf = (s: string) => (s.includes('\r') ? s.replace(/\r\n|\r|\n/g, '\r\n') : s.replaceAll('\n', '\r\n'));

/**
 * Dot-stuffing (RFC 5321 4.5.2) of text whose lines end in CRLF: a `.` that starts a line is doubled. `lineStart`: the
 * text itself starts a line.
 */
export function dotStuff(text: string, lineStart = true): string {
  const stuffed = text.includes('\n.') ? text.replace(/\n\./g, '\n..') : text;
  return lineStart && stuffed.charCodeAt(0) === DOT ? `.${stuffed}` : stuffed;
}

/**
 * Octets `from` to `to` of `src` (no line end among them) in quoted-printable at `dst[at]`: tab and printable ASCII
 * but `=` as they are, any other octet as `=XX`. Returns where it stopped. `dst` has room for three octets each.
 */
function encodeQp(src: Buffer, from: number, to: number, dst: Buffer, at: number): number {
  let l = at;
  for (let i = from; i < to; i++) {
    const c = src[i]!;
    if ((c >= SP && c <= 0x7e && c !== EQ) || c === TAB) dst[l++] = c;
    else {
      dst[l] = EQ;
      dst[l + 1] = HEX_DIGITS[c >> 4]!;
      dst[l + 2] = HEX_DIGITS[c & 15]!;
      l += 3;
    }
  }
  return l;
}

/** Text that quoted-printable leaves as it is, one octet a character: tab and printable ASCII but `=`. */
const QP_AS_IS = /^[\t\x20-\x3c\x3e-\x7e]*$/;

/**
 * Whether octets whose lines end in CRLF have a line over `max` octets (its CR not counted). A line end is looked for
 * backwards from `max + 1` octets ahead of each line's start, so a text of short lines is judged in a few searches.
 */
function lineOver(b: Buffer, max: number): boolean {
  for (let start = 0; b.length - start > max; ) {
    // Every line end is CRLF here: an LF at most max + 1 octets ahead ends a line of at most max; none, a longer one.
    const lf = b.lastIndexOf(LF, start + max + 1);
    if (lf < start) return true;
    start = lf + 1;
  }
  return false;
}

/** A growing byte buffer that messages are written into, one after another (reused across a batch). */
export class WireWriter {
  buf: Buffer;
  pos = 0;
  /**
   * Where the quoted-printable line being built starts in `buf`: its octets are encoded in place up to `pos` (before
   * the blank rule and soft breaks, which qpEndLine applies there).
   */
  private lineStart = 0;

  constructor(capacity = 256 * 1024) {
    // Never from Buffer's shared pool: `take` hands the memory over whole.
    this.buf = Buffer.allocUnsafeSlow(capacity);
  }

  /** Makes room for `n` more bytes. */
  ensure(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.pos + n) size *= 2;
    const grown = Buffer.allocUnsafeSlow(size);
    this.buf.copy(grown, 0, 0, this.pos);
    this.buf = grown;
  }

  /**
   * Text that needs no line-end normalisation (headers, boundary lines: CRLF already, no bare CR or LF), as UTF-8,
   * dot-stuffed. `lineStart`: the text starts a line (a `.` there is doubled too).
   */
  text(s: string, lineStart: boolean): void {
    this.raw(dotStuff(s, lineStart));
  }

  /** Text written as it is (UTF-8): what is already dot-stuffed, or the terminating `.` line. */
  raw(s: string): void {
    this.ensure(s.length * 3);
    this.pos += this.buf.write(s, this.pos, 'utf8');
  }

  /**
   * A quoted-printable part's UTF-8 (a lone surrogate as U+FFFD, as Buffer writes it), put in `utf8` once: the
   * encoding below reads these bytes, which a loop over a typed array reads several times faster than a string's
   * characters.
   */
  private utf8: Buffer = Buffer.allocUnsafe(16 * 1024);
  private utf8Length = 0;

  /** Encodes a part's text to UTF-8 for `quotedPrintable`. */
  load(s: string): void {
    if (this.utf8.length < s.length * 3) this.utf8 = Buffer.allocUnsafe(s.length * 3);
    this.utf8Length = this.utf8.write(s, 0, 'utf8');
  }

  /**
   * A part whose text (`text`, lines ending in CRLF) may go as it is, with its head (`head(encoding)`) in front: as
   * mime.ts' partEncoding decides it (7bit: ASCII without NUL; 8bit, for a relay that takes it: no NUL; either way no
   * line over 998 octets and no boundary mark), dot-stuffed, as UTF-8. Null, with nothing written, when the part
   * must be quoted-printable. The text is written once, as UTF-8, past room for the head, and judged on those octets
   * by native searches (a NUL search in a string with a character over Latin-1 looks at every character, about 2 us
   * for a campaign's text part); then the head is written and the text moved up to it (BENCHMARKS.md › Issue 28,
   * nineteenth stop).
   */
  asIsPart(text: string, eightBit: boolean, head: (encoding: '7bit' | '8bit') => string): '7bit' | '8bit' | null {
    const room = 256;
    this.ensure(room + text.length * 3);
    const at = this.pos + room;
    const n = this.buf.write(text, at, 'utf8');
    const body = this.buf.subarray(at, at + n);
    // One octet a character: every character is ASCII.
    const ascii = n === text.length;
    if ((!ascii && !eightBit) || body.indexOf(0) >= 0 || body.indexOf(BOUNDARY_MARK) >= 0 || lineOver(body, 998)) return null;
    const encoding = ascii ? '7bit' : '8bit';
    const h = head(encoding);
    if (h.length > room || body[0] === DOT || body.indexOf('\n.') >= 0) {
      // A line to dot-stuff (rare in a part: html-to-text indents, HTML starts with `<`), or a head too long for the room.
      this.raw(h);
      this.raw(dotStuff(text));
      return encoding;
    }
    this.pos += this.buf.write(h, this.pos, 'latin1');
    this.buf.copyWithin(this.pos, at, at + n);
    this.pos += n;
    return encoding;
  }

  /**
   * The loaded text in quoted-printable (RFC 2045 6.7) as mime.ts' `quotedPrintable` writes it: line ends normalised
   * to CRLF; tab, printable ASCII but `=` as they are, any other octet as `=XX`; a blank before a line end encoded;
   * lines over 76 characters broken with soft breaks (75 characters and `=`) that never split an `=XX`; dot-stuffed.
   */
  quotedPrintable(): void {
    this.lineStart = this.pos;
    this.qpLoaded();
    this.qpEndLine();
  }

  /**
   * The loaded text onto the quoted-printable line being built: each line end (CR LF, a lone CR or a lone LF) writes
   * the line and a CRLF; the text's last line stays open for what follows.
   */
  private qpLoaded(): void {
    const b = this.utf8;
    const n = this.utf8Length;
    let start = 0;
    for (let end = 0; end < n; end++) {
      const c = b[end]!;
      if (c !== LF && c !== CR) continue;
      this.qpAppend(b, start, end);
      this.qpEndLine();
      this.crlfOut();
      if (c === CR && end + 1 < n && b[end + 1] === LF) end++;
      start = end + 1;
    }
    this.qpAppend(b, start, n);
  }

  /** Octets `from` to `to` of `b` (no line end among them) encoded onto the line. */
  private qpAppend(b: Buffer, from: number, to: number): void {
    this.ensure((to - from) * 3);
    this.pos = encodeQp(b, from, to, this.buf, this.pos);
  }

  /** Encoded octets (a static segment's line) onto the line as they are. */
  private qpAppendEncoded(encoded: Buffer): void {
    this.ensure(encoded.length);
    this.pos += encoded.copy(this.buf, this.pos);
  }

  /** Where each piece of the line being ended starts (qpEndLine), kept across lines. */
  private readonly pieces: number[] = [];

  /**
   * The line ended where it was encoded: a blank at its end encoded, soft breaks where it is over 76 characters,
   * dot-stuffed. The pieces are found first (only the octets around each cut are read), then moved to their places
   * from the last to the first (native moves, no copy of the line elsewhere and no loop over its octets).
   */
  private qpEndLine(): void {
    const start = this.lineStart;
    let end = this.pos;
    // A blank before the line end is encoded (it would be taken for padding).
    const last = end > start ? this.buf[end - 1]! : -1;
    if (last === SP || last === TAB) {
      this.ensure(2);
      this.buf[end - 1] = EQ;
      this.buf[end++] = HEX_DIGITS[last >> 4]!;
      this.buf[end++] = HEX_DIGITS[last & 15]!;
    }
    const l = end - start;
    // Soft breaks: each piece 75 characters (fewer where that would split an `=XX`) and `=`, until 76 or fewer remain;
    // a piece that starts with a `.` gets another in front of it.
    const pieces = this.pieces;
    pieces.length = 0;
    let buf = this.buf;
    let at = 0;
    let grow = 0;
    while (l - at > 76) {
      let cut = 75;
      if (buf[start + at + cut - 1] === EQ) cut -= 1;
      else if (buf[start + at + cut - 2] === EQ) cut -= 2;
      pieces.push(at);
      if (buf[start + at] === DOT) grow++;
      grow += 3;
      at += cut;
    }
    if (at < l) {
      pieces.push(at);
      if (buf[start + at] === DOT) grow++;
    }
    if (grow === 0) {
      this.pos = end;
      return;
    }
    this.pos = end;
    this.ensure(grow);
    buf = this.buf;
    // From the last piece to the first, each moves right by what the pieces before it add.
    let to = end + grow;
    let pieceEnd = l;
    for (let k = pieces.length - 1; k >= 0; k--) {
      const from = pieces[k]!;
      if (pieceEnd < l) {
        buf[--to] = LF;
        buf[--to] = CR;
        buf[--to] = EQ;
      }
      const n = pieceEnd - from;
      to -= n;
      buf.copyWithin(to, start + from, start + pieceEnd);
      if (buf[to] === DOT) buf[--to] = DOT;
      pieceEnd = from;
    }
    this.pos = end + grow;
  }

  private crlfOut(): void {
    this.ensure(2);
    this.buf[this.pos++] = CR;
    this.buf[this.pos++] = LF;
    this.lineStart = this.pos;
  }

  /**
   * An HTML part given as segments, in quoted-printable: the same bytes as `load` and `quotedPrintable` of the text
   * they join to. A static segment's lines come encoded (without the blank rule and soft breaks, which depend on
   * what surrounds them); a string is encoded here.
   */
  segmentsQuotedPrintable(segments: HtmlSegments): void {
    this.lineStart = this.pos;
    let prevCR = false;
    for (const seg of segments) {
      if (typeof seg === 'string') {
        if (!seg) continue;
        const s = prevCR && seg.charCodeAt(0) === LF ? seg.slice(1) : seg;
        prevCR = seg.charCodeAt(seg.length - 1) === CR;
        if (!s) continue;
        if (QP_AS_IS.test(s)) {
          // Nothing to encode and no line end (a tracked link, most values): its characters are its octets.
          this.ensure(s.length);
          this.pos += this.buf.write(s, this.pos, 'latin1');
          continue;
        }
        this.load(s);
        this.qpLoaded();
        continue;
      }
      const lines = seg.qpLines;
      // After a CR, a leading LF is the same line end: its empty first line is skipped, and so is the break after it.
      const first = prevCR && seg.firstCode === LF ? 1 : 0;
      for (let j = first; j < lines.length; j++) {
        if (j > first) {
          this.qpEndLine();
          this.crlfOut();
        }
        this.qpAppendEncoded(lines[j]!);
      }
      prevCR = seg.lastCode === CR;
    }
    this.qpEndLine();
  }

  /**
   * An HTML part given as segments (see HtmlSegments below), written as asIsPart writes the text they join to: line
   * ends CRLF, dot-stuffed, UTF-8. A static segment's bytes are copied as prepared; only the junctions are looked at
   * (a CR that ends one segment and the LF that starts the next are one line end; a `.` that starts a line is doubled).
   */
  segments(segments: HtmlSegments): void {
    let lineStart = true;
    let prevCR = false;
    for (const seg of segments) {
      if (typeof seg === 'string') {
        if (!seg) continue;
        if (QP_AS_IS.test(seg)) {
          // No line end in it (most values, every tracked link): its characters are its octets; only a dot that starts
          // a line is doubled.
          this.ensure(seg.length + 1);
          if (lineStart && seg.charCodeAt(0) === DOT) this.buf[this.pos++] = DOT;
          this.pos += this.buf.write(seg, this.pos, 'latin1');
          prevCR = false;
          lineStart = false;
          continue;
        }
        const s = prevCR && seg.charCodeAt(0) === LF ? seg.slice(1) : seg;
        if (s) this.raw(dotStuff(crlf(s), lineStart));
        const last = seg.charCodeAt(seg.length - 1);
        prevCR = last === CR;
        lineStart = last === CR || last === LF;
        continue;
      }
      let from = 0;
      if (prevCR && seg.firstCode === LF) from = 2;
      else if (lineStart && seg.firstCode === DOT) {
        this.ensure(1);
        this.buf[this.pos++] = DOT;
      }
      this.ensure(seg.bytes.length);
      this.pos += seg.bytes.copy(this.buf, this.pos, from);
      prevCR = seg.lastCode === CR;
      lineStart = seg.lastCode === CR || seg.lastCode === LF;
    }
  }

  /**
   * The bytes written, handed over in the memory they were written in (its own ArrayBuffer, so transferable; the view
   * starts at its offset 0). The writer goes on in new memory of the same size: a copy out of a batch's bytes was
   * about 3% of a render thread's time.
   */
  take(): Buffer {
    const out = this.buf.subarray(0, this.pos);
    this.buf = Buffer.allocUnsafeSlow(this.buf.length);
    this.pos = 0;
    return out;
  }

  reset(): void {
    this.pos = 0;
  }
}

/**
 * A run of a template's own HTML, prepared once for the wire: what a campaign's recipients share byte for byte.
 * Built by `staticText`; the fields describe `text` (its line ends being CRLF, CR or LF) as the encoding choice needs.
 */
export interface StaticText {
  readonly text: string;
  /** The UTF-8 of `text` with line ends CRLF and every `.` after a line end doubled (a leading one is the writer's). */
  readonly bytes: Buffer;
  readonly firstCode: number;
  readonly lastCode: number;
  /** Every character is 0x01-0x7f. */
  readonly ascii: boolean;
  readonly nul: boolean;
  readonly boundary: boolean;
  readonly lines: LineStats;
  /** Where the last `=` of `text` is (-1: none). */
  readonly eqAt: number;
  /**
   * Each line of `text` (split at CRLF, CR, LF) in quoted-printable, without the blank rule and the soft breaks,
   * which depend on what comes before and after (the writer applies them).
   */
  readonly qpLines: readonly Buffer[];
}

/** What a text's lines measure in UTF-8 octets: the first (the whole text when it has no line end), the last, the longest in between. */
interface LineStats {
  readonly lineEnd: boolean;
  readonly first: number;
  readonly last: number;
  readonly inner: number;
}

/** An HTML part as the text its segments join to: a static segment is prepared once, a string is a recipient's. */
export type HtmlSegments = readonly (StaticText | string)[];

// eslint-disable-next-line no-control-regex -- NUL and the 8-bit range are what it finds
const NOT_SEVEN_BIT = /[^\x01-\x7f]/;

const octets = (s: string, ascii: boolean) => (ascii ? s.length : Buffer.byteLength(s, 'utf8'));

/** Line lengths of a text whose lines end in CRLF, CR or LF. */
function lineStats(s: string, ascii: boolean): LineStats {
  let first = -1;
  let inner = 0;
  let start = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c !== CR && c !== LF) continue;
    const length = octets(s.slice(start, i), ascii);
    if (first < 0) first = length;
    else if (length > inner) inner = length;
    if (c === CR && s.charCodeAt(i + 1) === LF) i++;
    start = i + 1;
  }
  const rest = octets(s.slice(start), ascii);
  return first < 0 ? { lineEnd: false, first: rest, last: rest, inner: 0 } : { lineEnd: true, first, last: rest, inner };
}

const isHigh = (c: number) => c >= 0xd800 && c <= 0xdbff;
const isLow = (c: number) => c >= 0xdc00 && c <= 0xdfff;

/**
 * A template's run of text as a segment: prepared (staticText), or the string itself where it starts with a low
 * surrogate or ends with a high one, which could pair with its neighbour's in the joined text (see appendSegment).
 */
export const segmentOf = (text: string): StaticText | string => (isLow(text.charCodeAt(0)) || isHigh(text.charCodeAt(text.length - 1)) ? text : staticText(text));

/**
 * Adds a segment to a list being built. A string after a string that ends with a high surrogate is joined to it, so a
 * surrogate pair split across two strings is encoded as the pair it is in the joined text (a prepared segment never
 * starts or ends with half of one: segmentOf).
 */
export function appendSegment(out: (StaticText | string)[], seg: StaticText | string): void {
  const last = out.length ? out[out.length - 1] : undefined;
  if (typeof seg === 'string' && typeof last === 'string' && isHigh(last.charCodeAt(last.length - 1))) out[out.length - 1] = last + seg;
  else out.push(seg);
}

/** A static segment for `text` (non-empty). */
function staticText(text: string): StaticText {
  const ascii = !NOT_SEVEN_BIT.test(text);
  return {
    text,
    bytes: Buffer.from(dotStuff(crlf(text), false), 'utf8'),
    firstCode: text.charCodeAt(0),
    lastCode: text.charCodeAt(text.length - 1),
    ascii,
    nul: text.includes('\0'),
    boundary: text.includes(BOUNDARY_MARK),
    lines: lineStats(text, ascii),
    eqAt: text.lastIndexOf('='),
    qpLines: text.split(/\r\n|\r|\n/).map((line) => {
      const utf8 = Buffer.from(line, 'utf8');
      const encoded = Buffer.alloc(utf8.length * 3);
      return encoded.subarray(0, encodeQp(utf8, 0, utf8.length, encoded, 0));
    }),
  };
}

/**
 * How the text the segments join to would go (mime.ts `partEncoding`): 7bit when it is ASCII without NUL, 8bit when
 * the relay takes it and it has no NUL; either way with no line over 998 octets and no boundary mark. Null:
 * quoted-printable (WireWriter#segmentsQuotedPrintable).
 */
export function segmentsEncoding(segments: HtmlSegments, eightBit: boolean): '7bit' | '8bit' | null {
  let ascii = true;
  let line = 0;
  /** Where the joined text so far may end in the start of a boundary mark (an `=` in its last four characters). */
  let openMark = false;
  for (let i = 0; i < segments.length; i++) {
    const seg = segments[i]!;
    const text = typeof seg === 'string' ? seg : seg.text;
    if (!text) continue;
    // A boundary mark across the junction: the text before (up to its last four characters) and this one's first four.
    if (openMark && (joinedTail(segments, i) + text.slice(0, 4)).includes(BOUNDARY_MARK)) return null;
    // Tab and printable ASCII but `=` (most values, every tracked link): no line end, no mark, one octet a character.
    const asIs = typeof seg === 'string' && QP_AS_IS.test(seg);
    // Only the last four characters can open a mark (a prepared segment knows its own).
    const eq = asIs ? -1 : typeof seg === 'string' ? text.lastIndexOf('=') : seg.eqAt;
    openMark = eq >= 0 ? eq >= text.length - 4 : openMark && text.length < 4;
    if (asIs) {
      line += text.length;
      if (line > 998) return null;
      continue;
    }
    let stats: LineStats;
    if (typeof seg === 'string') {
      const plain = !NOT_SEVEN_BIT.test(seg);
      if (!plain) {
        if (!eightBit || seg.includes('\0')) return null;
        ascii = false;
      }
      if (seg.includes(BOUNDARY_MARK)) return null;
      if (seg.includes('\n') || seg.includes('\r')) stats = lineStats(seg, plain);
      else {
        line += plain ? seg.length : Buffer.byteLength(seg, 'utf8');
        if (line > 998) return null;
        continue;
      }
    } else {
      if (!seg.ascii) {
        if (!eightBit || seg.nul) return null;
        ascii = false;
      }
      if (seg.boundary) return null;
      stats = seg.lines;
    }
    if (!stats.lineEnd) line += stats.first;
    else {
      if (line + stats.first > 998 || stats.inner > 998) return null;
      line = stats.last;
    }
    if (line > 998) return null;
  }
  return ascii ? '7bit' : '8bit';
}

/** The last (up to) four characters of the text that the segments before `end` join to. */
function joinedTail(segments: HtmlSegments, end: number): string {
  let tail = '';
  for (let i = end - 1; i >= 0 && tail.length < 4; i--) {
    const seg = segments[i]!;
    tail = (typeof seg === 'string' ? seg : seg.text) + tail;
  }
  return tail.slice(-4);
}
