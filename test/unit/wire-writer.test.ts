import { buildMime, partEncoding, wireMessage, writeWireMessage, type MimeMessage } from '../../domain/mail/mime';
import { appendSegment, crlf, segmentOf, WireWriter, type HtmlSegments, type StaticText } from '../../domain/mail/wire-writer';

// The one-pass writer must give exactly the bytes of the string path (buildMime, then wireMessage, then UTF-8).

const base: MimeMessage = {
  messageId: '<0190a0a0-0000-7000-8000-000000000001@news.example.com>',
  date: new Date('2026-11-27T10:00:00Z'),
  from: { address: 'news@example.com', name: 'Example News' },
  to: { address: 'reader@example.com' },
  subject: 'The November issue',
  html: '<p>Hello</p>',
  text: 'Hello',
  headers: { 'List-Unsubscribe': '<https://example.com/u/abc>', 'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click' },
};
const BOUNDARY = '=_mw_0123456789abcdef01234567';

function both(msg: MimeMessage, eightBit: boolean, w = new WireWriter(64)) {
  const expected = Buffer.from(wireMessage(buildMime(msg, { eightBit, boundary: BOUNDARY })), 'utf8');
  const start = w.pos;
  const { eightBit: used } = writeWireMessage(w, msg, { eightBit, boundary: BOUNDARY });
  return { expected, actual: w.buf.subarray(start, w.pos), used };
}

/** A seeded generator (mulberry32), so a failure names a case that can be run again. */
function prng(seed: number) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const PIECES = ['a', 'word ', ' ', '\t', '.', '..', '=', '==', '\r', '\n', '\r\n', '\n.', '\r\n.x', 'é', '€', '—', '😀', '\ud800', '\udc00', '\0', '\x0b', '\x7f', '=_mw_', 'x'.repeat(74), 'y'.repeat(80), 'z'.repeat(1000), '<a href="https://example.com/?a=1&amp;b=2">link</a>', 'é'.repeat(400)];

function randomText(next: () => number, pieces = PIECES): string {
  let s = '';
  const n = Math.floor(next() * 60);
  for (let i = 0; i < n; i++) s += pieces[Math.floor(next() * pieces.length)];
  return s;
}

describe('writeWireMessage', () => {
  it('writes the bytes of wireMessage(buildMime(...)) for fixed cases', () => {
    const cases: Partial<MimeMessage>[] = [
      {},
      { text: null },
      { html: '.starts with a dot\n.and another\r\nline.\n', text: '.\n..\r\n.' },
      { html: `<p>${'long '.repeat(300)}</p>`, text: `${'a'.repeat(998)}\n${'b'.repeat(999)}` },
      { html: 'trailing blank \ntrailing tab\t\nend ', text: 'é ' },
      { html: '=_mw_ looks like a boundary', text: 'NUL \0 here' },
      { html: 'café — 😀 and a lone \ud800 surrogate', text: 'plain' },
      { html: `${'é'.repeat(500)}\n${'é'.repeat(499)}`, text: '€'.repeat(333) },
      // Lines of exactly 998 octets may go as they are; 999 may not.
      { html: 'x'.repeat(998), text: `${'a'.repeat(998)}\n.b` },
      { html: `<p>\n${'x'.repeat(999)}`, text: `${'é'.repeat(499)}\nend\n` },
      { html: `${'x'.repeat(999)}\nend`, text: `${'é'.repeat(499)}é\nend` },
      { html: `${'€'.repeat(332)}é`, text: `${'é'.repeat(499)}ab` },
      { html: '\r\r\n\n\r', text: '\r' },
      { replyTo: 'help@example.com', subject: 'Zoë’s news', to: { address: 'reader@example.com', name: 'Réader, "R"' } },
    ];
    for (const c of cases) {
      for (const eightBit of [false, true]) {
        const { expected, actual } = both({ ...base, ...c }, eightBit);
        expect(actual.toString('latin1')).toBe(expected.toString('latin1'));
      }
    }
  });

  it('writes the same bytes for random texts (seeded), messages one after another in one buffer', () => {
    const w = new WireWriter(16);
    const encodings = new Map<string, number>();
    for (let seed = 1; seed <= 600; seed++) {
      const next = prng(seed);
      // A third of the texts from pieces without NUL or a boundary mark, so more parts go as they are.
      const pieces = seed % 3 ? PIECES : PIECES.filter((p) => p !== '\0' && p !== '=_mw_');
      const msg = { ...base, html: randomText(next, pieces), text: next() < 0.2 ? null : randomText(next, pieces) };
      const eightBit = next() < 0.5;
      const { expected, actual, used } = both(msg, eightBit, w);
      if (!actual.equals(expected)) throw new Error(`seed ${seed}: ${JSON.stringify(msg.html)} / ${JSON.stringify(msg.text)} (eightBit ${eightBit})`);
      // BODY=8BITMIME exactly when some octet is over 127.
      expect(used).toBe(expected.some((b) => b > 0x7f));
      for (const m of expected.toString('latin1').matchAll(/Content-Transfer-Encoding: ([\w-]+)/g)) encodings.set(m[1]!, (encodings.get(m[1]!) ?? 0) + 1);
    }
    // Every way a part can go, many times each.
    for (const encoding of ['7bit', '8bit', 'quoted-printable']) expect(encodings.get(encoding)).toBeGreaterThan(50);
  });

  it('leaves a message with attachments to the string path, byte for byte', () => {
    const msg = { ...base, attachments: [{ filename: 'a.txt', content: Buffer.from('hi'), disposition: 'attachment' as const }] };
    const { expected, actual } = both(msg, false);
    expect(actual.equals(expected)).toBe(true);
  });
});

describe('writeWireMessage with the HTML as segments', () => {
  // Built as the composer builds them (link-plan.ts trackPieces): the template's runs by segmentOf, every segment added
  // by appendSegment; strings may hold anything.
  const segmentsOf = (pieces: string[], staticWhere: (i: number) => boolean): HtmlSegments => {
    const out: (StaticText | string)[] = [];
    pieces.forEach((p, i) => appendSegment(out, p && staticWhere(i) ? segmentOf(p) : p));
    return out;
  };

  function compare(html: string, segments: HtmlSegments, eightBit: boolean, w: WireWriter, label: string) {
    const msg = { ...base, html };
    const expected = Buffer.from(wireMessage(buildMime(msg, { eightBit, boundary: BOUNDARY })), 'utf8');
    const start = w.pos;
    const { eightBit: used } = writeWireMessage(w, { ...msg, html: '' }, { eightBit, boundary: BOUNDARY }, segments);
    const actual = w.buf.subarray(start, w.pos);
    if (!actual.equals(expected)) throw new Error(`${label}: ${JSON.stringify(segments.map((s) => (typeof s === 'string' ? s : { static: s.text })))} (eightBit ${eightBit})`);
    expect(used).toBe(expected.some((b) => b > 0x7f));
  }

  it('writes the bytes of the joined HTML at every junction that matters (CR then LF, a dot after a line end, a boundary mark across, long lines)', () => {
    const w = new WireWriter(32);
    const cases: string[][] = [
      ['<p>a\r', '\nb</p>'],
      ['line\r', '\n', '.dot'],
      ['x\n', '.y', '\r', '\n.z'],
      ['.', 'starts', '\n', '.', '.'],
      ['ab=', '_mw_cd'],
      ['a=_', 'm', 'w_'],
      ['a', '=', '_mw', '_'],
      ['c'.repeat(990), 'd'.repeat(8), '\r\n', 'e'],
      ['c'.repeat(990), 'd'.repeat(9)],
      ['é'.repeat(495), 'é'.repeat(5)],
      ['blank ', '\n', 'tab\t', '\r\n', 'end ', ''],
      ['😀'.slice(0, 1), '😀'.slice(1), ' pair across strings'],
      ['NUL', '\0', 'here'],
      ['', '', 'only strings'],
      ['x'.repeat(70), '=', 'y'.repeat(10), '€'.repeat(30)],
      // Whole lines inside a segment (prepared once), in quoted-printable (non-ASCII without 8BITMIME, or a line over
      // 998 octets): after a CR that ended the line, with a dot, a blank, a long line.
      ['<p>€\r', '\nb</p>\n.c \r\n' + 'w'.repeat(200) + '\nd', 'e'],
      ['a\r\n', 'b\r\n\r\n.\r\n', '=x', 'z'.repeat(1000)],
    ];
    for (const [n, pieces] of cases.entries()) {
      for (const eightBit of [false, true]) {
        for (const where of [() => true, () => false, (i: number) => i % 2 === 0, (i: number) => i % 2 === 1]) compare(pieces.join(''), segmentsOf(pieces, where), eightBit, w, `case ${n}`);
      }
    }
  });

  it('writes the bytes of the joined HTML for random texts cut into random segments (seeded)', () => {
    const w = new WireWriter(16);
    for (let seed = 1; seed <= 600; seed++) {
      const next = prng(seed * 7919);
      const pieces = Array.from({ length: 1 + Math.floor(next() * 12) }, () => (next() < 0.3 ? PIECES[Math.floor(next() * PIECES.length)]! : randomText(next).slice(0, Math.floor(next() * 200))));
      const statics = pieces.map(() => next() < 0.5);
      compare(pieces.join(''), segmentsOf(pieces, (i) => statics[i]!), next() < 0.5, w, `seed ${seed}`);
    }
  });
});

describe('partEncoding', () => {
  it('measures lines in UTF-8 octets as CRLF normalisation makes them, and keeps NUL and long lines from going as they are', () => {
    // As writeTextPart hands it a text: normalised only when it has a CR (LF alone ends a line as it is).
    const enc = (text: string, eightBit = true) => partEncoding(text.includes('\r') ? crlf(text) : text, eightBit);
    expect(enc(`ab\r\n${'c'.repeat(998)}\rf\ng`)).toBe('7bit');
    expect(enc(`ab\r\n${'c'.repeat(999)}\rf\ng`)).toBe('quoted-printable');
    expect(enc(`ab\n${'c'.repeat(999)}`)).toBe('quoted-printable');
    expect(enc(`${'c'.repeat(998)}\n${'c'.repeat(998)}`)).toBe('7bit');
    // 2 + 4 + 3 octets: é, an emoji, a lone surrogate (U+FFFD): 999 octets on a line, then 990.
    expect(enc(`x\n${'é😀\ud800'.repeat(111)}`)).toBe('quoted-printable');
    expect(enc(`x\r${'é😀\ud800'.repeat(110)}`)).toBe('8bit');
    expect(enc(`x\r${'é😀\ud800'.repeat(110)}`, false)).toBe('quoted-printable');
    expect(enc('a\0')).toBe('quoted-printable');
  });
});
