import { createHmac, hkdfSync, randomUUID } from 'node:crypto';
import { parseDocument, DomUtils } from 'htmlparser2';
import { LinkTokens, linkTokens, MAX_TOKEN_CHARS } from '../../domain/tracking/tokens';
import { applyTracking, clickHref, contactLinks, escapeAttribute, listUnsubscribeHeaders, openPixel, type LinkConfig } from '../../domain/tracking/links';
import { unsubscribeAddress } from '../../domain/inbound/return-path';

const cfg: LinkConfig = { publicUrl: 'https://mail.example.com', appSecret: 'unit-test-app-secret-0123456789-abcdef' };
const tokens = linkTokens(cfg.appSecret);
const emailId = '0190f3a2-7b1c-7def-8abc-0123456789ab';

/** Flips one bit of the decoded token and re-encodes it canonically. */
function tamper(token: string, byteIndex: number): string {
  const raw = Buffer.from(token, 'base64url');
  raw[byteIndex]! ^= 0x01;
  return raw.toString('base64url');
}

describe('link tokens', () => {
  test('open, click and contact tokens verify to what was signed', () => {
    const url = 'https://shop.example/items?id=7&ref=mail#top';
    const contactId = randomUUID();
    expect(tokens.verify(tokens.sign({ kind: 'open', emailId }), 'open')).toEqual({ kind: 'open', emailId });
    expect(tokens.verify(tokens.sign({ kind: 'click', emailId, url }), 'click')).toEqual({ kind: 'click', emailId, url });
    expect(tokens.verify(tokens.sign({ kind: 'contact', contactId }), 'contact')).toEqual({ kind: 'contact', contactId });
    expect(tokens.verify(tokens.sign({ kind: 'contact', contactId, emailId }), 'contact')).toEqual({ kind: 'contact', contactId, emailId });
  });

  test('contact tokens without an email id, as sent before emails were named, keep verifying (same bytes as then)', () => {
    const contactId = randomUUID();
    // The earlier format, written out: version 1, kind 3, the contact id, HMAC over those 18 bytes.
    const key = Buffer.from(hkdfSync('sha256', Buffer.from(cfg.appSecret, 'utf8'), Buffer.alloc(0), 'mailwright/link-tokens/v1', 32));
    const body = Buffer.concat([Buffer.from([1, 3]), Buffer.from(contactId.replace(/-/g, ''), 'hex')]);
    const earlier = Buffer.concat([body, createHmac('sha256', key).update(body).digest().subarray(0, 16)]).toString('base64url');
    expect(tokens.verify(earlier, 'contact')).toEqual({ kind: 'contact', contactId });
    expect(tokens.sign({ kind: 'contact', contactId })).toBe(earlier);
  });

  test('click and open tokens: HMAC-SHA256 of the payload as createHmac computes it, first 16 bytes (non-ASCII URL too)', () => {
    const key = Buffer.from(hkdfSync('sha256', Buffer.from(cfg.appSecret, 'utf8'), Buffer.alloc(0), 'mailwright/link-tokens/v1', 32));
    for (const url of ['https://shop.example/items?id=7&ref=mail#top', 'https://exämple.test/ü?q=😀', `https://long.example/${'x'.repeat(300)}`]) {
      for (const token of [tokens.sign({ kind: 'click', emailId, url }), tokens.sign({ kind: 'open', emailId })]) {
        const raw = Buffer.from(token, 'base64url');
        const body = raw.subarray(0, raw.length - 16);
        expect(raw.subarray(raw.length - 16).equals(createHmac('sha256', key).update(body).digest().subarray(0, 16))).toBe(true);
      }
    }
  });

  test('a contact token carries the email id only as a whole UUID: other trailing lengths are refused even when signed', () => {
    const contactId = randomUUID();
    const key = Buffer.from(hkdfSync('sha256', Buffer.from(cfg.appSecret, 'utf8'), Buffer.alloc(0), 'mailwright/link-tokens/v1', 32));
    const signed = (extra: Buffer) => {
      const body = Buffer.concat([Buffer.from([1, 3]), Buffer.from(contactId.replace(/-/g, ''), 'hex'), extra]);
      return Buffer.concat([body, createHmac('sha256', key).update(body).digest().subarray(0, 16)]).toString('base64url');
    };
    expect(tokens.verify(signed(Buffer.from(emailId.replace(/-/g, ''), 'hex')), 'contact')).toEqual({ kind: 'contact', contactId, emailId });
    for (const n of [1, 15, 17, 32]) expect(tokens.verify(signed(Buffer.alloc(n, 7)), 'contact')).toBeNull();
  });

  test('tokens are compact and URL-safe (base64url, no padding)', () => {
    const open = tokens.sign({ kind: 'open', emailId });
    expect(open).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(open.length).toBeLessThanOrEqual(48);
    expect(tokens.sign({ kind: 'contact', contactId: emailId }).length).toBeLessThanOrEqual(48);
    // With the email it was composed for: 16 bytes more (it goes into List-Unsubscribe and the mailto subject too).
    expect(tokens.sign({ kind: 'contact', contactId: randomUUID(), emailId })).toMatch(/^[A-Za-z0-9_-]{67}$/);
  });

  test('URLs with any characters round-trip exactly', () => {
    const urls = [
      'https://example.com/',
      'http://example.com/path with space?q=a b',
      'https://例え.jp/パス?キー=値',
      'https://example.com/?a=1&b=2&c=%20%2F#frag',
      `https://example.com/${'x'.repeat(3000)}`,
    ];
    for (let i = 0; i < 200; i++) urls.push(`https://example.com/${randomUUID()}?n=${Math.random()}&u=${encodeURIComponent(String.fromCodePoint(0x20 + ((i * 7919) % 0x2fff)))}`);
    for (const url of urls) expect(tokens.verify(tokens.sign({ kind: 'click', emailId, url }), 'click')?.url).toBe(url);
  });

  test('any flipped bit is refused (header, id, url and mac)', () => {
    const token = tokens.sign({ kind: 'click', emailId, url: 'https://example.com/a' });
    const length = Buffer.from(token, 'base64url').length;
    for (let i = 0; i < length; i++) expect(tokens.verify(tamper(token, i), 'click')).toBeNull();
  });

  test("any flipped bit of a contact token naming an email is refused (header, contact, email and mac), so an email can't be swapped in", () => {
    const token = tokens.sign({ kind: 'contact', contactId: randomUUID(), emailId });
    const length = Buffer.from(token, 'base64url').length;
    expect(length).toBe(50);
    for (let i = 0; i < length; i++) expect(tokens.verify(tamper(token, i), 'contact')).toBeNull();
  });

  test('signing refuses an email id in a contact token that is not a UUID', () => {
    expect(() => tokens.sign({ kind: 'contact', contactId: randomUUID(), emailId: 'nope' })).toThrow(/UUID/);
  });

  test('a token of one kind is not accepted as another kind', () => {
    const contact = tokens.sign({ kind: 'contact', contactId: emailId });
    const open = tokens.sign({ kind: 'open', emailId });
    expect(tokens.verify(contact, 'open')).toBeNull();
    expect(tokens.verify(open, 'contact')).toBeNull();
    expect(tokens.verify(open, 'click')).toBeNull();
  });

  test('a token made with another secret is refused', () => {
    const other = new LinkTokens('another-app-secret-0123456789-abcdefgh');
    expect(tokens.verify(other.sign({ kind: 'open', emailId }), 'open')).toBeNull();
  });

  test('garbage is refused without throwing: empty, non-base64url, non-canonical, truncated, too long', () => {
    const good = tokens.sign({ kind: 'open', emailId });
    for (const bad of ['', 'a', '!!!!', `${good}=`, good.slice(0, -4), `${good}A`, good.replace(/.$/, (c) => (c === 'A' ? 'B' : 'A')), 'A'.repeat(MAX_TOKEN_CHARS + 4)]) {
      expect(tokens.verify(bad, 'open')).toBeNull();
    }
    // Same bytes spelt with different unused trailing bits (34 bytes leave 2 spare bits): only the canonical spelling is a token.
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    const sibling = good.slice(0, -1) + alphabet[alphabet.indexOf(good.at(-1)!) ^ 1];
    expect(Buffer.from(sibling, 'base64url').equals(Buffer.from(good, 'base64url'))).toBe(true);
    expect(tokens.verify(sibling, 'open')).toBeNull();
  });

  test('the key is HKDF(APP_SECRET) under its own label, not the DKIM sealing key', () => {
    const forge = (label: string) => {
      const key = Buffer.from(hkdfSync('sha256', Buffer.from(cfg.appSecret, 'utf8'), Buffer.alloc(0), label, 32));
      const body = Buffer.concat([Buffer.from([1, 1]), Buffer.from(emailId.replace(/-/g, ''), 'hex')]);
      return Buffer.concat([body, createHmac('sha256', key).update(body).digest().subarray(0, 16)]).toString('base64url');
    };
    expect(tokens.verify(forge('mailwright/link-tokens/v1'), 'open')).toEqual({ kind: 'open', emailId });
    expect(tokens.verify(forge('mailwright/secret-box/v1'), 'open')).toBeNull();
  });

  test('every kind is the bytes of the format written out with createHmac, whatever order ids are signed in', () => {
    const key = Buffer.from(hkdfSync('sha256', Buffer.from(cfg.appSecret, 'utf8'), Buffer.alloc(0), 'mailwright/link-tokens/v1', 32));
    const written = (kind: number, ...parts: Buffer[]) => {
      const body = Buffer.concat([Buffer.from([1, kind]), ...parts]);
      return Buffer.concat([body, createHmac('sha256', key).update(body).digest().subarray(0, 16)]).toString('base64url');
    };
    const bytes = (id: string) => Buffer.from(id.replace(/-/g, ''), 'hex');
    const emails = [randomUUID(), randomUUID()];
    const contact = randomUUID();
    // Long URLs grow the signer's scratch buffer (twice here); lone surrogates are written as U+FFFD, as Buffer.from does.
    const urls = ['https://example.com/', 'https://bücher.example/ä?q=😀&x=<y>', `https://example.com/${'a'.repeat(5000)}`, `https://example.com/${'€'.repeat(3000)}`, 'https://example.com/\uD800?q=\uDFFF', 'https://example.com/after'];
    for (const url of urls) {
      for (const email of [...emails, emails[0]!]) {
        expect(tokens.sign({ kind: 'click', emailId: email, url })).toBe(written(2, bytes(email), Buffer.from(url, 'utf8')));
        expect(tokens.sign({ kind: 'contact', contactId: contact, emailId: email })).toBe(written(3, bytes(contact), bytes(email)));
        expect(tokens.sign({ kind: 'open', emailId: email })).toBe(written(1, bytes(email)));
        expect(tokens.sign({ kind: 'contact', contactId: email })).toBe(written(3, bytes(email)));
      }
    }
  });

  test('signing refuses ids that are not UUIDs, and a refused id leaves the next token right', () => {
    expect(() => tokens.sign({ kind: 'open', emailId: 'not-a-uuid' })).toThrow(/UUID/);
    const good = tokens.sign({ kind: 'open', emailId });
    // Half a UUID's digits, then a bad character: the signer has written part of it when it throws.
    expect(() => tokens.sign({ kind: 'open', emailId: `${'f'.repeat(8)}-ffff-ffff-ffff-fffffffffffz` })).toThrow(/UUID/);
    expect(tokens.sign({ kind: 'open', emailId })).toBe(good);
    expect(tokens.verify(good, 'open')).toEqual({ kind: 'open', emailId });
  });
});

describe('applyTracking', () => {
  const track = (html: string, opts: Partial<{ opens: boolean; clicks: boolean }> = {}) =>
    applyTracking(html, { emailId, opens: opts.opens ?? true, clicks: opts.clicks ?? true }, cfg);

  /** The hrefs of <a> elements as a browser would read them (entities decoded). */
  const hrefs = (html: string) => DomUtils.getElementsByTagName('a', parseDocument(html)).map((a) => a.attribs.href);
  const clickTarget = (href: string | undefined) => {
    const m = /^https:\/\/mail\.example\.com\/t\/c\/([A-Za-z0-9_-]+)$/.exec(href ?? '');
    return m ? tokens.verify(m[1]!, 'click') : null;
  };

  test('http(s) links go through the click endpoint, signed with the email id and the exact URL', () => {
    const out = track('<p><a href="https://shop.example/a?x=1">A</a> <a class="b" href=\'http://b.example/\'>B</a> <a href=https://c.example/x>C</a></p>', { opens: false });
    expect(hrefs(out).map((h) => clickTarget(h))).toEqual([
      { kind: 'click', emailId, url: 'https://shop.example/a?x=1' },
      { kind: 'click', emailId, url: 'http://b.example/' },
      { kind: 'click', emailId, url: 'https://c.example/x' },
    ]);
    // Everything else is byte for byte the same.
    expect(out.replace(/https:\/\/mail\.example\.com\/t\/c\/[A-Za-z0-9_-]+/g, 'URL')).toBe(
      '<p><a href="URL">A</a> <a class="b" href=\'URL\'>B</a> <a href="URL">C</a></p>',
    );
  });

  test('entity-encoded hrefs round-trip: &amp; in the HTML is & in the signed URL', () => {
    const out = track('<a href="https://ex.com/?a=1&amp;b=2&#38;c=3&quot;">x</a>', { opens: false });
    expect(clickTarget(hrefs(out)[0])?.url).toBe('https://ex.com/?a=1&b=2&c=3"');
  });

  test('mailto:, tel:, anchors, relative and odd links are left untouched', () => {
    const html =
      '<a href="mailto:help@ex.com?subject=Hi&amp;body=x">m</a><a href="tel:+123">t</a><a href="#top">a</a>' +
      '<a href="/relative">r</a><a href="javascript:alert(1)">j</a><a href>n</a><a href="">e</a><a name="x">n</a><a href="https://">bad</a>';
    expect(track(html, { opens: false })).toBe(html);
  });

  test('our own unsubscribe, subscribe and manage links are never wrapped', () => {
    const links = contactLinks(randomUUID(), cfg);
    const html = `<a href="${links.unsubscribeUrl}">u</a><a href="${links.manageUrl}">m</a><a href="${links.subscribeUrl}">s</a>`;
    expect(track(html, { opens: false })).toBe(html);
  });

  test('links in comments, scripts and styles are not rewritten; <area href> is', () => {
    const html = '<!-- <a href="https://a.example/"> --><script>var s = "<a href=\'https://b.example/\'>";</script><style>a[href="https://c.example/"]{}</style>';
    expect(track(html, { opens: false })).toBe(html);
    const area = track('<map><area href="https://d.example/" shape="rect"></map>', { opens: false });
    expect(area).toMatch(/^<map><area href="https:\/\/mail\.example\.com\/t\/c\/[A-Za-z0-9_-]+" shape="rect"><\/map>$/);
  });

  test('surrounding whitespace of an href is not part of the URL; uppercase tags and attributes are found', () => {
    const out = track('<A HREF="  https://ex.com/x \n">x</A>', { opens: false });
    expect(clickTarget(hrefs(out)[0])?.url).toBe('https://ex.com/x');
  });

  test('the open pixel goes right before </body>, or at the end without one', () => {
    const out = track('<html><body><p>Hi</p></body></html>', { clicks: false });
    const m = /^<html><body><p>Hi<\/p><img src="https:\/\/mail\.example\.com\/t\/o\/([A-Za-z0-9_-]+)" width="1" height="1" alt="" style="display:none"><\/body><\/html>$/.exec(out);
    expect(m).not.toBeNull();
    expect(tokens.verify(m![1]!, 'open')).toEqual({ kind: 'open', emailId });
    expect(track('<p>fragment</p>', { clicks: false })).toMatch(/^<p>fragment<\/p><img src="https:\/\/mail\.example\.com\/t\/o\/[^"]+"[^>]*>$/);
    // A </body> inside a comment is not the body's end.
    expect(track('<p>x</p><!-- </body> -->', { clicks: false })).toMatch(/^<p>x<\/p><!-- <\/body> --><img /);
  });

  test('with opens and clicks off the HTML is returned unchanged', () => {
    const html = '<body><a href="https://ex.com/">x</a></body>';
    expect(applyTracking(html, { emailId, opens: false, clicks: false }, cfg)).toBe(html);
  });

  test('clicks only: no pixel; opens only: links untouched', () => {
    const html = '<body><a href="https://ex.com/">x</a></body>';
    expect(track(html, { opens: false })).not.toContain('/t/o/');
    expect(track(html, { clicks: false })).toContain('href="https://ex.com/"');
  });
});

describe('click hrefs and the open pixel', () => {
  it('are the escaped public URL and a token that verifies, whatever the public URL holds', () => {
    const cfg: LinkConfig = { publicUrl: 'https://mail.example.com/a&b"c<d>\'e', appSecret: 's'.repeat(32) };
    const emailId = randomUUID();
    for (let i = 0; i < 2; i++) {
      const href = clickHref(emailId, 'https://shop.example.com/?x=1&y=2', cfg);
      const prefix = escapeAttribute(`${cfg.publicUrl}/t/c/`);
      expect(href.startsWith(prefix)).toBe(true);
      expect(linkTokens(cfg.appSecret).verify(href.slice(prefix.length), 'click')).toEqual({ kind: 'click', emailId, url: 'https://shop.example.com/?x=1&y=2' });
      const pixel = openPixel(emailId, cfg);
      const src = /src="([^"]*)"/.exec(pixel)![1]!;
      expect(src.startsWith(escapeAttribute(`${cfg.publicUrl}/t/o/`))).toBe(true);
      expect(linkTokens(cfg.appSecret).verify(src.slice(escapeAttribute(`${cfg.publicUrl}/t/o/`).length), 'open')).toEqual({ kind: 'open', emailId });
    }
  });
});

describe('contact links and List-Unsubscribe', () => {
  const contactId = randomUUID();

  test('links are signed per contact and point at the public pages', () => {
    const links = contactLinks(contactId, cfg);
    const token = links.unsubscribeUrl.split('/').pop()!;
    expect(tokens.verify(token, 'contact')).toEqual({ kind: 'contact', contactId });
    expect(links).toEqual({
      unsubscribeUrl: `https://mail.example.com/unsubscribe/${token}`,
      subscribeUrl: `https://mail.example.com/subscribe/${token}`,
      manageUrl: `https://mail.example.com/manage/${token}`,
      oneClickUrl: `https://mail.example.com/unsubscribe/${token}`,
      token,
    });
    expect(contactLinks(randomUUID(), cfg).unsubscribeUrl).not.toBe(links.unsubscribeUrl);
  });

  test('links composed into an email sign its id too (one token for all three links), and each email gets its own', () => {
    const links = contactLinks(contactId, cfg, emailId);
    const token = links.unsubscribeUrl.split('/').pop()!;
    expect(links.token).toBe(token);
    expect(tokens.verify(token, 'contact')).toEqual({ kind: 'contact', contactId, emailId });
    expect([links.subscribeUrl, links.manageUrl, links.oneClickUrl].map((u) => u.split('/').pop())).toEqual([token, token, token]);
    expect(contactLinks(contactId, cfg, randomUUID()).token).not.toBe(token);
    expect(contactLinks(contactId, cfg).token).not.toBe(token);
    expect(listUnsubscribeHeaders(links, 'a@b.example', cfg)['List-Unsubscribe']).toBe(
      `<https://mail.example.com/unsubscribe/${token}>, <mailto:unsubscribe@b.example?subject=unsubscribe%20${token}>`,
    );
  });

  test('List-Unsubscribe has the https URL and a mailto on the sender domain; List-Unsubscribe-Post is one-click', () => {
    const headers = listUnsubscribeHeaders(contactLinks(contactId, cfg), 'News@Mail.Shop.Example', cfg);
    const token = contactLinks(contactId, cfg).unsubscribeUrl.split('/').pop()!;
    expect(headers).toEqual({
      'List-Unsubscribe': `<https://mail.example.com/unsubscribe/${token}>, <mailto:unsubscribe@mail.shop.example?subject=unsubscribe%20${token}>`,
      'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click',
    });
  });

  test("with an ACTIVE return path the mailto is the email's signed u- address on the bounce host, the subject still carrying the token", () => {
    const links = contactLinks(contactId, cfg, emailId);
    const bounce = { emailId, host: 'bounces.b.example' };
    expect(listUnsubscribeHeaders(links, 'a@b.example', cfg, bounce)['List-Unsubscribe']).toBe(
      `<https://mail.example.com/unsubscribe/${links.token}>, <mailto:${unsubscribeAddress(emailId, 'bounces.b.example', cfg.appSecret)}?subject=unsubscribe%20${links.token}>`,
    );
    // UNSUBSCRIBE_MAILTO, set, still wins; `off` still leaves https only.
    expect(listUnsubscribeHeaders(links, 'a@b.example', { ...cfg, unsubscribeMailto: 'leave@ops.example' }, bounce)['List-Unsubscribe']).toContain('<mailto:leave@ops.example?');
    expect(listUnsubscribeHeaders(links, 'a@b.example', { ...cfg, unsubscribeMailto: 'off' }, bounce)['List-Unsubscribe']).not.toContain('mailto:');
  });

  test('UNSUBSCRIBE_MAILTO overrides the mailbox, and `off` leaves https only', () => {
    expect(listUnsubscribeHeaders(contactLinks(contactId, cfg), 'a@b.example', { ...cfg, unsubscribeMailto: 'leave@ops.example' })['List-Unsubscribe']).toMatch(
      /, <mailto:leave@ops\.example\?subject=unsubscribe%20[A-Za-z0-9_-]+>$/,
    );
    expect(listUnsubscribeHeaders(contactLinks(contactId, cfg), 'a@b.example', { ...cfg, unsubscribeMailto: 'off' })['List-Unsubscribe']).toMatch(/^<https:\/\/[^>]+>$/);
  });
});
