import { createPublicKey, randomUUID } from 'node:crypto';
import { Connection, Client, WorkflowNotFoundError } from '@temporalio/client';
import { dkimVerify } from 'mailauth';
import { api } from '../helpers/api';
import { maybeRecordHistory } from '../helpers/histories';
import { closeDb, db } from '../helpers/db';
import { addVerifiedDomain, createTestProject, type TestProject } from '../helpers/fixtures';
import { messagesTo, waitForMail } from '../helpers/mailbox';
import { breakName, mailauthResolver, publishRecords, removeName, setTxt } from '../helpers/dns';
import { stackEnv } from '../stack-env';

interface DnsRecord {
  type: string;
  name: string;
  value: string;
  purpose: 'OWNERSHIP' | 'DKIM' | 'SPF' | 'DMARC' | 'RETURN_PATH_MX' | 'RETURN_PATH_SPF';
  required: boolean;
  status: string;
  lastCheckedAt: string | null;
  found?: string[];
  error?: string;
}
interface DomainBody {
  id: string;
  projectId: string;
  name: string;
  status: 'PENDING' | 'VERIFIED';
  statusReason: string | null;
  records: DnsRecord[];
  dkimSelector: string | null;
  verifiedAt: string | null;
  lastCheckedAt: string | null;
  failingSince: string | null;
  returnPath: { host: string; status: 'ACTIVE' | 'NOT_CONFIGURED'; mailFrom: string; reason: string | null };
}

let project: TestProject;
let other: TestProject;
let connection: Connection;
let temporal: Client;
const added: { id: string; key: string }[] = [];

beforeAll(async () => {
  [project, other] = await Promise.all([createTestProject('Domains'), createTestProject('Other')]);
  connection = await Connection.connect({ address: stackEnv().temporalAddress });
  temporal = new Client({ connection });
});

afterAll(async () => {
  // End every verification loop this file started, so they do not keep checking during later test files.
  await Promise.all(added.map((d) => api('DELETE', `/domains/${d.id}`, { key: d.key })));
  await connection?.close();
  await closeDb();
});

const name = () => `d${randomUUID().slice(0, 8)}.example.test`;
const rcpt = () => `rcpt-${randomUUID().slice(0, 8)}@example.com`;
const record = (d: DomainBody, purpose: DnsRecord['purpose']) => d.records.find((r) => r.purpose === purpose)!;

async function addDomain(domain: string, p: TestProject = project): Promise<DomainBody> {
  const res = await api<DomainBody>('POST', '/domains', { key: p.secretKey, body: { domain } });
  if (res.status !== 201) throw new Error(`POST /domains ${domain}: ${res.status} ${res.text}`);
  added.push({ id: res.body.id, key: p.secretKey });
  return res.body;
}

const verify = (id: string, p: TestProject = project) => api<DomainBody>('GET', `/domains/${id}/verify`, { key: p.secretKey });

async function listed(id: string, p: TestProject = project): Promise<DomainBody | undefined> {
  const res = await api<DomainBody[]>('GET', `/domains/project/${p.projectId}`, { key: p.secretKey });
  expect(res.status).toBe(200);
  return res.body.find((d) => d.id === id);
}

/** Polls until `pick` returns something truthy. */
async function eventually<T>(what: string, pick: () => Promise<T | undefined | false>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await pick();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** A domain of `project` whose records are published and that a forced check verified. */
async function verifiedDomain(): Promise<DomainBody> {
  const domain = await addDomain(name());
  await publishRecords(domain.records);
  const res = await verify(domain.id);
  expect(res.status).toBe(200);
  expect(res.body.status).toBe('VERIFIED');
  return res.body;
}

const send = (from: string, to: string) =>
  api('POST', '/v1/send', { key: project.secretKey, body: { to, from, subject: 'Signed?', body: '<p>Hello from a verified domain</p>' } });

async function rawMessage(to: string): Promise<Buffer> {
  await waitForMail(to);
  const [summary] = await messagesTo(to);
  const res = await fetch(`${stackEnv().mailboxUrl}/messages/${summary!.id}/raw`);
  return Buffer.from(await res.arrayBuffer());
}

describe('POST /domains', () => {
  test("adds the domain PENDING with the DNS records to create: ownership token, DKIM key, SPF, DMARC, the bounce host's MX and SPF", async () => {
    const domain = name();
    const res = await api<DomainBody>('POST', '/domains', { key: project.secretKey, body: { domain: `  ${domain.toUpperCase()}. ` } });
    expect(res.status).toBe(201);
    added.push({ id: res.body.id, key: project.secretKey });
    const body = res.body;
    expect(body).toMatchObject({ projectId: project.projectId, name: domain, status: 'PENDING', verifiedAt: null, failingSince: null });
    expect(body.records.map((r) => [r.purpose, r.type, r.name, r.required])).toEqual([
      ['OWNERSHIP', 'TXT', `_mailwright.${domain}`, true],
      ['DKIM', 'TXT', `${body.dkimSelector}._domainkey.${domain}`, true],
      ['SPF', 'TXT', domain, false],
      ['DMARC', 'TXT', `_dmarc.${domain}`, false],
      ['RETURN_PATH_MX', 'MX', `bounces.${domain}`, false],
      ['RETURN_PATH_SPF', 'TXT', `bounces.${domain}`, false],
    ]);
    expect(body.dkimSelector).toMatch(/^mw-[0-9a-f]{8}$/);
    expect(record(body, 'OWNERSHIP').value).toMatch(/^mailwright-verification=[\w-]{20,}$/);
    expect(record(body, 'SPF').value).toBe('v=spf1 include:spf.mailwright.local ~all');
    expect(record(body, 'DMARC').value).toMatch(/^v=DMARC1; p=none;?$/);
    expect(record(body, 'RETURN_PATH_MX').value).toBe('10 mx.mailwright.local'); // INBOUND_MX_HOST's default
    expect(record(body, 'RETURN_PATH_SPF').value).toBe('v=spf1 include:spf.mailwright.local ~all');
    expect(body.returnPath).toEqual({ host: `bounces.${domain}`, status: 'NOT_CONFIGURED', mailFrom: '<From address>', reason: 'The domain is not verified yet.' });
    const dkim = /^v=DKIM1; k=rsa; p=([A-Za-z0-9+/=]+)$/.exec(record(body, 'DKIM').value);
    expect(dkim).not.toBeNull();
    const key = createPublicKey({ key: Buffer.from(dkim![1]!, 'base64'), format: 'der', type: 'spki' });
    expect(key.asymmetricKeyDetails?.modulusLength).toBe(2048); // DKIM_KEY_BITS' default (1024: test/unit/domains.test.ts)

    // The private key is stored sealed (AES-256-GCM) and never shown.
    expect(res.text).not.toMatch(/PRIVATE KEY|privateKey/);
    const { rows } = await db().query('select dkim_private_key from domains where id = $1', [body.id]);
    expect(rows[0].dkim_private_key).toMatch(/^v1\.[\w-]+\.[\w-]+\.[\w-]+$/);
    expect(rows[0].dkim_private_key).not.toContain('BEGIN');
  });

  test('starts the verification workflow domain-verification/<id> with the ProjectId and DomainId search attributes', async () => {
    const domain = await addDomain(name());
    const desc = await temporal.workflow.getHandle(`domain-verification/${domain.id}`).describe();
    expect(desc.type).toBe('domainVerification');
    expect(desc.status.name).toBe('RUNNING');
    expect(desc.searchAttributes.ProjectId).toEqual([project.projectId]);
    expect(desc.searchAttributes.DomainId).toEqual([domain.id]);
  });

  test.each([
    ['an IP address', '192.168.1.10'],
    ['an IPv6 address', '[2001:db8::1]'],
    ['a single label', 'localhost'],
    ['a URL', 'https://example.com/'],
    ['trailing junk', 'example.com/evil'],
    ['a port', 'example.com:25'],
    ['an address', 'me@example.com'],
    ['a wildcard', '*.example.com'],
    ['an empty label', 'example..com'],
    ['a numeric TLD', 'example.123'],
    ['an empty string', ''],
  ])('%s is refused with 422 VALIDATION_ERROR (invalid_domain)', async (_what, domain) => {
    const res = await api('POST', '/domains', { key: project.secretKey, body: { domain } });
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ success: false, error: { code: 'VALIDATION_ERROR', statusCode: 422 } });
    expect(res.body.error.errors).toEqual([{ field: 'domain', code: 'invalid_domain', message: expect.any(String) }]);
  });

  test('a missing or non-string domain is a 422, a malformed body a 400', async () => {
    const missing = await api('POST', '/domains', { key: project.secretKey, body: {} });
    expect(missing.status).toBe(422);
    expect(missing.body.error.errors[0].field).toBe('domain');
    const number = await api('POST', '/domains', { key: project.secretKey, body: { domain: 42 } });
    expect(number.status).toBe(422);
    const broken = await api('POST', '/domains', { key: project.secretKey, raw: '{"domain":' });
    expect(broken.status).toBe(400);
    expect(broken.body.error.code).toBe('INVALID_JSON');
  });

  test('the same domain twice in a project is 409 DOMAIN_EXISTS, naming the existing id', async () => {
    const domain = await addDomain(name());
    const again = await api('POST', '/domains', { key: project.secretKey, body: { domain: domain.name.toUpperCase() } });
    expect(again.status).toBe(409);
    expect(again.body.error).toMatchObject({ code: 'DOMAIN_EXISTS', statusCode: 409 });
    expect(again.body.error.suggestion).toContain(domain.id);
  });

  test('a domain verified by another project is 409 DOMAIN_TAKEN; one pending elsewhere can be added', async () => {
    const taken = name();
    await addVerifiedDomain(other.projectId, taken);
    const res = await api('POST', '/domains', { key: project.secretKey, body: { domain: taken } });
    expect(res.status).toBe(409);
    expect(res.body.error).toMatchObject({ code: 'DOMAIN_TAKEN', message: expect.stringContaining('another project') });
    expect(JSON.stringify(res.body)).not.toContain(other.projectId);

    const pendingElsewhere = await addDomain(name(), other);
    expect((await addDomain(pendingElsewhere.name)).status).toBe('PENDING');
  });

  test('two projects prove the same records: only the first is verified, the second stays PENDING and says why', async () => {
    const first = await addDomain(name());
    const second = await addDomain(first.name, other);
    await publishRecords(first.records);
    expect((await verify(first.id)).body.status).toBe('VERIFIED');
    // Both ownership tokens side by side at _mailwright.<domain>, and the second project's DKIM key.
    await publishRecords([record(first, 'OWNERSHIP'), record(second, 'OWNERSHIP'), record(second, 'DKIM')]);
    const res = await verify(second.id, other);
    expect(res.status).toBe(200);
    expect(res.body.status).toBe('PENDING');
    expect(res.body.statusReason).toMatch(/verified by another project/);
    expect(record(res.body, 'OWNERSHIP').status).toBe('VERIFIED');
    expect(record(res.body, 'DKIM').status).toBe('VERIFIED');
  });

  test('a public key is refused (401 INVALID_API_KEY)', async () => {
    const res = await api('POST', '/domains', { key: project.publicKey, body: { domain: name() } });
    expect(res.status).toBe(401);
    expect(res.body.error.code).toBe('INVALID_API_KEY');
  });
});

describe('verification loop', () => {
  test('PENDING -> VERIFIED by the background check once the records appear, without a forced check', async () => {
    const domain = await addDomain(name());
    const checked = await eventually('a first check', async () => {
      const d = await listed(domain.id);
      return d?.lastCheckedAt ? d : undefined;
    });
    expect(checked.status).toBe('PENDING');
    expect(checked.records.map((r) => r.status)).toEqual(['NOT_FOUND', 'NOT_FOUND', 'NOT_FOUND', 'NOT_FOUND', 'NOT_FOUND', 'NOT_FOUND']);
    expect(checked.statusReason).toMatch(/OWNERSHIP TXT at _mailwright\..* not found; DKIM TXT at .* not found/);

    await publishRecords(domain.records);
    const verified = await eventually('VERIFIED', async () => {
      const d = await listed(domain.id);
      return d?.status === 'VERIFIED' ? d : undefined;
    });
    expect(verified.records.map((r) => [r.purpose, r.status])).toEqual([
      ['OWNERSHIP', 'VERIFIED'],
      ['DKIM', 'VERIFIED'],
      ['SPF', 'VERIFIED'],
      ['DMARC', 'VERIFIED'],
      ['RETURN_PATH_MX', 'VERIFIED'],
      ['RETURN_PATH_SPF', 'VERIFIED'],
    ]);
    expect(verified.returnPath.status).toBe('ACTIVE');
    expect(verified.verifiedAt).not.toBeNull();
    expect(verified.statusReason).toBeNull();
  });

  test("SPF, DMARC and the bounce host's records are not required: ownership and DKIM alone verify the domain", async () => {
    const domain = await addDomain(name());
    await publishRecords([record(domain, 'OWNERSHIP'), record(domain, 'DKIM')]);
    const res = await verify(domain.id);
    expect(res.body.status).toBe('VERIFIED');
    expect(record(res.body, 'SPF').status).toBe('NOT_FOUND');
    expect(record(res.body, 'DMARC').status).toBe('NOT_FOUND');
    expect(record(res.body, 'RETURN_PATH_MX').status).toBe('NOT_FOUND');
    expect(record(res.body, 'RETURN_PATH_SPF').status).toBe('NOT_FOUND');
    expect(res.body.returnPath).toMatchObject({ status: 'NOT_CONFIGURED', reason: expect.stringMatching(/^No MX record at bounces\./) });
  });

  test('GET /domains/:id/verify checks now and returns each record\'s fresh status', async () => {
    const domain = await addDomain(name());
    await setTxt(record(domain, 'OWNERSHIP').name, [record(domain, 'OWNERSHIP').value]);
    await setTxt(record(domain, 'DKIM').name, ['v=DKIM1; k=rsa; p=MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAwrong']);
    const before = Date.now();
    const partial = await verify(domain.id);
    expect(partial.status).toBe(200);
    expect(Date.parse(partial.body.lastCheckedAt!)).toBeGreaterThanOrEqual(before - 5);
    expect(partial.body.status).toBe('PENDING');
    expect(record(partial.body, 'OWNERSHIP').status).toBe('VERIFIED');
    expect(record(partial.body, 'DKIM')).toMatchObject({ status: 'MISMATCH', found: ['v=DKIM1; k=rsa; p=MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAwrong'] });
    expect(partial.body.statusReason).toMatch(/DKIM TXT at .* has a different value/);

    await publishRecords([record(domain, 'DKIM')]);
    const before2 = Date.now();
    const done = await verify(domain.id);
    expect(done.body.status).toBe('VERIFIED');
    expect(record(done.body, 'DKIM').status).toBe('VERIFIED');
    expect(Date.parse(done.body.lastCheckedAt!)).toBeGreaterThanOrEqual(before2 - 5);
  });

  test('a removed record is caught by the next check: a warning first, PENDING after the grace period, VERIFIED again once restored', async () => {
    const domain = await verifiedDomain();
    const dkim = record(domain, 'DKIM');
    await removeName(dkim.name);

    const warned = await eventually('the lost record to be noticed', async () => {
      const d = await listed(domain.id);
      return d && record(d, 'DKIM').status === 'NOT_FOUND' ? d : undefined;
    }, 10_000);
    expect(warned.status).toBe('VERIFIED');
    expect(warned.failingSince).not.toBeNull();
    expect(warned.statusReason).toMatch(/DKIM TXT at .* not found .*goes back to PENDING/);
    expect((await send(`hello@${domain.name}`, rcpt())).status).toBe(200); // still allowed during the grace period

    const demoted = await eventually('demotion', async () => {
      const d = await listed(domain.id);
      return d?.status === 'PENDING' ? d : undefined;
    }, 20_000);
    expect(demoted.verifiedAt).toBeNull();
    expect(demoted.statusReason).toMatch(/No longer verified/);
    const refused = await send(`hello@${domain.name}`, rcpt());
    expect(refused.status).toBe(403);
    expect(refused.body.error.code).toBe('DOMAIN_NOT_VERIFIED');

    await publishRecords([dkim]);
    const again = await verify(domain.id);
    expect(again.body).toMatchObject({ status: 'VERIFIED', failingSince: null, statusReason: null });
    expect((await send(`hello@${domain.name}`, rcpt())).status).toBe(200);
  });

  test('a lookup that times out or fails is LOOKUP_FAILED, bounded by DNS_TIMEOUT, and changes nothing', async () => {
    const domain = await verifiedDomain();
    const ownership = record(domain, 'OWNERSHIP');
    await breakName(ownership.name, 'drop');
    const started = Date.now();
    const timedOut = await verify(domain.id);
    expect(Date.now() - started).toBeLessThan(8_000);
    expect(record(timedOut.body, 'OWNERSHIP')).toMatchObject({ status: 'LOOKUP_FAILED', error: 'ETIMEOUT' });
    expect(timedOut.body).toMatchObject({ status: 'VERIFIED', failingSince: null });
    expect(timedOut.body.statusReason).toMatch(/inconclusive/);

    await breakName(ownership.name, 'servfail');
    const failed = await verify(domain.id);
    expect(record(failed.body, 'OWNERSHIP')).toMatchObject({ status: 'LOOKUP_FAILED', error: 'ESERVFAIL' });
    expect(failed.body.status).toBe('VERIFIED');
  });

  test('DELETE ends the workflow and removes the domain', async () => {
    const domain = await addDomain(name());
    const handle = temporal.workflow.getHandle(`domain-verification/${domain.id}`);
    expect((await handle.describe()).status.name).toBe('RUNNING');

    const res = await api('DELETE', `/domains/${domain.id}`, { key: project.secretKey });
    expect(res.status).toBe(204);
    expect(res.text).toBe('');
    const status = await eventually('the workflow to end', async () => {
      const s = (await handle.describe()).status.name;
      return s !== 'RUNNING' ? s : undefined;
    }, 10_000);
    expect(status).toBe('COMPLETED');
    expect(await handle.result()).toMatchObject({ ended: 'REMOVED' });
    await maybeRecordHistory(`domain-verification/${domain.id}`, 'domain-verification-removed');

    expect(await listed(domain.id)).toBeUndefined();
    expect((await verify(domain.id)).status).toBe(404);
    expect((await api('DELETE', `/domains/${domain.id}`, { key: project.secretKey })).status).toBe(404);
  });

  test('a forced check starts the workflow again when it is not running', async () => {
    const domain = await addDomain(name());
    const handle = temporal.workflow.getHandle(`domain-verification/${domain.id}`);
    await handle.terminate('test: lost workflow');
    await publishRecords(domain.records);
    const res = await verify(domain.id);
    expect(res.status).toBe(200);
    expect(res.body.status).toBe('VERIFIED');
    expect((await handle.describe()).status.name).toBe('RUNNING');
  });
});

describe('GET /domains/project/:projectId', () => {
  test('lists the project\'s verified and pending domains, oldest first', async () => {
    const p = await createTestProject('Listing');
    const a = await addDomain(name(), p);
    await addVerifiedDomain(p.projectId, `v-${name()}`);
    const res = await api<DomainBody[]>('GET', `/domains/project/${p.projectId}`, { key: p.secretKey });
    expect(res.status).toBe(200);
    expect(res.body.map((d) => [d.name, d.status])).toEqual([
      [a.name, 'PENDING'],
      [expect.stringMatching(/^v-/), 'VERIFIED'],
    ]);
  });

  test('another project id is 404; a malformed one is 422', async () => {
    const res = await api('GET', `/domains/project/${other.projectId}`, { key: project.secretKey });
    expect(res.status).toBe(404);
    expect(res.body.error.code).toBe('NOT_FOUND');
    expect((await api('GET', `/domains/project/${randomUUID()}`, { key: project.secretKey })).status).toBe(404);
    const bad = await api('GET', '/domains/project/not-a-uuid', { key: project.secretKey });
    expect(bad.status).toBe(422);
    expect(bad.body.error.errors[0].field).toBe('params.projectId');
  });
});

describe('OpenAPI', () => {
  test('the domain endpoints and the Domain schema are in /openapi.json', async () => {
    const res = await api('GET', '/openapi.json');
    expect(res.status).toBe(200);
    expect(res.body.paths['/domains'].post.requestBody.content['application/json'].schema).toEqual({ $ref: '#/components/schemas/CreateDomainRequest' });
    expect(res.body.components.schemas.CreateDomainRequest.properties.domain.type).toBe('string');
    expect(Object.keys(res.body.paths['/domains/{id}'])).toEqual(['delete']);
    expect(Object.keys(res.body.paths['/domains/{id}/verify'])).toEqual(['get']);
    expect(Object.keys(res.body.paths['/domains/project/{projectId}'])).toEqual(['get']);
    expect(Object.keys(res.body.components.schemas.Domain.properties)).toEqual(
      expect.arrayContaining(['id', 'name', 'status', 'records', 'dkimSelector', 'verifiedAt', 'lastCheckedAt', 'failingSince', 'statusReason', 'returnPath']),
    );
    const record = res.body.components.schemas.DnsRecord.properties;
    expect(record.type.enum).toEqual(['TXT', 'MX']);
    expect(record.purpose.enum).toEqual(['OWNERSHIP', 'DKIM', 'SPF', 'DMARC', 'RETURN_PATH_MX', 'RETURN_PATH_SPF']);
    expect(res.body.components.schemas.Domain.properties.returnPath).toEqual({ $ref: '#/components/schemas/DomainReturnPath' });
    expect(res.body.components.schemas.DomainReturnPath.properties.status.enum).toEqual(['ACTIVE', 'NOT_CONFIGURED']);
  });
});

describe("another project's domains", () => {
  test('are 404 for verify and delete, and stay untouched', async () => {
    const theirs = await addDomain(name(), other);
    for (const [method, path] of [
      ['GET', `/domains/${theirs.id}/verify`],
      ['DELETE', `/domains/${theirs.id}`],
    ] as const) {
      const res = await api(method, path, { key: project.secretKey });
      expect(res.status).toBe(404);
      expect(res.body).toMatchObject({ success: false, error: { code: 'NOT_FOUND', statusCode: 404 } });
    }
    expect(await listed(theirs.id, other)).toBeDefined();
    expect((await temporal.workflow.getHandle(`domain-verification/${theirs.id}`).describe()).status.name).toBe('RUNNING');
  });

  test('a malformed id is 422, an unknown one 404', async () => {
    expect((await api('GET', '/domains/nope/verify', { key: project.secretKey })).status).toBe(422);
    expect((await api('DELETE', `/domains/${randomUUID()}`, { key: project.secretKey })).status).toBe(404);
  });
});

describe('DKIM signing', () => {
  test('mail from a verified domain is DKIM-signed with its key, and the signature verifies against the DNS', async () => {
    const domain = await verifiedDomain();
    const to = rcpt();
    expect((await send(`news@${domain.name}`, to)).status).toBe(200);
    const raw = await rawMessage(to);
    expect(raw.toString()).toMatch(/^DKIM-Signature: /m);

    const result = await dkimVerify(raw, { resolver: mailauthResolver() });
    expect(result.results).toHaveLength(1);
    expect(result.results[0]).toMatchObject({ signingDomain: domain.name, selector: domain.dkimSelector, status: { result: 'pass' } });

    // The check is real: an altered body no longer verifies.
    const tampered = Buffer.from(raw.toString().replace('Hello from a verified domain', 'Hello from an altered domain'));
    const bad = await dkimVerify(tampered, { resolver: mailauthResolver() });
    expect(bad.results[0]!.status.result).not.toBe('pass');
  });

  test("campaign messages are signed in the worker's render threads: each verifies against the DNS and covers the one-click unsubscribe pair", async () => {
    const own = await createTestProject('Signed campaign');
    const domain = await addDomain(name(), own);
    await publishRecords(domain.records);
    expect((await verify(domain.id, own)).body.status).toBe('VERIFIED');
    const readers = [rcpt(), rcpt(), rcpt()];
    for (const email of readers) expect((await api('POST', '/contacts', { key: own.secretKey, body: { email, data: { first: 'Ada  Lovelace ' } } })).status).toBe(201);
    const call = (method: string, path: string, body?: unknown) => api(method, path, { key: own.secretKey, body });
    const campaign = await call('POST', '/campaigns', {
      name: 'Signed news',
      subject: 'News for {{ first }}',
      body: '<p>Hello {{ first }},\t the   news</p>   \n\n',
      from: `news@${domain.name}`,
      audienceType: 'ALL',
    });
    expect(campaign.status).toBe(201);
    expect((await call('POST', `/campaigns/${campaign.body.id}/send`)).status).toBe(200);
    for (const to of readers) {
      const raw = await rawMessage(to);
      const [result] = (await dkimVerify(raw, { resolver: mailauthResolver() })).results;
      expect(result).toMatchObject({ signingDomain: domain.name, selector: domain.dkimSelector, status: { result: 'pass' } });
      const h = /\bh=([^;]+);/.exec(raw.toString().replace(/\r\n[ \t]/g, ' '))![1]!.split(':');
      expect(h).toEqual(expect.arrayContaining(['from', 'subject', 'list-unsubscribe', 'list-unsubscribe-post', 'list-id']));
      expect((raw.toString().match(/^DKIM-Signature:/gm) ?? []).length).toBe(1);
    }
  });

  test('mail from a verified domain without a key (like the dev seed mailwright.test) is sent unsigned, and no workflow checks it', async () => {
    const domain = name();
    await addVerifiedDomain(project.projectId, domain);
    const to = rcpt();
    expect((await send(`hello@${domain}`, to)).status).toBe(200);
    const raw = await rawMessage(to);
    expect(raw.toString()).not.toMatch(/^DKIM-Signature:/im);

    const { rows } = await db().query('select id from domains where project_id = $1 and name = $2', [project.projectId, domain]);
    const id = rows[0].id as string;
    const res = await verify(id);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: 'VERIFIED', records: [], dkimSelector: null, returnPath: { status: 'NOT_CONFIGURED' } });
    await expect(temporal.workflow.getHandle(`domain-verification/${id}`).describe()).rejects.toBeInstanceOf(WorkflowNotFoundError);
  });
});
