import { randomUUID } from 'node:crypto';
import { api } from '../helpers/api';
import { createTestProject, type TestProject } from '../helpers/fixtures';
import { breakName, removeName, setRecords } from '../helpers/dns';
import type { VerifyResult } from '../../domain/verify/email-verifier';

/** The response's `data`: the domain's result type (the API returns it as is). */
type VerifyData = VerifyResult;

let project: TestProject;
/** Every name this file publishes lives under its own zone; labels are chosen so the spell checker leaves them alone. */
const zone = `v${randomUUID().slice(0, 8)}.verify.test`;
const published: string[] = [];

async function publish(name: string, records: Parameters<typeof setRecords>[1]): Promise<string> {
  await setRecords(name, records);
  published.push(name);
  return name;
}

const verify = (email: unknown, key = project.secretKey) => api<{ success: boolean; data: VerifyData }>('POST', '/v1/verify', { key, body: { email } });

async function verified(email: string): Promise<VerifyData> {
  const res = await verify(email);
  expect(res.status).toBe(200);
  expect(res.body.success).toBe(true);
  return res.body.data;
}

beforeAll(async () => {
  project = await createTestProject('Verify');
});

afterAll(async () => {
  await Promise.all(published.map((name) => removeName(name)));
});

describe('POST /v1/verify: DNS', () => {
  test('a domain with MX records accepts mail: valid, no reasons; the answer has every field', async () => {
    const domain = await publish(`withmx.${zone}`, { mx: [{ exchange: `mx1.${zone}`, priority: 10 }], ns: [`ns1.${zone}`] });
    const data = await verified(`jane@${domain}`);
    expect(data).toEqual({
      email: `jane@${domain}`,
      normalizedEmail: `jane@${domain}`,
      valid: true,
      isDisposable: false,
      isAlias: false,
      isTypo: false,
      isPlusAddressed: false,
      isPersonalEmail: false,
      domainExists: true,
      hasWebsite: false,
      hasMxRecords: true,
      suggestion: null,
      reasons: [],
    });
  });

  test('no MX but an A record: implicit MX (RFC 5321), valid, and the A record counts as a website', async () => {
    const domain = await publish(`aonly.${zone}`, { a: ['192.0.2.10'] });
    const data = await verified(`jane@${domain}`);
    expect(data).toMatchObject({ valid: true, domainExists: true, hasMxRecords: false, hasWebsite: true, reasons: ['implicit_mx'] });
  });

  test('no MX but an AAAA record: implicit MX too', async () => {
    const domain = await publish(`aonly6.${zone}`, { aaaa: ['2001:db8::25'] });
    expect(await verified(`jane@${domain}`)).toMatchObject({ valid: true, hasMxRecords: false, hasWebsite: true, reasons: ['implicit_mx'] });
  });

  test('a null MX ("0 .", RFC 7505) accepts no mail even with an A record', async () => {
    const domain = await publish(`nullmx.${zone}`, { mx: [{ exchange: '.', priority: 0 }], a: ['192.0.2.11'] });
    const data = await verified(`jane@${domain}`);
    expect(data).toMatchObject({ valid: false, domainExists: true, hasMxRecords: false, hasWebsite: true, reasons: ['null_mx'] });
  });

  test('a domain that exists with neither MX nor A/AAAA accepts no mail: no_mx_records', async () => {
    const domain = await publish(`parked.${zone}`, { ns: [`ns1.${zone}`], txt: ['v=spf1 -all'] });
    const data = await verified(`jane@${domain}`);
    expect(data).toMatchObject({ valid: false, domainExists: true, hasMxRecords: false, hasWebsite: false, reasons: ['no_mx_records'] });
  });

  test('NXDOMAIN: domainExists false, domain_not_found', async () => {
    const data = await verified(`jane@gone.${zone}`);
    expect(data).toMatchObject({ valid: false, domainExists: false, hasMxRecords: false, hasWebsite: false, reasons: ['domain_not_found'] });
  });

  test('hasWebsite from www.<domain> alone (a DNS check, no HTTP)', async () => {
    const domain = await publish(`wwwonly.${zone}`, { mx: [{ exchange: `mx1.${zone}`, priority: 10 }] });
    await publish(`www.${domain}`, { a: ['192.0.2.80'] });
    expect(await verified(`jane@${domain}`)).toMatchObject({ valid: true, hasWebsite: true, hasMxRecords: true, reasons: [] });
  });

  test('SERVFAIL is not a 500: 200, inconclusive (valid false, dns_lookup_failed), not claimed missing', async () => {
    const domain = `failing.${zone}`;
    await breakName(domain, 'servfail');
    published.push(domain);
    const data = await verified(`jane@${domain}`);
    expect(data).toMatchObject({ valid: false, domainExists: false, hasMxRecords: false, reasons: ['dns_lookup_failed'] });
    expect(data.reasons).not.toContain('domain_not_found');
  });

  test('a server that never answers: the call still answers, within the DNS timeout (1 s in the test stack), inconclusive', async () => {
    const domain = `dropped.${zone}`;
    await breakName(domain, 'drop');
    published.push(domain);
    const started = Date.now();
    const data = await verified(`jane@${domain}`);
    const elapsed = Date.now() - started;
    expect(data).toMatchObject({ valid: false, domainExists: false, reasons: ['dns_lookup_failed'] });
    // Queries run in parallel under one per-lookup deadline: about 1 s, not 6 x 1 s, nor c-ares' own retries (~75 s).
    expect(elapsed).toBeGreaterThanOrEqual(900);
    expect(elapsed).toBeLessThan(4_000);
  });

  test('MX answers but www.<domain> times out: the mail verdict stands, the failed lookup is reported', async () => {
    const domain = await publish(`partial.${zone}`, { mx: [{ exchange: `mx1.${zone}`, priority: 10 }] });
    await breakName(`www.${domain}`, 'drop');
    published.push(`www.${domain}`);
    expect(await verified(`jane@${domain}`)).toMatchObject({ valid: true, hasMxRecords: true, hasWebsite: false, reasons: ['dns_lookup_failed'] });
  });
});

describe('POST /v1/verify: address checks', () => {
  let mailDomain: string;
  beforeAll(async () => {
    mailDomain = await publish(`people.${zone}`, { mx: [{ exchange: `mx1.${zone}`, priority: 10 }] });
  });

  test('plus addressing: flagged, still valid, normalizedEmail drops the tag and lowercases', async () => {
    const data = await verified(`Jane.Doe+Newsletters@${mailDomain.toUpperCase()}`);
    expect(data).toMatchObject({
      email: `Jane.Doe+Newsletters@${mailDomain.toUpperCase()}`,
      normalizedEmail: `jane.doe@${mailDomain}`,
      isPlusAddressed: true,
      isAlias: false,
      valid: true,
      reasons: [],
    });
  });

  test('a role address (admin@) is an alias: flagged with role_address, still valid', async () => {
    expect(await verified(`admin@${mailDomain}`)).toMatchObject({ isAlias: true, valid: true, reasons: ['role_address'] });
    expect(await verified(`support+billing@${mailDomain}`)).toMatchObject({ isAlias: true, isPlusAddressed: true, reasons: ['role_address'] });
    expect(await verified(`jane@${mailDomain}`)).toMatchObject({ isAlias: false, reasons: [] });
  });

  test('a disposable domain is invalid even when it accepts mail (subdomains of a listed domain too)', async () => {
    const domain = await publish(`inbox-${randomUUID().slice(0, 8)}.mailinator.com`, { mx: [{ exchange: 'mail.mailinator.com', priority: 10 }] });
    const data = await verified(`jane@${domain}`);
    expect(data).toMatchObject({ isDisposable: true, valid: false, hasMxRecords: true, domainExists: true, isPersonalEmail: false, reasons: ['disposable'] });
  });

  test('mailinator.com itself is disposable', async () => {
    const data = await verified('jane@mailinator.com');
    expect(data.isDisposable).toBe(true);
    expect(data.valid).toBe(false);
    expect(data.reasons).toContain('disposable');
  });

  test('a typo of a big provider (gmial.com) suggests the right address, keeping the local part', async () => {
    const data = await verified('Jane@gmial.com');
    expect(data).toMatchObject({ isTypo: true, suggestion: 'Jane@gmail.com', valid: false });
    expect(data.reasons).toContain('possible_typo');
  });

  test('a near miss of a provider is a typo even if the domain accepts mail (typo-squatting)', async () => {
    await publish('hotmial.com', { mx: [{ exchange: 'mx.hotmial.com', priority: 10 }] });
    const data = await verified('jane@hotmial.com');
    expect(data).toMatchObject({ isTypo: true, suggestion: 'jane@hotmail.com', hasMxRecords: true });
    expect(data.reasons).toContain('possible_typo');
  });

  test('a personal provider (gmail.com) is flagged and is not a typo', async () => {
    await publish('gmail.com', { mx: [{ exchange: 'gmail-smtp-in.l.google.com', priority: 5 }], a: ['192.0.2.50'] });
    const data = await verified('jane.doe@gmail.com');
    expect(data).toMatchObject({ isPersonalEmail: true, isTypo: false, suggestion: null, isDisposable: false, valid: true, hasMxRecords: true, hasWebsite: true, reasons: [] });
    expect((await verified(`jane@${mailDomain}`)).isPersonalEmail).toBe(false);
  });

  test.each([
    ['no @', 'jane.example.com'],
    ['two @', 'jane@@example.com'],
    ['a space', 'jane doe@example.com'],
    ['no TLD', 'jane@localhost'],
    ['an IP literal', 'jane@[192.0.2.1]'],
  ])('invalid format (%s) is 200 with valid false and only invalid_format', async (_why, email) => {
    const data = await verified(email);
    expect(data).toEqual({
      email,
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

describe('POST /v1/verify: request errors', () => {
  test('a public key is refused: 401 INVALID_API_KEY', async () => {
    const res = await verify('jane@example.com', project.publicKey);
    expect(res.status).toBe(401);
    expect(res.body).toMatchObject({ success: false, error: { code: 'INVALID_API_KEY', statusCode: 401 } });
  });

  test('no key: 401 UNAUTHORIZED', async () => {
    const res = await api('POST', '/v1/verify', { body: { email: 'jane@example.com' } });
    expect(res.status).toBe(401);
    expect(res.body.error.code).toBe('UNAUTHORIZED');
  });

  test.each([
    ['missing', {}, 'invalid_type'],
    ['a number', { email: 42 }, 'invalid_type'],
    ['null', { email: null }, 'invalid_type'],
    ['empty', { email: '   ' }, 'too_small'],
    ['too long', { email: `${'a'.repeat(1100)}@example.com` }, 'too_big'],
  ])('email %s: 422 VALIDATION_ERROR on the email field', async (_why, body, code) => {
    const res = await api('POST', '/v1/verify', { key: project.secretKey, body });
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ success: false, error: { code: 'VALIDATION_ERROR', statusCode: 422, errors: [{ field: 'email', code }] } });
    expect(res.body.error.requestId).toMatch(/^[0-9a-f-]{36}$/);
  });

  test('malformed JSON: 400 INVALID_JSON', async () => {
    const res = await api('POST', '/v1/verify', { key: project.secretKey, raw: '{"email":' });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('INVALID_JSON');
  });

  test('the OpenAPI document describes the route with its request and response schemas', async () => {
    const res = await api('GET', '/openapi.json');
    expect(res.status).toBe(200);
    const op = res.body.paths['/v1/verify'].post;
    expect(op.security).toEqual([{ secretKey: [] }]);
    expect(op.description).toMatch(/invalid_format/);
    expect(Object.keys(op.responses)).toEqual(expect.arrayContaining(['200', '401', '422']));
    expect(res.body.components.schemas.VerifyResult.required).toEqual(
      expect.arrayContaining(['email', 'valid', 'isDisposable', 'isAlias', 'isTypo', 'isPlusAddressed', 'isPersonalEmail', 'domainExists', 'hasWebsite', 'hasMxRecords', 'reasons']),
    );
  });
});
