import { randomUUID } from 'node:crypto';
import type { ParsedMail } from 'mailparser';
import { api } from '../helpers/api';
import { expectStatus } from '../helpers/automations';
import { closeDb, db, waitForEmailStatus } from '../helpers/db';
import { breakName, publishRecords, removeName } from '../helpers/dns';
import { createTestProject, type TestProject } from '../helpers/fixtures';
import { messagesTo, waitForMail } from '../helpers/mailbox';
import { openSmtp } from '../helpers/smtp-client';
import { stackEnv } from '../stack-env';
import { loadConfig } from '../../domain/config';
import { parseReturnPath, parseUnsubscribeAddress } from '../../domain/inbound/return-path';

/**
 * A return path per sender domain (issue 25, point 1), on the real stack: the bounce host's MX and SPF records in the
 * loopback DNS server, the domain check, and what every send path hands the SMTP capture server as envelope sender
 * (the capture server records MAIL FROM; a relay adds no Return-Path header, the receiving mailbox would) and as the
 * List-Unsubscribe mailto:.
 */

interface DnsRecord {
  type: 'TXT' | 'MX';
  name: string;
  value: string;
  purpose: string;
  required: boolean;
  status: string;
  error?: string;
}
interface DomainBody {
  id: string;
  name: string;
  status: 'PENDING' | 'VERIFIED';
  records: DnsRecord[];
  returnPath: { host: string; status: 'ACTIVE' | 'NOT_CONFIGURED'; mailFrom: string; reason: string | null };
}

const secret = loadConfig({ ...process.env, DATABASE_URL: stackEnv().databaseUrl }).appSecret;
const tag = () => randomUUID().slice(0, 8);
const rcpt = () => `rp-${tag()}@example.com`;
const record = (d: DomainBody, purpose: string) => d.records.find((r) => r.purpose === purpose)!;

let project: TestProject;
const added: string[] = [];
const call = (method: string, path: string, body?: unknown) => api(method, path, { key: project.secretKey, body });

beforeAll(async () => {
  project = await createTestProject('Return paths');
});

afterAll(async () => {
  // Verification loops of this file end with it.
  await Promise.all(added.map((id) => call('DELETE', `/domains/${id}`)));
  await closeDb();
});

async function addDomain(): Promise<DomainBody> {
  const body = expectStatus(await call('POST', '/domains', { domain: `rp${tag()}.example.test` }), 201) as DomainBody;
  added.push(body.id);
  return body;
}

const verify = async (id: string) => expectStatus(await call('GET', `/domains/${id}/verify`), 200) as DomainBody;

/** A VERIFIED domain; with `bounceHost`, its bounce host's MX and SPF are published too. */
async function verifiedDomain(opts: { bounceHost: boolean }): Promise<DomainBody> {
  const domain = await addDomain();
  await publishRecords(domain.records.filter((r) => opts.bounceHost || !r.purpose.startsWith('RETURN_PATH_')));
  const checked = await verify(domain.id);
  expect(checked.status).toBe('VERIFIED');
  return checked;
}

/** The envelope sender the capture server recorded for the one message to `to`. */
async function envelopeFrom(to: string): Promise<string> {
  await waitForMail(to);
  const [summary] = await messagesTo(to);
  return summary!.from;
}

/** The address of a message's List-Unsubscribe mailto: (before its `?subject=`), from the raw header (mailparser parses List-* headers). */
function mailtoOf(mail: ParsedMail): string | undefined {
  const line = (mail.headerLines.find((h) => h.key === 'list-unsubscribe')?.line ?? '').replace(/\r?\n[ \t]+/g, ' ');
  return /<mailto:([^?>]+)\?subject=unsubscribe%20[\w-]+>/.exec(line)?.[1];
}

async function sendOne(from: string, body: Record<string, unknown> = {}): Promise<{ to: string; emailId: string }> {
  const to = rcpt();
  const res = expectStatus(await call('POST', '/v1/send', { to, from, subject: 'Hello', body: '<p>Hello</p>', ...body }), 200);
  return { to, emailId: res.data.emails[0].email as string };
}

async function marketingTemplate(from: string): Promise<string> {
  return expectStatus(await call('POST', '/templates', { name: `M ${tag()}`, subject: 'News', body: '<p>News</p>', type: 'MARKETING', from }), 201).id;
}

describe('the bounce host records and the domain check', () => {
  test("published MX and SPF at the bounce host: both VERIFIED, and the domain's return path is ACTIVE", async () => {
    const domain = await verifiedDomain({ bounceHost: true });
    const host = `bounces.${domain.name}`;
    expect(record(domain, 'RETURN_PATH_MX')).toMatchObject({ type: 'MX', name: host, value: '10 mx.mailwright.local', required: false, status: 'VERIFIED' });
    expect(record(domain, 'RETURN_PATH_SPF')).toMatchObject({ type: 'TXT', name: host, value: 'v=spf1 include:spf.mailwright.local ~all', required: false, status: 'VERIFIED' });
    expect(domain.returnPath).toEqual({ host, status: 'ACTIVE', mailFrom: `b-<token>@${host}`, reason: null });
    const listed = (expectStatus(await call('GET', `/domains/project/${project.projectId}`), 200) as DomainBody[]).find((d) => d.id === domain.id)!;
    expect(listed.returnPath.status).toBe('ACTIVE');
  });

  test('without them the domain is VERIFIED all the same, its return path NOT_CONFIGURED with the reason', async () => {
    const domain = await verifiedDomain({ bounceHost: false });
    expect(record(domain, 'RETURN_PATH_MX').status).toBe('NOT_FOUND');
    expect(record(domain, 'RETURN_PATH_SPF').status).toBe('NOT_FOUND');
    expect(domain.returnPath).toEqual({
      host: `bounces.${domain.name}`,
      status: 'NOT_CONFIGURED',
      mailFrom: '<From address>',
      reason: `No MX record at bounces.${domain.name}: publish MX 10 mx.mailwright.local at bounces.${domain.name}.`,
    });
  });

  test('an MX naming another host is a MISMATCH (with what was found); ours among others is enough', async () => {
    const domain = await verifiedDomain({ bounceHost: false });
    const host = `bounces.${domain.name}`;
    await publishRecords([{ type: 'MX', name: host, value: '10 mx.elsewhere.example' }]);
    const other = await verify(domain.id);
    expect(record(other, 'RETURN_PATH_MX')).toMatchObject({ status: 'MISMATCH', found: ['10 mx.elsewhere.example'] });
    expect(other.returnPath.status).toBe('NOT_CONFIGURED');
    await publishRecords([
      { type: 'MX', name: host, value: '5 mx.elsewhere.example' },
      { type: 'MX', name: host, value: '20 MX.Mailwright.Local.' },
    ]);
    expect((await verify(domain.id)).returnPath.status).toBe('ACTIVE');
  });

  test('a domain stored before return paths: the two records are listed PENDING, and the next check adds and verifies them', async () => {
    const domain = await verifiedDomain({ bounceHost: true });
    // As a row written before this change: four records, no return path.
    await db().query(
      `update domains set records = (select jsonb_agg(r) from jsonb_array_elements(records) r where r->>'purpose' not like 'RETURN_PATH_%'), return_path_host = null where id = $1`,
      [domain.id],
    );
    const listed = (expectStatus(await call('GET', `/domains/project/${project.projectId}`), 200) as DomainBody[]).find((d) => d.id === domain.id)!;
    expect(listed.records.map((r) => [r.purpose, r.status])).toEqual([
      ['OWNERSHIP', 'VERIFIED'],
      ['DKIM', 'VERIFIED'],
      ['SPF', 'VERIFIED'],
      ['DMARC', 'VERIFIED'],
      ['RETURN_PATH_MX', 'PENDING'],
      ['RETURN_PATH_SPF', 'PENDING'],
    ]);
    expect(listed.returnPath).toMatchObject({ status: 'NOT_CONFIGURED', reason: expect.stringMatching(/not been checked yet/) });
    // What is sent meanwhile uses the From address.
    const before = await sendOne(`hello@${domain.name}`);
    expect(await envelopeFrom(before.to)).toBe(`hello@${domain.name}`);

    const checked = await verify(domain.id);
    expect(checked.records.map((r) => [r.purpose, r.status]).slice(4)).toEqual([['RETURN_PATH_MX', 'VERIFIED'], ['RETURN_PATH_SPF', 'VERIFIED']]);
    expect(checked.returnPath.status).toBe('ACTIVE');
    const { rows } = await db().query(`select jsonb_array_length(records) as n, return_path_host from domains where id = $1`, [domain.id]);
    expect(rows[0]).toEqual({ n: 6, return_path_host: `bounces.${domain.name}` });
  });

  test('a failed MX lookup keeps the return path ACTIVE; a removed MX ends it, and the next email is sent from the From address', async () => {
    const domain = await verifiedDomain({ bounceHost: true });
    const host = `bounces.${domain.name}`;
    await breakName(host, 'servfail');
    const failed = await verify(domain.id);
    expect(record(failed, 'RETURN_PATH_MX')).toMatchObject({ status: 'LOOKUP_FAILED', error: 'ESERVFAIL' });
    expect(failed.returnPath.status).toBe('ACTIVE');
    expect(failed.status).toBe('VERIFIED');

    // The API caches the sender domain; the change of its return path reaches every API process (change feed).
    const active = await sendOne(`hello@${domain.name}`);
    expect(parseReturnPath(await envelopeFrom(active.to), secret)).toMatchObject({ emailId: active.emailId });

    await removeName(host);
    const removed = await verify(domain.id);
    expect(record(removed, 'RETURN_PATH_MX').status).toBe('NOT_FOUND');
    expect(removed.returnPath.status).toBe('NOT_CONFIGURED');
    expect(removed.status).toBe('VERIFIED');
    const after = await sendOne(`hello@${domain.name}`);
    expect(await envelopeFrom(after.to)).toBe(`hello@${domain.name}`);
  });
});

describe('every send path uses the return path of an ACTIVE domain', () => {
  let active: DomainBody;
  let plain: DomainBody;
  beforeAll(async () => {
    [active, plain] = await Promise.all([verifiedDomain({ bounceHost: true }), verifiedDomain({ bounceHost: false })]);
  });

  test("/v1/send: the envelope sender is the email's b- address on the bounce host; From stays as given", async () => {
    const { to, emailId } = await sendOne(`Hello@${active.name}`);
    const mailFrom = await envelopeFrom(to);
    expect(mailFrom).toMatch(new RegExp(`^b-[a-z2-7]{48}@bounces\\.${active.name.replace(/\./g, '\\.')}$`));
    expect(parseReturnPath(mailFrom, secret)).toMatchObject({ emailId });
    const [mail] = await waitForMail(to);
    expect(mail!.from?.value[0]?.address).toBe(`Hello@${active.name}`);
    expect(mail!.headers.get('return-path')).toBeUndefined(); // a relay does not add it; the final mailbox does
  });

  test('/v1/send with a marketing template: the List-Unsubscribe mailto: is the u- address, which the inbound server takes and which unsubscribes', async () => {
    const templateId = await marketingTemplate(`news@${active.name}`);
    const to = rcpt();
    const res = expectStatus(await call('POST', '/v1/send', { to, template: templateId, subscribed: true }), 200);
    const emailId: string = res.data.emails[0].email;
    const [mail] = await waitForMail(to);
    const mailto = mailtoOf(mail!)!;
    expect(mailto).toMatch(new RegExp(`^u-[a-z2-7]{48}@bounces\\.${active.name.replace(/\./g, '\\.')}$`));
    expect(parseUnsubscribeAddress(mailto, secret)).toEqual({ emailId });
    expect(parseReturnPath(await envelopeFrom(to), secret)).toMatchObject({ emailId });

    // Mail to that mailto: reaches the inbound server (the bounce host's MX) and unsubscribes the contact.
    const smtp = await openSmtp(stackEnv().inboundSmtpPort);
    try {
      expect((await smtp.command(`MAIL FROM:<${to}>`)).code).toBe(250);
      expect((await smtp.command(`RCPT TO:<${mailto}>`)).code).toBe(250);
      const reply = await smtp.data([`From: <${to}>`, `To: <${mailto}>`, 'Subject: unsubscribe', `Message-ID: <${randomUUID()}@example.com>`, '', 'Please stop.', ''].join('\r\n'));
      expect(reply.code).toBe(250);
      await smtp.command('QUIT');
    } finally {
      await smtp.close();
    }
    const deadline = Date.now() + 30_000;
    for (;;) {
      const { rows } = await db().query('select subscribed from contacts where project_id = $1 and email = $2', [project.projectId, to]);
      if (rows[0]?.subscribed === false) break;
      if (Date.now() > deadline) throw new Error('the contact was not unsubscribed by mail to the List-Unsubscribe mailto:');
      await new Promise((r) => setTimeout(r, 200));
    }
  });

  test('campaigns: every message has its own b- envelope sender and u- mailto:, naming its email', async () => {
    const readers = [rcpt(), rcpt()];
    const audience = `rp-campaign-${tag()}`;
    for (const email of readers) expectStatus(await call('POST', '/contacts', { email, data: { audience } }), 201);
    const campaign = expectStatus(
      await call('POST', '/campaigns', {
        name: `Return path ${tag()}`,
        subject: 'Campaign',
        body: '<p>Campaign</p>',
        from: `news@${active.name}`,
        audienceType: 'FILTERED',
        audienceFilter: { operator: 'AND', conditions: [{ field: 'data.audience', operator: 'equals', value: audience }] },
      }),
      201,
    );
    expectStatus(await call('POST', `/campaigns/${campaign.id}/send`), 200);
    for (const to of readers) {
      const [mail] = await waitForMail(to, { timeoutMs: 60_000 });
      const { rows } = await db().query('select id from emails where campaign_id = $1 and to_email = $2', [campaign.id, to]);
      const emailId = rows[0].id as string;
      expect(parseReturnPath(await envelopeFrom(to), secret)).toMatchObject({ emailId });
      expect(parseUnsubscribeAddress(mailtoOf(mail!)!, secret)).toEqual({ emailId });
    }
  });

  test('campaign test sends: the envelope sender is the test email\'s b- address', async () => {
    const campaign = expectStatus(await call('POST', '/campaigns', { name: `Test ${tag()}`, subject: 'T', body: '<p>T</p>', from: `news@${active.name}`, audienceType: 'ALL' }), 201);
    const to = rcpt();
    const res = expectStatus(await call('POST', `/campaigns/${campaign.id}/test`, { email: to }), 200);
    expect(parseReturnPath(await envelopeFrom(to), secret)).toMatchObject({ emailId: res.emailId });
  });

  test('automation SEND_EMAIL steps: the envelope sender is the step email\'s b- address, and a marketing template gets the u- mailto:', async () => {
    const event = `rp-${tag()}`;
    const templateId = await marketingTemplate(`auto@${active.name}`);
    const wf = expectStatus(await call('POST', '/workflows', { name: `RP ${tag()}`, triggerEvent: event }), 201);
    expectStatus(await call('POST', `/workflows/${wf.id}/steps`, { type: 'SEND_EMAIL', config: { templateId } }), 201);
    expectStatus(await call('PATCH', `/workflows/${wf.id}`, { enabled: true }), 200);
    const to = rcpt();
    expectStatus(await call('POST', '/contacts', { email: to, subscribed: true }), 201);
    expectStatus(await api('POST', '/v1/track', { key: project.publicKey, body: { email: to, event } }), 200);
    const [mail] = await waitForMail(to);
    const { rows } = await db().query('select e.id from emails e join contacts c on c.id = e.contact_id where c.project_id = $1 and c.email = $2', [project.projectId, to]);
    const emailId = rows[0].id as string;
    expect(parseReturnPath(await envelopeFrom(to), secret)).toMatchObject({ emailId });
    expect(parseUnsubscribeAddress(mailtoOf(mail!)!, secret)).toEqual({ emailId });
  });

  test('a domain whose return path is NOT_CONFIGURED sends as before: the From address as envelope sender, the mailto: unsubscribe@<domain>', async () => {
    const { to, emailId } = await sendOne(`hello@${plain.name}`);
    expect(await envelopeFrom(to)).toBe(`hello@${plain.name}`);
    await waitForEmailStatus(emailId, 'SENT');

    const templateId = await marketingTemplate(`news@${plain.name}`);
    const reader = rcpt();
    expectStatus(await call('POST', '/v1/send', { to: reader, template: templateId, subscribed: true }), 200);
    const [mail] = await waitForMail(reader);
    expect(mailtoOf(mail!)).toBe(`unsubscribe@${plain.name}`);
    expect(await envelopeFrom(reader)).toBe(`news@${plain.name}`);
  });
});
