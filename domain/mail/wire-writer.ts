/**
 * A campaign message written straight to the bytes SMTP sends after DATA, in one pass per part.
 *
 * buildMime (mime.ts) makes the message as a string and wireMessage dot-stuffs it; a render thread then measured it
 * and encoded it to UTF-8 into the batch's buffer. For a 9 KB message that was six passes over the text and as many
 * strings of its size (line-end normalisation, the 7-bit checks, quoted-printable with its split into lines and soft
 * breaks, the multipart join, dot-stuffing, the UTF-8 encoding): about a third of rendering a campaign message
 * (BENCHMARKS.md › Issue 28). Here a part's text is scanned once for the encoding it needs and then written once, CRLF
 * line ends, quoted-printable or UTF-8 octets and dot-stuffing together, into a buffer reused across a batch. The
 * bytes are exactly those of `wireMessage(buildMime(...))` (a unit test compares them over a corpus and random texts).
 */

/** ASCII `=`, `.`, CR, LF, space, tab. */
const EQ = 0x3d;
const DOT = 0x2e;
const CR = 0x0d;
const LF = 0x0a;
const SP = 0x20;
const TAB = 0x09;
// eslint-disable-next-line no-control-regex -- NUL and the 8-bit range are what it finds
const NOT_SEVEN_BIT = /[^\x01-\x7f]/;
const HEX_DIGITS = Buffer.from('0123456789ABCDEF', 'latin1');

/** Whether a line of `s` is over 998 octets (UTF-8), lines ended by CR LF, a lone CR or a lone LF. */
function hasLineOver998(s: string, ascii: boolean): boolean {
  const text = s.includes('\r') ? s.replace(/\r\n|\r/g, '\n') : s;
  for (let start = 0; ; ) {
    const end = text.indexOf('\n', start);
    const stop = end < 0 ? text.length : end;
    const units = stop - start;
    // A UTF-16 unit is at most 3 octets: only a line that could be over is measured.
    if (units > 998 || (!ascii && units * 3 > 998 && Buffer.byteLength(text.slice(start, stop)) > 998)) return true;
    if (end < 0) return false;
    start = end + 1;
  }
}

/** A growing byte buffer that messages are written into, one after another (reused across a batch). */
export class WireWriter {
  buf: Buffer;
  pos = 0;
  /** Quoted-printable lines are encoded here first, then copied with their soft breaks. */
  private line: Buffer = Buffer.allocUnsafe(4096);

  constructor(capacity = 256 * 1024) {
    this.buf = Buffer.allocUnsafe(capacity);
  }

  /** Makes room for `n` more bytes. */
  ensure(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.pos + n) size *= 2;
    const grown = Buffer.allocUnsafe(size);
    this.buf.copy(grown, 0, 0, this.pos);
    this.buf = grown;
  }

  /**
   * Text that needs no line-end normalisation (headers, boundary lines: CRLF already, no bare CR or LF), as UTF-8,
   * dot-stuffed. `lineStart`: the text starts a line (a `.` there is doubled too).
   */
  text(s: string, lineStart: boolean): void {
    if ((lineStart && s.charCodeAt(0) === DOT) || s.includes('\n.')) {
      s = s.replace(/\n\./g, '\n..');
      if (lineStart && s.charCodeAt(0) === DOT) s = `.${s}`;
    }
    this.ensure(s.length * 3);
    this.pos += this.buf.write(s, this.pos, 'utf8');
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
   * What a part's text allows (the checks of mime.ts' isSevenBit and isEightBitSafe): whether it is all ASCII without
   * NUL, whether it has a NUL, and whether a line is over 998 octets, lines as CRLF normalisation makes them. Native
   * searches only: a loop over a 15 KB body's characters or octets costs several times as much on this path.
   */
  scan(s: string): { ascii: boolean; nul: boolean; overlong: boolean } {
    const ascii = !NOT_SEVEN_BIT.test(s);
    const nul = !ascii && s.includes('\0');
    return { ascii, nul, overlong: (ascii ? s.length : s.length * 3) > 998 && hasLineOver998(s, ascii) };
  }

  /** A part's text as it is, line ends made CRLF (CR LF, a lone CR and a lone LF each end a line), dot-stuffed. */
  plain(s: string): void {
    let text = s.includes('\r') ? s.replace(/\r\n|\r|\n/g, '\r\n') : s.replaceAll('\n', '\r\n');
    if (text.includes('\n.')) text = text.replace(/\n\./g, '\n..');
    this.raw(text.charCodeAt(0) === DOT ? `.${text}` : text);
  }

  /**
   * The loaded text in quoted-printable (RFC 2045 6.7) as mime.ts' `quotedPrintable` writes it: line ends normalised
   * to CRLF; tab, printable ASCII but `=` as they are, any other octet as `=XX`; a blank before a line end encoded;
   * lines over 76 characters broken with soft breaks (75 characters and `=`) that never split an `=XX`; dot-stuffed.
   */
  quotedPrintable(): void {
    const b = this.utf8;
    const n = this.utf8Length;
    let start = 0;
    for (;;) {
      let end = start;
      while (end < n) {
        const c = b[end]!;
        if (c === LF || c === CR) break;
        end++;
      }
      this.qpLine(start, end);
      if (end >= n) return;
      // CR LF, a lone CR or a lone LF: one line end.
      start = b[end] === CR && end + 1 < n && b[end + 1] === LF ? end + 2 : end + 1;
      this.ensure(2);
      this.buf[this.pos++] = CR;
      this.buf[this.pos++] = LF;
    }
  }

  /** One line (octets `from` to `to` of the loaded text) encoded, then written with its soft breaks. */
  private qpLine(from: number, to: number): void {
    if (this.line.length < (to - from) * 3 + 3) this.line = Buffer.allocUnsafe((to - from) * 3 + 3);
    const b = this.utf8;
    const line = this.line;
    let l = 0;
    for (let i = from; i < to; i++) {
      const c = b[i]!;
      if ((c >= SP && c <= 0x7e && c !== EQ) || c === TAB) line[l++] = c;
      else {
        line[l] = EQ;
        line[l + 1] = HEX_DIGITS[c >> 4]!;
        line[l + 2] = HEX_DIGITS[c & 15]!;
        l += 3;
      }
    }
    // A blank before the line end is encoded (it would be taken for padding).
    const last = l > 0 ? line[l - 1] : -1;
    if (last === SP || last === TAB) {
      line[l - 1] = EQ;
      line[l++] = HEX_DIGITS[last >> 4]!;
      line[l++] = HEX_DIGITS[last & 15]!;
    }
    // Soft breaks: each piece 75 characters (fewer where that would split an `=XX`) and `=`, until 76 or fewer remain.
    this.ensure(l + Math.ceil(l / 73) * 4 + 1);
    const out = this.buf;
    let p = this.pos;
    let at = 0;
    while (l - at > 76) {
      let cut = 75;
      if (line[at + cut - 1] === EQ) cut -= 1;
      else if (line[at + cut - 2] === EQ) cut -= 2;
      if (line[at] === DOT) out[p++] = DOT;
      line.copy(out, p, at, at + cut);
      p += cut;
      out[p++] = EQ;
      out[p++] = CR;
      out[p++] = LF;
      at += cut;
    }
    if (at < l && line[at] === DOT) out[p++] = DOT;
    line.copy(out, p, at, l);
    this.pos = p + l - at;
  }

  /** The bytes written since `from`, copied into memory of their own (transferable: not from Buffer's pool). */
  take(from = 0): Buffer {
    const out = Buffer.allocUnsafeSlow(this.pos - from);
    this.buf.copy(out, 0, from, this.pos);
    return out;
  }

  reset(): void {
    this.pos = 0;
  }
}
