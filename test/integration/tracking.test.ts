import { randomUUID } from 'node:crypto';
import { api } from '../helpers/api';
import { closeDb, db } from '../helpers/db';
import { addVerifiedDomain, createTestProject, uniqueDomain, type TestProject } from '../helpers/fixtures';
import { stackEnv } from '../stack-env';
import { loadConfig } from '../../domain/config';
import { linkTokens, type LinkTokens } from '../../domain/tracking/tokens';
import { contactLinks, type LinkConfig } from '../../domain/tracking/links';

/**
 * The public endpoints through the real API. Tokens are signed here with the same configuration the API process
 * derives (this process's environment plus the stack's, as the global setup starts it): the API runs without an
 * APP_SECRET in tests, so both use the fixed development secret. A mismatch would fail every "genuine token" test.
 */
const stack = stackEnv();
const apiConfig = loadConfig({ ...process.env, NODE_ENV: 'test', DATABASE_URL: stack.databaseUrl, PUBLIC_URL: stack.apiUrl });
const cfg: LinkConfig = apiConfig;
const tokens: LinkTokens = linkTokens(apiConfig.appSecret);

let project: TestProject;
let domain: string;
const rcpt = (tag = 'rcpt') => `${tag}-${randomUUID().slice(0, 8)}@example.com`;

beforeAll(async () => {
  project = await createTestProject('Tracking <b>&</b> Co');
  domain = uniqueDomain();
  await addVerifiedDomain(project.projectId, domain);
});
afterAll(closeDb);

/** A real email (and its contact) through /v1/send. */
async function sendOne(opts: { subscribed?: boolean } = {}): Promise<{ emailId: string; contactId: string; email: string }> {
  const to = rcpt();
  const res = await api('POST', '/v1/send', {
    key: project.secretKey,
    body: { to, from: `hi@${domain}`, subject: 'Tracked', body: '<p>Hello</p>', ...(opts.subscribed === undefined ? {} : { subscribed: opts.subscribed }) },
  });
  expect(res.status).toBe(200);
  const [sent] = res.body.data.emails;
  return { emailId: sent.email, contactId: sent.contact.id, email: to };
}

/** A contact through POST /contacts (subscribed unless told otherwise). */
async function createContact(p: TestProject = project, subscribed = true): Promise<{ id: string; email: string }> {
  const email = rcpt('contact');
  const res = await api('POST', '/contacts', { key: p.secretKey, body: { email, subscribed } });
  expect(res.status).toBe(201);
  return { id: res.body.id, email };
}

const emailRow = async (id: string) =>
  (await db().query('select open_count, click_count, first_opened_at, first_clicked_at from emails where id = $1', [id])).rows[0];
const emailEvents = async (emailId: string) =>
  (await db().query(`select name, data, contact_id from events where email_id = $1 and name like 'email.%' and name not in ('email.sent', 'email.bounced', 'email.failed') order by id`, [emailId])).rows;
const contactRow = async (id: string) => (await db().query('select subscribed from contacts where id = $1', [id])).rows[0];
const subscriptionEvents = async (contactId: string) =>
  (await db().query(`select name, data from events where contact_id = $1 and name like 'contact.%' order by id`, [contactId])).rows;

const get = (path: string) => fetch(`${stack.apiUrl}${path}`, { redirect: 'manual' });
const postForm = (path: string, form: Record<string, string> | null, type = 'application/x-www-form-urlencoded') =>
  fetch(`${stack.apiUrl}${path}`, {
    method: 'POST',
    redirect: 'manual',
    headers: form ? { 'content-type': type } : {},
    body: form ? new URLSearchParams(form).toString() : undefined,
  });

/** The token with one bit of its payload flipped (re-encoded canonically): the MAC no longer matches. */
function tamper(token: string, byteIndex = 5): string {
  const raw = Buffer.from(token, 'base64url');
  raw[byteIndex]! ^= 0x01;
  return raw.toString('base64url');
}

const tokenOf = (url: string) => url.slice(url.lastIndexOf('/') + 1);

describe('open pixel GET /t/o/:token', () => {
  test('each hit answers a 1x1 GIF (no-store) and records email.open; first_opened_at is set by the first hit only', async () => {
    const { emailId, contactId } = await sendOne();
    const token = tokens.sign({ kind: 'open', emailId });
    const first = await get(`/t/o/${token}`);
    expect(first.status).toBe(200);
    expect(first.headers.get('content-type')).toBe('image/gif');
    expect(first.headers.get('cache-control')).toBe('no-store');
    const gif = Buffer.from(await first.arrayBuffer());
    expect(gif.subarray(0, 6).toString('latin1')).toBe('GIF89a');
    expect([gif.readUInt16LE(6), gif.readUInt16LE(8)]).toEqual([1, 1]);

    const afterFirst = await emailRow(emailId);
    expect(afterFirst.open_count).toBe(1);
    expect(afterFirst.first_opened_at).toBeInstanceOf(Date);
    await new Promise((r) => setTimeout(r, 20));
    expect((await get(`/t/o/${token}`)).status).toBe(200);
    const afterSecond = await emailRow(emailId);
    expect(afterSecond.open_count).toBe(2);
    expect(afterSecond.first_opened_at).toEqual(afterFirst.first_opened_at);
    expect(afterSecond.click_count).toBe(0);

    const events = await emailEvents(emailId);
    expect(events).toEqual([
      { name: 'email.open', data: {}, contact_id: contactId },
      { name: 'email.open', data: {}, contact_id: contactId },
    ]);
  });

  test('a forged, tampered or foreign-kind token still gets the pixel, and nothing is recorded', async () => {
    const { emailId, contactId } = await sendOne();
    const genuine = tokens.sign({ kind: 'open', emailId });
    for (const token of [tamper(genuine), 'garbage', tokens.sign({ kind: 'contact', contactId }), linkTokens('another-secret-of-at-least-32-characters!').sign({ kind: 'open', emailId })]) {
      const res = await get(`/t/o/${token}`);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe('image/gif');
      expect(Buffer.from(await res.arrayBuffer()).subarray(0, 6).toString('latin1')).toBe('GIF89a');
    }
    expect((await emailRow(emailId)).open_count).toBe(0);
    expect(await emailEvents(emailId)).toEqual([]);
  });

  test('concurrent opens are all counted and first_opened_at is set once', async () => {
    const { emailId } = await sendOne();
    const token = tokens.sign({ kind: 'open', emailId });
    await Promise.all(Array.from({ length: 8 }, () => get(`/t/o/${token}`).then((r) => r.arrayBuffer())));
    expect((await emailRow(emailId)).open_count).toBe(8);
    expect(await emailEvents(emailId)).toHaveLength(8);
  });
});

describe('click redirect GET /t/c/:token', () => {
  test('redirects (302) to exactly the signed URL and records email.click with the link', async () => {
    const { emailId, contactId } = await sendOne();
    const url = 'https://shop.example.com/landing?utm=mail&b=2#section';
    const res = await get(`/t/c/${tokens.sign({ kind: 'click', emailId, url })}`);
    expect(res.status).toBe(302);
    expect(res.headers.get('location')).toBe(url);
    expect(res.headers.get('cache-control')).toBe('no-store');
    const row = await emailRow(emailId);
    expect(row.click_count).toBe(1);
    expect(row.first_clicked_at).toBeInstanceOf(Date);
    expect(row.open_count).toBe(0);
    expect(await emailEvents(emailId)).toEqual([{ name: 'email.click', data: { url }, contact_id: contactId }]);
  });

  test('a tampered token is a 404 page without a redirect, and nothing is recorded', async () => {
    const { emailId } = await sendOne();
    const genuine = tokens.sign({ kind: 'click', emailId, url: 'https://shop.example.com/' });
    // Flip a bit in the id and in the URL (turning it into another address), and sign with another secret.
    const attacker = linkTokens('attacker-secret-of-at-least-32-characters').sign({ kind: 'click', emailId, url: 'https://evil.example/' });
    for (const token of [tamper(genuine, 5), tamper(genuine, 30), attacker, 'x']) {
      const res = await get(`/t/c/${token}`);
      expect(res.status).toBe(404);
      expect(res.headers.get('location')).toBeNull();
      expect(res.headers.get('content-type')).toMatch(/^text\/html/);
      expect(await res.text()).toContain('This link is not valid');
    }
    expect((await emailRow(emailId)).click_count).toBe(0);
    expect(await emailEvents(emailId)).toEqual([]);
  });

  test('HEAD requests (link checkers) answer like GET but record nothing', async () => {
    const { emailId } = await sendOne();
    const url = 'https://shop.example.com/head';
    const click = await fetch(`${stack.apiUrl}/t/c/${tokens.sign({ kind: 'click', emailId, url })}`, { method: 'HEAD', redirect: 'manual' });
    expect(click.status).toBe(302);
    expect(click.headers.get('location')).toBe(url);
    const open = await fetch(`${stack.apiUrl}/t/o/${tokens.sign({ kind: 'open', emailId })}`, { method: 'HEAD' });
    expect(open.status).toBe(200);
    expect(open.headers.get('content-type')).toBe('image/gif');
    expect(await emailRow(emailId)).toMatchObject({ open_count: 0, click_count: 0 });
    expect(await emailEvents(emailId)).toEqual([]);
  });

  test('the link still works when the email row is gone (the URL is signed), but nothing is recorded', async () => {
    const { emailId } = await sendOne();
    const url = 'https://docs.example.com/after-cleanup';
    await db().query('delete from emails where id = $1', [emailId]);
    const res = await get(`/t/c/${tokens.sign({ kind: 'click', emailId, url })}`);
    expect(res.status).toBe(302);
    expect(res.headers.get('location')).toBe(url);
    expect(await emailEvents(emailId)).toEqual([]);
  });
});

describe('unsubscribe /unsubscribe/:token', () => {
  test('GET shows a confirmation page with a POST form and changes nothing', async () => {
    const contact = await createContact();
    const { unsubscribeUrl } = contactLinks(contact.id, cfg);
    const res = await get(new URL(unsubscribeUrl).pathname);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(res.headers.get('referrer-policy')).toBe('no-referrer');
    const page = await res.text();
    expect(page).toMatch(/<form method="post">/);
    expect(page).toContain(contact.email);
    // The project's name is shown escaped.
    expect(page).toContain('Tracking &lt;b&gt;&amp;&lt;/b&gt; Co');
    expect(page).not.toContain('<b>&</b>');
    expect(await contactRow(contact.id)).toEqual({ subscribed: true });
    expect(await subscriptionEvents(contact.id)).toEqual([]);
  });

  test('RFC 8058 one-click POST unsubscribes and records exactly one contact.unsubscribed; a second POST records none', async () => {
    const contact = await createContact();
    const path = new URL(contactLinks(contact.id, cfg).oneClickUrl).pathname;
    const first = await postForm(path, { 'List-Unsubscribe': 'One-Click' });
    expect(first.status).toBe(200);
    expect(first.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(await contactRow(contact.id)).toEqual({ subscribed: false });
    const second = await postForm(path, { 'List-Unsubscribe': 'One-Click' });
    expect(second.status).toBe(200);
    expect(await contactRow(contact.id)).toEqual({ subscribed: false });
    expect(await subscriptionEvents(contact.id)).toEqual([{ name: 'contact.unsubscribed', data: { via: 'unsubscribe_link', oneClick: true } }]);
  });

  test('one-click as multipart/form-data (what RFC 8058 recommends) works too', async () => {
    const contact = await createContact();
    const form = new FormData();
    form.set('List-Unsubscribe', 'One-Click');
    const res = await fetch(`${stack.apiUrl}${new URL(contactLinks(contact.id, cfg).oneClickUrl).pathname}`, { method: 'POST', body: form });
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('Unsubscribed\n');
    expect(await contactRow(contact.id)).toEqual({ subscribed: false });
  });

  test('a multipart post with a file part: the file is ignored, the fields still count', async () => {
    const contact = await createContact();
    const form = new FormData();
    form.set('attachment', new Blob([Buffer.alloc(64 * 1024, 1)], { type: 'application/octet-stream' }), 'junk.bin');
    form.set('List-Unsubscribe', 'One-Click');
    const res = await fetch(`${stack.apiUrl}${new URL(contactLinks(contact.id, cfg).oneClickUrl).pathname}`, { method: 'POST', body: form });
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('Unsubscribed\n');
    expect(await contactRow(contact.id)).toEqual({ subscribed: false });
  });

  test("the page's own form post and an empty POST unsubscribe with an HTML answer", async () => {
    const a = await createContact();
    const b = await createContact();
    const viaForm = await postForm(new URL(contactLinks(a.id, cfg).unsubscribeUrl).pathname, { confirm: 'unsubscribe' });
    const empty = await postForm(new URL(contactLinks(b.id, cfg).unsubscribeUrl).pathname, null);
    for (const res of [viaForm, empty]) {
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8');
      expect(await res.text()).toContain('You are unsubscribed');
    }
    expect(await contactRow(a.id)).toEqual({ subscribed: false });
    expect(await contactRow(b.id)).toEqual({ subscribed: false });
    expect(await subscriptionEvents(a.id)).toEqual([{ name: 'contact.unsubscribed', data: { via: 'unsubscribe_link' } }]);
  });

  test('an already unsubscribed contact: the GET page says so, a POST records nothing', async () => {
    const contact = await createContact(project, false);
    const path = new URL(contactLinks(contact.id, cfg).unsubscribeUrl).pathname;
    expect(await (await get(path)).text()).toContain('You are unsubscribed');
    expect((await postForm(path, { 'List-Unsubscribe': 'One-Click' })).status).toBe(200);
    expect(await subscriptionEvents(contact.id)).toEqual([]);
  });

  test('a tampered token or a deleted contact is a friendly 404 page, and nothing changes', async () => {
    const contact = await createContact();
    const token = tokenOf(contactLinks(contact.id, cfg).unsubscribeUrl);
    for (const res of [await get(`/unsubscribe/${tamper(token)}`), await postForm(`/unsubscribe/${tamper(token)}`, { 'List-Unsubscribe': 'One-Click' })]) {
      expect(res.status).toBe(404);
      expect(res.headers.get('content-type')).toMatch(/^text\/html/);
      expect(await res.text()).toContain('This link is not valid');
    }
    expect(await contactRow(contact.id)).toEqual({ subscribed: true });

    const gone = await createContact();
    const goneToken = tokenOf(contactLinks(gone.id, cfg).unsubscribeUrl);
    expect((await api('DELETE', `/contacts/${gone.id}`, { key: project.secretKey })).status).toBe(204);
    for (const res of [await get(`/unsubscribe/${goneToken}`), await postForm(`/unsubscribe/${goneToken}`, null), await get(`/manage/${goneToken}`)]) {
      expect(res.status).toBe(404);
      expect(await res.text()).toContain('This link is not valid');
    }
  });

  test("another project's contact cannot be touched without its own token (an id swapped into a token fails)", async () => {
    const other = await createTestProject('Other project');
    const victim = await createContact(other);
    const mine = await createContact();
    // Put the victim's id into my genuine token, keeping my MAC.
    const raw = Buffer.from(tokenOf(contactLinks(mine.id, cfg).unsubscribeUrl), 'base64url');
    Buffer.from(victim.id.replace(/-/g, ''), 'hex').copy(raw, 2);
    const forged = raw.toString('base64url');
    for (const res of [await postForm(`/unsubscribe/${forged}`, { 'List-Unsubscribe': 'One-Click' }), await postForm(`/manage/${forged}`, { subscribed: 'false' })]) {
      expect(res.status).toBe(404);
    }
    expect(await contactRow(victim.id)).toEqual({ subscribed: true });
    expect(await contactRow(mine.id)).toEqual({ subscribed: true });
    // Its own token works.
    expect((await postForm(new URL(contactLinks(victim.id, cfg).unsubscribeUrl).pathname, null)).status).toBe(200);
    expect(await contactRow(victim.id)).toEqual({ subscribed: false });
  });
});

describe('subscribe /subscribe/:token', () => {
  test('GET confirms without changing anything; POST subscribes once and records contact.subscribed', async () => {
    const { contactId } = await sendOne(); // a new /v1/send recipient is unsubscribed
    expect(await contactRow(contactId)).toEqual({ subscribed: false });
    const path = new URL(contactLinks(contactId, cfg).subscribeUrl).pathname;
    const page = await get(path);
    expect(page.status).toBe(200);
    expect(await page.text()).toMatch(/Subscribe\?[\s\S]*<form method="post">/);
    expect(await contactRow(contactId)).toEqual({ subscribed: false });

    const first = await postForm(path, { confirm: 'subscribe' });
    expect(first.status).toBe(200);
    expect(await first.text()).toContain('You are subscribed');
    expect((await postForm(path, null)).status).toBe(200);
    expect(await contactRow(contactId)).toEqual({ subscribed: true });
    expect(await subscriptionEvents(contactId)).toEqual([{ name: 'contact.subscribed', data: { via: 'subscribe_link' } }]);
  });
});

describe('manage /manage/:token', () => {
  test('GET shows the state and the opposite button; POST subscribed=false|true changes it with via manage_page', async () => {
    const contact = await createContact();
    const path = new URL(contactLinks(contact.id, cfg).manageUrl).pathname;
    const page = await (await get(path)).text();
    expect(page).toContain(`${contact.email}</strong> is subscribed to`);
    expect(page).toContain('<input type="hidden" name="subscribed" value="false">');

    expect((await postForm(path, { subscribed: 'false' })).status).toBe(200);
    expect(await contactRow(contact.id)).toEqual({ subscribed: false });
    const after = await (await get(path)).text();
    expect(after).toContain('is not subscribed to');
    expect(after).toContain('<input type="hidden" name="subscribed" value="true">');

    expect((await postForm(path, { subscribed: 'true' })).status).toBe(200);
    expect(await contactRow(contact.id)).toEqual({ subscribed: true });
    expect(await subscriptionEvents(contact.id)).toEqual([
      { name: 'contact.unsubscribed', data: { via: 'manage_page' } },
      { name: 'contact.subscribed', data: { via: 'manage_page' } },
    ]);
  });

  test('a POST without a valid `subscribed` is a 400 page and changes nothing', async () => {
    const contact = await createContact();
    const path = new URL(contactLinks(contact.id, cfg).manageUrl).pathname;
    for (const form of [{ subscribed: 'maybe' }, null]) {
      const res = await postForm(path, form);
      expect(res.status).toBe(400);
      expect(res.headers.get('content-type')).toMatch(/^text\/html/);
    }
    expect(await contactRow(contact.id)).toEqual({ subscribed: true });
    expect(await subscriptionEvents(contact.id)).toEqual([]);
  });
});

describe('documentation', () => {
  test('the OpenAPI document lists the public endpoints, with form bodies and HTML/GIF responses', async () => {
    const res = await api('GET', '/openapi.json');
    expect(res.status).toBe(200);
    const paths = res.body.paths;
    expect(Object.keys(paths)).toEqual(expect.arrayContaining(['/t/o/{token}', '/t/c/{token}', '/unsubscribe/{token}', '/subscribe/{token}', '/manage/{token}']));
    expect(Object.keys(paths['/unsubscribe/{token}'].post.requestBody.content)).toEqual(['application/x-www-form-urlencoded', 'multipart/form-data']);
    expect(paths['/unsubscribe/{token}'].post.security).toEqual([]);
    expect(Object.keys(paths['/t/o/{token}'].get.responses['200'].content)).toEqual(['image/gif']);
    expect(Object.keys(paths['/manage/{token}'].get.responses['200'].content)).toEqual(['text/html']);
  });
});

describe('render errors through the API', () => {
  test('a Liquid or MJML error in /v1/send is a 422 VALIDATION_ERROR on the field, not a 500', async () => {
    const send = (body: Record<string, unknown>) => api('POST', '/v1/send', { key: project.secretKey, body: { to: rcpt(), from: `hi@${domain}`, subject: 's', body: '<p>b</p>', ...body } });
    const liquid = await send({ body: '<p>{{ name | nosuchfilter }}</p>' });
    expect(liquid.status).toBe(422);
    expect(liquid.body.error).toMatchObject({ code: 'VALIDATION_ERROR', errors: [{ field: 'body', code: 'invalid_template' }] });
    const mjml = await send({ body: '<mjml><mj-body><mj-bogus /></mj-body></mjml>' });
    expect(mjml.status).toBe(422);
    expect(mjml.body.error.errors[0]).toMatchObject({ field: 'body', code: 'invalid_mjml' });
    const subject = await send({ subject: 'Hi {{ name ' });
    expect(subject.status).toBe(422);
    expect(subject.body.error.errors[0]).toMatchObject({ field: 'subject', code: 'invalid_template' });
  });
});
