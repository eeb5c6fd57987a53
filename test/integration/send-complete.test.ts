import { randomBytes, randomUUID } from 'node:crypto';
import type { ParsedMail } from 'mailparser';
import { api } from '../helpers/api';
import { closeDb, db } from '../helpers/db';
import { addVerifiedDomain, createTestProject, uniqueDomain, type TestProject } from '../helpers/fixtures';
import { messagesTo, waitForMail } from '../helpers/mailbox';
import { stackEnv } from '../stack-env';

/**
 * The complete /v1/send, asserted on the MIME message the SMTP server captured: templates and overrides, Liquid
 * variables and defaults, non-persistent data, MJML, the plain-text part, custom headers, attachments and inline
 * images, tracking, List-Unsubscribe for marketing mail, idempotency, and the 4xx answers to bad input.
 */
let project: TestProject;
let domain: string;
const rcpt = (tag = 'rcpt') => `${tag}-${randomUUID().slice(0, 8)}@example.com`;

beforeAll(async () => {
  project = await createTestProject();
  domain = uniqueDomain();
  await addVerifiedDomain(project.projectId, domain);
});
afterAll(closeDb);

const send = (body: Record<string, unknown>, opts: { key?: string; headers?: Record<string, string> } = {}) =>
  api('POST', '/v1/send', { key: opts.key ?? project.secretKey, body, headers: opts.headers });

async function createTemplate(fields: Record<string, unknown>): Promise<string> {
  const res = await api('POST', '/templates', { key: project.secretKey, body: { name: `t-${randomUUID().slice(0, 6)}`, type: 'TRANSACTIONAL', ...fields } });
  expect(res.status).toBe(201);
  return res.body.id as string;
}

async function waitForStatus(emailId: string, status: string, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const res = await api('GET', `/emails/${emailId}`, { key: project.secretKey });
    if (res.body?.status === status) return res.body;
    if (Date.now() > deadline) throw new Error(`email ${emailId} is ${res.body?.status}, expected ${status}`);
    await new Promise((r) => setTimeout(r, 150));
  }
}

async function sendOne(body: Record<string, unknown>): Promise<{ mail: ParsedMail; emailId: string; to: string }> {
  const to = typeof body.to === 'string' ? body.to : rcpt();
  const res = await send({ from: `hello@${domain}`, ...body, to });
  expect(res.status).toBe(200);
  const [mail] = await waitForMail(to);
  return { mail: mail!, emailId: res.body.data.emails[0].email, to };
}

const header = (mail: ParsedMail, name: string) => mail.headerLines.find((h) => h.key === name.toLowerCase())?.line.replace(/^[^:]+:\s*/, '');

describe('templates in /v1/send', () => {
  test("a template's subject, body, sender and reply-to are used, with Liquid over the contact's and the call's data", async () => {
    const template = await createTemplate({
      subject: 'Welcome, {{ first ?? friend }}',
      body: '<p>Hi {{ first }}, your plan is {{ plan ?? "Free" }}.{{ nothing }}</p><p>Code {{ code }}</p>',
      from: `team@${domain}`,
      fromName: 'The Team',
      replyTo: `help@${domain}`,
    });
    const { mail, emailId, to } = await sendOne({ template, from: undefined, data: { first: 'Ada', code: { value: 'X-1', persistent: false } } });
    expect(mail.subject).toBe('Welcome, Ada');
    expect(mail.from!.value).toEqual([{ name: 'The Team', address: `team@${domain}` }]);
    expect(mail.replyTo!.value[0]!.address).toBe(`help@${domain}`);
    expect(mail.html).toContain('<p>Hi Ada, your plan is Free.</p><p>Code X-1</p>');
    expect(mail.text).toContain('Hi Ada, your plan is Free.');
    // The non-persistent value rendered but was not stored on the contact; the persistent one was.
    const { rows } = await db().query('select data from contacts where project_id = $1 and email = $2', [project.projectId, to]);
    expect(rows[0].data).toEqual({ first: 'Ada' });
    const email = await waitForStatus(emailId, 'SENT');
    expect(email.template).toBe(template);
    expect(email.messageId).toBe(`<${emailId}@${domain}>`);
    expect(email.smtpResponse).toMatch(/^250 /);
  });

  test('explicit subject, body, from and reply override the template', async () => {
    const template = await createTemplate({ subject: 'Template subject', body: '<p>Template body</p>', from: `team@${domain}`, replyTo: `help@${domain}` });
    const { mail } = await sendOne({
      template,
      subject: 'Own subject',
      body: '<p>Own body</p>',
      from: { name: 'Own Sender', email: `own@${domain}` },
      reply: `own-replies@${domain}`,
    });
    expect(mail.subject).toBe('Own subject');
    expect(mail.html).toContain('<p>Own body</p>');
    expect(mail.html).not.toContain('Template body');
    expect(mail.from!.value).toEqual([{ name: 'Own Sender', address: `own@${domain}` }]);
    expect(mail.replyTo!.value[0]!.address).toBe(`own-replies@${domain}`);
  });

  test('a template without a sender needs `from`; an unknown template is 404', async () => {
    const template = await createTemplate({ subject: 'S', body: '<p>B</p>' });
    const res = await send({ to: rcpt(), template });
    expect(res.status).toBe(422);
    expect(res.body.error.errors).toEqual([expect.objectContaining({ field: 'from', code: 'required' })]);
    const missing = await send({ to: rcpt(), template: randomUUID(), from: `a@${domain}` });
    expect(missing.status).toBe(404);
    expect(missing.body.error.code).toBe('NOT_FOUND');
  });

  test('a send right after a template changed uses the new version, whoever changed it; a deleted template is 404', async () => {
    // The API caches templates for sends; a trigger on the table drops the cached copy whatever made the change.
    const template = await createTemplate({ subject: 'Version 1', body: '<p>Body 1</p>', from: `team@${domain}` });
    expect((await sendOne({ template, from: undefined })).mail.subject).toBe('Version 1');
    expect((await api('PATCH', `/templates/${template}`, { key: project.secretKey, body: { subject: 'Version 2', body: '<p>Body 2</p>' } })).status).toBe(200);
    const second = (await sendOne({ template, from: undefined })).mail;
    expect(second.subject).toBe('Version 2');
    expect(second.html).toContain('<p>Body 2</p>');
    await db().query(`update templates set subject = 'Version 3' where id = $1`, [template]);
    const deadline = Date.now() + 2_000;
    let third = '';
    // The notification is asynchronous: allow the change feed a moment, but not the cache's one-minute expiry.
    while (third !== 'Version 3' && Date.now() < deadline) third = (await sendOne({ template, from: undefined })).mail.subject ?? '';
    expect(third).toBe('Version 3');
    expect((await api('DELETE', `/templates/${template}`, { key: project.secretKey })).status).toBe(204);
    const gone = await send({ to: rcpt(), template });
    expect(gone.status).toBe(404);
  });

  test('the deprecated `name` names a string sender', async () => {
    const { mail } = await sendOne({ subject: 'Named', body: '<p>n</p>', from: `named@${domain}`, name: 'Legacy Name' });
    expect(mail.from!.value).toEqual([{ name: 'Legacy Name', address: `named@${domain}` }]);
  });

  test('each recipient of an array gets its own contact and its own rendering, in order', async () => {
    const a = rcpt('a');
    const b = rcpt('b');
    for (const [email, first] of [[a, 'Alan'], [b, 'Grace']] as const) {
      expect((await api('POST', '/contacts', { key: project.secretKey, body: { email, data: { first } } })).status).toBe(201);
    }
    const res = await send({ to: [a, { name: 'G', email: b }], from: `hello@${domain}`, subject: 'For {{ first }}', body: '<p>Dear {{ first }} ({{ email }})</p>' });
    expect(res.status).toBe(200);
    expect(res.body.data.emails.map((e: { contact: { email: string } }) => e.contact.email)).toEqual([a, b]);
    const [mailA] = await waitForMail(a);
    const [mailB] = await waitForMail(b);
    expect(mailA!.subject).toBe('For Alan');
    expect(mailA!.html).toContain(`<p>Dear Alan (${a})</p>`);
    expect(mailB!.subject).toBe('For Grace');
    expect(mailB!.html).toContain(`<p>Dear Grace (${b})</p>`);
  });
});

describe('rendering', () => {
  test('an MJML body is compiled to responsive HTML, with variables, and gets a plain-text part', async () => {
    const body = `<mjml><mj-body><mj-section><mj-column>
      <mj-text>Hello {{ first }}</mj-text>
      <mj-button href="https://example.com/start">Start</mj-button>
    </mj-column></mj-section></mj-body></mjml>`;
    const { mail } = await sendOne({ subject: 'MJML', body, data: { first: 'Linus' }, tracking: { opens: false, clicks: false } });
    expect(mail.html).toContain('Hello Linus');
    expect(mail.html).not.toMatch(/<mj-/);
    expect(mail.html).toMatch(/<table/);
    expect(mail.html).toContain('href="https://example.com/start"');
    expect(mail.text).toContain('Hello Linus');
    expect(mail.text).toMatch(/START|Start/);
  });

  test('always-available variables: id, email, mailwright_id, mailwright_email and the subscription links', async () => {
    const { mail, to } = await sendOne({
      subject: 'Vars',
      body: '<p>{{ id }}|{{ email }}|{{ mailwright_id }}|{{ mailwright_email }}</p><p>{{ unsubscribeUrl }}</p><p>{{ manageUrl }}</p><p>{{ subscribeUrl }}</p>',
      tracking: { clicks: false, opens: false },
    });
    const { rows } = await db().query('select id from contacts where project_id = $1 and email = $2', [project.projectId, to]);
    const id = rows[0].id as string;
    expect(mail.html).toContain(`<p>${id}|${to}|${id}|${to}</p>`);
    const base = stackEnv().apiUrl;
    expect(mail.html).toMatch(new RegExp(`<p>${base.replace(/[.:/]/g, '\\$&')}/unsubscribe/[^<]+</p>`));
    expect(mail.html).toMatch(/\/manage\/[^<]+<\/p>/);
    expect(mail.html).toMatch(/\/subscribe\/[^<]+<\/p>/);
  });

  test('a template syntax error is a 422, not a 500', async () => {
    const res = await send({ to: rcpt(), from: `a@${domain}`, subject: 'ok', body: '<p>{% if %}</p>' });
    expect(res.status).toBe(422);
    expect(res.body.error.code).toBe('VALIDATION_ERROR');
    expect(res.body.error.errors[0].field).toBe('body');
  });
});

describe('headers', () => {
  test('custom headers reach the message', async () => {
    const { mail } = await sendOne({ subject: 'H', body: '<p>h</p>', headers: { 'X-Campaign': 'spring-2026', 'X-Entity-Ref-ID': 'abc-123' } });
    expect(header(mail, 'X-Campaign')).toBe('spring-2026');
    expect(header(mail, 'X-Entity-Ref-ID')).toBe('abc-123');
  });

  test.each([
    ['a CR/LF in a value', { 'X-Evil': 'a\r\nBcc: victim@example.com' }, 'header_injection'],
    ['a LF in a name', { 'X-Evil\nBcc': 'x' }, 'invalid_header'],
    ['a structural header', { From: 'ceo@bank.example' }, 'reserved_header'],
    ['List-Unsubscribe', { 'List-Unsubscribe': '<https://evil.example>' }, 'reserved_header'],
  ])('%s is refused with 422', async (_what, headers, code) => {
    const to = rcpt();
    const res = await send({ to, from: `a@${domain}`, subject: 'S', body: '<p>b</p>', headers });
    expect(res.status).toBe(422);
    expect(res.body.error.errors.map((e: { code: string }) => e.code)).toContain(code);
    expect(await messagesTo(to)).toHaveLength(0);
  });

  test('a value over 998 characters is refused', async () => {
    const res = await send({ to: rcpt(), from: `a@${domain}`, subject: 'S', body: '<p>b</p>', headers: { 'X-Long': 'x'.repeat(999) } });
    expect(res.status).toBe(422);
  });
});

describe('subject and body', () => {
  test.each([
    ['a newline in the subject', { subject: 'Hello\nBcc: x@example.com' }, 'subject'],
    ['an empty subject', { subject: '' }, 'subject'],
    ['a subject over 998 characters', { subject: 's'.repeat(999) }, 'subject'],
    ['an empty body', { body: '' }, 'body'],
    ['no subject without a template', { subject: undefined }, 'subject'],
  ])('%s is a 422 on that field', async (_what, override, field) => {
    const res = await send({ to: rcpt(), from: `a@${domain}`, subject: 'S', body: '<p>b</p>', ...override });
    expect(res.status).toBe(422);
    expect(res.body.error.errors.map((e: { field: string }) => e.field)).toContain(field);
  });

  test('a rendered subject stays on one line', async () => {
    const { mail } = await sendOne({ subject: 'Hi {{ first }}', body: '<p>x</p>', data: { first: 'Ada\r\nBcc: victim@example.com' } });
    expect(mail.subject).not.toMatch(/[\r\n]/);
    expect(mail.bcc).toBeUndefined();
    expect(mail.subject).toContain('Ada');
  });
});

describe('attachments', () => {
  test('files and inline CID images arrive intact', async () => {
    const pdf = randomBytes(50_000);
    const png = Buffer.from('89504e470d0a1a0a0000000d4948445200000001000000010806000000', 'hex');
    const { mail, emailId } = await sendOne({
      subject: 'Files',
      body: '<p>Logo: <img src="cid:logo-1"></p>',
      attachments: [
        { filename: 'report.pdf', content: pdf.toString('base64') },
        { filename: 'logo.png', content: png.toString('base64'), contentType: 'image/png', disposition: 'inline', contentId: 'logo-1' },
        { filename: 'notes.txt', content: Buffer.from('plain notes').toString('base64'), contentType: 'text/plain' },
      ],
    });
    const byName = new Map(mail.attachments.map((a) => [a.filename, a]));
    expect(byName.get('report.pdf')!.content.equals(pdf)).toBe(true);
    expect(byName.get('report.pdf')!.contentType).toBe('application/pdf');
    expect(byName.get('report.pdf')!.contentDisposition).toBe('attachment');
    const logo = byName.get('logo.png')!;
    expect(logo.content.equals(png)).toBe(true);
    expect(logo.contentType).toBe('image/png');
    expect(logo.contentDisposition).toBe('inline');
    expect(logo.cid).toBe('logo-1');
    expect(byName.get('notes.txt')!.content.toString()).toBe('plain notes');
    expect((await waitForStatus(emailId, 'SENT')).attachments).toBe(3);
  });

  test('one send to several recipients stores each attachment once', async () => {
    const a = rcpt('att-a');
    const b = rcpt('att-b');
    const content = randomBytes(2_000).toString('base64');
    const res = await send({ to: [a, b], from: `a@${domain}`, subject: 'Shared', body: '<p>s</p>', attachments: [{ filename: 'shared.bin', content }] });
    expect(res.status).toBe(200);
    for (const to of [a, b]) expect((await waitForMail(to))[0]!.attachments[0]!.content.toString('base64')).toBe(content);
    const ids = res.body.data.emails.map((e: { email: string }) => e.email);
    const { rows } = await db().query('select distinct unnest(attachment_ids) as id from emails where id = any($1::uuid[])', [ids]);
    expect(rows).toHaveLength(1);
  });

  test('more than 10 MB of attachments is 413 ATTACHMENTS_TOO_LARGE; nothing is sent', async () => {
    const to = rcpt();
    const big = Buffer.alloc(5.5 * 1024 * 1024, 7).toString('base64');
    const res = await send({ to, from: `a@${domain}`, subject: 'Big', body: '<p>b</p>', attachments: [{ filename: 'a.bin', content: big }, { filename: 'b.bin', content: big }] });
    expect(res.status).toBe(413);
    expect(res.body.error.code).toBe('ATTACHMENTS_TOO_LARGE');
    expect(await messagesTo(to)).toHaveLength(0);
  });

  test.each([
    ['11 attachments', { attachments: Array.from({ length: 11 }, (_, i) => ({ filename: `f${i}.txt`, content: 'aGk=' })) }, 'attachments'],
    ['content that is not base64', { attachments: [{ filename: 'x.txt', content: 'not base64!' }] }, 'attachments.0.content'],
    ['a path as the file name', { attachments: [{ filename: '../../etc/passwd', content: 'aGk=' }] }, 'attachments.0.filename'],
    ['an inline file without contentId', { attachments: [{ filename: 'i.png', content: 'aGk=', disposition: 'inline' }] }, 'attachments.0.contentId'],
  ])('%s is a 422', async (_what, override, field) => {
    const res = await send({ to: rcpt(), from: `a@${domain}`, subject: 'S', body: '<p>b</p>', ...override });
    expect(res.status).toBe(422);
    expect(res.body.error.errors.map((e: { field: string }) => e.field)).toContain(field);
  });
});

describe('tracking', () => {
  test('links become signed redirects and an open pixel is added; the redirect and pixel record email.click and email.open', async () => {
    const { mail, emailId } = await sendOne({
      subject: 'Track',
      body: '<html><body><p><a href="https://example.com/pricing?a=1&amp;b=2">Pricing</a> <a href="mailto:help@example.com">Mail us</a></p></body></html>',
    });
    const html = mail.html as string;
    const links = [...html.matchAll(/href="([^"]+)"/g)].map((m) => m[1]!.replace(/&amp;/g, '&'));
    const tracked = links.find((l) => l.includes('/t/c/'))!;
    expect(tracked).toBeDefined();
    expect(links).toContain('mailto:help@example.com');
    expect(html).not.toContain('https://example.com/pricing');
    const pixel = /<img[^>]+src="([^"]+\/t\/o\/[^"]+)"/.exec(html)?.[1];
    expect(pixel).toBeDefined();

    const click = await fetch(tracked, { redirect: 'manual' });
    expect(click.status).toBe(302);
    expect(click.headers.get('location')).toBe('https://example.com/pricing?a=1&b=2');
    const open = await fetch(pixel!.replace(/&amp;/g, '&'));
    expect(open.status).toBe(200);
    expect(open.headers.get('content-type')).toMatch(/image\/gif/);

    const email = await waitForStatus(emailId, 'SENT');
    expect(email.clicks).toBe(1);
    expect(email.opens).toBe(1);
    expect(email.firstClickedAt).not.toBeNull();
    const { rows } = await db().query(`select name, data from events where email_id = $1 and name in ('email.open', 'email.click') order by name`, [emailId]);
    expect(rows).toEqual([
      { name: 'email.click', data: expect.objectContaining({ url: 'https://example.com/pricing?a=1&b=2' }) },
      { name: 'email.open', data: expect.any(Object) },
    ]);
  });

  test('a send can turn tracking off', async () => {
    const { mail } = await sendOne({ subject: 'No track', body: '<p><a href="https://example.com/x">x</a></p>', tracking: { opens: false, clicks: false } });
    expect(mail.html).toContain('href="https://example.com/x"');
    expect(mail.html).not.toMatch(/\/t\/[oc]\//);
  });

  test('the project setting turns tracking off, and a send can turn it back on', async () => {
    const other = await createTestProject();
    const otherDomain = uniqueDomain();
    await addVerifiedDomain(other.projectId, otherDomain);
    const patch = await api('PATCH', `/users/@me/projects/${other.projectId}`, { cookie: other.cookie, body: { settings: { trackOpens: false, trackClicks: false } } });
    expect(patch.status).toBe(200);
    const off = rcpt();
    const on = rcpt();
    const body = '<p><a href="https://example.com/y">y</a></p>';
    expect((await send({ to: off, from: `a@${otherDomain}`, subject: 'Off', body }, { key: other.secretKey })).status).toBe(200);
    expect((await send({ to: on, from: `a@${otherDomain}`, subject: 'On', body, tracking: { clicks: true } }, { key: other.secretKey })).status).toBe(200);
    const [offMail] = await waitForMail(off);
    const [onMail] = await waitForMail(on);
    expect(offMail!.html).toContain('href="https://example.com/y"');
    expect(offMail!.html).not.toMatch(/\/t\/[oc]\//);
    expect(onMail!.html).toMatch(/\/t\/c\//);
    expect(onMail!.html).not.toMatch(/\/t\/o\//);
  });
});

describe('marketing mail and unsubscribing', () => {
  test('carries List-Unsubscribe (https and mailto) and One-Click; a GET of the link changes nothing, a POST unsubscribes', async () => {
    const template = await createTemplate({ type: 'MARKETING', subject: 'News', body: '<p>News <a href="{{ unsubscribeUrl }}">unsubscribe</a></p>', from: `news@${domain}` });
    const to = rcpt('news');
    expect((await api('POST', '/contacts', { key: project.secretKey, body: { email: to } })).status).toBe(201);
    const { mail, emailId } = await sendOne({ to, template, from: undefined });
    const listUnsubscribe = header(mail, 'List-Unsubscribe')!;
    const https = /<(https?:\/\/[^>]+)>/.exec(listUnsubscribe)?.[1];
    expect(https).toBeDefined();
    expect(listUnsubscribe).toMatch(/<mailto:[^>]+>/);
    expect(header(mail, 'List-Unsubscribe-Post')).toBe('List-Unsubscribe=One-Click');
    expect((await waitForStatus(emailId, 'SENT')).kind).toBe('MARKETING');

    const contact = async () => (await db().query('select id, subscribed from contacts where project_id = $1 and email = $2', [project.projectId, to])).rows[0];
    expect((await contact()).subscribed).toBe(true);
    const page = await fetch(https!);
    expect(page.status).toBe(200);
    expect((await contact()).subscribed).toBe(true);

    const oneClick = await fetch(https!, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'List-Unsubscribe=One-Click' });
    expect(oneClick.status).toBe(200);
    const after = await contact();
    expect(after.subscribed).toBe(false);
    const { rows } = await db().query(`select name, data from events where contact_id = $1 and name = 'contact.unsubscribed'`, [after.id]);
    expect(rows).toHaveLength(1);
  });

  test('marketing mail is never sent to an unsubscribed contact (the email ends CANCELLED); transactional mail is', async () => {
    const marketing = await createTemplate({ type: 'MARKETING', subject: 'Promo', body: '<p>promo</p>', from: `news@${domain}` });
    const to = rcpt('unsub');
    expect((await api('POST', '/contacts', { key: project.secretKey, body: { email: to, subscribed: false } })).status).toBe(201);
    const res = await send({ to, template: marketing });
    expect(res.status).toBe(200);
    const cancelled = await waitForStatus(res.body.data.emails[0].email, 'CANCELLED');
    expect(cancelled.error).toMatch(/unsubscribed/);
    const transactional = await send({ to, from: `a@${domain}`, subject: 'Receipt', body: '<p>receipt</p>' });
    expect(transactional.status).toBe(200);
    const [mail] = await waitForMail(to);
    expect(mail!.subject).toBe('Receipt');
    expect(header(mail!, 'List-Unsubscribe')).toBeUndefined();
    expect(await messagesTo(to)).toHaveLength(1);
  });
});

describe('Idempotency-Key', () => {
  test('a retry with the same key and body returns the first response and sends nothing more', async () => {
    const to = rcpt('idem');
    const key = randomUUID();
    const body = { to, from: `a@${domain}`, subject: 'Once', body: '<p>once</p>' };
    const first = await send(body, { headers: { 'idempotency-key': key } });
    expect(first.status).toBe(200);
    const second = await send({ body: body.body, subject: body.subject, from: body.from, to }, { headers: { 'idempotency-key': key } });
    expect(second.status).toBe(200);
    expect(second.body).toEqual(first.body);
    expect(second.headers.get('idempotent-replayed')).toBe('true');
    await waitForMail(to);
    await new Promise((r) => setTimeout(r, 500));
    expect(await messagesTo(to)).toHaveLength(1);
    const { rows } = await db().query('select count(*)::int as n from emails where project_id = $1 and to_email = $2', [project.projectId, to]);
    expect(rows[0].n).toBe(1);
  });

  test('the same key with a different body is 409; another project may use the same key', async () => {
    const key = randomUUID();
    expect((await send({ to: rcpt(), from: `a@${domain}`, subject: 'A', body: '<p>a</p>' }, { headers: { 'idempotency-key': key } })).status).toBe(200);
    const reuse = await send({ to: rcpt(), from: `a@${domain}`, subject: 'B', body: '<p>b</p>' }, { headers: { 'idempotency-key': key } });
    expect(reuse.status).toBe(409);
    expect(reuse.body.error.code).toBe('IDEMPOTENCY_KEY_MISMATCH');
    const other = await createTestProject();
    const otherDomain = uniqueDomain();
    await addVerifiedDomain(other.projectId, otherDomain);
    expect((await send({ to: rcpt(), from: `a@${otherDomain}`, subject: 'B', body: '<p>b</p>' }, { key: other.secretKey, headers: { 'idempotency-key': key } })).status).toBe(200);
  });

  test('a failed request frees its key: the corrected retry is processed', async () => {
    const key = randomUUID();
    const bad = await send({ to: rcpt(), from: 'a@unverified.example', subject: 'A', body: '<p>a</p>' }, { headers: { 'idempotency-key': key } });
    expect(bad.status).toBe(403);
    const again = await send({ to: rcpt(), from: 'a@unverified.example', subject: 'A', body: '<p>a</p>' }, { headers: { 'idempotency-key': key } });
    expect(again.status).toBe(403);
    expect(again.headers.get('idempotent-replayed')).toBeNull();
  });

  test('a malformed key is a 400', async () => {
    const res = await send({ to: rcpt(), from: `a@${domain}`, subject: 'A', body: '<p>a</p>' }, { headers: { 'idempotency-key': 'x'.repeat(256) } });
    expect(res.status).toBe(400);
  });
});

describe('GET /emails/:id', () => {
  test("another project's email is 404", async () => {
    const res = await send({ to: rcpt(), from: `a@${domain}`, subject: 'Mine', body: '<p>m</p>' });
    const other = await createTestProject();
    const got = await api('GET', `/emails/${res.body.data.emails[0].email}`, { key: other.secretKey });
    expect(got.status).toBe(404);
  });

  test('a bounce is BOUNCED with the SMTP reply, and an email.bounced event', async () => {
    const to = `bounce-${randomUUID().slice(0, 8)}@example.com`;
    const res = await send({ to, from: `a@${domain}`, subject: 'Bounce', body: '<p>b</p>' });
    const email = await waitForStatus(res.body.data.emails[0].email, 'BOUNCED');
    expect(email.smtpResponse).toMatch(/^550/);
    const { rows } = await db().query(`select name from events where email_id = $1`, [email.id]);
    expect(rows.map((r) => r.name)).toEqual(['email.bounced']);
  });
});
