import { createPublicKey, createSign, createVerify } from 'node:crypto';
import { checkDomainName } from '../../domain/domains/hostname';
import { SecretBox, dkimKeyContext } from '../../domain/domains/secret-box';
import { dkimRecordMatches, generateDkimKeyPair, parseDkimTags } from '../../domain/domains/dkim';
import {
  buildDnsRecords,
  decideDomainState,
  decideReturnPath,
  evaluateRecord,
  returnPathState,
  withReturnPathRecords,
  type DomainRecord,
  type DomainState,
} from '../../domain/domains/dns-records';
import { loadConfig, parseDuration } from '../../domain/config';

describe('checkDomainName', () => {
  test.each([
    ['example.com', 'example.com'],
    ['Mail.Example.COM', 'mail.example.com'],
    ['  example.com  ', 'example.com'],
    ['example.com.', 'example.com'],
    ['a-b.example.co.uk', 'a-b.example.co.uk'],
    ['xn--bcher-kva.de', 'xn--bcher-kva.de'],
    ['bücher.de', 'xn--bcher-kva.de'],
    ['123.example.com', '123.example.com'],
  ])('accepts %p as %p', (input, name) => expect(checkDomainName(input)).toEqual({ ok: true, name }));

  test.each([
    ['', /empty/],
    ['localhost', /two labels/],
    ['com', /two labels/],
    ['1.2.3.4', /IP address/],
    ['[::1]', /IP address/],
    ['2001:db8::1', /IP address/],
    ['example.com/path', /bare domain/],
    ['https://example.com', /bare domain/],
    ['example.com:25', /bare domain/],
    ['user@example.com', /bare domain/],
    ['*.example.com', /bare domain/],
    ['_dmarc.example.com', /bare domain/],
    ['exa mple.com', /bare domain/],
    ['example..com', /empty label/],
    ['.example.com', /empty label/],
    ['example.com..', /empty label/],
    ['-example.com', /invalid label/],
    ['example-.com', /invalid label/],
    ['example.c', /top-level/],
    ['example.123', /top-level/],
    ['example.com\u0000', /invalid|bare/],
    [`${'a'.repeat(64)}.com`, /invalid label/],
    [`${'a.'.repeat(127)}com`, /longer than 253/],
  ])('refuses %p', (input, reason) => {
    const res = checkDomainName(input);
    expect(res.ok).toBe(false);
    if (!res.ok) expect(res.reason).toMatch(reason);
  });
});

describe('SecretBox (AES-256-GCM, key from APP_SECRET)', () => {
  const box = new SecretBox('a-test-app-secret-that-is-long-enough-0123');

  test('round trip; each sealing uses a new IV', () => {
    const a = box.encrypt('-----BEGIN PRIVATE KEY-----\nabc\n', dkimKeyContext('d1'));
    const b = box.encrypt('-----BEGIN PRIVATE KEY-----\nabc\n', dkimKeyContext('d1'));
    expect(a).toMatch(/^v1\.[\w-]+\.[\w-]+\.[\w-]+$/);
    expect(a).not.toBe(b);
    expect(a).not.toContain('PRIVATE KEY');
    expect(box.decrypt(a, dkimKeyContext('d1'))).toBe('-----BEGIN PRIVATE KEY-----\nabc\n');
    expect(box.decrypt(b, dkimKeyContext('d1'))).toBe('-----BEGIN PRIVATE KEY-----\nabc\n');
  });

  test('another APP_SECRET, another context (row) or an altered ciphertext does not decrypt', () => {
    const sealed = box.encrypt('secret', dkimKeyContext('d1'));
    expect(() => new SecretBox('another-app-secret-that-is-long-enough-999').decrypt(sealed, dkimKeyContext('d1'))).toThrow(/cannot be decrypted/);
    expect(() => box.decrypt(sealed, dkimKeyContext('d2'))).toThrow(/cannot be decrypted/);
    const parts = sealed.split('.');
    const ct = Buffer.from(parts[3]!, 'base64url');
    ct[0] = ct[0]! ^ 1;
    expect(() => box.decrypt([parts[0], parts[1], parts[2], ct.toString('base64url')].join('.'), dkimKeyContext('d1'))).toThrow(/cannot be decrypted/);
    expect(() => box.decrypt('plain text', dkimKeyContext('d1'))).toThrow(/unknown format/);
  });
});

const returnPath = { label: 'bounces', mxHost: 'mx.mailwright.test', spfInclude: 'spf.relay.test' };

describe('DKIM keys and records', () => {
  test('a generated key is 2048-bit RSA; the record value carries its public key; it verifies signatures of the private key', async () => {
    const keys = await generateDkimKeyPair();
    expect(keys.selector).toMatch(/^mw-[0-9a-f]{8}$/);
    const pub = createPublicKey({ key: Buffer.from(keys.publicKeyBase64, 'base64'), format: 'der', type: 'spki' });
    expect(pub.asymmetricKeyType).toBe('rsa');
    expect(pub.asymmetricKeyDetails?.modulusLength).toBe(2048);
    const signature = createSign('sha256').update('hello').sign(keys.privateKeyPem);
    expect(createVerify('sha256').update('hello').verify(pub, signature)).toBe(true);

    const [, dkim] = buildDnsRecords({ domain: 'example.com', dkimSelector: keys.selector, dkimPublicKeyBase64: keys.publicKeyBase64, verificationToken: 't', spfInclude: 's', returnPath });
    expect(dkim!.value).toBe(`v=DKIM1; k=rsa; p=${keys.publicKeyBase64}`);
  });

  test('DKIM_KEY_BITS=1024: a 1024-bit key, whose record fits one 255-character TXT string', async () => {
    const keys = await generateDkimKeyPair(1024);
    const pub = createPublicKey({ key: Buffer.from(keys.publicKeyBase64, 'base64'), format: 'der', type: 'spki' });
    expect(pub.asymmetricKeyDetails?.modulusLength).toBe(1024);
    const signature = createSign('sha256').update('hello').sign(keys.privateKeyPem);
    expect(createVerify('sha256').update('hello').verify(pub, signature)).toBe(true);
    const [, dkim] = buildDnsRecords({ domain: 'example.com', dkimSelector: keys.selector, dkimPublicKeyBase64: keys.publicKeyBase64, verificationToken: 't', spfInclude: 's', returnPath });
    expect(dkim!.value.length).toBeLessThanOrEqual(255);
  });

  test("the record builder: ownership and DKIM required; SPF, DMARC and the bounce host's MX and SPF recommended", () => {
    const records = buildDnsRecords({
      domain: 'mail.example.com',
      dkimSelector: 'mw-0123abcd',
      dkimPublicKeyBase64: 'MIIBIjAN',
      verificationToken: 'mailwright-verification=tok',
      spfInclude: 'spf.relay.test',
      returnPath,
    });
    expect(records).toEqual([
      { type: 'TXT', purpose: 'OWNERSHIP', required: true, name: '_mailwright.mail.example.com', value: 'mailwright-verification=tok', status: 'PENDING', lastCheckedAt: null },
      { type: 'TXT', purpose: 'DKIM', required: true, name: 'mw-0123abcd._domainkey.mail.example.com', value: 'v=DKIM1; k=rsa; p=MIIBIjAN', status: 'PENDING', lastCheckedAt: null },
      { type: 'TXT', purpose: 'SPF', required: false, name: 'mail.example.com', value: 'v=spf1 include:spf.relay.test ~all', status: 'PENDING', lastCheckedAt: null },
      { type: 'TXT', purpose: 'DMARC', required: false, name: '_dmarc.mail.example.com', value: 'v=DMARC1; p=none;', status: 'PENDING', lastCheckedAt: null },
      { type: 'MX', purpose: 'RETURN_PATH_MX', required: false, name: 'bounces.mail.example.com', value: '10 mx.mailwright.test', status: 'PENDING', lastCheckedAt: null },
      { type: 'TXT', purpose: 'RETURN_PATH_SPF', required: false, name: 'bounces.mail.example.com', value: 'v=spf1 include:spf.relay.test ~all', status: 'PENDING', lastCheckedAt: null },
    ]);
  });

  test('DKIM record matching ignores tag order, spacing and extra tags, but not another key or type', () => {
    expect(parseDkimTags('v=DKIM1; k=rsa; p=AB CD')).toEqual(new Map([['v', 'DKIM1'], ['k', 'rsa'], ['p', 'ABCD']]));
    expect(dkimRecordMatches('v=DKIM1; k=rsa; p=ABCD', 'ABCD')).toBe(true);
    expect(dkimRecordMatches('p=AB\tCD ; k=rsa; t=s; ', 'ABCD')).toBe(true);
    expect(dkimRecordMatches('v=DKIM1; p=ABCE', 'ABCD')).toBe(false);
    expect(dkimRecordMatches('v=DKIM1; k=ed25519; p=ABCD', 'ABCD')).toBe(false);
    expect(dkimRecordMatches('v=DKIM2; p=ABCD', 'ABCD')).toBe(false);
    expect(dkimRecordMatches('garbage', 'ABCD')).toBe(false);
  });
});

describe('evaluateRecord', () => {
  const at = new Date('2026-11-21T12:00:00Z');
  const [ownership, dkim, spf, dmarc, returnPathMx, returnPathSpf] = buildDnsRecords({
    domain: 'example.com',
    dkimSelector: 'mw-1',
    dkimPublicKeyBase64: 'KEY',
    verificationToken: 'mailwright-verification=abc',
    spfInclude: 'spf.mailwright.local',
    returnPath,
  }) as [DomainRecord, DomainRecord, DomainRecord, DomainRecord, DomainRecord, DomainRecord];
  const found = (...values: string[]) => ({ kind: 'found' as const, values });

  test('ownership: the exact token among other TXT records', () => {
    expect(evaluateRecord(ownership, found('other', 'mailwright-verification=abc'), at)).toMatchObject({ status: 'VERIFIED', lastCheckedAt: at.toISOString() });
    expect(evaluateRecord(ownership, found('mailwright-verification=abd'), at)).toMatchObject({ status: 'MISMATCH', found: ['mailwright-verification=abd'] });
    expect(evaluateRecord(ownership, { kind: 'none' }, at)).toMatchObject({ status: 'NOT_FOUND' });
    expect(evaluateRecord(ownership, { kind: 'error', code: 'ETIMEOUT' }, at)).toMatchObject({ status: 'LOOKUP_FAILED', error: 'ETIMEOUT' });
  });

  test('a new result drops the details of the previous one', () => {
    const mismatch = evaluateRecord(ownership, found('x'), at);
    expect(evaluateRecord(mismatch, found('mailwright-verification=abc'), at)).not.toHaveProperty('found');
  });

  test('DKIM: the published key must be ours', () => {
    expect(evaluateRecord(dkim, found('k=rsa; p=KEY'), at).status).toBe('VERIFIED');
    expect(evaluateRecord(dkim, found('v=DKIM1; k=rsa; p=OTHER'), at).status).toBe('MISMATCH');
  });

  test('SPF: one SPF record that includes ours; two SPF records are an error', () => {
    expect(evaluateRecord(spf, found('google-site-verification=x', 'v=spf1 include:_spf.google.com include:spf.mailwright.local -all'), at).status).toBe('VERIFIED');
    expect(evaluateRecord(spf, found('v=spf1 +include:SPF.Mailwright.Local ~all'), at).status).toBe('VERIFIED');
    expect(evaluateRecord(spf, found('v=spf1 include:_spf.google.com ~all'), at).status).toBe('MISMATCH');
    expect(evaluateRecord(spf, found('v=spf1 include:spf.mailwright.local ~all', 'v=spf1 -all'), at).status).toBe('MISMATCH');
    expect(evaluateRecord(spf, found('some-other-token'), at).status).toBe('NOT_FOUND');
  });

  test("the bounce host's MX: one exchange must be INBOUND_MX_HOST, in any case, with or without the root's dot, at any preference", () => {
    expect(evaluateRecord(returnPathMx, found('10 mx.mailwright.test'), at).status).toBe('VERIFIED');
    expect(evaluateRecord(returnPathMx, found('5 backup.example.net', '20 MX.Mailwright.Test.'), at).status).toBe('VERIFIED');
    expect(evaluateRecord(returnPathMx, found('10 mx.example.net'), at)).toMatchObject({ status: 'MISMATCH', found: ['10 mx.example.net'] });
    expect(evaluateRecord(returnPathMx, found('10 mx.mailwright.test.evil.example'), at).status).toBe('MISMATCH');
    expect(evaluateRecord(returnPathMx, found('0 .'), at).status).toBe('MISMATCH'); // a null MX (RFC 7505) takes no mail
    expect(evaluateRecord(returnPathMx, { kind: 'none' }, at).status).toBe('NOT_FOUND');
    expect(evaluateRecord(returnPathMx, { kind: 'error', code: 'ESERVFAIL' }, at)).toMatchObject({ status: 'LOOKUP_FAILED', error: 'ESERVFAIL' });
  });

  test("the bounce host's SPF: like the domain's, one SPF record that includes SPF_INCLUDE", () => {
    expect(evaluateRecord(returnPathSpf, found('v=spf1 include:spf.relay.test ~all'), at).status).toBe('VERIFIED');
    expect(evaluateRecord(returnPathSpf, found('v=spf1 include:spf.mailwright.local ~all'), at).status).toBe('MISMATCH');
    expect(evaluateRecord(returnPathSpf, found('v=spf1 include:spf.relay.test ~all', 'v=spf1 -all'), at).status).toBe('MISMATCH');
    expect(evaluateRecord(returnPathSpf, found('hello'), at).status).toBe('NOT_FOUND');
  });

  test('DMARC: any one DMARC record (the policy is the owner\'s choice)', () => {
    expect(evaluateRecord(dmarc, found('v=DMARC1; p=reject; rua=mailto:d@example.com'), at).status).toBe('VERIFIED');
    expect(evaluateRecord(dmarc, found('v=DMARC1; p=none', 'v=DMARC1; p=reject'), at).status).toBe('MISMATCH');
    expect(evaluateRecord(dmarc, found('hello'), at).status).toBe('NOT_FOUND');
  });
});

describe('decideDomainState', () => {
  const t0 = new Date('2026-11-21T00:00:00Z');
  const later = (ms: number) => new Date(t0.getTime() + ms);
  const HOUR = 3_600_000;
  const rec = (purpose: DomainRecord['purpose'], status: DomainRecord['status'], required = purpose === 'OWNERSHIP' || purpose === 'DKIM'): DomainRecord => ({
    type: 'TXT',
    name: `${purpose.toLowerCase()}.example.com`,
    value: 'v',
    purpose,
    required,
    status,
    lastCheckedAt: null,
  });
  const pending: DomainState = { status: 'PENDING', verifiedAt: null, failingSince: null, statusReason: null };
  const verified: DomainState = { status: 'VERIFIED', verifiedAt: t0, failingSince: null, statusReason: null };

  test('PENDING becomes VERIFIED when ownership and DKIM are verified, whatever SPF and DMARC say', () => {
    const next = decideDomainState(pending, [rec('OWNERSHIP', 'VERIFIED'), rec('DKIM', 'VERIFIED'), rec('SPF', 'NOT_FOUND'), rec('DMARC', 'MISMATCH')], later(1), HOUR);
    expect(next).toEqual({ status: 'VERIFIED', verifiedAt: later(1), failingSince: null, statusReason: null });
  });

  test('PENDING stays PENDING while a required record is missing, and says which', () => {
    const next = decideDomainState(pending, [rec('OWNERSHIP', 'VERIFIED'), rec('DKIM', 'NOT_FOUND')], t0, HOUR);
    expect(next.status).toBe('PENDING');
    expect(next.statusReason).toMatch(/DKIM TXT at dkim\.example\.com not found/);
    expect(next.statusReason).not.toMatch(/OWNERSHIP/);
    expect(decideDomainState(pending, [rec('OWNERSHIP', 'VERIFIED'), rec('DKIM', 'LOOKUP_FAILED')], t0, HOUR).status).toBe('PENDING');
  });

  test('a verified domain that loses a record stays VERIFIED during the grace period, with the reason and the deadline', () => {
    const first = decideDomainState(verified, [rec('OWNERSHIP', 'VERIFIED'), rec('DKIM', 'NOT_FOUND')], later(HOUR), 72 * HOUR);
    expect(first).toMatchObject({ status: 'VERIFIED', verifiedAt: t0, failingSince: later(HOUR) });
    expect(first.statusReason).toContain(later(73 * HOUR).toISOString());
    const second = decideDomainState(first, [rec('OWNERSHIP', 'VERIFIED'), rec('DKIM', 'MISMATCH')], later(50 * HOUR), 72 * HOUR);
    expect(second).toMatchObject({ status: 'VERIFIED', failingSince: later(HOUR) });
    const demoted = decideDomainState(second, [rec('OWNERSHIP', 'VERIFIED'), rec('DKIM', 'NOT_FOUND')], later(73 * HOUR), 72 * HOUR);
    expect(demoted).toMatchObject({ status: 'PENDING', verifiedAt: null, failingSince: null });
    expect(demoted.statusReason).toMatch(/No longer verified/);
  });

  test('restoring the record in time clears the warning and keeps the original verifiedAt', () => {
    const failing = { ...verified, failingSince: later(HOUR), statusReason: 'x' };
    expect(decideDomainState(failing, [rec('OWNERSHIP', 'VERIFIED'), rec('DKIM', 'VERIFIED')], later(2 * HOUR), 72 * HOUR)).toEqual(verified);
  });

  test('a zero grace period demotes at the first check that finds a record missing', () => {
    expect(decideDomainState(verified, [rec('OWNERSHIP', 'NOT_FOUND'), rec('DKIM', 'VERIFIED')], later(1), 0).status).toBe('PENDING');
  });

  test('failed lookups are inconclusive: a verified domain keeps its state and its failingSince', () => {
    const failing = { ...verified, failingSince: later(HOUR), statusReason: null };
    const next = decideDomainState(failing, [rec('OWNERSHIP', 'VERIFIED'), rec('DKIM', 'LOOKUP_FAILED')], later(100 * HOUR), 72 * HOUR);
    expect(next).toMatchObject({ status: 'VERIFIED', verifiedAt: t0, failingSince: later(HOUR) });
    expect(next.statusReason).toMatch(/inconclusive/);
  });

  test('a lost recommended record changes nothing', () => {
    expect(decideDomainState(verified, [rec('OWNERSHIP', 'VERIFIED'), rec('DKIM', 'VERIFIED'), rec('SPF', 'NOT_FOUND')], later(1), 0)).toEqual(verified);
  });
});

describe('the return path (bounce host records and state)', () => {
  const base = buildDnsRecords({ domain: 'example.com', dkimSelector: 'mw-1', dkimPublicKeyBase64: 'KEY', verificationToken: 'tok', spfInclude: 'spf.relay.test', returnPath });
  const stored = base.slice(0, 4).map((r) => ({ ...r, status: 'VERIFIED' as const, lastCheckedAt: '2026-11-21T00:00:00.000Z' }));
  const mxOf = (records: DomainRecord[]) => records.find((r) => r.purpose === 'RETURN_PATH_MX')!;
  const withMx = (status: DomainRecord['status'], extra: Partial<DomainRecord> = {}) =>
    withReturnPathRecords(stored, 'example.com', returnPath).map((r) => (r.purpose === 'RETURN_PATH_MX' ? { ...r, status, ...extra } : r));

  test('a domain stored before return paths gets the two records, PENDING, after its own, which keep their statuses', () => {
    const records = withReturnPathRecords(stored, 'example.com', returnPath);
    expect(records.slice(0, 4)).toEqual(stored);
    expect(records.slice(4)).toEqual(base.slice(4));
  });

  test('records that match the configuration keep their status; a changed INBOUND_MX_HOST or RETURN_PATH_LABEL replaces them, PENDING', () => {
    const checked = withMx('VERIFIED');
    expect(withReturnPathRecords(checked, 'example.com', returnPath)).toEqual(checked);
    const moved = withReturnPathRecords(checked, 'example.com', { ...returnPath, mxHost: 'inbound.example.net' });
    expect(mxOf(moved)).toMatchObject({ value: '10 inbound.example.net', status: 'PENDING', name: 'bounces.example.com' });
    const relabelled = withReturnPathRecords(checked, 'example.com', { ...returnPath, label: 'rp' });
    expect(relabelled.filter((r) => r.name === 'rp.example.com').map((r) => [r.purpose, r.status])).toEqual([['RETURN_PATH_MX', 'PENDING'], ['RETURN_PATH_SPF', 'PENDING']]);
    expect(relabelled).toHaveLength(6);
  });

  test('a domain without records (added without a key, like the dev seed) gets none', () => {
    expect(withReturnPathRecords([], 'mailwright.test', returnPath)).toEqual([]);
  });

  test('ACTIVE once the MX is verified on a VERIFIED domain; a lost or wrong MX turns it off at once; SPF does not matter', () => {
    expect(decideReturnPath(null, 'VERIFIED', withMx('VERIFIED'))).toBe('bounces.example.com');
    expect(decideReturnPath(null, 'PENDING', withMx('VERIFIED'))).toBeNull();
    expect(decideReturnPath('bounces.example.com', 'VERIFIED', withMx('NOT_FOUND'))).toBeNull();
    expect(decideReturnPath('bounces.example.com', 'VERIFIED', withMx('MISMATCH'))).toBeNull();
    expect(decideReturnPath('bounces.example.com', 'PENDING', withMx('VERIFIED'))).toBeNull(); // demoted
    expect(decideReturnPath(null, 'VERIFIED', stored)).toBeNull();
  });

  test('a failed MX lookup is inconclusive: the previous state stays (for the same host only)', () => {
    expect(decideReturnPath('bounces.example.com', 'VERIFIED', withMx('LOOKUP_FAILED'))).toBe('bounces.example.com');
    expect(decideReturnPath(null, 'VERIFIED', withMx('LOOKUP_FAILED'))).toBeNull();
    expect(decideReturnPath('old.example.com', 'VERIFIED', withMx('LOOKUP_FAILED'))).toBeNull();
  });

  test('the state the API shows: the host, the envelope sender as a pattern, and why it is not configured', () => {
    const domain = { name: 'example.com', status: 'VERIFIED' as const, returnPathHost: null };
    expect(returnPathState({ ...domain, returnPathHost: 'bounces.example.com', records: withMx('VERIFIED') }, returnPath)).toEqual({
      host: 'bounces.example.com',
      status: 'ACTIVE',
      mailFrom: 'b-<token>@bounces.example.com',
      reason: null,
    });
    const off = returnPathState({ ...domain, records: withMx('NOT_FOUND') }, returnPath);
    expect(off).toMatchObject({ host: 'bounces.example.com', status: 'NOT_CONFIGURED', mailFrom: '<From address>' });
    expect(off.reason).toBe('No MX record at bounces.example.com: publish MX 10 mx.mailwright.test at bounces.example.com.');
    expect(returnPathState({ ...domain, records: withMx('MISMATCH') }, returnPath).reason).toMatch(/do not name mx\.mailwright\.test/);
    expect(returnPathState({ ...domain, records: withMx('LOOKUP_FAILED', { error: 'ETIMEOUT' }) }, returnPath).reason).toMatch(/failed \(ETIMEOUT\)/);
    expect(returnPathState({ ...domain, records: withMx('PENDING') }, returnPath).reason).toMatch(/not been checked yet/);
    expect(returnPathState({ ...domain, status: 'PENDING', records: withMx('VERIFIED') }, returnPath).reason).toMatch(/not verified yet/);
    expect(returnPathState({ ...domain, records: [] }, returnPath).reason).toMatch(/no DNS records/);
  });
});

describe('configuration of sender domains', () => {
  const base = { DATABASE_URL: 'postgres://x' };

  test('durations need a unit', () => {
    expect(parseDuration('2s')).toBe(2_000);
    expect(parseDuration('5m')).toBe(300_000);
    expect(parseDuration('6h')).toBe(21_600_000);
    expect(parseDuration('1.5s')).toBe(1_500);
    expect(parseDuration('250ms')).toBe(250);
    expect(parseDuration('300')).toBeUndefined();
    expect(parseDuration('5 minutes')).toBeUndefined();
  });

  test('defaults: system resolver, 2048-bit DKIM keys, 5 min checks, 6 h re-checks, 72 h grace, a fixed development APP_SECRET', () => {
    const cfg = loadConfig(base);
    expect(cfg.domains).toEqual({
      dnsServers: [],
      dnsTimeoutMs: 5_000,
      spfInclude: 'spf.mailwright.local',
      dkimKeyBits: 2048,
      checkIntervalMs: 300_000,
      recheckIntervalMs: 21_600_000,
      demoteAfterMs: 259_200_000,
    });
    expect(cfg.appSecret.length).toBeGreaterThanOrEqual(32);
  });

  test('DNS_SERVERS takes IPs with optional ports; a host name or a bad port is refused', () => {
    expect(loadConfig({ ...base, DNS_SERVERS: '127.0.0.1:5300, 1.1.1.1,[::1]:53' }).domains.dnsServers).toEqual(['127.0.0.1:5300', '1.1.1.1', '[::1]:53']);
    expect(() => loadConfig({ ...base, DNS_SERVERS: 'dns.example.com:53' })).toThrow(/DNS_SERVERS/);
    expect(() => loadConfig({ ...base, DNS_SERVERS: '127.0.0.1:99999' })).toThrow(/DNS_SERVERS/);
    expect(() => loadConfig({ ...base, DOMAIN_CHECK_INTERVAL: '5' })).toThrow(/DOMAIN_CHECK_INTERVAL/);
  });

  test('DKIM_KEY_BITS is 1024 or 2048', () => {
    expect(loadConfig({ ...base, DKIM_KEY_BITS: '1024' }).domains.dkimKeyBits).toBe(1024);
    expect(() => loadConfig({ ...base, DKIM_KEY_BITS: '4096' })).toThrow(/DKIM_KEY_BITS/);
    expect(() => loadConfig({ ...base, DKIM_KEY_BITS: '512' })).toThrow(/DKIM_KEY_BITS/);
  });

  test('production requires APP_SECRET', () => {
    const prod = { ...base, NODE_ENV: 'production', JWT_SECRET: 'x'.repeat(32), PUBLIC_URL: 'https://mail.example.com' };
    expect(() => loadConfig(prod)).toThrow(/APP_SECRET: is required in production/);
    expect(loadConfig({ ...prod, APP_SECRET: 'y'.repeat(32) }).appSecret).toBe('y'.repeat(32));
  });
});
