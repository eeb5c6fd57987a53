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

  /** A part's text as it is, line ends made CRLF, dot-stuffed. */
  plain(s: string): void {
    this.raw(dotStuff(crlf(s)));
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

  /** The bytes written, copied into memory of their own (transferable: not from Buffer's pool). */
  take(): Buffer {
    const out = Buffer.allocUnsafeSlow(this.pos);
    this.buf.copy(out, 0, 0, this.pos);
    return out;
  }

  reset(): void {
    this.pos = 0;
  }
}
