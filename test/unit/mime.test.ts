import { simpleParser } from 'mailparser';
import libqp from 'libqp';
import MimeNode from 'nodemailer/lib/mime-node';
import { foldLines } from 'nodemailer/lib/mime-funcs';
import { buildMime, foldLine, quotedPrintable, type MimeMessage } from '../../domain/mail/mime';

/** The message the delivery activity builds, parsed back the way a receiving client reads it. */
const base: MimeMessage = {
  messageId: '<0190f3a2-7b1c-7def-8abc-0123456789ab@example.com>',
  date: new Date('2026-11-22T10:00:00Z'),
  from: { name: 'The Team', address: 'team@example.com' },
  to: { name: null, address: 'ada@example.org' },
  subject: 'Hello',
  html: '<p>Hello</p>',
  text: 'Hello',
};

const lines = (raw: string) => raw.split('\r\n');

describe('buildMime', () => {
  test('headers: addresses, subject, Message-ID, Date, MIME-Version; only CRLF line ends and no line over 998', async () => {
    const raw = buildMime({ ...base, replyTo: 'help@example.com' });
    expect(raw).not.toMatch(/[^\r]\n|\r[^\n]/);
    expect(Math.max(...lines(raw).map((l) => l.length))).toBeLessThanOrEqual(998);
    const mail = await simpleParser(raw);
    expect(mail.from!.value).toEqual([{ name: 'The Team', address: 'team@example.com' }]);
    expect(mail.to).toMatchObject({ value: [{ address: 'ada@example.org', name: '' }] });
    expect(mail.replyTo!.value[0]!.address).toBe('help@example.com');
    expect(mail.subject).toBe('Hello');
    expect(mail.messageId).toBe(base.messageId);
    expect(mail.date!.toISOString()).toBe('2026-11-22T10:00:00.000Z');
    expect(mail.headers.get('mime-version')).toBe('1.0');
  });

  test('non-ASCII names and subjects become encoded words, long headers are folded, IDN domains are punycoded', async () => {
    const subject = `Grüße — ${'a long subject '.repeat(8)}🎉`;
    const raw = buildMime({ ...base, subject, from: { name: 'Zoë, "Team"', address: 'team@bücher.example' }, headers: { 'X-Note': 'Ünïcode' } });
    const headerBlock = raw.slice(0, raw.indexOf('\r\n\r\n'));
    expect(headerBlock).toMatch(/^[\x20-\x7e\r\n\t]*$/); // 7-bit headers
    expect(Math.max(...lines(headerBlock).map((l) => l.length))).toBeLessThanOrEqual(78);
    expect(headerBlock).toContain('From: =?UTF-8?Q?');
    expect(headerBlock).toContain('<team@xn--bcher-kva.example>');
    const mail = await simpleParser(raw);
    expect(mail.subject).toBe(subject);
    expect(mail.from!.value).toEqual([{ name: 'Zoë, "Team"', address: 'team@bücher.example' }]);
  });

  const encodings = (raw: string) => [...raw.matchAll(/^Content-Type: (text\/\w+).*\r\nContent-Transfer-Encoding: (.*)$/gm)].map((m) => `${m[1]} ${m[2]}`);

  test('HTML and text are parts of multipart/alternative (text first), decoded exactly: quoted-printable when not ASCII, as they are (7bit) when ASCII', async () => {
    const html = `<p>a = b</p>\n.<p>starts with a dot</p><p>${'long line '.repeat(40)}</p><p>€ ünï</p>`;
    const text = 'Line one\n.\ntrailing spaces   \r\nend';
    const raw = buildMime({ ...base, html, text });
    expect(raw).toMatch(/^Content-Type: multipart\/alternative;\r\n boundary="=_mw_[0-9a-f]{24}_a"$/m);
    expect(encodings(raw)).toEqual(['text/plain 7bit', 'text/html quoted-printable']);
    expect(Math.max(...lines(raw).map((l) => l.length))).toBeLessThanOrEqual(76);
    const mail = await simpleParser(raw);
    expect(mail.html).toBe(html);
    expect(mail.text).toBe(text.replace(/\r\n/g, '\n'));
    expect(raw.indexOf('Content-Type: text/plain')).toBeLessThan(raw.indexOf('Content-Type: text/html'));
  });

  test('ASCII goes as it is only with lines of at most 998 octets and nothing like a boundary; otherwise quoted-printable', async () => {
    const fits = `<p>${'x'.repeat(990)}</p>\n<p>a = b, =41 stays literal</p>`;
    const tooLong = `<p>${'x'.repeat(996)}</p>`; // 1,003 characters on one line
    const boundaryLike = '<p>a</p>\n--=_mw_000000000000000000000000_a--\n<p>b</p>';
    for (const [html, encoding] of [[fits, '7bit'], [tooLong, 'quoted-printable'], [boundaryLike, 'quoted-printable'], ['<p>nul\u0000</p>', 'quoted-printable']] as const) {
      const raw = buildMime({ ...base, html, text: null });
      expect(encodings(raw)).toEqual([`text/html ${encoding}`]);
      expect(raw).not.toMatch(/[^\r]\n|\r[^\n]/);
      expect(Math.max(...lines(raw).map((l) => l.length))).toBeLessThanOrEqual(998);
      expect((await simpleParser(raw)).html).toBe(`${html}\n`);
    }
  });

  test('without a text part the HTML part is the whole body', async () => {
    const raw = buildMime({ ...base, text: null });
    expect(raw).not.toContain('multipart');
    expect(raw).toMatch(/^Content-Type: text\/html; charset=utf-8$/m);
    expect((await simpleParser(raw)).html).toBe('<p>Hello</p>\n'); // the message ends with a line break
  });

  test('attachments go in multipart/mixed, images with a content id in multipart/related next to the HTML', async () => {
    const pdf = Buffer.from('%PDF-1.4 '.repeat(100));
    const png = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 1, 2, 3]);
    const raw = buildMime({
      ...base,
      html: '<p><img src="cid:logo@mail"></p>',
      attachments: [
        { filename: 'résumé.pdf', content: pdf, disposition: 'attachment' },
        { filename: 'logo.png', content: png, contentType: 'image/png', disposition: 'inline', contentId: 'logo@mail' },
      ],
    });
    expect(raw).toMatch(/^Content-Type: multipart\/mixed;(\r\n)? boundary=/m);
    expect(raw).toMatch(/^Content-Type: multipart\/related; type="text\/html";(\r\n)? boundary=/m);
    const mail = await simpleParser(raw, { keepCidLinks: true });
    const [logo, doc] = mail.attachments;
    expect(logo).toMatchObject({ filename: 'logo.png', contentType: 'image/png', contentDisposition: 'inline', cid: 'logo@mail', related: true });
    expect(logo!.content.equals(png)).toBe(true);
    // No content type given: detected from the extension; a non-ASCII file name is RFC 2231-encoded.
    expect(doc).toMatchObject({ filename: 'résumé.pdf', contentType: 'application/pdf', contentDisposition: 'attachment' });
    expect(doc!.content.equals(pdf)).toBe(true);
    expect(mail.html).toContain('<img src="cid:logo@mail">');
    expect(mail.text).toBe('Hello');
  });

  test('custom headers are kept (folded, not re-encoded when ASCII; blank ones left out), and every message gets its own boundary', async () => {
    const unsubscribe = `<https://mail.example.com/unsubscribe/${'t'.repeat(90)}>, <mailto:unsubscribe@example.com?subject=unsubscribe>`;
    const raw = buildMime({ ...base, headers: { 'List-Unsubscribe': unsubscribe, 'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click', 'X-Campaign': 'c-1', 'X-Blank': ' ' } });
    expect(raw).not.toMatch(/^X-Blank:/im);
    const mail = await simpleParser(raw);
    expect(mail.headerLines.find((h) => h.key === 'list-unsubscribe')!.line.replace(/\r\n /g, ' ')).toBe(`List-Unsubscribe: ${unsubscribe}`);
    expect(mail.headerLines.find((h) => h.key === 'list-unsubscribe-post')!.line).toBe('List-Unsubscribe-Post: List-Unsubscribe=One-Click');
    expect(mail.headerLines.find((h) => h.key === 'x-campaign')!.line).toBe('X-Campaign: c-1');
    const boundary = (m: string) => /boundary="([^"]+)"/.exec(m)![1];
    expect(boundary(raw)).not.toBe(boundary(buildMime(base)));
  });

  test('List-Id with a long list identifier stays readable (folded, never an encoded word)', async () => {
    const listId = `"Spring news" <${'0'.repeat(36)}.campaigns.news.example.com>`;
    const raw = buildMime({ ...base, headers: { 'List-Id': listId } });
    expect(raw).not.toMatch(/^List-Id: =\?/im);
    const mail = await simpleParser(raw);
    expect(mail.headerLines.find((h) => h.key === 'list-id')!.line.replace(/\r\n /g, ' ')).toBe(`List-Id: ${listId}`);
  });
});

describe('quotedPrintable', () => {
  /** Strings with what quoted-printable must encode: non-ASCII (astral too), `=`, whitespace before line ends, lone surrogates. */
  const pieces = ['a', ' ', '\t', '=', 'é', '—', '😀', '\uD800', 'x'.repeat(80), '<p class="x">', '\r\n', '.', '=3D', '€€€'];
  const samples = Array.from({ length: 400 }, (_, n) => {
    let s = '';
    let seed = n * 7919 + 13;
    for (let i = 0; i < 40; i++) {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      s += pieces[seed % pieces.length];
    }
    return s;
  });

  test('decodes (libqp, as mail clients decode) to the text as UTF-8 encodes it; lines of at most 76; no whitespace before a line end; only safe characters', () => {
    for (const s of samples) {
      const encoded = quotedPrintable(s);
      expect(libqp.decode(encoded).toString('utf8')).toBe(Buffer.from(s, 'utf8').toString('utf8'));
      for (const line of encoded.split('\r\n')) {
        expect(line.length).toBeLessThanOrEqual(76);
        expect(line).not.toMatch(/[ \t]$/);
        expect(line).toMatch(/^[\t\x20-\x7e]*$/);
        // Every = starts an =XX, but for the soft break that may end a line: a soft break never splits an =XX.
        expect(line.replace(/=[0-9A-F]{2}/g, '').replace(/=$/, '')).not.toContain('=');
      }
    }
  });

  test('hard line breaks stay where the text has them, and plain short lines are unchanged', () => {
    expect(quotedPrintable('plain line\r\nsecond')).toBe('plain line\r\nsecond');
    expect(quotedPrintable('a = b \r\nGrüße\t')).toBe('a =3D b=20\r\nGr=C3=BC=C3=9Fe=09');
  });
});

describe('per-message headers', () => {
  /** The header block's line for `key`, with its folded continuation lines. */
  const headerLine = (raw: string, key: string) => {
    const block = raw.slice(0, raw.indexOf('\r\n\r\n')).split('\r\n');
    const at = block.findIndex((l) => l.startsWith(`${key}:`));
    expect(at).toBeGreaterThanOrEqual(0);
    let end = at + 1;
    while (end < block.length && /^[ \t]/.test(block[end]!)) end++;
    return block.slice(at, end).join('\r\n');
  };
  const nodemailer = (key: string, value: Parameters<MimeNode['encodeHeaderValue']>[1]) => foldLines(`${key}: ${new MimeNode().encodeHeaderValue(key, value)}`, 76);

  test('are the lines nodemailer writes, through the shortcuts and around them', () => {
    const addresses = [
      { name: null, address: 'reader-1@example.com' },
      { name: null, address: 'Reader.One+tag@example.com' },
      { name: null, address: 'reader@EXAMPLE.com' },
      { name: null, address: 'a.b@bücher.example' },
      { name: null, address: '"quoted local"@example.com' },
      { name: null, address: `${'x'.repeat(70)}@example.com` },
      { name: 'Ada Lovelace', address: 'ada@example.org' },
      { name: 'Zoë', address: 'zoe@example.org' },
    ];
    const subjects = ['Hello', '  leading and trailing  ', 'a =?utf-8?q?x?= word', `${'long '.repeat(20)}end`, 'Grüße', 'tab\there', ''];
    const ids = ['<0190f3a2-7b1c-7def-8abc-0123456789ab@example.com>', `<${'a'.repeat(80)}@example.com>`, '<a>b>', 'no-brackets@example.com'];
    const froms = [{ name: 'Example News', address: 'news@example.com' }, { name: '', address: 'plain@example.com' }, { name: 'Zoë, "Team"', address: 'team@bücher.example' }];
    for (let i = 0; i < 24; i++) {
      const msg: MimeMessage = {
        ...base,
        to: addresses[i % addresses.length]!,
        from: froms[i % froms.length]!,
        replyTo: i % 2 ? 'help@example.com' : `Help Desk <help+${i}@Example.com>`,
        subject: subjects[i % subjects.length]!,
        messageId: ids[i % ids.length]!,
        date: new Date(Date.UTC(2026, 10, 27, 15, 0, i % 3, 7 * i)),
        // Custom headers repeat their last value or change it (each name's last line is kept).
        headers: { Precedence: i % 4 < 2 ? 'bulk' : 'list', 'X-Note': ['Ünïcode', 'plain', 'plain', `${'long '.repeat(20)}end`][i % 4]!, 'List-Id': i % 5 < 3 ? 'News <news.example.com>' : 'Other <other.example.com>' },
      };
      const raw = buildMime(msg);
      for (const key of ['Precedence', 'X-Note']) expect(headerLine(raw, key)).toBe(nodemailer(key, msg.headers![key]!));
      expect(headerLine(raw, 'List-Id')).toBe(foldLines(`List-Id: ${msg.headers!['List-Id']}`, 76));
      expect(headerLine(raw, 'To')).toBe(nodemailer('To', { name: msg.to.name ?? '', address: msg.to.address }));
      expect(headerLine(raw, 'From')).toBe(nodemailer('From', { name: msg.from.name ?? '', address: msg.from.address }));
      expect(headerLine(raw, 'Reply-To')).toBe(nodemailer('Reply-To', msg.replyTo!));
      expect(headerLine(raw, 'Message-ID')).toBe(nodemailer('Message-ID', msg.messageId));
      expect(headerLine(raw, 'Date')).toBe(nodemailer('Date', msg.date!));
      if (msg.subject) expect(headerLine(raw, 'Subject')).toBe(nodemailer('Subject', msg.subject));
    }
  });
});

describe('foldLine', () => {
  test('folds as foldLines does, a line of a shape it has met before included', () => {
    // A seeded generator (mulberry32): the same lines every run.
    let seed = 0x5eed;
    const random = () => {
      seed = (seed + 0x6d2b79f5) | 0;
      let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
    // Mostly word characters and spaces; now and then another blank or a line end, which take foldLines' own way.
    const pick = () => {
      const r = random();
      if (r < 0.15) return ' ';
      if (r < 0.16) return ['\t', '\u00a0', '\r', '\n', '\r\n', '\u2028'][Math.floor(random() * 6)]!;
      return 'abcdefghijklmnopqrstuvwxyz0123456789<>:@=_-,.'[Math.floor(random() * 45)]!;
    };
    let compared = 0;
    for (let i = 0; i < 3000; i++) {
      const length = i % 10 === 0 ? 74 + (i % 4) : Math.floor(random() * 320);
      let line = '';
      while (line.length < length) line += pick();
      // Twice, and once more with other characters in the same places: a remembered shape must fold the same.
      const other = line.replace(/[a-z0-9]/g, (c) => (c === 'x' ? 'y' : 'x'));
      for (const l of [line, line, other]) {
        expect(foldLine(l)).toBe(foldLines(l, 76));
        compared++;
      }
    }
    expect(compared).toBe(9000);
    // The campaign's two: the multipart boundary line and List-Unsubscribe, whose tokens change per message.
    for (const token of ['a'.repeat(67), 'B-'.repeat(33) + 'c', 'x'.repeat(120)]) {
      const boundaryLine = `Content-Type: multipart/alternative; boundary="=_mw_${token.slice(0, 24)}_a"`;
      expect(foldLine(boundaryLine)).toBe(foldLines(boundaryLine, 76));
      const unsubscribe = `List-Unsubscribe: <https://mail.example.com/unsubscribe/${token}>, <mailto:unsubscribe@example.com?subject=unsubscribe%20${token}>`;
      expect(foldLine(unsubscribe)).toBe(foldLines(unsubscribe, 76));
      expect(foldLine(unsubscribe)).toContain('\r\n');
    }
  });
});
