import { dkimVerify } from 'mailauth';
import { buildMime, wireMessage, writeWireMessage, type MimeMessage } from '../../domain/mail/mime';
import { WireWriter } from '../../domain/mail/wire-writer';
import { relaxedBody, signMessage, signWritten } from '../../domain/mail/dkim-sign';
import { generateDkimKeyPair, type DkimKeyPair } from '../../domain/domains/dkim';

/** Signatures are checked by mailauth's verifier (an implementation of its own) against a key served by a stub resolver. */
let keys: DkimKeyPair;
beforeAll(async () => {
  keys = await generateDkimKeyPair();
});

const DOMAIN = 'news.example.com';
const key = () => ({ domainName: DOMAIN, keySelector: keys.selector, privateKey: keys.privateKeyPem });
const resolver = (publicKey = keys.publicKeyBase64) => async (name: string, rrtype: string) => {
  if (rrtype === 'TXT' && name === `${keys.selector}._domainkey.${DOMAIN}`) return [[`v=DKIM1; k=rsa; p=${publicKey}`]];
  throw Object.assign(new Error(`no ${rrtype} record for ${name}`), { code: 'ENOTFOUND' });
};
const verify = async (raw: string, publicKey?: string) => (await dkimVerify(Buffer.from(raw), { resolver: resolver(publicKey) })).results;

const message: MimeMessage = {
  messageId: '<0190f3a2-7b1c-7def-8abc-0123456789ab@news.example.com>',
  date: new Date('2026-11-26T10:00:00Z'),
  from: { name: 'Example News — Ünïcode', address: `news@${DOMAIN}` },
  to: { name: 'Ada', address: 'ada@example.org' },
  replyTo: 'help@example.com',
  subject: `A long subject that nodemailer folds over more than one line, with ünïcode, ${'word '.repeat(20)}`,
  // Trailing white space, runs of spaces and tabs, and empty lines at the end: what relaxed canonicalization changes.
  html: '<p>Hello   Ada,\t\tthe  news </p>  \n\n<p>More</p>\t\n\n\n',
  text: 'Hello Ada  \n\tthe news\n\n\n',
  headers: {
    'List-Unsubscribe': '<https://mail.example.com/unsubscribe/abc>, <mailto:unsubscribe@example.com?subject=abc>',
    'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click',
    'List-Id': `"November issue" <p1.campaigns.${DOMAIN}>`,
    Precedence: 'bulk',
  },
};

describe('signMessage (DKIM, rsa-sha256, relaxed/relaxed)', () => {
  test('a campaign message verifies, covering the one-click unsubscribe pair (RFC 8058) and the other listed fields', async () => {
    const signed = signMessage(buildMime(message), key());
    expect(signed.startsWith('DKIM-Signature: v=1; a=rsa-sha256; c=relaxed/relaxed;')).toBe(true);
    expect(Math.max(...signed.split('\r\n').map((l) => l.length))).toBeLessThanOrEqual(998);
    const [result] = await verify(signed);
    expect(result).toMatchObject({ signingDomain: DOMAIN, selector: keys.selector, status: { result: 'pass' } });
    const h = /\bh=([^;]+);/.exec(signed.replace(/\r\n /g, ' '))![1]!.split(':');
    expect(h).toEqual(
      expect.arrayContaining(['from', 'to', 'subject', 'date', 'message-id', 'reply-to', 'mime-version', 'content-type', 'list-id', 'list-unsubscribe', 'list-unsubscribe-post']),
    );
    expect(h).not.toContain('precedence');
  });

  test('a changed body, a changed signed field or another key fails; a field it does not sign may change', async () => {
    const signed = signMessage(buildMime(message), key());
    // mailauth says "neutral" for a body hash that does not match, "fail" for a signature that does not.
    expect((await verify(signed.replace('the  news', 'the  NEWS')))[0]!.status).toMatchObject({ result: 'neutral', comment: expect.stringMatching(/body hash/i) });
    expect((await verify(signed.replace('List-Unsubscribe-Post: List-Unsubscribe=One-Click', 'List-Unsubscribe-Post: nothing')))[0]!.status.result).toBe('fail');
    const other = await generateDkimKeyPair();
    expect((await verify(signed, other.publicKeyBase64))[0]!.status.result).toBe('fail');
    expect((await verify(signed.replace('Precedence: bulk', 'Precedence: list')))[0]!.status.result).toBe('pass');
    // White space that relaxed canonicalization ignores may change in transit.
    expect((await verify(signed.replace('the  news', 'the news')))[0]!.status.result).toBe('pass');
  });

  test('a message without a body and a single-part one verify too', async () => {
    const head = `From: news@${DOMAIN}\r\nTo: ada@example.org\r\nSubject: Hi\r\n`;
    for (const raw of [`${head}\r\n`, `${head}\r\nJust text\r\n`]) expect((await verify(signMessage(raw, key())))[0]!.status.result).toBe('pass');
  });

  test('signWritten: a message written to the wire and signed there is byte for byte wireMessage(signMessage(buildMime(...))), and verifies', async () => {
    const now = new Date('2026-11-27T12:00:00Z');
    const boundary = '=_mw_0123456789abcdef';
    const w = new WireWriter(64);
    const cases: Partial<MimeMessage>[] = [
      {},
      { text: null },
      // Lines that start with dots (dot-stuffed on the wire, not in what is signed), 8-bit text, NUL, long lines.
      { html: '.dot\n..two\r\n<p>\tend  </p>\n.', text: '.\n..\r\n. x' },
      { html: `<p>${'é'.repeat(600)}</p>\n${'w'.repeat(1200)}`, text: 'café —  \0 ' },
      { html: '', text: '' },
    ];
    for (const [i, c] of cases.entries()) {
      for (const eightBit of [false, true]) {
        const msg = { ...message, ...c };
        const expected = Buffer.from(wireMessage(signMessage(buildMime(msg, { eightBit, boundary }), key(), now)), 'utf8');
        const start = w.pos;
        writeWireMessage(w, msg, { eightBit, boundary });
        signWritten(w, start, key(), now);
        const actual = w.buf.subarray(start, w.pos);
        if (!actual.equals(expected)) throw new Error(`case ${i} (eightBit ${eightBit}): the bytes differ`);
        // What verifies is the message as it was before dot-stuffing.
        const raw = actual.subarray(0, -3).toString('utf8').replace(/\r\n\.\./g, '\r\n.');
        expect((await verify(raw))[0]!.status.result).toBe('pass');
      }
    }
  });

  test('relaxedBody: line-end white space dropped, runs folded to one space, trailing empty lines removed, CRLF at the end', () => {
    expect(relaxedBody('')).toBe('');
    expect(relaxedBody('\r\n\r\n')).toBe('');
    expect(relaxedBody('a  b\t\tc \t\r\n\r\nd \r\n\r\n\r\n')).toBe('a b c\r\n\r\nd\r\n');
    expect(relaxedBody('no line end  ')).toBe('no line end\r\n');
  });
});
