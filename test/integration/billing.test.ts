import path from 'node:path';
import { randomUUID } from 'node:crypto';
import Stripe from 'stripe';
import type { ManagedProcess } from '../../scripts/services/process';
import { startStripeMock } from '../../scripts/services/stripe-mock';
import { stackEnv } from '../stack-env';
import { startExtraApi } from '../helpers/extra-api';
import { api, sessionCookie, type ApiResponse } from '../helpers/api';
import { closeDb, db } from '../helpers/db';
import { addVerifiedDomain, createTestProject, uniqueDomain, type TestProject } from '../helpers/fixtures';
import { messagesTo, waitForMail } from '../helpers/mailbox';

// Caps are enforced by the stack's own API (no Stripe configured: billing disabled there). Stripe's side runs against
// stripe-mock, a real process on loopback, through an API process of its own configured with it and with plans.
const WEBHOOK_SECRET = 'whsec_mailwright_test_secret';
const PLANS = { free: {}, pro: { price: 'price_pro', emails: 50_000, contacts: 5_000, events: 100_000 }, team: { price: 'price_team', emails: 200_000 } };

let stripeMock: { url: string; process: ManagedProcess };
let billingApi: { url: string; process: ManagedProcess };
const stripe = new Stripe('sk_test_mailwright');

beforeAll(async () => {
  stripeMock = await startStripeMock({ logFile: path.join(stackEnv().dataDir, 'stripe-mock.log') });
  billingApi = await startExtraApi('api-billing', {
    RATE_LIMIT_PER_MINUTE: '0',
    STRIPE_SECRET_KEY: 'sk_test_mailwright',
    STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET,
    STRIPE_API_URL: stripeMock.url,
    BILLING_PLANS: JSON.stringify(PLANS),
    BILLING_RETURN_URL: 'https://dashboard.example.test/billing',
  });
}, 180_000);

afterAll(async () => {
  await billingApi?.process.stop();
  await stripeMock?.process.stop();
  await closeDb();
});

const base = (p: string) => `/users/@me/projects/${p}`;
const onStripeApi = (method: string, p: string, project: TestProject, body?: unknown) => api(method, p, { cookie: project.cookie, body, baseUrl: billingApi.url });
const putLimits = (project: TestProject, body: object) => api('PUT', `${base(project.projectId)}/billing-limits`, { cookie: project.cookie, body });
const consumption = async (project: TestProject) => (await api('GET', `${base(project.projectId)}/billing-consumption`, { cookie: project.cookie })).body;
const capRefused = (res: ApiResponse, field: string) => {
  expect(res.status).toBe(402);
  expect(res.body.error).toMatchObject({ code: 'BILLING_LIMIT_EXCEEDED', statusCode: 402 });
  expect(res.body.error.errors[0]).toMatchObject({ field, code: 'cap_exceeded' });
};
const thisHour = () => new Date(Math.floor(Date.now() / 3_600_000) * 3_600_000);
const monthStart = () => new Date(Date.UTC(new Date().getUTCFullYear(), new Date().getUTCMonth(), 1));

async function rows(sql: string, params: unknown[]): Promise<number> {
  return Number((await db().query<{ n: string }>(sql, params)).rows[0]!.n);
}

async function until<T>(what: string, read: () => Promise<T>, done: (v: T) => boolean, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await read();
    if (done(v)) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(v)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

function signedEvent(type: string, object: object, created = Math.floor(Date.now() / 1000), secret = WEBHOOK_SECRET) {
  const payload = JSON.stringify({ id: `evt_${randomUUID().replace(/-/g, '')}`, object: 'event', type, created, api_version: Stripe.API_VERSION, data: { object } });
  return { payload, signature: stripe.webhooks.generateTestHeaderString({ payload, secret }) };
}

const postWebhook = (baseUrl: string, e: { payload: string; signature: string }) =>
  api('POST', '/webhooks/incoming/stripe', { raw: e.payload, headers: { 'content-type': 'application/json', 'stripe-signature': e.signature }, baseUrl });

const subscription = (projectId: string, price: string, status = 'active') => ({
  id: `sub_${projectId.slice(0, 8)}`,
  object: 'subscription',
  customer: `cus_${projectId.slice(0, 8)}`,
  status,
  metadata: { projectId },
  items: { object: 'list', data: [{ id: 'si_1', object: 'subscription_item', price: { id: price, object: 'price' } }] },
});

describe('billing limits and consumption', () => {
  test('a new project has the default plan and no caps; PUT sets its own caps (a key left out keeps its cap, null removes one)', async () => {
    const p = await createTestProject('Billing limits');
    const initial = await api('GET', `${base(p.projectId)}/billing-limits`, { cookie: p.cookie });
    expect(initial.status).toBe(200);
    expect(initial.body).toMatchObject({ plan: 'free', limits: { emails: null, contacts: null, events: null }, effective: { emails: null, contacts: null, events: null }, billingEnabled: false, subscription: null });
    expect(initial.body.period).toEqual({ start: monthStart().toISOString(), end: new Date(Date.UTC(monthStart().getUTCFullYear(), monthStart().getUTCMonth() + 1, 1)).toISOString() });

    expect((await putLimits(p, { emails: 1000, contacts: 50 })).body.limits).toEqual({ emails: 1000, contacts: 50, events: null });
    const updated = await putLimits(p, { events: 7, contacts: null });
    expect(updated.status).toBe(200);
    expect(updated.body.limits).toEqual({ emails: 1000, contacts: null, events: 7 });
    expect(updated.body.effective).toEqual({ emails: 1000, contacts: null, events: 7 });

    const bad = await putLimits(p, { emails: -1, extra: 1 });
    expect(bad.status).toBe(422);
    expect(bad.body.error.code).toBe('VALIDATION_ERROR');
  });

  test('members read billing, only an ADMIN or OWNER changes caps, and another user sees no such project', async () => {
    const p = await createTestProject('Billing roles');
    const other = await api('POST', '/auth/signup', { body: { email: `member-${randomUUID()}@example.com`, password: 'correct horse battery staple' } });
    const cookie = sessionCookie(other);
    expect((await api('GET', `${base(p.projectId)}/billing-limits`, { cookie })).status).toBe(404);
    await db().query(`insert into memberships (project_id, user_id, role) values ($1, $2, 'MEMBER')`, [p.projectId, other.body.id]);
    expect((await api('GET', `${base(p.projectId)}/billing-limits`, { cookie })).status).toBe(200);
    expect((await api('GET', `${base(p.projectId)}/billing-consumption`, { cookie })).status).toBe(200);
    const refused = await api('PUT', `${base(p.projectId)}/billing-limits`, { cookie, body: { emails: 1 } });
    expect(refused.status).toBe(403);
    expect(refused.body.error.code).toBe('FORBIDDEN');
  });

  test('consumption comes from the rollups of this month and the contact counters', async () => {
    const p = await createTestProject('Billing consumption');
    const domain = uniqueDomain();
    await addVerifiedDomain(p.projectId, domain);
    for (const i of [1, 2, 3]) expect((await api('POST', '/v1/track', { key: p.publicKey, body: { email: `c${i}@${domain}`, event: 'signup' } })).status).toBe(200);
    expect((await api('POST', '/v1/send', { key: p.secretKey, body: { to: [`c1@${domain}`, `c2@${domain}`], from: `hi@${domain}`, subject: 'Hi', body: '<p>Hi</p>' } })).status).toBe(200);
    // Last month's rows are another period.
    await db().query(`insert into analytics_hourly (project_id, metric, hour, count) values ($1, 'sent', $2, 500)`, [p.projectId, new Date(monthStart().getTime() - 3_600_000)]);
    await db().query(`insert into event_name_hourly (project_id, name, hour, count, system) values ($1, 'signup', $2, 500, false)`, [p.projectId, new Date(monthStart().getTime() - 3_600_000)]);
    await putLimits(p, { contacts: 10 });
    const used = await until('the rollups', () => consumption(p), (c) => c.emails.used === 2 && c.events.used === 3);
    expect(used).toMatchObject({ emails: { used: 2, pending: 0, limit: null, remaining: null }, contacts: { used: 3, limit: 10, remaining: 7 }, events: { used: 3, limit: null } });
  });
});

describe('enforcement: 402 BILLING_LIMIT_EXCEEDED before anything is queued', () => {
  test('the emails cap reached mid-month: a send of N recipients checks N, and once the cap is reached one more send is refused with nothing stored or sent', async () => {
    const p = await createTestProject('Billing emails cap');
    const domain = uniqueDomain();
    await addVerifiedDomain(p.projectId, domain);
    await putLimits(p, { emails: 100 });
    // 98 sent earlier this month (set-based seed of the hourly rollup), and plenty last month that do not count.
    await db().query(
      `insert into analytics_hourly (project_id, metric, hour, count)
       select $1, 'sent', h, case when h = $3 then 98 - (count(*) over () - 1) else 1 end
       from generate_series($2::timestamptz, $3::timestamptz, interval '1 hour') h`,
      [p.projectId, new Date(Math.max(monthStart().getTime(), thisHour().getTime() - 40 * 3_600_000)), thisHour()],
    );
    await db().query(`insert into analytics_hourly (project_id, metric, hour, count) values ($1, 'sent', $2, 100000)`, [p.projectId, new Date(monthStart().getTime() - 3_600_000)]);
    expect((await consumption(p)).emails).toEqual({ used: 98, pending: 0, limit: 100, remaining: 2 });

    const three = [1, 2, 3].map((i) => `r${i}@${domain}`);
    capRefused(await api('POST', '/v1/send', { key: p.secretKey, body: { to: three, from: `hi@${domain}`, subject: 'Hi', body: '<p>Hi</p>' } }), 'emails');
    expect(await rows('select count(*) as n from emails where project_id = $1', [p.projectId])).toBe(0);
    expect(await rows('select count(*) as n from contacts where project_id = $1', [p.projectId])).toBe(0); // no recipient upserted either

    const two = await api('POST', '/v1/send', { key: p.secretKey, body: { to: three.slice(0, 2), from: `hi@${domain}`, subject: 'Hi', body: '<p>Hi</p>' } });
    expect(two.status).toBe(200);
    await waitForMail(three[0]!);
    await waitForMail(three[1]!);
    await until('the sent rollup', () => consumption(p), (c) => c.emails.used === 100);

    const last = `last@${domain}`;
    capRefused(await api('POST', '/v1/send', { key: p.secretKey, body: { to: last, from: `hi@${domain}`, subject: 'One more', body: '<p>Hi</p>' } }), 'emails');
    await new Promise((r) => setTimeout(r, 1_000));
    expect(await rows('select count(*) as n from emails where project_id = $1 and to_email = $2', [p.projectId, last])).toBe(0);
    expect(await messagesTo(last)).toHaveLength(0);
    expect(await rows('select count(*) as n from emails where project_id = $1', [p.projectId])).toBe(2);

    // Raising the cap lets it through at once (the API drops its cached caps on the change).
    await putLimits(p, { emails: 101 });
    expect((await api('POST', '/v1/send', { key: p.secretKey, body: { to: last, from: `hi@${domain}`, subject: 'One more', body: '<p>Hi</p>' } })).status).toBe(200);
  });

  test('a campaign checks its whole audience at send time: refused whole (still a DRAFT, no email queued) when it would pass the cap', async () => {
    const p = await createTestProject('Billing campaign');
    const domain = uniqueDomain();
    await addVerifiedDomain(p.projectId, domain);
    for (let i = 0; i < 5; i++) expect((await api('POST', '/contacts', { key: p.secretKey, body: { email: `a${i}@${domain}` } })).status).toBe(201);
    const campaign = await api('POST', '/campaigns', { key: p.secretKey, body: { name: 'All', subject: 'News', body: '<p>News</p>', from: `news@${domain}`, audienceType: 'ALL' } });
    expect(campaign.status).toBe(201);
    await putLimits(p, { emails: 4 });
    capRefused(await api('POST', `/campaigns/${campaign.body.id}/send`, { key: p.secretKey }), 'emails');
    expect((await api('GET', `/campaigns/${campaign.body.id}`, { key: p.secretKey })).body.status).toBe('DRAFT');
    expect(await rows('select count(*) as n from emails where campaign_id = $1', [campaign.body.id])).toBe(0);

    await putLimits(p, { emails: 5 });
    const sent = await api('POST', `/campaigns/${campaign.body.id}/send`, { key: p.secretKey });
    expect(sent.status).toBe(200);
    // While it sends, its recipients not yet sent count against the cap: nothing more fits this month.
    await waitForMail(`a4@${domain}`);
    const c = await until('the campaign sends', () => consumption(p), (v) => v.emails.used === 5);
    expect(c.emails).toMatchObject({ used: 5, pending: 0, remaining: 0 });
    capRefused(await api('POST', '/v1/send', { key: p.secretKey, body: { to: `a0@${domain}`, from: `hi@${domain}`, subject: 'Hi', body: '<p>Hi</p>' } }), 'emails');
  });

  test('the contacts cap: a new contact past it is refused on POST /contacts, /v1/track and /v1/send; existing ones still work', async () => {
    const p = await createTestProject('Billing contacts cap');
    const domain = uniqueDomain();
    await addVerifiedDomain(p.projectId, domain);
    await putLimits(p, { contacts: 2 });
    expect((await api('POST', '/contacts', { key: p.secretKey, body: { email: `a@${domain}` } })).status).toBe(201);
    expect((await api('POST', '/v1/track', { key: p.publicKey, body: { email: `b@${domain}`, event: 'signup' } })).status).toBe(200);
    capRefused(await api('POST', '/contacts', { key: p.secretKey, body: { email: `c@${domain}` } }), 'contacts');
    capRefused(await api('POST', '/v1/track', { key: p.publicKey, body: { email: `c@${domain}`, event: 'signup' } }), 'contacts');
    capRefused(await api('POST', '/v1/send', { key: p.secretKey, body: { to: [`a@${domain}`, `c@${domain}`], from: `hi@${domain}`, subject: 'Hi', body: '<p>Hi</p>' } }), 'contacts');
    expect(await rows('select count(*) as n from emails where project_id = $1', [p.projectId])).toBe(0);
    // Existing addresses (in any case) are no new contacts.
    expect((await api('POST', '/contacts', { key: p.secretKey, body: { email: `A@${domain}`, data: { plan: 'pro' } } })).status).toBe(200);
    expect((await api('POST', '/v1/track', { key: p.publicKey, body: { email: `b@${domain}`, event: 'login' } })).status).toBe(200);
    expect((await api('POST', '/v1/send', { key: p.secretKey, body: { to: [`a@${domain}`, `b@${domain}`], from: `hi@${domain}`, subject: 'Hi', body: '<p>Hi</p>' } })).status).toBe(200);
    expect(await rows('select count(*) as n from contacts where project_id = $1', [p.projectId])).toBe(2);
  });

  test("the events cap counts this month's tracked events (not the service's own): past it /v1/track is refused and records nothing", async () => {
    const p = await createTestProject('Billing events cap');
    const domain = uniqueDomain();
    await db().query(
      `insert into event_name_hourly (project_id, name, hour, count, system) values ($1, 'purchase', $2, 10, false), ($1, 'email.sent', $2, 1000, true)`,
      [p.projectId, thisHour()],
    );
    await putLimits(p, { events: 10 });
    expect((await consumption(p)).events).toEqual({ used: 10, limit: 10, remaining: 0 });
    capRefused(await api('POST', '/v1/track', { key: p.publicKey, body: { email: `e@${domain}`, event: 'purchase' } }), 'events');
    expect(await rows('select count(*) as n from events where project_id = $1', [p.projectId])).toBe(0);
    expect(await rows('select count(*) as n from contacts where project_id = $1', [p.projectId])).toBe(0);
    await putLimits(p, { events: 11 });
    expect((await api('POST', '/v1/track', { key: p.publicKey, body: { email: `e@${domain}`, event: 'purchase' } })).status).toBe(200);
  });

  test('an automation SEND_EMAIL step at the emails cap sends and stores nothing, records FAILED with the reason and the run goes on; a campaign test send is refused', async () => {
    const p = await createTestProject('Billing automation cap');
    const domain = uniqueDomain();
    await addVerifiedDomain(p.projectId, domain);
    await putLimits(p, { emails: 1 });
    const secret = (method: string, path: string, body?: unknown) => api(method, path, { key: p.secretKey, body });
    const template = await secret('POST', '/templates', { name: 'Welcome', subject: 'Welcome', body: '<p>Hi</p>', type: 'TRANSACTIONAL', from: `auto@${domain}` });
    expect(template.status).toBe(201);
    const wf = (await secret('POST', '/workflows', { name: 'Welcome', triggerEvent: 'signed-up' })).body;
    const send = (await secret('POST', `/workflows/${wf.id}/steps`, { type: 'SEND_EMAIL', config: { templateId: template.body.id } })).body;
    const exit = (await secret('POST', `/workflows/${wf.id}/steps`, { type: 'EXIT', config: {} })).body;
    expect((await secret('POST', `/workflows/${wf.id}/transitions`, { fromStepId: send.id, toStepId: exit.id })).status).toBe(201);
    expect((await secret('PATCH', `/workflows/${wf.id}`, { enabled: true })).status).toBe(200);
    const runOf = async (email: string) => {
      const { rows: found } = await db().query<{ id: string }>('select id from contacts where project_id = $1 and email = $2', [p.projectId, email]);
      if (!found[0]) return null;
      const list = (await secret('GET', `/workflows/${wf.id}/executions?contactId=${found[0].id}`)).body.data;
      return list[0] ? (await secret('GET', `/workflows/${wf.id}/executions/${list[0].id}`)).body : null;
    };
    const finished = (email: string) => until(`the run of ${email}`, () => runOf(email), (x) => x?.status === 'COMPLETED');

    // Under the cap: sent, and counted once the rollup has it.
    expect((await api('POST', '/v1/track', { key: p.publicKey, body: { email: `first@${domain}`, event: 'signed-up' } })).status).toBe(200);
    expect((await finished(`first@${domain}`)).steps[0].outcome).toMatchObject({ status: 'SENT' });
    await waitForMail(`first@${domain}`);
    await until('the sent rollup', () => consumption(p), (c) => c.emails.used === 1);

    // At the cap: the step fails with the cap's message, the run still reaches EXIT, nothing is stored or delivered.
    expect((await api('POST', '/v1/track', { key: p.publicKey, body: { email: `second@${domain}`, event: 'signed-up' } })).status).toBe(200);
    const second = await finished(`second@${domain}`);
    expect(second.steps.map((s: { type: string }) => s.type)).toEqual(['SEND_EMAIL', 'EXIT']);
    expect(second.steps[0].outcome).toMatchObject({ status: 'FAILED', error: expect.stringContaining('its cap is 1') });
    expect(await rows('select count(*) as n from emails where project_id = $1 and to_email = $2', [p.projectId, `second@${domain}`])).toBe(0);
    await new Promise((r) => setTimeout(r, 500));
    expect(await messagesTo(`second@${domain}`)).toHaveLength(0);

    const campaign = await secret('POST', '/campaigns', { name: 'News', subject: 'News', body: '<p>News</p>', from: `news@${domain}`, audienceType: 'ALL' });
    capRefused(await secret('POST', `/campaigns/${campaign.body.id}/test`, { email: `tester@${domain}` }), 'emails');
    await putLimits(p, { emails: 2 });
    expect((await secret('POST', `/campaigns/${campaign.body.id}/test`, { email: `tester@${domain}` })).status).toBe(200);
    await waitForMail(`tester@${domain}`);
  });

  test('a CSV import creates new contacts up to the contacts cap; the rest are row errors, and existing contacts are still updated', async () => {
    const p = await createTestProject('Billing import cap');
    const domain = uniqueDomain();
    expect((await api('POST', '/contacts', { key: p.secretKey, body: { email: `old@${domain}` } })).status).toBe(201);
    await putLimits(p, { contacts: 3 });
    const csv = ['email,plan', `new1@${domain},pro`, `old@${domain},team`, `new2@${domain},free`, `new3@${domain},free`, `new4@${domain},free`].join('\n');
    const form = new FormData();
    form.append('file', new Blob([csv]), 'contacts.csv');
    const queued = await fetch(`${stackEnv().apiUrl}/contacts/import`, { method: 'POST', headers: { authorization: `Bearer ${p.secretKey}` }, body: form });
    expect(queued.status).toBe(202);
    const { jobId } = (await queued.json()) as { jobId: string };
    const job = await until(
      'the import',
      async () => (await api('GET', `/contacts/import/${jobId}`, { key: p.secretKey })).body,
      (j) => ['COMPLETED', 'FAILED', 'CANCELLED'].includes(j.status),
    );
    expect(job).toMatchObject({ status: 'COMPLETED', total: 5, processed: 5, created: 2, updated: 1, failed: 2 });
    expect(job.errors).toEqual([
      { line: 5, email: `new3@${domain}`, message: "The project's contacts cap (3) is reached: the contact was not created" },
      { line: 6, email: `new4@${domain}`, message: "The project's contacts cap (3) is reached: the contact was not created" },
    ]);
    const stored = (await db().query('select email, data from contacts where project_id = $1 order by email', [p.projectId])).rows;
    expect(stored).toEqual([
      { email: `new1@${domain}`, data: { plan: 'pro' } },
      { email: `new2@${domain}`, data: { plan: 'free' } },
      { email: `old@${domain}`, data: { plan: 'team' } },
    ]);
  });
});

describe('Stripe: checkout, portal, invoices and the webhook', () => {
  test('without Stripe configured the Stripe routes answer 409 BILLING_DISABLED and GET /config says billing is off; with it, on', async () => {
    const p = await createTestProject('Billing disabled');
    expect((await api('GET', '/config')).body.billing).toBe(false);
    expect((await api('GET', '/config', { baseUrl: billingApi.url })).body.billing).toBe(true);
    for (const [method, route, body] of [
      ['POST', `${base(p.projectId)}/checkout`, { plan: 'pro' }],
      ['POST', `${base(p.projectId)}/billing-portal`, undefined],
      ['GET', `${base(p.projectId)}/billing-invoices`, undefined],
    ] as const) {
      const res = await api(method, route, { cookie: p.cookie, body });
      expect(res.status).toBe(409);
      expect(res.body.error.code).toBe('BILLING_DISABLED');
    }
    const hook = await postWebhook(stackEnv().apiUrl, signedEvent('customer.subscription.updated', subscription(p.projectId, 'price_pro')));
    expect(hook.status).toBe(409);
    expect(hook.body.error.code).toBe('BILLING_DISABLED');
  });

  test('checkout creates the project\'s Stripe customer once and a subscription session for a plan with a price; an unknown plan is 422', async () => {
    const p = await createTestProject('Billing checkout');
    const res = await onStripeApi('POST', `${base(p.projectId)}/checkout`, p, { plan: 'pro' });
    expect(res.status).toBe(200);
    expect(res.body.id).toMatch(/^cs_/);
    expect(typeof res.body.url).toBe('string');
    const customer = (await db().query('select stripe_customer_id from project_billing where project_id = $1', [p.projectId])).rows[0]?.stripe_customer_id;
    expect(customer).toMatch(/^cus_/);
    expect((await onStripeApi('POST', `${base(p.projectId)}/checkout`, p, { plan: 'team' })).status).toBe(200);
    expect((await db().query('select stripe_customer_id from project_billing where project_id = $1', [p.projectId])).rows[0].stripe_customer_id).toBe(customer);
    const unknown = await onStripeApi('POST', `${base(p.projectId)}/checkout`, p, { plan: 'free' }); // no price: nothing to buy
    expect(unknown.status).toBe(422);
    expect(unknown.body.error.errors[0]).toMatchObject({ field: 'plan', code: 'unknown_plan' });
    // The plan applies only when Stripe says it is paid.
    expect((await onStripeApi('GET', `${base(p.projectId)}/billing-limits`, p)).body).toMatchObject({ plan: 'free', billingEnabled: true });
  });

  test('the billing portal answers a session URL, and invoices list the customer\'s invoices', async () => {
    const p = await createTestProject('Billing portal');
    const empty = await onStripeApi('GET', `${base(p.projectId)}/billing-invoices`, p);
    expect(empty.status).toBe(200);
    expect(empty.body).toEqual({ data: [], cursor: null, hasMore: false });
    const portal = await onStripeApi('POST', `${base(p.projectId)}/billing-portal`, p);
    expect(portal.status).toBe(200);
    expect(typeof portal.body.url).toBe('string');
    const invoices = await onStripeApi('GET', `${base(p.projectId)}/billing-invoices?limit=5`, p);
    expect(invoices.status).toBe(200);
    expect(invoices.body.data.length).toBeGreaterThan(0);
    expect(invoices.body.data[0]).toMatchObject({ id: expect.stringMatching(/^in_/), currency: expect.any(String), total: expect.any(Number), created: expect.any(String) });
  });

  test('a forged or mis-signed webhook is refused with 403 INVALID_SIGNATURE and changes nothing', async () => {
    const p = await createTestProject('Billing forged');
    const genuine = signedEvent('customer.subscription.updated', subscription(p.projectId, 'price_team'));
    const forged = await postWebhook(billingApi.url, { payload: genuine.payload.replace('price_team', 'price_pro'), signature: genuine.signature });
    expect(forged.status).toBe(403);
    expect(forged.body.error.code).toBe('INVALID_SIGNATURE');
    const otherSecret = await postWebhook(billingApi.url, signedEvent('customer.subscription.updated', subscription(p.projectId, 'price_team'), undefined, 'whsec_someone_else'));
    expect(otherSecret.status).toBe(403);
    expect((await postWebhook(billingApi.url, { payload: genuine.payload, signature: '' })).status).toBe(403);
    expect((await onStripeApi('GET', `${base(p.projectId)}/billing-limits`, p)).body.plan).toBe('free');
  });

  test('signed subscription events apply the plan and its caps (the lower of plan and own caps is enforced); a late older event changes nothing; deletion returns to the default plan', async () => {
    const p = await createTestProject('Billing webhook');
    await putLimits(p, { emails: 100_000, contacts: 10 });
    const now = Math.floor(Date.now() / 1000);
    const updated = await postWebhook(billingApi.url, signedEvent('customer.subscription.updated', subscription(p.projectId, 'price_team'), now));
    expect(updated.status).toBe(200);
    expect(updated.body).toEqual({ received: true, type: 'customer.subscription.updated', applied: true });
    let limits = (await onStripeApi('GET', `${base(p.projectId)}/billing-limits`, p)).body;
    expect(limits).toMatchObject({ plan: 'team', planLimits: { emails: 200_000, contacts: null, events: null }, effective: { emails: 100_000, contacts: 10, events: null } });
    expect(limits.subscription).toEqual({ id: `sub_${p.projectId.slice(0, 8)}`, status: 'active' });

    const late = await postWebhook(billingApi.url, signedEvent('customer.subscription.deleted', subscription(p.projectId, 'price_team', 'canceled'), now - 60));
    expect(late.body.applied).toBe(false);
    expect((await onStripeApi('GET', `${base(p.projectId)}/billing-limits`, p)).body.plan).toBe('team');

    // Checkout completed: the plan of the session.
    const completed = await postWebhook(
      billingApi.url,
      signedEvent('checkout.session.completed', { id: 'cs_test_1', object: 'checkout.session', mode: 'subscription', client_reference_id: p.projectId, customer: `cus_${p.projectId.slice(0, 8)}`, subscription: 'sub_new', metadata: { projectId: p.projectId, plan: 'pro' } }, now + 1),
    );
    expect(completed.body.applied).toBe(true);
    limits = (await onStripeApi('GET', `${base(p.projectId)}/billing-limits`, p)).body;
    expect(limits).toMatchObject({ plan: 'pro', planLimits: { emails: 50_000, contacts: 5_000, events: 100_000 }, effective: { emails: 50_000, contacts: 10, events: 100_000 } });

    const deleted = await postWebhook(billingApi.url, signedEvent('customer.subscription.deleted', subscription(p.projectId, 'price_pro', 'canceled'), now + 2));
    expect(deleted.body.applied).toBe(true);
    limits = (await onStripeApi('GET', `${base(p.projectId)}/billing-limits`, p)).body;
    expect(limits).toMatchObject({ plan: 'free', subscription: { id: null, status: 'canceled' }, effective: { emails: 100_000, contacts: 10, events: null } });

    const ignored = await postWebhook(billingApi.url, signedEvent('invoice.paid', { id: 'in_1', object: 'invoice' }));
    expect(ignored.body).toEqual({ received: true, type: 'invoice.paid', applied: false });
  });
});
