import dgram from 'node:dgram';
import {
  classifyAddress,
  editDistance,
  isDisposableDomain,
  isPersonalDomain,
  isRoleLocalPart,
  parseAddress,
  plusTag,
  typoSuggestion,
} from '../../domain/verify/address-checks';
import { createDomainResolver, evaluateDns, type DomainDns, type Lookup, type MxRecord } from '../../domain/verify/dns-checks';
import { buildVerifyResult, EmailVerifier, invalidFormatResult } from '../../domain/verify/email-verifier';

const found = <T>(...records: T[]): Lookup<T> => ({ kind: 'found', records });
const NODATA = { kind: 'nodata' } as const;
const NX = { kind: 'nxdomain' } as const;
const FAIL = { kind: 'error', code: 'ESERVFAIL' } as const;
const TIMEOUT = { kind: 'error', code: 'ETIMEOUT' } as const;
const mx = (exchange: string, priority = 10): MxRecord => ({ exchange, priority });

/** A domain's answers: MX host, apex A, no website extras unless overridden. */
function answers(over: Partial<DomainDns> = {}): DomainDns {
  return { mx: found(mx('mx1.example.net')), a: NODATA, aaaa: NODATA, ns: found('ns1.example.net'), wwwA: NX, wwwAaaa: NX, ...over };
}

describe('parseAddress (format check)', () => {
  test.each([
    ['jane@example.com', 'jane', 'example.com'],
    ['  Jane.Doe@Example.COM ', 'Jane.Doe', 'example.com'],
    ['a+tag@sub.example.co.uk', 'a+tag', 'sub.example.co.uk'],
    ["o'brien@example.ie", "o'brien", 'example.ie'],
    [`${'a'.repeat(64)}@example.com`, 'a'.repeat(64), 'example.com'],
  ])('accepts %p (local %p, domain %p)', (input, local, domain) => expect(parseAddress(input)).toEqual({ local, domain }));

  test.each([
    ['no at sign', 'jane.example.com'],
    ['two at signs', 'a@b@example.com'],
    ['no domain dot', 'jane@localhost'],
    ['a one-letter TLD', 'jane@example.c'],
    ['a numeric TLD', 'jane@1.2.3.4'],
    ['an IP literal', 'jane@[192.0.2.1]'],
    ['a quoted local part', '"jane doe"@example.com'],
    ['a space', 'jane doe@example.com'],
    ['a leading dot', '.jane@example.com'],
    ['a trailing dot in the local part', 'jane.@example.com'],
    ['two dots in a row', 'ja..ne@example.com'],
    ['a label ending with a hyphen', 'jane@example-.com'],
    ['a label longer than 63', `jane@${'a'.repeat(64)}.com`],
    ['a local part longer than 64', `${'a'.repeat(65)}@example.com`],
    // A 250-character domain is fine by itself; with the local part the path exceeds 254.
    ['an address longer than 254', `jane.doe.x@${`${'a'.repeat(61)}.`.repeat(4)}co`],
    ['non-ASCII', 'jane@bücher.de'],
    ['empty', ''],
  ])('refuses %s', (_why, input) => expect(parseAddress(input)).toBeUndefined());
});

describe('address classification', () => {
  test.each([
    ['mailinator.com', true],
    ['inbox.mailinator.com', true],
    ['guerrillamail.com', true],
    ['yopmail.com', true],
    ['gmail.com', false],
    ['example.org', false],
    ['acme-mailinator.io', false],
  ])('disposable domain %p: %p (parents count, look-alikes do not)', (domain, expected) => expect(isDisposableDomain(domain)).toBe(expected));

  test.each([
    ['gmail.com', true],
    ['googlemail.com', true],
    ['hotmail.fr', true],
    ['yahoo.co.jp', true],
    ['web.de', true],
    ['mailinator.com', false],
    ['gmial.com', false],
    ['acme-corp.com', false],
    ['mail.gmail.com', false],
  ])('personal provider %p: %p (all.json without its disposable entries)', (domain, expected) => expect(isPersonalDomain(domain)).toBe(expected));

  test.each([
    ['jane+news', { base: 'jane', tag: 'news' }],
    ['jane+a+b', { base: 'jane', tag: 'a+b' }],
    ['jane+', { base: 'jane', tag: '' }],
    ['+jane', undefined],
    ['jane', undefined],
  ])('plus tag of %p', (local, expected) => expect(plusTag(local)).toEqual(expected));

  test.each([
    ['admin', true],
    ['Info', true],
    ['no-reply', true],
    ['postmaster', true],
    ['support+billing', true],
    ['jane', false],
    ['jane+admin', false],
    ['administratorjane', false],
  ])('role local part %p: %p', (local, expected) => expect(isRoleLocalPart(local)).toBe(expected));

  test.each([
    ['gmail', 'gmial', 1],
    ['gmail', 'gmai', 1],
    ['gmail', 'gmaill', 1],
    ['gmail', 'gnail', 1],
    ['ibm', 'aim', 2],
    ['kitten', 'sitting', 3],
    ['', 'abc', 3],
    ['same', 'same', 0],
  ])('edit distance %p / %p = %p', (a, b, d) => {
    expect(editDistance(a, b)).toBe(d);
    expect(editDistance(b, a)).toBe(d);
  });

  test.each([
    ['gmial.com', { domain: 'gmail.com', nearMiss: true }],
    ['gamil.com', { domain: 'gmail.com', nearMiss: true }],
    ['hotmial.com', { domain: 'hotmail.com', nearMiss: true }],
    ['yahooo.com', { domain: 'yahoo.com', nearMiss: true }],
    ['outlok.com', { domain: 'outlook.com', nearMiss: true }],
    // Guesses, trusted only together with DNS: a TLD slip, or short names one or two edits from a provider.
    ['gmail.con', { domain: 'gmail.com', nearMiss: false }],
    ['acme.cmo', { domain: 'acme.co', nearMiss: false }],
    ['ibm.com', { domain: 'aim.com', nearMiss: false }],
    ['ge.com', { domain: 'me.com', nearMiss: false }],
    // Known providers are never corrected; unrelated names get no suggestion.
    ['protonmail.ch', undefined],
    ['gmail.com', undefined],
    ['acme-widgets.io', undefined],
  ])('typo suggestion for %p', (domain, expected) => expect(typoSuggestion(domain)).toEqual(expected));

  test('classifyAddress: normalizes (lowercase, no +tag) and sets every flag', () => {
    expect(classifyAddress(' Support+Tickets@GMAIL.com ')).toEqual({
      local: 'Support+Tickets',
      domain: 'gmail.com',
      normalizedEmail: 'support@gmail.com',
      isPlusAddressed: true,
      isAlias: true,
      isDisposable: false,
      isPersonalEmail: true,
      typo: undefined,
    });
    expect(classifyAddress('jane@mailinator.com')).toMatchObject({ isDisposable: true, isPersonalEmail: false, isAlias: false, isPlusAddressed: false });
    expect(classifyAddress('jane@gmial.com')).toMatchObject({ isDisposable: true, typo: { domain: 'gmail.com', nearMiss: true } });
    expect(classifyAddress('not an address')).toBeUndefined();
  });
});

describe('evaluateDns', () => {
  test('MX hosts: exists, accepts mail, no implicit MX', () => {
    expect(evaluateDns(answers())).toEqual({
      domainExists: 'yes', acceptsMail: 'yes', hasMxRecords: true, nullMx: false, implicitMx: false, hasWebsite: false, lookupFailed: false,
    });
  });

  test('no MX (NODATA) but an A record: implicit MX (RFC 5321 § 5.1), and a website', () => {
    expect(evaluateDns(answers({ mx: NODATA, a: found('192.0.2.1') }))).toMatchObject({ acceptsMail: 'yes', hasMxRecords: false, implicitMx: true, hasWebsite: true });
  });

  test('no MX but an AAAA record only: implicit MX too', () => {
    expect(evaluateDns(answers({ mx: NODATA, aaaa: found('2001:db8::1') }))).toMatchObject({ acceptsMail: 'yes', implicitMx: true });
  });

  test('null MX (single "0 .") accepts no mail even with an A record', () => {
    const v = evaluateDns(answers({ mx: found(mx('', 0)), a: found('192.0.2.1') }));
    expect(v).toMatchObject({ domainExists: 'yes', acceptsMail: 'no', hasMxRecords: false, nullMx: true, implicitMx: false, hasWebsite: true });
  });

  test('a null MX beside real MX hosts is ignored (RFC 7505 § 3)', () => {
    expect(evaluateDns(answers({ mx: found(mx('.', 0), mx('mx1.example.net', 10)) }))).toMatchObject({ acceptsMail: 'yes', hasMxRecords: true, nullMx: false });
  });

  test('no MX and no address: exists but accepts no mail', () => {
    expect(evaluateDns(answers({ mx: NODATA }))).toMatchObject({ domainExists: 'yes', acceptsMail: 'no', hasMxRecords: false, implicitMx: false });
  });

  test('NXDOMAIN everywhere: does not exist, no mail', () => {
    expect(evaluateDns({ mx: NX, a: NX, aaaa: NX, ns: NX, wwwA: NX, wwwAaaa: NX })).toMatchObject({ domainExists: 'no', acceptsMail: 'no', lookupFailed: false });
  });

  test('NXDOMAIN is conclusive even when other queries failed', () => {
    expect(evaluateDns({ mx: NX, a: TIMEOUT, aaaa: FAIL, ns: NX, wwwA: NX, wwwAaaa: NX })).toMatchObject({ domainExists: 'no', acceptsMail: 'no', lookupFailed: true });
  });

  test('only NS answers: the domain exists (NOERROR) but has no mail host', () => {
    expect(evaluateDns({ mx: NODATA, a: NODATA, aaaa: NODATA, ns: found('ns1.example.net'), wwwA: NX, wwwAaaa: NX })).toMatchObject({ domainExists: 'yes', acceptsMail: 'no' });
  });

  test('every query failed: unknown, not "no"', () => {
    const failed = { mx: FAIL, a: FAIL, aaaa: TIMEOUT, ns: FAIL, wwwA: TIMEOUT, wwwAaaa: TIMEOUT };
    expect(evaluateDns(failed)).toEqual({
      domainExists: 'unknown', acceptsMail: 'unknown', hasMxRecords: false, nullMx: false, implicitMx: false, hasWebsite: false, lookupFailed: true,
    });
  });

  test('MX failed but A answered: the domain exists, mail is unknown (no implicit MX from a failed MX lookup)', () => {
    expect(evaluateDns(answers({ mx: TIMEOUT, a: found('192.0.2.1') }))).toMatchObject({ domainExists: 'yes', acceptsMail: 'unknown', implicitMx: false, lookupFailed: true });
  });

  test('no MX and the address lookups failed: unknown', () => {
    expect(evaluateDns(answers({ mx: NODATA, a: FAIL, aaaa: NODATA }))).toMatchObject({ acceptsMail: 'unknown' });
  });

  test('MX hosts with a failed www lookup: mail verdict stands, the failure is flagged', () => {
    expect(evaluateDns(answers({ wwwA: TIMEOUT }))).toMatchObject({ acceptsMail: 'yes', hasWebsite: false, lookupFailed: true });
  });

  test('website from www.<domain> alone', () => {
    expect(evaluateDns(answers({ wwwAaaa: found('2001:db8::80') }))).toMatchObject({ hasWebsite: true });
  });
});

describe('buildVerifyResult', () => {
  const verdict = (email: string, dns: DomainDns) => buildVerifyResult(email, classifyAddress(email)!, evaluateDns(dns));

  test('a clean address with MX is valid with no reasons', () => {
    expect(verdict('jane@acme-widgets.io', answers({ a: found('192.0.2.1') }))).toEqual({
      email: 'jane@acme-widgets.io',
      normalizedEmail: 'jane@acme-widgets.io',
      valid: true,
      isDisposable: false,
      isAlias: false,
      isTypo: false,
      isPlusAddressed: false,
      isPersonalEmail: false,
      domainExists: true,
      hasWebsite: true,
      hasMxRecords: true,
      suggestion: null,
      reasons: [],
    });
  });

  test('implicit MX is valid and says so', () => {
    const r = verdict('jane@acme-widgets.io', answers({ mx: NODATA, a: found('192.0.2.1') }));
    expect(r).toMatchObject({ valid: true, hasMxRecords: false, reasons: ['implicit_mx'] });
  });

  test.each([
    ['null MX', answers({ mx: found(mx('', 0)) }), ['null_mx'], true],
    ['no MX and no address', answers({ mx: NODATA }), ['no_mx_records'], true],
    ['NXDOMAIN', { mx: NX, a: NX, aaaa: NX, ns: NX, wwwA: NX, wwwAaaa: NX }, ['domain_not_found'], false],
  ])('%s is invalid: %p', (_name, dns, reasons, exists) => {
    const r = verdict('jane@acme-widgets.io', dns);
    expect(r.valid).toBe(false);
    expect(r.reasons).toEqual(reasons);
    expect(r.domainExists).toBe(exists);
  });

  test('a failed MX lookup is inconclusive: valid false, dns_lookup_failed, no negative verdict claimed', () => {
    const r = verdict('jane@acme-widgets.io', { mx: TIMEOUT, a: TIMEOUT, aaaa: TIMEOUT, ns: TIMEOUT, wwwA: TIMEOUT, wwwAaaa: TIMEOUT });
    expect(r).toMatchObject({ valid: false, domainExists: false, hasMxRecords: false, hasWebsite: false, reasons: ['dns_lookup_failed'] });
  });

  test('a failed lookup the mail verdict does not need leaves valid true', () => {
    expect(verdict('jane@acme-widgets.io', answers({ aaaa: FAIL }))).toMatchObject({ valid: true, reasons: ['dns_lookup_failed'] });
  });

  test('a disposable domain is invalid even when it accepts mail', () => {
    expect(verdict('jane@mailinator.com', answers())).toMatchObject({ valid: false, isDisposable: true, reasons: ['disposable'] });
  });

  test('a near miss of a provider is a typo even when it accepts mail; the suggestion keeps the local part', () => {
    const r = verdict('Jane.Doe@gmial.com', answers());
    expect(r).toMatchObject({ isTypo: true, suggestion: 'Jane.Doe@gmail.com' });
    expect(r.reasons).toEqual(['disposable', 'possible_typo']);
  });

  test('a TLD guess is a typo only when the domain takes no mail', () => {
    expect(verdict('jane@acme.cmo', answers())).toMatchObject({ isTypo: false, suggestion: null, valid: true });
    expect(verdict('jane@acme.cmo', { mx: NX, a: NX, aaaa: NX, ns: NX, wwwA: NX, wwwAaaa: NX })).toMatchObject({
      isTypo: true,
      suggestion: 'jane@acme.co',
      reasons: ['domain_not_found', 'possible_typo'],
    });
    // Inconclusive DNS is not evidence either way.
    expect(verdict('jane@acme.cmo', answers({ mx: TIMEOUT }))).toMatchObject({ isTypo: false });
  });

  test('role and plus addresses are flagged but stay valid', () => {
    const r = verdict('admin+alerts@acme-widgets.io', answers());
    expect(r).toMatchObject({ valid: true, isAlias: true, isPlusAddressed: true, normalizedEmail: 'admin@acme-widgets.io', reasons: ['role_address'] });
  });

  test('invalid format: every flag false and only invalid_format', () => {
    expect(invalidFormatResult('nope')).toEqual({
      email: 'nope',
      normalizedEmail: null,
      valid: false,
      isDisposable: false,
      isAlias: false,
      isTypo: false,
      isPlusAddressed: false,
      isPersonalEmail: false,
      domainExists: false,
      hasWebsite: false,
      hasMxRecords: false,
      suggestion: null,
      reasons: ['invalid_format'],
    });
  });
});

describe('EmailVerifier cache', () => {
  const settings = { servers: [], timeoutMs: 1_000 };

  test('reuses a domain\'s answers within the TTL, shares concurrent lookups, and looks again after it', async () => {
    const calls: string[] = [];
    const verifier = new EmailVerifier(settings, { cacheTtlMs: 50, lookup: async (d) => (calls.push(d), answers()) });
    await Promise.all([verifier.verify('a@acme-widgets.io'), verifier.verify('b@ACME-widgets.io'), verifier.verify('c@acme-widgets.io')]);
    expect(calls).toEqual(['acme-widgets.io']);
    await new Promise((r) => setTimeout(r, 70));
    await verifier.verify('a@acme-widgets.io');
    expect(calls).toEqual(['acme-widgets.io', 'acme-widgets.io']);
  });

  test('answers with a failed lookup are not kept', async () => {
    let n = 0;
    const verifier = new EmailVerifier(settings, { lookup: async () => (++n === 1 ? answers({ mx: TIMEOUT }) : answers()) });
    expect((await verifier.verify('a@acme-widgets.io')).reasons).toEqual(['dns_lookup_failed']);
    await new Promise((r) => setImmediate(r));
    expect(await verifier.verify('a@acme-widgets.io')).toMatchObject({ valid: true, reasons: [] });
    expect(n).toBe(2);
  });

  test('keeps at most cacheMaxEntries domains', async () => {
    const calls: string[] = [];
    const verifier = new EmailVerifier(settings, { cacheMaxEntries: 2, lookup: async (d) => (calls.push(d), answers()) });
    // three.io evicts one.io; one.io again evicts two.io; three.io is still cached.
    for (const d of ['one.io', 'two.io', 'three.io', 'one.io', 'three.io']) await verifier.verify(`x@${d}`);
    expect(calls).toEqual(['one.io', 'two.io', 'three.io', 'one.io']);
  });

  test('an invalid address makes no lookup', async () => {
    const lookup = jest.fn(async () => answers());
    const verifier = new EmailVerifier(settings, { lookup });
    expect((await verifier.verify('jane@@acme.io')).reasons).toEqual(['invalid_format']);
    expect(lookup).not.toHaveBeenCalled();
  });
});

describe('createDomainResolver', () => {
  test('a server that never answers costs one timeout, not one per query or retry', async () => {
    const silent = dgram.createSocket('udp4');
    await new Promise<void>((r) => silent.bind(0, '127.0.0.1', r));
    const received: string[] = [];
    silent.on('message', (m) => received.push(m.toString('hex')));
    try {
      const resolver = createDomainResolver({ servers: [`127.0.0.1:${silent.address().port}`], timeoutMs: 300 });
      const started = Date.now();
      const dns = await resolver.lookup('nowhere.example');
      const elapsed = Date.now() - started;
      expect(Object.values(dns).map((l) => l.kind)).toEqual(['error', 'error', 'error', 'error', 'error', 'error']);
      expect(dns.mx).toEqual({ kind: 'error', code: 'ETIMEOUT' });
      expect(elapsed).toBeGreaterThanOrEqual(290);
      expect(elapsed).toBeLessThan(1_500);
      // The six queries went out in parallel to the configured server.
      expect(received.length).toBeGreaterThanOrEqual(6);
    } finally {
      silent.close();
    }
  });
});
