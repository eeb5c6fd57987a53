import { randomUUID } from 'node:crypto';
import {
  findReturnPathTokens,
  parseReturnPath,
  parseUnsubscribeAddress,
  parseUnsubscribeSubject,
  RETURN_PATH_MAX_AGE_DAYS,
  returnPathAddress,
  unsubscribeAddress,
  unsubscribeTokenFromSubject,
} from '../../domain/inbound/return-path';
import { linkTokens } from '../../domain/tracking/tokens';

const SECRET = 'unit-test-app-secret-0123456789-abcdef';
const OTHER_SECRET = 'another-app-secret-0123456789-abcdefgh';
const HOST = 'bounces.shop.example';
const NOW = new Date('2026-11-27T12:34:56Z');
const DAY = 86_400_000;
const emailId = '019ab2c4-5e6f-7a00-8b00-0000000000aa';

const localOf = (address: string) => address.slice(0, address.lastIndexOf('@'));
const BASE32 = 'abcdefghijklmnopqrstuvwxyz234567';

/** The address with the base32 character at `index` of its token replaced by the next one of the alphabet. */
function alterChar(address: string, index: number): string {
  const local = localOf(address);
  const at = 2 + index;
  const next = BASE32[(BASE32.indexOf(local[at]!) + 1) % 32]!;
  return `${local.slice(0, at)}${next}${local.slice(at + 1)}@${HOST}`;
}

/** Decodes the 30-byte token of a local part (test-side RFC 4648 base32, written independently of the module). */
function tokenBytes(local: string): Buffer {
  let bits = '';
  for (const c of local.slice(2)) bits += BASE32.indexOf(c).toString(2).padStart(5, '0');
  return Buffer.from(bits.match(/.{8}/g)!.map((b) => parseInt(b, 2)));
}

describe('return path addresses (signed VERP)', () => {
  test('an address round-trips to its email id and issue day', () => {
    const address = returnPathAddress(emailId, HOST, SECRET, NOW);
    expect(address).toMatch(/^b-[a-z2-7]{48}@bounces\.shop\.example$/);
    expect(parseReturnPath(address, SECRET, NOW)).toEqual({ emailId, issuedAt: new Date('2026-11-27T00:00:00Z') });
    for (let i = 0; i < 50; i++) {
      const id = randomUUID();
      expect(parseReturnPath(returnPathAddress(id, HOST, SECRET, NOW), SECRET, NOW)).toMatchObject({ emailId: id });
    }
  });

  test('the token carries the email id, the issue day and a 12-byte MAC, and nothing else', () => {
    const raw = tokenBytes(localOf(returnPathAddress(emailId, HOST, SECRET, NOW)));
    expect(raw).toHaveLength(30);
    expect(raw.subarray(0, 16).toString('hex')).toBe(emailId.replace(/-/g, ''));
    expect(raw.readUInt16BE(16)).toBe(Math.floor(NOW.getTime() / DAY));
  });

  test('the local part stays within RFC 5321 (64 octets), is lowercase, and the host is lowercased', () => {
    const address = returnPathAddress(emailId.toUpperCase(), 'Bounces.Shop.Example', SECRET, NOW);
    expect(localOf(address).length).toBeLessThanOrEqual(64);
    expect(address).toBe(address.toLowerCase());
    expect(address.endsWith('@bounces.shop.example')).toBe(true);
  });

  test('any case is accepted: MTAs may upper- or mix-case the local part', () => {
    const address = returnPathAddress(emailId, HOST, SECRET, NOW);
    const mixed = [...address].map((c, i) => (i % 2 ? c.toUpperCase() : c)).join('');
    for (const form of [address.toUpperCase(), mixed, `<${address}>`, ` ${address} `, localOf(address), localOf(address).toUpperCase()]) {
      expect(parseReturnPath(form, SECRET, NOW)).toMatchObject({ emailId });
    }
  });

  test('a token changed in any character, or with its MAC changed, is forged', () => {
    const address = returnPathAddress(emailId, HOST, SECRET, NOW);
    for (let i = 0; i < 48; i++) expect(parseReturnPath(alterChar(address, i), SECRET, NOW)).toEqual({ error: 'forged' });
  });

  test('another email id under the same MAC is forged (the id is signed, not just carried)', () => {
    const genuine = localOf(returnPathAddress(emailId, HOST, SECRET, NOW));
    const other = localOf(returnPathAddress('019ab2c4-5e6f-7a00-8b00-0000000000bb', HOST, SECRET, NOW));
    // The first 16 bytes (the id) are the first 25.6 characters: splice the other id's characters, keep our MAC.
    const spliced = `${other.slice(0, 2 + 25)}${genuine.slice(2 + 25)}`;
    expect(parseReturnPath(spliced, SECRET, NOW)).toEqual({ error: 'forged' });
  });

  test('a token signed with another secret is forged', () => {
    expect(parseReturnPath(returnPathAddress(emailId, HOST, OTHER_SECRET, NOW), SECRET, NOW)).toEqual({ error: 'forged' });
  });

  test(`a token is valid for ${RETURN_PATH_MAX_AGE_DAYS} days after its issue day, then expired`, () => {
    const address = returnPathAddress(emailId, HOST, SECRET, NOW);
    const later = (days: number) => new Date(NOW.getTime() + days * DAY);
    expect(parseReturnPath(address, SECRET, later(RETURN_PATH_MAX_AGE_DAYS))).toMatchObject({ emailId });
    expect(parseReturnPath(address, SECRET, later(RETURN_PATH_MAX_AGE_DAYS + 1))).toEqual({ error: 'expired' });
    expect(parseReturnPath(address, SECRET, later(10_000))).toEqual({ error: 'expired' });
  });

  test('a token dated more than a day ahead is refused; one day of clock skew is not', () => {
    const address = returnPathAddress(emailId, HOST, SECRET, NOW);
    expect(parseReturnPath(address, SECRET, new Date(NOW.getTime() - DAY))).toMatchObject({ emailId });
    expect(parseReturnPath(address, SECRET, new Date(NOW.getTime() - 2 * DAY))).toEqual({ error: 'expired' });
  });

  test('expiry is judged only for a genuine MAC: a forged old token is forged, not expired', () => {
    const old = returnPathAddress(emailId, HOST, OTHER_SECRET, new Date('2020-01-01T00:00:00Z'));
    expect(parseReturnPath(old, SECRET, NOW)).toEqual({ error: 'forged' });
  });

  test.each([
    ['another mailbox on the host', `postmaster@${HOST}`],
    ['an empty string', ''],
    ['the null sender', '<>'],
    ['one character short', `b-${'a'.repeat(47)}@${HOST}`],
    ['one character long', `b-${'a'.repeat(49)}@${HOST}`],
    ['not base32 (digits 0, 1, 8, 9)', `b-${'a'.repeat(44)}0189@${HOST}`],
    ['not base32 (padding)', `b-${'a'.repeat(46)}==@${HOST}`],
    ['a local part over 64 octets', `b-${'a'.repeat(100)}@${HOST}`],
    ['a very long input', `b-${'a'.repeat(100_000)}`],
    ['no prefix', `${'a'.repeat(50)}@${HOST}`],
    ['another kind', unsubscribeAddress(emailId, HOST, SECRET)],
    ['a subaddress', `b-${'a'.repeat(48)}+tag@${HOST}`],
  ])('%s is not ours', (_name, input) => {
    expect(parseReturnPath(input, SECRET, NOW)).toEqual({ error: 'not_ours' });
  });

  test('a non-UUID email id is a programming error, not a token', () => {
    expect(() => returnPathAddress('not-a-uuid', HOST, SECRET, NOW)).toThrow(/UUID/);
    expect(() => returnPathAddress(emailId, HOST, '', NOW)).toThrow(/secret/);
  });
});

describe('unsubscribe addresses', () => {
  test('round-trip in any case, never expire, and are not return paths', () => {
    const address = unsubscribeAddress(emailId, HOST, SECRET);
    expect(address).toMatch(/^u-[a-z2-7]{48}@bounces\.shop\.example$/);
    expect(parseUnsubscribeAddress(address, SECRET)).toEqual({ emailId });
    expect(parseUnsubscribeAddress(address.toUpperCase(), SECRET)).toEqual({ emailId });
    expect(parseReturnPath(address, SECRET, NOW)).toEqual({ error: 'not_ours' });
    expect(parseUnsubscribeAddress(returnPathAddress(emailId, HOST, SECRET, NOW), SECRET)).toEqual({ error: 'not_ours' });
  });

  test('altered or signed with another secret: forged', () => {
    const address = unsubscribeAddress(emailId, HOST, SECRET);
    expect(parseUnsubscribeAddress(alterChar(address, 3), SECRET)).toEqual({ error: 'forged' });
    expect(parseUnsubscribeAddress(alterChar(address, 47), SECRET)).toEqual({ error: 'forged' });
    expect(parseUnsubscribeAddress(unsubscribeAddress(emailId, HOST, OTHER_SECRET), SECRET)).toEqual({ error: 'forged' });
  });

  test('a return path and an unsubscribe address of one email do not share a MAC (the kind is signed)', () => {
    const b = tokenBytes(localOf(returnPathAddress(emailId, HOST, SECRET, NOW)));
    const u = tokenBytes(localOf(unsubscribeAddress(emailId, HOST, SECRET)));
    expect(b.subarray(0, 16)).toEqual(u.subarray(0, 16));
    expect(b.subarray(18, 30).equals(u.subarray(16, 28))).toBe(false);
  });
});

describe('return paths found in text', () => {
  test('in Return-Path, Received envelope-from, typed DSN fields and SRS addresses; lowercased, deduplicated', () => {
    const local = localOf(returnPathAddress(emailId, HOST, SECRET, NOW));
    const text = [
      `Return-Path: <${local.toUpperCase()}@${HOST}>`,
      `\t(envelope-from <${local}@${HOST}>)`,
      `X-Postfix-Sender: rfc822; ${local}@${HOST}`,
      `SRS0=HhH1=TT=${HOST}=${local}@forwarder.example`,
    ].join('\n');
    expect(findReturnPathTokens(text)).toEqual([local]);
    expect(findReturnPathTokens(`SRS0=HhH1=TT=${HOST}=${local}@forwarder.example`)).toEqual([local]);
  });

  test('not inside a longer local part or token, and at most `max`', () => {
    expect(findReturnPathTokens(`xb-${'a'.repeat(48)}@h`)).toEqual([]);
    expect(findReturnPathTokens(`b-${'a'.repeat(49)}@h`)).toEqual([]);
    const many = Array.from({ length: 10 }, (_, i) => `b-${BASE32[i]!.repeat(48)}@h`).join(' ');
    expect(findReturnPathTokens(many, 3)).toHaveLength(3);
  });
});

describe('unsubscribe subjects (List-Unsubscribe mailto:)', () => {
  const contactId = '019ab2c4-0000-7000-8000-00000000c0de';
  const token = linkTokens(SECRET).sign({ kind: 'contact', contactId, emailId });

  test.each([
    ['as the link writes it', `unsubscribe ${token}`],
    ['with a reply prefix', `Re: unsubscribe ${token}`],
    ['in upper case', `UNSUBSCRIBE ${token}`],
    ['left percent-encoded', `unsubscribe%20${token}`],
    ['with extra spaces around', `  unsubscribe   ${token}  `],
    ['folded and unfolded by the client', `unsubscribe\t${token}`],
  ])('the token is found %s', (_name, subject) => {
    expect(unsubscribeTokenFromSubject(subject)).toBe(token);
    expect(parseUnsubscribeSubject(subject, SECRET)).toEqual({ contactId, emailId });
  });

  test('a contact token without an email id (sent before emails were named) verifies too', () => {
    const older = linkTokens(SECRET).sign({ kind: 'contact', contactId });
    expect(older).toHaveLength(46);
    expect(parseUnsubscribeSubject(`unsubscribe ${older}`, SECRET)).toEqual({ contactId });
  });

  test('words after "unsubscribe" are no token', () => {
    expect(unsubscribeTokenFromSubject('Unsubscribe me from this list')).toBeNull();
    expect(unsubscribeTokenFromSubject('unsubscribe')).toBeNull();
  });

  test('no token, a token of another kind, an altered token or another secret: null', () => {
    const openToken = linkTokens(SECRET).sign({ kind: 'open', emailId });
    const altered = `${token.slice(0, 10)}${token[10] === 'A' ? 'B' : 'A'}${token.slice(11)}`;
    for (const subject of [
      'unsubscribe',
      'please unsubscribe me',
      'Unsubscribe me from this list',
      `unsubscribe ${openToken}`,
      `unsubscribe ${altered}`,
      `unsubscribe ${token.toLowerCase()}`,
      `resubscribe ${token}`,
      '',
      null,
      undefined,
    ]) {
      expect(parseUnsubscribeSubject(subject, SECRET)).toBeNull();
    }
    expect(parseUnsubscribeSubject(`unsubscribe ${token}`, OTHER_SECRET)).toBeNull();
  });

  test('a subject of any length is answered at once', () => {
    const long = `unsubscribe ${'A'.repeat(200_000)}`;
    const started = Date.now();
    expect(parseUnsubscribeSubject(long, SECRET)).toBeNull();
    expect(parseUnsubscribeSubject('unsubscribe '.repeat(10_000), SECRET)).toBeNull();
    expect(parseUnsubscribeSubject('unsubscribe '.repeat(1_300), SECRET)).toBeNull();
    expect(parseUnsubscribeSubject(`unsubscribe ${'A-'.repeat(8_000)}`, SECRET)).toBeNull();
    expect(Date.now() - started).toBeLessThan(1000);
  });
});
